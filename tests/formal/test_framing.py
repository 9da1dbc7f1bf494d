"""Proofs of the frame layer: it drops a partial frame after its timeout, and it hands on
only a frame it took whole.

The timeout: :class:`~hwgen.link.framing.FrameCodec` hunts for a sync byte, then takes a
frame's header, payload and trailer. Whatever bytes arrived before (any values: a false sync
byte, a header whose length promises more than will come, a frame cut short), once no byte has
been offered for ``timeout_cycles + 1`` cycles the parser is hunting again: no byte sequence
locks it up.
Proved by k-induction, so from every reachable state, whatever the frame's length and the
position in it.

The frames (:class:`FrameLayerSpec`, the first half of the frame engine's proof; the second is
tests/formal/test_executor.py): fed any bytes at any time, whenever the codec hands on a
request (``request.done``), the bytes it last took end with a request frame whose sync byte
and header CRC are right and whose header is ``request.header``; the payload bytes it handed
on, in order at their ``index``, are that frame's, the last one two cycles before ``done``; and
from then until the response's first byte ``crc_ok`` says whether the frame's CRCs are right,
while the header holds and no payload byte nor request follows. Its CRC unit's register is
proved equal to the spec's CRC model, and the model to the host's CRC on samples
(``test_crc_model_matches_the_host``).
"""

import binascii
from types import SimpleNamespace

import pytest
from amaranth.hdl import Array, Elaboratable, Module, Mux, Signal, Value
from support.formal import Spec, any_inputs, assert_proved, assert_refuted
from support.frame_proofs import ENGINE, HEADER, STEP_MASKS, crc16, crc_step

from hwgen.link import framing as framing_module
from hwgen.link.framing import FrameCodec
from hwgen.protocol import CRC_BYTES, CRC_PARAMETERS, HEADER_BYTES, SYNC_REQUEST

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
        super().__init__(codec)
        self.timeout_cycles = timeout_cycles

    def elaborate(self, platform):
        m = Module()
        dut = self.dut
        fsm = self.fsm(self.add_design(m, platform))
        any_inputs(m, [dut.i_stream.valid, dut.i_stream.payload, dut.o_stream.ready,
                       dut.response.valid, dut.response.status, dut.response.length,
                       dut.response.payload.valid, dut.response.payload.payload])

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


# -- the frames --------------------------------------------------------------------------------

def test_crc_model_matches_the_host():
    """The spec's CRC is the host's: the shift register on plain ints, and its one-byte step
    (as masks) applied byte after byte."""
    for data in (b"", b"\xa5", b"123456789", bytes(range(40))):
        bits = [byte >> k & 1 for byte in data for k in reversed(range(8))]
        reg = crc16(bits)
        assert sum(bit << k for k, bit in enumerate(reg)) == binascii.crc_hqx(data, 0)
        value = 0
        for byte in data:
            inputs = value | byte << 16
            value = sum((inputs & mask).bit_count() % 2 << k for k, mask in enumerate(STEP_MASKS))
        assert value == binascii.crc_hqx(data, 0)


