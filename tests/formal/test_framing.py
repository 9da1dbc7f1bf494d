"""Proof: the frame parser drops a partial frame after its timeout, whatever came before.

:class:`~hwgen.link.framing.FrameCodec` hunts for a sync byte, then takes a frame's header,
payload and trailer. Whatever bytes arrived before (any values: a false sync byte, a header
whose length promises more than will come, a frame cut short), once no byte has been offered
for ``timeout_cycles + 1`` cycles the parser is hunting again: no byte sequence locks it up.
Proved by k-induction, so from every reachable state, whatever the frame's length and the
position in it.
"""

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Fragment, Module, Signal, Value
from support.formal import Spec, assert_proved, assert_refuted

from hwgen.link.framing import FrameCodec

pytestmark = pytest.mark.formal

# The states that take a request's bytes; the others (TX_*) send its response, which waits for
# the command layer and for o_stream.ready, not for input.
RECEIVING = ("HEADER", "HEADER_CHECK", "PAYLOAD", "TRAILER")


class ParserTimeoutSpec(Spec):
    """Any bytes at any time, any answer, any backpressure; assumes nothing.

    ``quiet`` counts the cycles since a byte was last offered (``i_stream.valid``), saturating
    at ``timeout_cycles + 1``; after that many quiet cycles the parser must not be in a
    receiving state. The bound is the timeout plus the one cycle of HEADER_CHECK, which takes
    no byte and starts the count afresh. The parser's state is read as Amaranth's simulator
    reads it, from the elaborated design's FSM (``Fragment.find_generated``).
    """

    def __init__(self, codec, timeout_cycles):
        super().__init__()
        self.codec = codec
        self.timeout_cycles = timeout_cycles

    def elaborate(self, platform):
        m = Module()
        dut = self.codec
        fragment = Fragment.get(dut, platform)
        m.submodules.codec = fragment
        fsm = fragment.find_generated("fsm")
        for port in (dut.i_stream.valid, dut.i_stream.payload, dut.o_stream.ready,
                     dut.response.valid, dut.response.status, dut.response.length,
                     dut.response.payload.valid, dut.response.payload.payload):
            value = Value.cast(port)
            m.d.comb += value.eq(AnySeq(len(value)))

        bound = self.timeout_cycles + 1
        quiet = Signal(range(bound + 1))
        with m.If(dut.i_stream.valid):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != bound):
            m.d.sync += quiet.eq(quiet + 1)
        receiving = 0
        for state in RECEIVING:
            receiving |= fsm.state == fsm.encoding[state]
        with m.If(quiet == bound):
            self.check(m, "hunting_after_timeout", ~receiving)
        return m


class LateTimeout(FrameCodec):
    """Seeded bug: the parser drops a partial frame later than its ``timeout_cycles`` says."""

    def __init__(self, *, timeout_cycles):
        super().__init__(timeout_cycles=4 * timeout_cycles)
        self._claimed = timeout_cycles

    @property
    def timeout_cycles(self):
        return self._claimed


# A power of two, so that the idle counter has no value beyond the timeout (any state of the
# counter is one the design can reach); 4 keeps the induction short.
TIMEOUT = 4
# k-induction's k: longer than the bound, so that the k cycles before a failure start in a
# state that the design reaches (any state of the FSM, index, counter and header).
DEPTH = TIMEOUT + 4


def test_parser_returns_to_hunting(tmp_path):
    """k-induction of depth ``TIMEOUT + 4`` with a timeout of 4 cycles. The timeout is a
    parameter of one comparison (``idle == timeout_cycles - 1``) and the count does not depend
    on the frame, so the same proof holds for any timeout whose counter has no unused values
    (a power of two); other values add unused counter states that the design never enters,
    which k-induction would need a longer k to rule out."""
    codec = FrameCodec(timeout_cycles=TIMEOUT)
    assert_proved(ParserTimeoutSpec(codec, codec.timeout_cycles), tmp_path, depth=DEPTH,
                  mode="prove")


def test_seeded_bug_is_caught(tmp_path):
    codec = LateTimeout(timeout_cycles=TIMEOUT)
    assert_refuted(ParserTimeoutSpec(codec, codec.timeout_cycles), tmp_path, depth=DEPTH,
                   mode="prove", expect="hunting_after_timeout")
