"""The depthwise unit's output cells (OutputCells): the walk presents one cell a cycle from the
cycle after ``begin``, valid exactly at the output positions, ``last`` at the chunk's last,
against a Python model of the grid, for strides 1 to 3 and rows of one cell up."""

import pytest
from amaranth.sim import Simulator

from hwgen import AcceleratorConfig
from hwgen.device.depthwise_rows import OutputCells


def _cells(rows_last, wp, delay, sy, sx):
    """The model: ``(valid, last)`` of every cell of the walk, in order."""
    cells = []
    for r in range(rows_last + 1):
        for c in range(wp):
            if r == rows_last and c > delay:
                return cells
            valid = r % sy == 0 and c % sx == 0 and c <= delay
            cells.append((valid, valid and r == rows_last and c == delay))
    return cells


@pytest.mark.parametrize(("sy", "sx"), [(1, 1), (2, 2), (1, 3), (3, 1)])
@pytest.mark.parametrize(("out_rows", "ow", "kw"), [(1, 1, 1), (2, 5, 3), (3, 4, 1), (1, 3, 4)])
def test_the_walk_against_the_grid(sy, sx, out_rows, ow, kw):
    config = AcceleratorConfig(rows=3, cols=4, depthwise=True)
    dut = OutputCells(config)
    delay = (ow - 1) * sx
    wp = delay + kw
    rows_last = (out_rows - 1) * sy
    want = _cells(rows_last, wp, delay, sy, sx)

    async def bench(ctx):
        for name, value in (("dw_wp", wp), ("dw_delay", delay), ("sy", sy), ("sx", sx)):
            ctx.set(getattr(dut.geom, name), value)
        ctx.set(dut.rows_last, rows_last)
        for i in range(config.rows):
            ctx.set(dut.lines[i], i)
        for _ in range(2):      # twice: the walk starts over
            ctx.set(dut.begin, 1)
            await ctx.tick()
            ctx.set(dut.begin, 0)
            got = []
            for _ in range(len(want) + 3):
                got.append((ctx.get(dut.valid), ctx.get(dut.last)))
                assert [ctx.get(dut.sel[i]) for i in range(config.rows)] == [0, 1, 2]
                await ctx.tick()
            assert got == [(int(v), int(x)) for v, x in want] + [(0, 0)] * 3
            assert sum(v for v, _ in got) == out_rows * ow

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
