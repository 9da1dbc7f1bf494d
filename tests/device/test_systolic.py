"""Amaranth-simulator unit tests of the processing elements and small engines.

Each cell is checked cycle by cycle against a naive Python model of its registers; small
engines against NumPy and the cycle model.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hwgen.config import AcceleratorConfig
from hwgen.cycles import engine_timing
from hwgen.device.engine import MatmulEngine
from hwgen.device.systolic import OSProcessingElement, ProcessingElement


def _simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _wrap(value, bits):
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


@pytest.mark.parametrize("widths", [(8, 8, 32), (4, 4, 12), (16, 16, 40)])
def test_ws_pe_matches_model(widths):
    in_bits, w_bits, acc_bits = widths
    dut = ProcessingElement(in_bits, w_bits, acc_bits)
    rng = np.random.default_rng(3)

    async def bench(ctx):
        # Naive model: the registers as a dict, updated from the inputs of the cycle.
        r = {"a": 0, "sel": 0, "prod": 0, "psum": 0, "bank": [0, 0]}
        for cycle in range(300):
            a = int(rng.integers(-(1 << in_bits - 1), 1 << in_bits - 1))
            w = int(rng.integers(-(1 << w_bits - 1), 1 << w_bits - 1))
            psum = int(rng.integers(-(1 << acc_bits - 2), 1 << acc_bits - 2))
            sel, we, bank = (int(v) for v in rng.integers(0, 2, 3))
            en = int(rng.random() < 0.8)
            for name, value in (("a_in", a), ("sel_in", sel), ("psum_in", psum), ("w_in", w),
                                ("w_we", we), ("w_bank", bank), ("en", en)):
                ctx.set(getattr(dut, name), value)
            assert ctx.get(dut.a_out) == r["a"], cycle
            assert ctx.get(dut.sel_out) == r["sel"], cycle
            assert ctx.get(dut.psum_out) == r["psum"], cycle
            if not en:  # the clock enable: every register holds
                await ctx.tick()
                continue
            new = dict(r, bank=list(r["bank"]))
            new["a"], new["sel"] = a, sel
            new["prod"] = r["a"] * r["bank"][r["sel"]]
            new["psum"] = _wrap(psum + r["prod"], acc_bits)
            if we:
                new["bank"][bank] = w
            r = new
            await ctx.tick()

    _simulate(dut, bench)


def test_os_pe_matches_model():
    dut = OSProcessingElement(8, 8, 32)
    rng = np.random.default_rng(4)

    async def bench(ctx):
        r = {"a": 0, "w": 0, "f": 0, "l": 0, "prod": 0, "f2": 0, "l2": 0, "acc": 0, "res": 0}
        for cycle in range(300):
            a, w = (int(v) for v in rng.integers(-128, 128, 2))
            first, last = (int(v) for v in rng.integers(0, 2, 2))
            en = int(rng.random() < 0.8)
            for name, value in (("a_in", a), ("w_in", w), ("first_in", first),
                                ("last_in", last), ("en", en)):
                ctx.set(getattr(dut, name), value)
            assert ctx.get(dut.a_out) == r["a"], cycle
            assert ctx.get(dut.w_out) == r["w"], cycle
            assert ctx.get(dut.result) == r["res"], cycle
            if not en:  # the clock enable: every register holds
                await ctx.tick()
                continue
            total = (0 if r["f2"] else r["acc"]) + r["prod"]
            r = {"a": a, "w": w, "f": first, "l": last, "prod": r["a"] * r["w"],
                 "f2": r["f"], "l2": r["l"], "acc": _wrap(total, 32),
                 "res": _wrap(total, 32) if r["l2"] else r["res"]}
            await ctx.tick()

    _simulate(dut, bench)


@pytest.mark.parametrize(("dataflow", "registered"), [("ws", False), ("ws", True),
                                                      ("os", False)])
@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (3, 2)])
def test_small_engine(shape, dataflow, registered):
    """Random tiles through the engine: exact products, in order, at the modelled cycles
    (with the array's inputs registered too: a cycle later, the tiles' cycles the same)."""
    cfg = AcceleratorConfig(rows=shape[0], cols=shape[1], dataflow=dataflow)
    dut = MatmulEngine(cfg, input_register=registered)
    rng = np.random.default_rng(5)
    tiles = []
    for _ in range(4):
        m = int(rng.integers(1, 3 * cfg.rows + 2))
        tiles.append((rng.integers(-128, 128, (cfg.rows, cfg.cols)),
                      rng.integers(-128, 128, (m, cfg.rows))))
    got = []

    async def weights(ctx):
        for w, _ in tiles:
            for row in w:
                ctx.set(dut.i_weight.payload, [int(v) for v in row])
                ctx.set(dut.i_weight.valid, 1)
                await ctx.tick().until(dut.i_weight.ready)
        ctx.set(dut.i_weight.valid, 0)

    async def acts(ctx):
        for _, x in tiles:
            for i, row in enumerate(x):
                ctx.set(dut.i_act.payload, {"data": [int(v) for v in row],
                                            "last": int(i == len(x) - 1)})
                ctx.set(dut.i_act.valid, 1)
                await ctx.tick().until(dut.i_act.ready)
        ctx.set(dut.i_act.valid, 0)

    async def results(ctx):
        ctx.set(dut.o_result.ready, 1)
        total = sum(len(x) for _, x in tiles)
        for cycle in range(2000):
            if ctx.get(dut.o_result.valid):
                p = ctx.get(dut.o_result.payload)
                got.append((cycle, [int(v) for v in p.data], int(p.last)))
                if len(got) == total:
                    return
            await ctx.tick()
        raise AssertionError("timeout")

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(weights)
    sim.add_testbench(acts)
    sim.add_testbench(results)
    sim.run()
    expected = np.concatenate([x @ w for w, x in tiles])
    np.testing.assert_array_equal(np.array([row for _, row, _ in got]), expected)
    lasts = [last for _, _, last in got]
    assert lasts == [int(i == len(x) - 1) for _, x in tiles for i in range(len(x))]
    timing = engine_timing(cfg, [len(x) for _, x in tiles], registered=registered)
    assert [c for c, _, _ in got] == timing.out
