"""The depthwise unit's tile plan in counters (TileTaps) against hwgen.passes.depthwise's
tile_plan, tile after tile, for kernels of every shape on arrays of several heights."""

import math

import pytest
from amaranth.sim import Simulator

from hwgen import AcceleratorConfig
from hwgen.device.depthwise_taps import TileTaps
from hwgen.passes.depthwise import tile_plan


@pytest.mark.parametrize(("array", "extra"), [(1, 0), (3, 0), (4, 0), (8, 0), (8, 1), (2, 3)])
def test_the_counters_follow_the_tile_plan(array, extra):
    """On ``array`` rows and ``extra`` rows of the unit: a tile of ``rows`` taps, both."""
    config = AcceleratorConfig(rows=array, cols=8, depthwise=True, dw_lines=8,
                               dw_extra_rows=extra)
    rows = array + extra
    dut = TileTaps(config)
    kernels = [(kh, kw) for kh in (1, 2, 3, 5) for kw in (1, 2, 3, 4, 7)]
    zero = config.dw_lines + 1

    async def bench(ctx):
        for kh, kw in kernels:
            tq, tr = divmod(rows, kw)
            for name, value in (("kh", kh), ("kw", kw), ("dw_tq", tq), ("dw_tr", tr)):
                ctx.set(getattr(dut.geom, name), value)
            ctx.set(dut.first, 1)
            await ctx.tick()
            ctx.set(dut.first, 0)
            for kt in range(math.ceil(kh * kw / rows)):
                plan = tile_plan(kt, rows, kh, kw)
                assert (ctx.get(dut.span), ctx.get(dut.ky0), ctx.get(dut.kx0)) == \
                    (plan.span, plan.ky_min, plan.kx0), (kh, kw, kt)
                wraps = ctx.get(dut.wraps0)
                ctx.set(dut.step, 1)
                await ctx.tick()
                ctx.set(dut.step, 0)
                # The lines follow the counters a cycle later.
                lines = [ctx.get(dut.lines[i]) for i in range(rows)]
                assert lines == [zero if line is None else line for line in plan.lines]
                if kt + 1 < math.ceil(kh * kw / rows):
                    nxt = tile_plan(kt + 1, rows, kh, kw)
                    assert nxt.ky_min == plan.ky_min + tq + wraps

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
