"""The proofs' runner (``support.formal``): a failed property by its name, a missing tool as a
skip reason, a stuck proof ended."""

import pytest
from amaranth.hdl import Module, Signal
from support import formal
from support.formal import Spec, any_inputs, prove

pytestmark = pytest.mark.formal


class Counter(Spec):
    """A 4-bit counter that counts when told to, and claims to stay below ``limit``."""

    def __init__(self, limit):
        super().__init__(None)
        self.limit = limit

    def elaborate(self, platform):
        m = Module()
        count, step = Signal(4), Signal()
        any_inputs(m, [step])
        with m.If(step):
            m.d.sync += count.eq(count + 1)
        self.check(m, "below_limit", count < self.limit)
        return m


def test_failed_property_named_with_its_step_and_trace(tmp_path):
    result = prove(Counter(limit=3), tmp_path, depth=6)
    assert result.status == "FAIL"
    assert result.failed == ["below_limit (step 3)"]   # the earliest: three counts
    assert result.trace.is_file()
    result = prove(Counter(limit=3), tmp_path / "again", depth=3)
    assert (result.status, result.failed) == ("PASS", [])   # steps 0..2 hold


def test_missing_tool_is_named(monkeypatch):
    monkeypatch.setenv("PATH", "")
    reason = formal.formal_missing()
    assert "yowasp-sby" in reason and "yices-smt2" in reason and "pip install" in reason


def test_stuck_proof_is_ended(tmp_path, monkeypatch):
    monkeypatch.setattr(formal, "_TIMEOUT_S", 0.5)
    result = prove(Counter(limit=3), tmp_path, depth=6)
    assert result.status == "TIMEOUT"
