"""The write-back alone, exhaustively for small configurations: every first bank, every set of
existing channels, both ``valid`` values and addresses at the wrap, against a naive model of
where each channel of a step goes."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import SMALL

from hwgen.config import AcceleratorConfig
from hwgen.device.writeback import WriteBack
from hwgen.implementation import Implementation, Registers

ADDR_WIDTH = 5


def expected_writes(lanes, y, *, base, rem, ok, valid):
    """Return ``{bank: (address, value)}`` of a step: channel ``n0 + j`` (lane ``j``) goes to
    bank ``n % lanes``, word ``dst + n // lanes``, where ``base = dst + n0 // lanes`` and
    ``rem = n0 % lanes``; only existing channels (``ok``) of a valid step are written."""
    if not valid:
        return {}
    writes = {}
    for j, value in enumerate(y):
        if ok >> j & 1:
            element = rem + j              # channel n0 + j, counted from word `base`
            bank, word = element % lanes, element // lanes
            assert bank not in writes
            writes[bank] = ((base + word) % (1 << ADDR_WIDTH), value)
    return writes


@pytest.mark.parametrize(("shape", "post_lanes"), [
    ((1, 1), None), ((2, 3), None), ((3, 2), None), ((4, 4), None), ((2, 4), 1), ((2, 4), 2),
    ((3, 6), 3), ((5, 2), 1),
])
@pytest.mark.parametrize("stages", [0, 1], ids=["comb", "registered"])
def test_every_bank_gets_its_channel(shape, post_lanes, stages):
    """Each step's writes, ``stages`` cycles after it came (in its cycle, or the next)."""
    cfg = AcceleratorConfig(rows=shape[0], cols=shape[1], post_lanes=post_lanes, **SMALL)
    lanes, n_req = cfg.act_lanes, cfg.requant_lanes
    dut = WriteBack(cfg, ADDR_WIDTH, stages=stages)
    rng = np.random.default_rng(shape[0] * 10 + shape[1])
    top = (1 << ADDR_WIDTH) - 1
    checked = []

    async def bench(ctx):
        for rem in range(lanes):
            for ok in range(1 << n_req):
                for base in (0, 13, top):
                    for valid in (0, 1):
                        y = [int(v) for v in rng.integers(-128, 128, n_req)]
                        ctx.set(dut.i_step.valid, valid)
                        ctx.set(dut.i_step.payload, {"end": 0, "y": y, "pos": {
                            "base": base, "rem": rem, "ok": ok}})
                        want = expected_writes(lanes, y, base=base, rem=rem, ok=ok, valid=valid)
                        for _ in range(stages):
                            await ctx.tick()
                        for b in range(lanes):
                            en = ctx.get(dut.wr_en[b])
                            assert en == (b in want), (rem, ok, base, valid, b)
                            if en:
                                got = (ctx.get(dut.wr_addr[b]), ctx.get(dut.wr_data[b]))
                                assert got == want[b], (rem, ok, base, b, got, want[b])
                        checked.append(len(want))

    sim = Simulator(dut)
    if stages:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(checked) == lanes * (1 << n_req) * 3 * 2
    # Every lane was written from every first bank.
    assert sum(checked) == lanes * 3 * n_req * (1 << (n_req - 1))


def test_stages_follow_the_register_levels(refused):
    """The write-back registers its writes from ``Registers.HOST`` on (the boards' ECP5
    builds but the 12F's); other stages are refused."""
    assert [WriteBack.stages_for(Implementation(registers=level)) for level in Registers] \
        == [0, 0, 1, 1]
    cfg = AcceleratorConfig(rows=2, cols=2, **SMALL)
    refused(r"WriteBack: stages=2; allowed: 0, 1", lambda: WriteBack(cfg, ADDR_WIDTH, stages=2))
