"""``hwgen.h``: the C driver of the Wishbone core that ``hwgen soc`` writes (a string, so
that it ships as Python)."""

__all__ = ["HWGEN_H"]

#: The file's text.
HWGEN_H = r"""/* hwgen.h: a small driver for hwgen's Wishbone core, on top of the generated
 * hwgen_regs.h.
 *
 * Written by `hwgen soc` next to hwgen_regs.h; header only, no allocation, no libc beyond
 * <stdint.h>. Every function takes the core's base address (where the SoC maps it). The
 * memories are accessible while no run is in progress (STATUS.BUSY low); each word of a
 * region is `pieces` 32-bit bus words, little-endian (see hwgen_regs.h). */
#ifndef HWGEN_H
#define HWGEN_H

#include <stdint.h>

#include "hwgen_regs.h"

/* A memory image: `count` words of `region` from word `base`, each `pieces` 32-bit pieces. */
typedef struct {
    uint32_t region;
    uint32_t base;
    uint32_t count;
    uint32_t pieces;
    const uint32_t *data;
} hwgen_image_t;

/* Where a region's window is: byte offset, bus words per memory word, pieces per word. */
typedef struct {
    uint32_t offset;
    uint32_t stride;
    uint32_t pieces;
} hwgen_window_t;

static const hwgen_window_t hwgen_windows[5] = {
    {HWGEN_PROGRAM_OFFSET, HWGEN_PROGRAM_STRIDE, HWGEN_PROGRAM_PIECES},
    {HWGEN_WEIGHT_OFFSET, HWGEN_WEIGHT_STRIDE, HWGEN_WEIGHT_PIECES},
    {HWGEN_PARAM_OFFSET, HWGEN_PARAM_STRIDE, HWGEN_PARAM_PIECES},
    {HWGEN_ACT_OFFSET, HWGEN_ACT_STRIDE, HWGEN_ACT_PIECES},
    {HWGEN_OUTPUT_OFFSET, HWGEN_OUTPUT_STRIDE, HWGEN_OUTPUT_PIECES},
};

#define HWGEN_REG32(base, off) (*(volatile uint32_t *)((uintptr_t)(base) + (off)))

/* Return 1 when the core at `base` answers ID and was generated for `config_hash` (its
 * first 8 hex digits, as a compiled program names it), else 0. */
static inline int hwgen_check(uintptr_t base, uint32_t config_hash)
{
    return HWGEN_REG32(base, HWGEN_REG_ID) == HWGEN_ID_RESET
        && HWGEN_REG32(base, HWGEN_REG_CONFIG_HASH) == config_hash;
}

/* Write `count` words of `region` from word `addr`: `count * pieces` pieces from `src`. */
static inline void hwgen_write_words(uintptr_t base, uint32_t region, uint32_t addr,
                                     const uint32_t *src, uint32_t count)
{
    const hwgen_window_t *w = &hwgen_windows[region];
    volatile uint32_t *p = (volatile uint32_t *)(base + w->offset) + addr * w->stride;
    for (uint32_t i = 0; i < count; i++, p += w->stride)
        for (uint32_t k = 0; k < w->pieces; k++)
            p[k] = *src++;
}

/* Read `count` words of `region` from word `addr` into `dst` (`count * pieces` pieces). */
static inline void hwgen_read_words(uintptr_t base, uint32_t region, uint32_t addr,
                                    uint32_t *dst, uint32_t count)
{
    const hwgen_window_t *w = &hwgen_windows[region];
    volatile uint32_t *p = (volatile uint32_t *)(base + w->offset) + addr * w->stride;
    for (uint32_t i = 0; i < count; i++, p += w->stride)
        for (uint32_t k = 0; k < w->pieces; k++)
            *dst++ = p[k];
}

/* Read the signed `bits`-bit field at bit `pos` of word `addr` of `region` (bits <= 32):
 * only the one or two pieces that hold it. */
static inline int32_t hwgen_read_lane(uintptr_t base, uint32_t region, uint32_t addr,
                                      uint32_t pos, uint32_t bits)
{
    const hwgen_window_t *w = &hwgen_windows[region];
    volatile uint32_t *p = (volatile uint32_t *)(base + w->offset) + addr * w->stride;
    uint32_t k = pos >> 5, shift = pos & 31;
    uint64_t v = p[k] >> shift;
    if (shift + bits > 32)
        v |= (uint64_t)p[k + 1] << (32 - shift);
    uint32_t u = (uint32_t)v;
    if (bits < 32) {
        u &= (1u << bits) - 1u;
        if (u >> (bits - 1))
            u |= ~((1u << bits) - 1u);  /* sign-extend */
    }
    return (int32_t)u;
}

/* Write a compiled program's memory images (PROGRAM, WEIGHT, PARAM). Return 0, or -1 when
 * an image's word width does not match the core's (a program for another design). */
static inline int hwgen_load(uintptr_t base, const hwgen_image_t *images, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        const hwgen_image_t *im = &images[i];
        if (im->region > 4 || im->pieces != hwgen_windows[im->region].pieces)
            return -1;
        hwgen_write_words(base, im->region, im->base, im->data, im->count);
    }
    return 0;
}

/* Start the program on `batch` rows (1..ACC_DEPTH); clears STATUS.DONE. */
static inline void hwgen_start(uintptr_t base, uint32_t batch)
{
    HWGEN_REG32(base, HWGEN_REG_BATCH) = batch;
    HWGEN_REG32(base, HWGEN_REG_CONTROL) = HWGEN_CONTROL_START_MASK;
}

/* Wait until the run ends (STATUS.DONE, the level behind irq). Return 0, or the
 * ERROR_CAUSE bits when the core refused the start. */
static inline uint32_t hwgen_wait(uintptr_t base)
{
    uint32_t status;
    do {
        status = HWGEN_REG32(base, HWGEN_REG_STATUS);
        if (status & HWGEN_STATUS_ERROR_MASK)
            return HWGEN_REG32(base, HWGEN_REG_ERROR_CAUSE);
    } while (!(status & HWGEN_STATUS_DONE_MASK));
    HWGEN_REG32(base, HWGEN_REG_CONTROL) = HWGEN_CONTROL_CLEAR_DONE_MASK;
    return 0;
}

/* Zero the cycle, busy-cycle and MAC counters. */
static inline void hwgen_clear_counters(uintptr_t base)
{
    HWGEN_REG32(base, HWGEN_REG_CONTROL) = HWGEN_CONTROL_CLEAR_COUNTERS_MASK;
}

/* The 64-bit counters (reading _LO latches _HI). */
static inline uint64_t hwgen_counter(uintptr_t base, uint32_t lo_offset)
{
    uint32_t lo = HWGEN_REG32(base, lo_offset);
    return (uint64_t)HWGEN_REG32(base, lo_offset + 4) << 32 | lo;
}

/* Cycles with a run in progress, since the last clear. */
static inline uint64_t hwgen_cycles(uintptr_t base)
{
    return hwgen_counter(base, HWGEN_REG_CYCLES_LO);
}

/* Cycles in which an activation row entered the array, since the last clear. */
static inline uint64_t hwgen_busy_cycles(uintptr_t base)
{
    return hwgen_counter(base, HWGEN_REG_BUSY_CYCLES_LO);
}

#endif /* HWGEN_H */
"""
