"""Proof: the UART receiver is idle again after the line has been idle for one frame.

:class:`~hwgen.link.uart.UARTRx` follows any bit sequence on ``rx`` (glitches, framing errors,
a BREAK, bytes nobody takes); once the line has been high for a byte's frame time (start,
eight data bits and stop, plus the two-stage synchronizer) the receiver is hunting for a start
bit: no sequence locks it up. Proved by k-induction, so from every reachable state.
"""

import pytest
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from support.formal import Spec, any_inputs, assert_proved, assert_refuted

from hwgen.link.uart import UARTRx

pytestmark = pytest.mark.formal

_DATA_BITS = 8
_SYNC_STAGES = 2


def idle_bound(divisor):
    """Cycles of a high ``rx`` after which the receiver hunts: the synchronizer's stages,
    then at worst a whole byte from its first data bit (eight data bits and the stop bit,
    ``divisor`` cycles each), then the cycle that leaves STOP."""
    return _SYNC_STAGES + (_DATA_BITS + 1) * divisor + 1


class ReceiverIdleSpec(Spec):
    """Any bit on ``rx`` in every cycle, any ``o_data.ready``; assumes nothing.

    ``high`` counts the cycles ``rx`` has been high, saturating at :func:`idle_bound`; at the
    bound the receiver must be in HUNT. The FSM's state must also be one of its states (so
    that k-induction does not start from an encoding the design cannot hold). The state is
    read as Amaranth's simulator reads it, from the elaborated design (``find_generated``).
    """

    def __init__(self, receiver, divisor, fsm_path=("fsm",)):
        super().__init__(receiver, fsm_path)
        self.divisor = divisor

    def elaborate(self, platform):
        m = Module()
        dut = self.dut
        fsm = self.fsm(self.add_design(m, platform))
        any_inputs(m, [dut.rx, dut.o_data.ready])

        bound = idle_bound(self.divisor)
        high = Signal(range(bound + 1))
        with m.If(~dut.rx):
            m.d.sync += high.eq(0)
        with m.Elif(high != bound):
            m.d.sync += high.eq(high + 1)
        self.check(m, "state_is_a_state", fsm.state < len(fsm.encoding))
        with m.If(high == bound):
            self.check(m, "hunting_after_idle_line", fsm.state == fsm.encoding["HUNT"])
        return m


class LocksAfterFrameError(wiring.Component):
    """Seeded bug: a receiver whose input latches low after a framing error, as a BREAK
    detector that never lets go would hold it: it never sees the line idle again."""

    def __init__(self, divisor):
        self.rx_unit = UARTRx(divisor)
        super().__init__(self.rx_unit.signature)

    def elaborate(self, platform):
        m = Module()
        m.submodules.rx = inner = self.rx_unit
        stuck = Signal()
        with m.If(inner.err_frame):
            m.d.sync += stuck.eq(1)
        wiring.connect(m, inner.o_data, wiring.flipped(self.o_data))
        m.d.comb += [inner.rx.eq(Mux(stuck, 0, self.rx)), self.err_frame.eq(inner.err_frame),
                     self.err_overrun.eq(inner.err_overrun),
                     self.frame_errors.eq(inner.frame_errors)]
        return m


@pytest.mark.parametrize("divisor", [4, 8])
def test_receiver_returns_to_hunting(tmp_path, divisor):
    """k-induction with k two cycles beyond the bound, at the smallest divisor and at twice
    it. The divisor only sets the bit timer's reload values; a power of two leaves the timer
    no unused values, which k-induction would otherwise have to rule out with a longer k."""
    spec = ReceiverIdleSpec(UARTRx(divisor), divisor)
    assert_proved(spec, tmp_path, depth=idle_bound(divisor) + 2, mode="prove")


def test_seeded_bug_is_caught(tmp_path):
    """A bounded check from reset, long enough for a byte with a low stop bit and then the
    bound (the induction alone would only say that the proof fails)."""
    divisor = 4
    spec = ReceiverIdleSpec(LocksAfterFrameError(divisor), divisor, fsm_path=("rx", "fsm"))
    frame_error = _SYNC_STAGES + 2 + (_DATA_BITS + 2) * divisor
    assert_refuted(spec, tmp_path, depth=frame_error + idle_bound(divisor) + 4,
                   expect="hunting_after_idle_line")