class FrameLayerSpec(Spec):
    """Any bytes at any time, any answer, any backpressure; assumes nothing.

    The spec keeps the last bytes the codec took (as many as the longest frame of up to
    ``max_payload`` payload bytes) and the payload byte last handed on at each index; and it
    computes, with its own model (:func:`crc_step`), the CRC of the bytes the codec's CRC unit
    was fed since it last started: the unit's register must equal it in every cycle. While a
    frame comes in, the codec must feed its CRC unit exactly the bytes it takes, from the
    frame's sync byte on, and hold the sync byte, the header bytes and the payload so far at
    their places among the bytes taken; past the header, the model's CRC of the header must
    have been 0 (a codeword). From the cycle after ``request.done`` until the response's first
    byte, for a ``request.header.length`` up to ``max_payload``: the request's header is the
    frame's, its payload the handed-on bytes, ``crc_ok`` says whether the whole frame is a
    codeword (after a right header, whether the payload's CRC is right: the CRC is linear and
    starts from 0), and nothing changes (no byte taken, no payload, no ``done``, the same
    header). The last payload byte comes at least two cycles before ``done``. Longer frames are
    not checked (beyond the proof's size).

    The per-byte statements are what keep each step of the check small: a solver does not
    find by itself in minutes which byte of the history a register holds, least of all
    between two CRC circuits. The codec's state, byte index and CRC unit are read from the
    elaborated design, as Amaranth's simulator reads them (``find_generated``, the fragments'
    ``origins``).
    """

    def __init__(self, codec, max_payload):
        super().__init__(codec)
        self.max_payload = max_payload

    def elaborate(self, platform):
        m = Module()
        dut, max_payload = self.dut, self.max_payload
        fragment = self.add_design(m, platform)
        fsm = self.fsm(fragment)
        state = {name: fsm.state == value for name, value in fsm.encoding.items()}
        unit = fragment.find_subfragment("crc").origins[0]   # the amaranth.lib.crc unit
        rq = dut.request
        any_inputs(m, [dut.i_stream.valid, dut.i_stream.payload, dut.o_stream.ready,
                       dut.response.valid, dut.response.status, dut.response.length,
                       dut.response.payload.valid, dut.response.payload.payload])

        longest = HEADER + max_payload + CRC_BYTES
        taken = [Signal(8, name=f"taken{k}") for k in range(longest)]   # newest first
        seen = Signal(range(longest + 1))
        byte = dut.i_stream.payload
        took = dut.i_stream.valid & dut.i_stream.ready
        with m.If(took):
            m.d.sync += [taken[0].eq(byte)] + [taken[k].eq(taken[k - 1])
                                               for k in range(1, longest)]
            with m.If(seen != longest):
                m.d.sync += seen.eq(seen + 1)
        handed = [Signal(8, name=f"handed{k}") for k in range(max_payload)]
        with m.If(rq.payload.valid):
            for k in range(max_payload):
                with m.If(rq.index == k):
                    m.d.sync += handed[k].eq(rq.payload.payload)

        # The model's CRC of the bytes fed to the unit since its start, and how many.
        model = Signal(16)
        fed = Signal(range(longest + 2))
        with m.If(unit.valid):
            m.d.sync += [model.eq(crc_step(Mux(unit.start, 0, model), unit.data)),
                         fed.eq(Mux(unit.start, 1, Mux(fed > longest, fed, fed + 1)))]
        with m.Elif(unit.start):
            m.d.sync += [model.eq(0), fed.eq(0)]
        self.check(m, "crc_unit_computes_the_model", unit.crc == model)

        header = Value.cast(rq.header)
        length = rq.header.length
        # From the cycle after `done` (the last byte is in `taken`) to the response's first byte.
        pending = Signal()
        was_header = Signal.like(header)
        with m.If(rq.done):
            m.d.sync += pending.eq(1)
        with m.Elif(dut.o_stream.valid & dut.o_stream.ready):
            m.d.sync += pending.eq(0)
        m.d.sync += was_header.eq(header)
        with m.If(pending):
            self.check(m, "request_holds", ~took & ~rq.payload.valid & ~rq.done
                       & (header == was_header))
        payload_before = Signal()
        m.d.sync += payload_before.eq(rq.payload.valid)
        with m.If(rq.done):
            self.check(m, "payload_ends_before_its_crc", ~rq.payload.valid & ~payload_before)

        # The frame so far: `since` bytes from its sync byte on, `payload` of them handed on.
        since, payload = Signal(18), Signal(17)
        idx = rq.index
        with m.If(state["HEADER"]):
            m.d.comb += since.eq(idx)
        with m.Elif(state["HEADER_CHECK"]):
            m.d.comb += since.eq(HEADER)
        with m.Elif(state["PAYLOAD"]):
            m.d.comb += [since.eq(HEADER + idx), payload.eq(idx)]
        with m.Elif(state["TRAILER"]):
            m.d.comb += [since.eq(HEADER + length + idx), payload.eq(length)]
        with m.Elif(pending):
            m.d.comb += [since.eq(HEADER + length + CRC_BYTES), payload.eq(length)]
        receiving = state["HEADER"] | state["PAYLOAD"] | state["TRAILER"]
        answering = dut.o_stream.valid & dut.o_stream.ready   # the response starts
        with m.If(receiving | state["HEADER_CHECK"] | (pending & ~answering)):
            self.check(m, "crc_unit_fed_the_frame", (fed == since)
                       & (unit.valid == (receiving & took)) & ~unit.start)
        sending = state["TX_HEADER"] | state["TX_PAYLOAD"] | state["TX_TRAILER"]
        with m.If(unit.valid & ~sending):
            self.check(m, "crc_unit_fed_the_bytes_taken", took & (unit.data == byte))
        with m.If(rq.payload.valid):
            self.check(m, "payload_handed_on_in_order", state["PAYLOAD"] & took)
        # The header's CRC, as the model found it when the codec checked it.
        header_crc_ok = Signal()
        with m.If(state["HEADER_CHECK"]):
            m.d.sync += header_crc_ok.eq(model == 0)
        with m.If(state["PAYLOAD"] | state["TRAILER"] | pending):
            self.check(m, "header_crc_was_right", header_crc_ok)

        history = Array(taken)
        with m.If((since != 0) & (since <= longest)):
            self.check(m, "bytes_of_the_frame_were_taken", seen >= since)
            self.check(m, "frame_starts_with_sync", history[since - 1] == SYNC_REQUEST)
            for k in range(1, HEADER_BYTES):
                with m.If(since > k):
                    self.check(m, "header_is_the_frame_s",
                               header[8 * k:8 * k + 8] == history[since - 1 - k])
            for k in range(max_payload):
                with m.If(payload > k):
                    self.check(m, "payload_handed_on_is_the_frame_s",
                               handed[k] == history[since - HEADER - 1 - k])
        with m.If(pending & (since <= longest)):
            self.check(m, "request_header_sync_reads_0", rq.header.sync == 0)
            self.check(m, "crc_ok_is_the_frame_crc", rq.crc_ok == (model == 0))
        return m


