"""The run statistics: the split counter against a plain one, the MACs against the busy cycles."""

import numpy as np
import pytest
from amaranth.sim import Simulator


def test_split_counter_is_exact_every_cycle():
    """The two-half counter of the run statistics equals a plain counter at every cycle: across
    the halves' boundary, at the wrap, with gaps and clears."""
    from amaranth.hdl import Module, Signal

    from hwgen.device.counters import split_counter

    m = Module()
    out, inc, clear = Signal(9), Signal(), Signal()
    split_counter(m, out, inc, clear, "n")
    sim = Simulator(m)
    sim.add_clock(1e-6)
    rng = np.random.default_rng(3)
    seen = []

    async def bench(ctx):
        model = 0
        for cycle in range(1500):
            i, c = int(rng.random() < 0.9), int(cycle in (700, 701, 1200))
            ctx.set(inc, i)
            ctx.set(clear, c)
            await ctx.tick()
            model = 0 if c else (model + i) % 512
            seen.append((ctx.get(out), model))

    sim.add_testbench(bench)
    sim.run()
    assert max(w for _, w in seen) == 511 and all(g == w for g, w in seen), seen[:20]


@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (4, 4), (6, 8), (5, 7), (64, 64)])
def test_counters_against_a_model(shape):
    """``cycles`` counts the cycles with ``busy``, ``busy_cycles`` those with ``issue``, ``macs``
    is ``rows * cols`` per issue, and ``clear`` zeroes all three (whatever else is high), every
    cycle, with each input random and on for long stretches."""
    from hwgen.config import AcceleratorConfig
    from hwgen.device.counters import CounterBlock

    rows, cols = shape
    dut = CounterBlock(AcceleratorConfig(rows=rows, cols=cols))
    rng = np.random.default_rng(rows * 100 + cols)
    seen = []

    async def bench(ctx):
        cycles = busy_cycles = 0
        busy = issue = 0
        for _ in range(1200):
            # Inputs that keep their value for a while, as a run's busy and the array's issue do.
            busy = busy if rng.random() < 0.9 else 1 - busy
            issue = int(busy and rng.random() < 0.7)
            clear = int(rng.random() < 0.004)
            ctx.set(dut.busy, busy)
            ctx.set(dut.issue, issue)
            ctx.set(dut.clear, clear)
            await ctx.tick()
            cycles, busy_cycles = (0, 0) if clear else (cycles + busy, busy_cycles + issue)
            got = (ctx.get(dut.cycles), ctx.get(dut.busy_cycles), ctx.get(dut.macs))
            seen.append((got, (cycles, busy_cycles, busy_cycles * rows * cols)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    bad = [(i, g, w) for i, (g, w) in enumerate(seen) if g != w]
    assert not bad, bad[:5]
    assert max(w[1] for _, w in seen) > 100 and any(w == (0, 0, 0) for _, w in seen[9:])


def test_counters_hold_without_busy_or_issue():
    """Between runs nothing counts."""
    from hwgen.config import AcceleratorConfig
    from hwgen.device.counters import CounterBlock

    dut = CounterBlock(AcceleratorConfig(rows=2, cols=3))

    async def bench(ctx):
        ctx.set(dut.busy, 1)
        ctx.set(dut.issue, 1)
        await ctx.tick().repeat(5)
        ctx.set(dut.busy, 0)
        ctx.set(dut.issue, 0)
        for _ in range(10):
            await ctx.tick()
            assert (ctx.get(dut.cycles), ctx.get(dut.busy_cycles), ctx.get(dut.macs)) == \
                (5, 5, 30)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
