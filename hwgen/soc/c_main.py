"""``main.c``: the SoC firmware that ``hwgen soc`` writes: load the model, classify the test
inputs, time full batches (a string, so that it ships as Python)."""

__all__ = ["MAIN_C"]

#: The file's text.
MAIN_C = r"""/* main.c: hwgen's model on the SoC's CPU, with no host attached.
 *
 * Written by `hwgen soc`. Loads the compiled model of hwgen_model.h into the accelerator,
 * classifies the test inputs in one run and checks each class against hwgen.nn's, then
 * times runs of full batches: the CPU's copies (inputs in, scores out and their argmax) and
 * the array's work, in the SoC's clock cycles (timer0's uptime counter). */
#include <stdint.h>
#include <stdio.h>

#include <generated/csr.h>
#include <generated/mem.h>
#include <generated/soc.h>

#include "hwgen.h"
#include "hwgen_model.h"

#define BASE ((uintptr_t)ACCEL_BASE)
/* Runs of the timing loop. */
#define TIMED_RUNS 2

static uint64_t now(void)
{
    timer0_uptime_latch_write(1);
    return timer0_uptime_cycles_read();
}

/* Write samples first .. first + n - 1 (the test inputs, round robin) to rows 0 .. n - 1:
 * hwgen_write_words with the window's constants folded in, as the copy is the CPU's work. */
static void write_inputs(uint32_t n, uint32_t first)
{
    const hwgen_window_t *w = &hwgen_windows[HWGEN_MODEL_IN_REGION];
    const uint32_t size = HWGEN_MODEL_IN_WORDS * HWGEN_MODEL_IN_PIECES;
    volatile uint32_t *dst = (volatile uint32_t *)(BASE + w->offset)
                             + HWGEN_MODEL_IN_BASE * w->stride;
    for (uint32_t s = 0; s < n; s++) {
        const uint32_t *src = &hwgen_model_inputs[((first + s) % HWGEN_MODEL_SAMPLES) * size];
        for (uint32_t i = 0; i < HWGEN_MODEL_IN_WORDS; i++, dst += w->stride) {
#pragma GCC unroll 8
            for (uint32_t k = 0; k < HWGEN_MODEL_IN_PIECES; k++)
                dst[k] = *src++;
        }
    }
}

#if HWGEN_MODEL_OUT_LANE_BITS == 32 && HWGEN_MODEL_OUT_PITCH % HWGEN_MODEL_OUT_LANES == 0
/* The class of row s: the index of its largest score, the first on a tie (numpy.argmax).
 * Here each score is a whole piece and each row starts on a word: read them in order. */
static uint32_t classify(uint32_t s)
{
    const hwgen_window_t *w = &hwgen_windows[HWGEN_MODEL_OUT_REGION];
    volatile int32_t *p = (volatile int32_t *)(BASE + w->offset) + w->stride
        * (HWGEN_MODEL_OUT_BASE + s * (HWGEN_MODEL_OUT_PITCH / HWGEN_MODEL_OUT_LANES));
    uint32_t best = 0;
    int32_t best_score = p[0];
#pragma GCC unroll 16
    for (uint32_t i = 1; i < HWGEN_MODEL_CLASSES; i++) {
        int32_t v = p[(i / HWGEN_MODEL_OUT_LANES) * w->stride + i % HWGEN_MODEL_OUT_LANES];
        if (v > best_score) {
            best = i;
            best_score = v;
        }
    }
    return best;
}
#else
/* The class of row s: the index of its largest score, the first on a tie (numpy.argmax). */
static uint32_t classify(uint32_t s)
{
    uint32_t best = 0;
    int32_t best_score = 0;
    for (uint32_t i = 0; i < HWGEN_MODEL_CLASSES; i++) {
        uint32_t e = s * HWGEN_MODEL_OUT_PITCH + i;
        int32_t v = hwgen_read_lane(BASE, HWGEN_MODEL_OUT_REGION,
                                    HWGEN_MODEL_OUT_BASE + e / HWGEN_MODEL_OUT_LANES,
                                    (e % HWGEN_MODEL_OUT_LANES) * HWGEN_MODEL_OUT_LANE_BITS,
                                    HWGEN_MODEL_OUT_LANE_BITS);
        if (i == 0 || v > best_score) {
            best = i;
            best_score = v;
        }
    }
    return best;
}
#endif

static void finish(void)
{
#ifdef CSR_UART_BASE
    while (!uart_txempty_read())
        ;
#endif
#ifdef CSR_SIM_FINISH_BASE
    for (volatile int i = 0; i < 2000; i++)
        ;
    sim_finish_finish_write(1);
#endif
    for (;;)
        ;
}

static int check_classes(void)
{
    uint32_t ok = 0;
    write_inputs(HWGEN_MODEL_SAMPLES, 0);
    hwgen_clear_counters(BASE);
    hwgen_start(BASE, HWGEN_MODEL_SAMPLES);
    uint32_t err = hwgen_wait(BASE);
    if (err) {
        printf("hwgen: the core refused the run: ERROR_CAUSE 0x%lx\n", (unsigned long)err);
        return -1;
    }
    for (uint32_t s = 0; s < HWGEN_MODEL_SAMPLES; s++) {
        uint32_t c = classify(s);
        int same = c == hwgen_model_reference[s];
        ok += same;
        printf("sample %lu: class %lu reference %u label %u %s\n", (unsigned long)s,
               (unsigned long)c, hwgen_model_reference[s], hwgen_model_labels[s],
               same ? "match" : "MISMATCH");
    }
    printf("hwgen: %lu/%u classes match hwgen.nn; array %lu cycles for %u rows\n",
           (unsigned long)ok, HWGEN_MODEL_SAMPLES, (unsigned long)hwgen_cycles(BASE),
           HWGEN_MODEL_SAMPLES);
    return ok == HWGEN_MODEL_SAMPLES ? 0 : -1;
}

static void time_runs(void)
{
    uint64_t copy_in = 0, array = 0, copy_out = 0, busy = 0;
    uint32_t n = HWGEN_MODEL_BATCH, sum = 0;
    hwgen_clear_counters(BASE);
    for (uint32_t r = 0; r < TIMED_RUNS; r++) {
        uint64_t t0 = now();
        write_inputs(n, r * n);
        uint64_t t1 = now();
        hwgen_start(BASE, n);
        hwgen_wait(BASE);
        uint64_t t2 = now();
        for (uint32_t s = 0; s < n; s++)
            sum += classify(s);
        uint64_t t3 = now();
        copy_in += t1 - t0;
        array += t2 - t1;
        copy_out += t3 - t2;
    }
    busy = hwgen_cycles(BASE);
    uint64_t count = (uint64_t)TIMED_RUNS * n;
    uint64_t total = copy_in + array + copy_out;
    printf("timing: %lu inferences in runs of %lu (class sum %lu)\n", (unsigned long)count,
           (unsigned long)n, (unsigned long)sum);
    printf("cycles per inference: %lu total = %lu copy in + %lu array (core busy %lu) + "
           "%lu copy out and argmax\n",
           (unsigned long)(total / count), (unsigned long)(copy_in / count),
           (unsigned long)(array / count), (unsigned long)(busy / count),
           (unsigned long)(copy_out / count));
    printf("inferences per second at %lu Hz: %lu\n", (unsigned long)CONFIG_CLOCK_FREQUENCY,
           (unsigned long)((uint64_t)CONFIG_CLOCK_FREQUENCY * count / total));
}

int main(void)
{
    printf("\nhwgen on %s\n", CONFIG_CPU_HUMAN_NAME);
    if (!hwgen_check(BASE, HWGEN_MODEL_CONFIG_HASH)) {
        printf("hwgen: no core of configuration %08lx at 0x%08lx (ID 0x%08lx, hash 0x%08lx)\n",
               (unsigned long)HWGEN_MODEL_CONFIG_HASH, (unsigned long)BASE,
               (unsigned long)HWGEN_REG32(BASE, HWGEN_REG_ID),
               (unsigned long)HWGEN_REG32(BASE, HWGEN_REG_CONFIG_HASH));
        finish();
    }
    uint64_t t0 = now();
    if (hwgen_load(BASE, hwgen_model_images, HWGEN_MODEL_IMAGES)) {
        printf("hwgen: the model's word widths differ from the core's\n");
        finish();
    }
    printf("model loaded in %lu cycles\n", (unsigned long)(now() - t0));
    if (check_classes() == 0)
        time_runs();
    printf("hwgen: done\n");
    finish();
    return 0;
}
"""
