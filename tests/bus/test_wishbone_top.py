"""The Wishbone top in Amaranth's simulator: registers, memory windows, errors (the cocotb bench
sim/tb_wishbone.py runs whole programs through cocotbext-wishbone's master)."""

import random

import pytest
from amaranth.sim import Simulator
from support import TINY

from hwgen.boards.catalog import ECP5_IMPLEMENTATION
from hwgen.bus.regmap import ID_VALUE, MAP_VERSION
from hwgen.bus.wishbone_top import WishboneTop
from hwgen.memmap import Region
from sim.tb_wishbone import rmap_holes


async def _access(ctx, bus, byte_addr, data=None, sel=0xF):
    """One classic cycle; return ``(ack, err, dat_r, cycles from stb to the answer)``."""
    ctx.set(bus.adr, byte_addr // 4)
    ctx.set(bus.we, data is not None)
    ctx.set(bus.dat_w, data or 0)
    ctx.set(bus.sel, sel)
    ctx.set(bus.cyc, 1)
    ctx.set(bus.stb, 1)
    cycles = 0
    while True:
        await ctx.tick()
        cycles += 1
        ack, err, dat_r = ctx.get(bus.ack), ctx.get(bus.err), ctx.get(bus.dat_r)
        if ack or err or cycles == 20:
            break
    ctx.set(bus.cyc, 0)
    ctx.set(bus.stb, 0)
    await ctx.tick()
    return ack, err, dat_r, cycles


def _run(testbench, config=TINY, implementation=None):
    dut = WishboneTop(config, implementation)
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def bench(ctx):
        await testbench(ctx, dut)

    sim.add_testbench(bench)
    sim.run()


def test_registers_read_their_values():
    async def bench(ctx, dut):
        rmap, bus = dut.regmap, dut.bus
        for name, want in (("ID", ID_VALUE), ("VERSION", MAP_VERSION), ("BATCH", 1),
                           ("ACC_DEPTH", TINY.acc_depth), ("IRQ_ENABLE", 1),
                           ("WINDOW_SHIFT", rmap.window_shift),
                           ("ACT_DEPTH", TINY.act_depth), ("STATUS", 0)):
            ack, err, data, _ = await _access(ctx, bus, rmap[name].offset)
            assert (ack, err, data) == (1, 0, want), name
        ack, err, _, cycles = await _access(ctx, bus, rmap["BATCH"].offset, 3)
        assert ack and not err
        assert cycles == 1          # ack in the second cycle of stb, as documented
        assert (await _access(ctx, bus, rmap["BATCH"].offset))[2] == 3

    _run(bench)


# The ECP5 board's implementation (registered reads, as `hwgen soc` builds the core for the
# ULX3S): one cycle more for a window access, as documented.
@pytest.mark.parametrize("implementation", [None, ECP5_IMPLEMENTATION], ids=["plain", "ecp5"])
def test_windows_hold_words_piece_by_piece(implementation):
    latency = 3 + (implementation is not None)

    async def bench(ctx, dut):
        rng = random.Random(1)
        rmap, bus = dut.regmap, dut.bus
        for region in (Region.PARAM, Region.ACT, Region.PROGRAM):
            w = rmap.window(region)
            words = {}
            for addr in (0, w.depth - 1, rng.randrange(w.depth)):
                word = rng.getrandbits(w.word_bits)
                words[addr] = word
                for k in reversed(range(w.pieces)):      # any order of pieces
                    piece = (word >> (32 * k)) & 0xFFFFFFFF
                    byte = w.offset + 4 * (addr * w.stride + k)
                    ack, err, _, cycles = await _access(ctx, bus, byte, piece)
                    assert ack and not err
                    assert cycles == latency      # ack in the fourth (fifth) cycle
            for addr, word in words.items():
                got = 0
                for k in range(w.pieces):
                    _, _, data, cycles = await _access(
                        ctx, bus, w.offset + 4 * (addr * w.stride + k))
                    assert cycles == latency
                    got |= data << (32 * k)
                assert got == word, (region, addr)
            # One byte lane of a piece: only that byte changes.
            byte = w.offset + 4 * (addr * w.stride)
            await _access(ctx, bus, byte, 0xA5A5A5A5, sel=0b0100)
            _, _, data, _ = await _access(ctx, bus, byte)
            assert data == (word & 0xFF00FFFF | 0x00A50000) & ((1 << min(32, w.word_bits)) - 1)

    _run(bench, implementation=implementation)


def test_bad_accesses_answer_err_and_set_the_cause():
    async def bench(ctx, dut):
        rmap, bus = dut.regmap, dut.bus
        bad = rmap_holes(rmap)
        assert len(bad) >= 4
        for byte in bad:
            ack, err, _, _ = await _access(ctx, bus, byte)
            assert (ack, err) == (0, 1), hex(byte)
        _, _, cause, _ = await _access(ctx, bus, rmap["ERROR_CAUSE"].offset)
        assert cause == rmap["ERROR_CAUSE"].field("BUS").mask
        _, _, status, _ = await _access(ctx, bus, rmap["STATUS"].offset)
        assert status & rmap["STATUS"].field("ERROR").mask
        await _access(ctx, bus, rmap["CONTROL"].offset,
                      rmap["CONTROL"].field("CLEAR_ERROR").mask)
        assert (await _access(ctx, bus, rmap["ERROR_CAUSE"].offset))[2] == 0
        # A start with batch 0 is refused.
        await _access(ctx, bus, rmap["BATCH"].offset, 0)
        await _access(ctx, bus, rmap["CONTROL"].offset, rmap["CONTROL"].field("START").mask)
        _, _, cause, _ = await _access(ctx, bus, rmap["ERROR_CAUSE"].offset)
        assert cause == rmap["ERROR_CAUSE"].field("BAD_BATCH").mask
        assert (await _access(ctx, bus, rmap["RUNS"].offset))[2] == 0

    _run(bench)
