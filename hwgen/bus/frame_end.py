"""Mark the last byte of each response frame: a byte stream in, an AXI4-Stream out."""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..protocol import CRC_BYTES, HEADER_BYTES
from .axis_signature import AxiStreamSignature

__all__ = ["FrameEnd"]

# A frame: the header, its CRC, the payload (its length in header bytes 4 and 5, little-endian),
# the payload's CRC (hwgen.protocol).
_LENGTH_LO = 4
_FIXED = HEADER_BYTES + 2 * CRC_BYTES


class FrameEnd(wiring.Component):
    """Pass response frames of :mod:`hwgen.protocol` through, with ``tlast`` on the last byte
    of each.

    The frames come from the frame engine, which sends only whole, well-formed frames; the
    position in the frame is counted from the bytes that pass (``tvalid & tready``), so any
    gaps and any backpressure leave it right. Combinational: no latency, no buffer.

    Members
    -------
    i_stream : In(stream.Signature(8))
        Response bytes.
    o_axis : Out(AxiStreamSignature(8))
        The same bytes, ``tlast`` on each frame's last.
    """

    def __init__(self):
        super().__init__({"i_stream": In(stream.Signature(8)),
                          "o_axis": Out(AxiStreamSignature(8))})

    def elaborate(self, platform):
        m = Module()
        i, o = self.i_stream, self.o_axis
        pos = Signal(17)                # the position of the byte on the stream in its frame
        length = Signal(16)
        m.d.comb += [o.tdata.eq(i.payload), o.tvalid.eq(i.valid), i.ready.eq(o.tready),
                     # The length is known from byte 6 on; a frame has at least _FIXED bytes.
                     o.tlast.eq((pos >= _FIXED - 1) & (pos == length + _FIXED - 1))]
        with m.If(i.valid & o.tready):
            m.d.sync += pos.eq(pos + 1)
            with m.If(pos == _LENGTH_LO):
                m.d.sync += length[:8].eq(i.payload)
            with m.If(pos == _LENGTH_LO + 1):
                m.d.sync += length[8:].eq(i.payload)
            with m.If(o.tlast):
                m.d.sync += pos.eq(0)
        return m
