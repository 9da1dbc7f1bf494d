"""The run statistics: the split counter against a plain one, the MACs against the busy cycles."""

import numpy as np
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
