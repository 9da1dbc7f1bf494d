"""The frame layer of the host protocol: request frames in, response frames out.

:class:`FrameCodec` finds request frames of :mod:`hwgen.protocol` in a byte stream and checks
their CRCs, hands their header and payload bytes to the command layer
(:class:`hwgen.link.executor.CommandExecutor`), and sends the command layer's answer as a
response frame. The engine is half duplex (one request at a time), so both directions share one
CRC unit and one byte counter.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..protocol import (
    CRC_BYTES,
    CRC_PARAMETERS,
    HEADER_BYTES,
    SYNC_REQUEST,
    SYNC_RESPONSE,
    FrameHeader,
    Status,
)

__all__ = ["FrameCodec", "RequestSignature", "ResponseSignature"]


class RequestSignature(wiring.Signature):
    """A received request, as the frame layer hands it on (members seen from the frame layer).

    Members
    -------
    header : Out(FrameHeader)
        The request's header (its ``sync`` field reads 0); valid from the first payload byte
        until the next request's header arrives, which is after the response has gone out.
    payload : Out(stream.Signature(8, always_ready=True))
        Payload bytes as they arrive, in order; nothing refuses them.
    index : Out(16)
        Position in the payload of the byte on ``payload`` (read with ``payload.valid``). A
        frame that stops arriving is dropped without ``done``: the next payload starts again at
        position 0.
    done : Out(1)
        Pulses when the request's last byte (its payload CRC) arrives. The frame layer then
        takes no byte until the response has gone out.
    crc_ok : Out(1)
        The payload CRC matched; valid from the cycle after ``done`` until the response starts.
    """

    def __init__(self):
        super().__init__({
            "header": Out(FrameHeader),
            "payload": Out(stream.Signature(8, always_ready=True)),
            "index": Out(16),
            "done": Out(1),
            "crc_ok": Out(1),
        })


class ResponseSignature(wiring.Signature):
    """The answer to a request (members seen from its source, the command layer).

    The response echoes the request's opcode and sequence number. Its header goes out while
    ``valid`` is high (it may drop once the header is out); ``status`` and ``length`` must hold
    from then until the response's last byte. ``length`` payload bytes follow, taken from
    ``payload`` (whose ``valid`` may drop, to fetch more), then the payload CRC.

    Members
    -------
    valid : Out(1)
        ``status`` and ``length`` are final: send the header.
    status : Out(Status)
    length : Out(16)
        Payload bytes; 0 for none.
    payload : Out(stream.Signature(8))
        The payload bytes, in order.
    begin : In(1)
        Pulses as the header's last byte goes out if ``length`` is not 0: ``payload`` is asked
        for from the next cycle on.
    last : In(1)
        The byte ``payload`` offers is the payload's last one (valid with ``payload.ready``).
    next_index : In(16)
        Position of the payload byte that the next cycle asks for; 0 until the payload starts,
        so that a source with a synchronous read port can show each byte in time.
    """

    def __init__(self):
        super().__init__({
            "valid": Out(1),
            "status": Out(Status),
            "length": Out(16),
            "payload": Out(stream.Signature(8)),
            "begin": In(1),
            "last": In(1),
            "next_index": In(16),
        })


class FrameCodec(wiring.Component):
    """Receive request frames and send response frames of :mod:`hwgen.protocol`.

    Bytes outside frames are skipped. A frame whose header fails its CRC is dropped unseen by
    the command layer (its opcode and sequence number cannot be trusted) and the codec goes back
    to hunting for a sync byte after its header. A frame that stops arriving for
    ``timeout_cycles`` cycles is dropped the same way. Every other frame is received whole,
    whatever its length, and then waits for its response: until the response's last byte is out,
    ``i_stream.ready`` is low (no byte is lost), and each response byte waits for
    ``o_stream.ready`` as long as needed.

    Parameters
    ----------
    timeout_cycles : int
        Idle clock cycles after which a partial request is dropped, at least 1.

    Members
    -------
    i_stream : In(stream.Signature(8))
        Request bytes.
    o_stream : Out(stream.Signature(8))
        Response bytes.
    request : Out(RequestSignature())
        The request received.
    response : In(ResponseSignature())
        Its answer.
    idle : Out(1)
        Hunting for a sync byte: no request is partly received or being answered.

    Raises
    ------
    ValueError
        If ``timeout_cycles`` is not an int of at least 1.
    """

    def __init__(self, *, timeout_cycles):
        if isinstance(timeout_cycles, bool) or not isinstance(timeout_cycles, int) \
                or timeout_cycles < 1:
            raise ValueError(f"timeout_cycles must be an int >= 1, not {timeout_cycles!r}")
        self._timeout_cycles = timeout_cycles
        super().__init__({
            "i_stream": In(stream.Signature(8)),
            "o_stream": Out(stream.Signature(8)),
            "request": Out(RequestSignature()),
            "response": In(ResponseSignature()),
            "idle": Out(1),
        })

    @property
    def timeout_cycles(self):
        return self._timeout_cycles

    def elaborate(self, platform):
        m = Module()
        # One CRC unit for both directions. A register fed with data and then its CRC ends at 0
        # (the residue), which is also the initial value: ready for the next field.
        m.submodules.crc = crc = CRC_PARAMETERS.create()
        idx = Signal(16)  # byte index within the current frame section, in both directions
        with m.FSM() as fsm:
            self._receive(m, crc, idx)
            self._send(m, crc, idx)
        m.d.comb += self.idle.eq(fsm.ongoing("HUNT"))
        return m

    def _receive(self, m, crc, idx):
        """Add the states that take a request frame: HUNT, HEADER, HEADER_CHECK, PAYLOAD,
        TRAILER. The last hands over to TX_HEADER, which waits for the answer."""
        i, rq = self.i_stream, self.request
        hdr = rq.header
        idle = Signal(range(self._timeout_cycles))
        # The length minus one, registered: a subtractor feeding a comparator is two carry
        # chains in series, the iCE40's critical path. It is read at least two cycles after the
        # header is written (the header CRC comes in between).
        len_m1 = Signal((hdr.length - 1).shape(), name="len_m1")
        m.d.sync += len_m1.eq(hdr.length - 1)
        # `idx` is at the last payload byte: registered, computed as `idx` advances, so that the
        # state machine does not wait for a 16-bit comparator.
        rx_last = Signal()
        m.d.comb += [rq.index.eq(idx), rq.payload.payload.eq(i.payload),
                     rq.crc_ok.eq(crc.match_detected)]

        # A partial request that stops arriving is dropped: without this a truncated frame would
        # hold the parser until bytes of later frames completed it. `idle` counts the cycles
        # without a byte while a frame is partly in; it is 0 whenever none is.
        waiting = Signal()  # a frame is partly in: its next byte is awaited
        expired = ~i.valid & (idle == self._timeout_cycles - 1)
        m.d.sync += idle.eq(Mux(waiting & ~i.valid & ~expired, idle + 1, 0))

        def drop_when_idle():
            m.d.comb += waiting.eq(1)
            with m.If(expired):
                m.next = "HUNT"

        with m.State("HUNT"):
            m.d.comb += [i.ready.eq(1), crc.data.eq(i.payload)]
            with m.If(i.valid & (i.payload == SYNC_REQUEST)):
                m.d.comb += [crc.start.eq(1), crc.valid.eq(1)]
                m.d.sync += idx.eq(1)
                m.next = "HEADER"

        with m.State("HEADER"):
            # Bytes 1 .. HEADER_BYTES + CRC_BYTES - 1; the sync byte is not stored.
            m.d.comb += [i.ready.eq(1), crc.data.eq(i.payload), crc.valid.eq(i.valid)]
            with m.If(i.valid):
                m.d.sync += idx.eq(idx + 1)
                with m.Switch(idx):
                    for k in range(1, HEADER_BYTES):
                        with m.Case(k):
                            m.d.sync += hdr.as_value()[8 * k:8 * k + 8].eq(i.payload)
                with m.If(idx == HEADER_BYTES + CRC_BYTES - 1):
                    m.next = "HEADER_CHECK"
            drop_when_idle()

        with m.State("HEADER_CHECK"):
            # The CRC register has taken the last header byte; a good header leaves it at 0,
            # which is also the initial value for the payload CRC.
            m.d.sync += [idx.eq(0), rx_last.eq(len_m1 == 0)]
            with m.If(~crc.match_detected):
                m.next = "HUNT"
            with m.Elif(hdr.length == 0):
                m.next = "TRAILER"
            with m.Else():
                m.next = "PAYLOAD"

        with m.State("PAYLOAD"):
            m.d.comb += [i.ready.eq(1), crc.data.eq(i.payload), crc.valid.eq(i.valid),
                         rq.payload.valid.eq(i.valid)]
            with m.If(i.valid):
                m.d.sync += [idx.eq(idx + 1), rx_last.eq(idx + 1 == len_m1)]
                with m.If(rx_last):
                    m.d.sync += idx.eq(0)
                    m.next = "TRAILER"
            drop_when_idle()

        with m.State("TRAILER"):
            m.d.comb += [i.ready.eq(1), crc.data.eq(i.payload), crc.valid.eq(i.valid)]
            with m.If(i.valid):
                m.d.sync += idx.eq(idx + 1)
                with m.If(idx == CRC_BYTES - 1):
                    # The CRC register holds still from here until the response starts.
                    m.d.comb += rq.done.eq(1)
                    m.d.sync += idx.eq(0)
                    m.next = "TX_HEADER"
            drop_when_idle()

    def _send(self, m, crc, idx):
        """Add the states that send the response frame: TX_HEADER (waiting for
        ``response.valid`` first), TX_PAYLOAD and TX_TRAILER, then back to HUNT."""
        o, rs, hdr = self.o_stream, self.response, self.request.header
        tx_hdr = Signal(FrameHeader)
        m.d.comb += [
            tx_hdr.sync.eq(SYNC_RESPONSE),
            tx_hdr.opcode.eq(hdr.opcode),
            tx_hdr.seq.eq(hdr.seq),
            tx_hdr.status.eq(rs.status),
            tx_hdr.length.eq(rs.length),
        ]
        # The length minus one, registered (see `len_m1`); read at least two cycles after the
        # length is final (the response header comes in between).
        length_m1 = Signal((rs.length - 1).shape(), name="rsp_len_m1")
        m.d.sync += length_m1.eq(rs.length - 1)
        tx_last = Signal()  # `idx` is at the last payload byte (see `rx_last`)
        m.d.comb += rs.last.eq(tx_last)

        with m.State("TX_HEADER"):
            m.d.comb += o.valid.eq(rs.valid)
            with m.Switch(idx[:3]):
                for k in range(HEADER_BYTES):
                    with m.Case(k):
                        m.d.comb += o.payload.eq(tx_hdr.as_value()[8 * k:8 * k + 8])
                with m.Case(HEADER_BYTES):
                    m.d.comb += o.payload.eq(crc.crc[8:])
                with m.Case(HEADER_BYTES + 1):
                    m.d.comb += o.payload.eq(crc.crc[:8])
            m.d.comb += crc.data.eq(o.payload)
            with m.If(rs.valid & o.ready):
                m.d.sync += idx.eq(idx + 1)
                m.d.comb += [
                    crc.valid.eq(idx < HEADER_BYTES),
                    # restart at the first byte, and again after the header CRC so that the
                    # payload CRC covers the payload alone
                    crc.start.eq((idx == 0) | (idx == HEADER_BYTES + CRC_BYTES - 1)),
                ]
                with m.If(idx == HEADER_BYTES + CRC_BYTES - 1):
                    m.d.sync += [idx.eq(0), tx_last.eq(length_m1 == 0)]
                    with m.If(rs.length == 0):
                        m.next = "TX_TRAILER"
                    with m.Else():
                        m.d.comb += rs.begin.eq(1)
                        m.next = "TX_PAYLOAD"

        with m.State("TX_PAYLOAD"):
            taken = rs.payload.valid & o.ready
            m.d.comb += [
                o.valid.eq(rs.payload.valid),
                o.payload.eq(rs.payload.payload),
                rs.payload.ready.eq(o.ready),
                # (0 in every other state, ready for the first byte)
                rs.next_index.eq(Mux(taken, idx + 1, idx)),
                crc.data.eq(o.payload),
                crc.valid.eq(taken),
            ]
            with m.If(taken):
                m.d.sync += [idx.eq(idx + 1), tx_last.eq(idx + 1 == length_m1)]
                with m.If(tx_last):
                    m.d.sync += idx.eq(0)
                    m.next = "TX_TRAILER"

        with m.State("TX_TRAILER"):
            m.d.comb += [o.valid.eq(1), o.payload.eq(Mux(idx[0], crc.crc[:8], crc.crc[8:]))]
            with m.If(o.ready):
                m.d.sync += idx.eq(idx + 1)
                with m.If(idx == CRC_BYTES - 1):
                    m.next = "HUNT"