def test_frame_layer(tmp_path):
    """BMC from reset, deep enough for every frame of up to 3 payload bytes after any bytes
    (and for the cycle after it). The codec counts a payload with one counter compared with
    the length (the same comparison for every length), so a longer payload takes more of the
    same steps; the solver needs minutes a byte beyond these."""
    spec = FrameLayerSpec(FrameCodec(timeout_cycles=TIMEOUT), 3)
    assert_proved(spec, tmp_path, depth=HEADER + 1 + 3 + CRC_BYTES + 1, engine=ENGINE)


class AlwaysMatches(Elaboratable):
    """Seeded bug: a CRC unit whose check always passes (the real ``amaranth.lib.crc`` unit
    inside, its ``match_detected`` forced high), as a frame layer that skips its CRC checks
    would behave."""

    def __init__(self):
        self.unit = CRC_PARAMETERS.create()
        self.start, self.valid, self.match_detected = Signal(), Signal(), Signal()
        self.data, self.crc = Signal.like(self.unit.data), Signal.like(self.unit.crc)

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = inner = self.unit
        m.d.comb += [inner.start.eq(self.start), inner.data.eq(self.data),
                     inner.valid.eq(self.valid), self.crc.eq(inner.crc),
                     self.match_detected.eq(1)]
        return m


def test_frame_layer_seeded_bug_is_caught(tmp_path, monkeypatch):
    """A frame layer whose CRC checks always pass hands on a frame with a wrong header CRC."""
    monkeypatch.setattr(framing_module, "CRC_PARAMETERS",
                        SimpleNamespace(create=AlwaysMatches))
    spec = FrameLayerSpec(FrameCodec(timeout_cycles=TIMEOUT), 0)
    assert_refuted(spec, tmp_path, depth=HEADER + 1 + CRC_BYTES + 1, engine=ENGINE,
                   expect="header_crc_was_right")
