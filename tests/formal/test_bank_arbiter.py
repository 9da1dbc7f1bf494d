"""Proof: the bank arbiter gives the banks to exactly one unit, the running kind's, at once.

For any sequence of pass kinds and any requests from the units,
:class:`~hwgen.device.bank_arbiter.BankArbiter` grants exactly one unit in every cycle, the
banks see that unit's requests and no other's, every unit sees the words read, and a unit
whose kind has been running for a cycle (without ``registered``: at once) holds the grant.
Proved by k-induction, so for every cycle of every run, not only the first ones.
"""

import pytest
from amaranth.hdl import Const, Module, Signal, Value
from support.formal import Spec, any_inputs, assert_proved, assert_refuted

from hwgen.config import AcceleratorConfig
from hwgen.device.bank_arbiter import BankArbiter
from hwgen.memmap import PassKind

pytestmark = pytest.mark.formal

# Two lanes: per-bank fields are arrays, and a mix-up between lanes would show.
CONFIG = AcceleratorConfig(rows=2, cols=1, max_k=4, act_depth=16, weight_depth=16,
                           param_depth=2, acc_depth=2, out_depth=16, prog_depth=2)
# The device's units (hwgen.device.accelerator), the first being the default.
UNITS = {"matrix": [PassKind.MATRIX], "pool": [PassKind.MAXPOOL], "add": [PassKind.ADD],
         "depthwise": [PassKind.DEPTHWISE]}
_REQUESTS = ("rd_addr", "rd_en", "rd_take", "wr_addr", "wr_data", "wr_en")


class BankArbiterSpec(Spec):
    """Any kind and any requests in every cycle; assumes nothing.

    A unit *owns* a kind if it lists it; the default (first) unit also owns every kind no
    other unit lists (a kind whose unit the design leaves out, the 3-bit kind's values that
    are no :class:`PassKind`). With ``registered``
    the grant follows the kind of the cycle before (the spec keeps it), so the grant is checked
    against that one, and from the second cycle on (the first shows the reset grant).
    """


    def owner(self, kind):
        """Return each unit's ownership of ``kind`` (a dict of 1-bit values), from the unit
        list alone."""
        default, *others = UNITS
        owns = {name: Const(0) for name in UNITS}
        for name in others:
            for one in UNITS[name]:
                owns[name] |= kind == one
        listed = Const(0)
        for one in (one for name in others for one in UNITS[name]):
            listed |= kind == one
        owns[default] |= ~listed
        for one in UNITS[default]:
            owns[default] |= kind == one
        return owns

    def elaborate(self, platform):
        m = Module()
        m.submodules.arbiter = dut = self.dut
        rd_data = Value.cast(dut.banks.rd_data)
        any_inputs(m, [dut.kind, rd_data, *(getattr(dut.port(name), field)
                                             for name in UNITS for field in _REQUESTS)])

        one_hot = Const(0)
        for name in UNITS:
            others = Const(0)
            for other in UNITS:
                if other != name:
                    others |= dut.grant[other]
            one_hot |= dut.grant[name] & ~others
        self.check(m, "one_unit_granted", one_hot)
        for name in UNITS:
            with m.If(dut.grant[name]):
                for field in _REQUESTS:
                    self.check(m, "banks_see_the_granted_unit",
                               Value.cast(getattr(dut.banks, field))
                               == Value.cast(getattr(dut.port(name), field)))
            self.check(m, "every_unit_sees_the_words_read",
                       Value.cast(dut.port(name).rd_data) == rd_data)

        # The kind the grant must follow: this cycle's, or with `registered` the last one's.
        if dut.registered:
            last_kind = Signal.like(dut.kind)
            started = Signal()
            m.d.sync += [last_kind.eq(dut.kind), started.eq(1)]
            kind, checked = last_kind, started
        else:
            kind, checked = dut.kind, Const(1)
        with m.If(checked):
            for name, owns in self.owner(kind).items():
                self.check(m, "running_kind_granted", dut.grant[name] == owns)
        return m


@pytest.mark.parametrize("registered", [False, True])
def test_arbiter(tmp_path, registered):
    """k-induction of depth 3: the properties hold in every reachable state of a design
    whose only state is (with ``registered``) the grant register. Three units as on the
    device; more units add Muxes of the same form."""
    spec = BankArbiterSpec(BankArbiter(CONFIG, UNITS, registered=registered))
    assert_proved(spec, tmp_path, depth=3, mode="prove")


class TwoGrants(BankArbiter):
    """Seeded bug: the default unit is granted even while another unit's kind runs."""

    def decode(self, kind):
        grants = super().decode(kind)
        return {name: Const(1) if i == 0 else grant
                for i, (name, grant) in enumerate(grants.items())}


class Starves(BankArbiter):
    """Seeded bug: the add unit's kind is never granted (the default unit keeps the banks)."""

    def decode(self, kind):
        grants = super().decode(kind)
        default = next(iter(grants))
        return {**grants, "add": Const(0), default: grants[default] | grants["add"]}


@pytest.mark.parametrize(("bug", "broken"), [(TwoGrants, "one_unit_granted"),
                                             (Starves, "running_kind_granted")])
def test_seeded_bug_is_caught(tmp_path, bug, broken):
    spec = BankArbiterSpec(bug(CONFIG, UNITS, registered=True))
    assert_refuted(spec, tmp_path, depth=3, mode="prove", expect=broken)
