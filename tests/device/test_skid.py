"""The skid register: the stream it drives carries the same rows in the same cycles as a direct
connection of the feeder would, under the same ``ready`` pattern, and ``take`` says that it
holds no row (and ``take_next``, the cycle before, that it will)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hwgen.device.skid import Skid

WIDTH = 8


class Feeder:
    """A feeder as the accelerator's are: bursts of rows (a layer's), each starting at a cycle
    given (its ``start_layer``, which empties the feeder's register), after which the feeder
    presents its next row whenever it may move on."""

    def __init__(self, bursts):
        self.bursts = bursts           # [(start cycle, [rows])]
        self.rows = []
        self.valid, self.payload = 0, 0

    def clock(self, cycle, take):
        """One clock edge at the end of ``cycle`` in which the feeder may move on (``take``)."""
        starts = [rows for start, rows in self.bursts if start == cycle]
        if starts:
            self.rows = list(starts[0])
            self.valid = 0
        elif take:
            self.valid = int(bool(self.rows))
            if self.rows:
                self.payload = self.rows.pop(0)


def direct_trace(bursts, ready):
    """Return ``[(valid, payload or None)]`` per cycle of a feeder connected to the consumer
    directly: it moves on when it holds no row or the consumer takes it."""
    feeder = Feeder(bursts)
    trace = []
    for cycle, r in enumerate(ready):
        trace.append((feeder.valid, feeder.payload if feeder.valid else None))
        feeder.clock(cycle, not feeder.valid or r)
    return trace


def bursts_and_ready(rng, p_ready, cycles=600):
    """Bursts of 1..12 rows, each starting a few cycles after the previous one's rows all left
    (as layers do), and a random ``ready`` per cycle."""
    ready = [int(rng.random() < p_ready) for _ in range(cycles)]
    bursts, start = [], 2
    while True:
        rows = [int(v) for v in rng.integers(0, 1 << WIDTH, int(rng.integers(1, 13)))]
        bursts.append((start, rows))
        trace = direct_trace(bursts, ready)
        sent = [c for c, (v, _) in enumerate(trace) if v and ready[c]]
        if len(sent) < sum(len(r) for _, r in bursts):
            bursts.pop()               # the last burst does not finish within the cycles
            return bursts, ready
        start = sent[-1] + 1 + int(rng.integers(0, 4))


@pytest.mark.parametrize("p_ready", [1.0, 0.8, 0.5, 0.2])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_same_rows_in_the_same_cycles_as_a_direct_connection(seed, p_ready):
    rng = np.random.default_rng(seed)
    bursts, ready = bursts_and_ready(rng, p_ready)
    assert len(bursts) >= 3
    want = direct_trace(bursts, ready)
    dut = Skid(WIDTH)
    seen, takes, nexts = [], [], []

    async def bench(ctx):
        feeder = Feeder(bursts)
        held = None                     # the row a model of the skid register holds
        for cycle, r in enumerate(ready):
            ctx.set(dut.valid, feeder.valid)
            ctx.set(dut.payload, feeder.payload if feeder.valid else
                    int(rng.integers(0, 1 << WIDTH)))      # a row not valid is not looked at
            ctx.set(dut.o.ready, r)
            valid, take = ctx.get(dut.o.valid), ctx.get(dut.take)
            seen.append((valid, ctx.get(dut.o.payload) if valid else None))
            takes.append((take, held is None))
            nexts.append(ctx.get(dut.take_next))
            # The register fills with a row offered and refused while it is empty, and empties
            # when the row it holds is taken.
            if held is None and feeder.valid and not r:
                held = feeder.payload
            elif held is not None and r:
                held = None
            feeder.clock(cycle, take)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == want
    assert all(take == empty for take, empty in takes)
    assert nexts[:-1] == [take for take, _ in takes[1:]]
    if p_ready < 1:
        assert any(not empty for _, empty in takes)     # the register did fill
