"""The bank arbiter alone: each pass kind grants its unit, the banks see that unit's requests
and no other's, every unit sees the words read; against a naive model of the grant."""

import numpy as np
import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator
from support import SMALL

from hwgen.config import AcceleratorConfig
from hwgen.device.bank_arbiter import BankArbiter
from hwgen.memmap import PassKind

REQUESTS = ("rd_addr", "rd_en", "rd_take", "wr_addr", "wr_data", "wr_en")


def granted(units, kind):
    """Return the unit that runs ``kind``: the one that claims it, else the first."""
    return next((name for name, kinds in units.items() if kind in kinds), next(iter(units)))


def random_requests(rng, port):
    """Return random values, as raw bits, for each request member of ``port``."""
    return {f: int(rng.integers(0, 1 << len(Value.cast(getattr(port, f)))))
            for f in REQUESTS}


def run_arbiter(units, *, kinds, cycles=40, seed=0, registered=False):
    """Drive every unit's port with random requests and ``kind`` through ``kinds`` (raw
    values, including ones no kind names); check the banks, the grants and ``rd_data``
    (``registered``: the grant and the banks follow the kind of the cycle before, from the
    first unit out of reset). Return how many cycles each unit
    was granted."""
    cfg = AcceleratorConfig(rows=2, cols=3, **SMALL)
    dut = BankArbiter(cfg, units, registered=registered)
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys(units, 0)
    before = next(iter(units))   # the unit of the last cycle's kind

    async def bench(ctx):
        nonlocal before
        for cycle in range(cycles):
            kind = kinds[cycle % len(kinds)]
            kind = kind.value if isinstance(kind, PassKind) else kind
            ctx.set(Value.cast(dut.kind), kind)
            reqs = {name: random_requests(rng, dut.port(name)) for name in units}
            for name, values in reqs.items():
                for field, value in values.items():
                    ctx.set(Value.cast(getattr(dut.port(name), field)), value)
            words = int(rng.integers(0, 1 << len(Value.cast(dut.banks.rd_data))))
            ctx.set(Value.cast(dut.banks.rd_data), words)
            try:
                now = granted(units, PassKind(kind))
            except ValueError:          # a value no kind names: the first unit's
                now = next(iter(units))
            want = before if registered else now
            counts[want] += 1
            for name in units:
                assert ctx.get(getattr(dut.grant, name)) == (name == want), (cycle, kind, name)
                assert ctx.get(Value.cast(dut.port(name).rd_data)) == words, (cycle, name)
            for field in REQUESTS:
                got = ctx.get(Value.cast(getattr(dut.banks, field)))
                assert got == reqs[want][field], (cycle, kind, field)
            if registered:
                await ctx.tick()
            else:
                await ctx.delay(1e-6)
            before = now

    sim = Simulator(dut)
    if registered:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return counts


def test_grant_by_kind():
    units = {"matrix": (PassKind.MATRIX,), "pool": (PassKind.MAXPOOL,)}
    counts = run_arbiter(units, kinds=[PassKind.MATRIX, PassKind.MAXPOOL, PassKind.MAXPOOL,
                                       PassKind.MATRIX])
    assert counts == {"matrix": 20, "pool": 20}


def test_other_units_ignored_while_a_kind_runs():
    # The pooler's requests never reach the banks in a matrix pass, nor the matrix datapath's
    # in a pooling pass (random requests on both ports every cycle).
    units = {"matrix": (PassKind.MATRIX,), "pool": (PassKind.MAXPOOL,)}
    run_arbiter(units, kinds=[PassKind.MAXPOOL] * 5 + [PassKind.MATRIX] * 5, seed=1)


def test_unclaimed_kinds_run_the_first_unit():
    units = {"matrix": (PassKind.MATRIX,), "pool": (PassKind.MAXPOOL,)}
    counts = run_arbiter(units, kinds=[2, 7, PassKind.MAXPOOL, 5], seed=2)
    assert counts == {"matrix": 30, "pool": 10}


def test_one_unit_is_always_granted():
    # A device without spatial layers: its one unit's port goes straight to the banks.
    counts = run_arbiter({"matrix": (PassKind.MATRIX,)},
                         kinds=[PassKind.MATRIX, PassKind.MAXPOOL, 6], seed=3)
    assert counts == {"matrix": 40}


def test_a_third_unit_is_one_more_port():
    # A unit that claims a kind no other does (MAXPOOL here stands for a new kind's unit).
    units = {"matrix": (PassKind.MATRIX,), "pool": (), "other": (PassKind.MAXPOOL,)}
    counts = run_arbiter(units, kinds=[PassKind.MATRIX, PassKind.MAXPOOL], seed=4)
    assert counts == {"matrix": 20, "pool": 0, "other": 20}


@pytest.mark.parametrize(("units", "error", "match"), [
    ({}, ValueError, "at least one pass unit"),
    ({"2x": (PassKind.MATRIX,)}, ValueError, "'2x' is not a Python identifier"),
    ({"a": (PassKind.MATRIX,), "b": (PassKind.MATRIX,)}, ValueError,
     "kind MATRIX is already claimed by unit 'a'"),
    ({"a": ("matrix",)}, TypeError, "'matrix' is not a PassKind; allowed: MATRIX, MAXPOOL"),
])
def test_bad_units(units, error, match):
    cfg = AcceleratorConfig(rows=2, cols=2, **SMALL)
    with pytest.raises(error, match=match):
        BankArbiter(cfg, units)


def test_registered_grant_follows_the_kind_a_cycle_later():
    """The grant in a register (the accelerator's): the banks take the requests of the unit
    of the cycle before's kind, whatever this cycle's is."""
    units = {"matrix": (PassKind.MATRIX,), "pool": (PassKind.MAXPOOL,),
             "add": (PassKind.ADD,)}
    counts = run_arbiter(units, kinds=[PassKind.MAXPOOL, PassKind.ADD, PassKind.ADD, 6,
                                       PassKind.MATRIX], seed=5, registered=True)
    # The first cycle is the first unit's (out of reset), then each kind's a cycle late: the
    # last cycle's kind (MATRIX) is never granted.
    assert counts == {"matrix": 1 + 8 + 8 - 1, "pool": 8, "add": 16}
