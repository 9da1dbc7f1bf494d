"""The device on AXI4-Stream: the host protocol's frames as bytes in, response frames out."""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..device.top import Device, Link
from .axis_signature import AxiStreamSignature
from .frame_end import FrameEnd

__all__ = ["AxisTop"]


class AxisTop(wiring.Component):
    """A :class:`~hwgen.device.top.Device` whose links are AXI4-Stream ports of 8-bit beats.

    ``s_axis`` carries request frames of :mod:`hwgen.protocol`, one byte a beat; ``m_axis``
    carries the response frames, ``tlast`` on the last byte of each. The protocol is
    byte-framed (a frame's length is any number of bytes) and the frame engine takes and gives
    one byte a cycle, so 8-bit beats carry it at its full rate without packing. Both streams
    have full backpressure and may pause at any beat. ``s_axis.tlast`` is ignored: the
    protocol's headers delimit frames (a frame split over several packets, or several frames in
    one, are the same bytes).

    Parameters
    ----------
    config : AcceleratorConfig
    implementation : Implementation or None
    pe_instances : bool
        Instantiate the processing elements by Verilog module name (for emission).

    Members
    -------
    s_axis : In(AxiStreamSignature(8))
        Requests (``tlast`` ignored).
    m_axis : Out(AxiStreamSignature(8))
        Responses.
    busy : Out(1)
        A program is running.
    """

    def __init__(self, config, implementation=None, *, pe_instances=False):
        self.device = Device(config, link=Link.STREAM, implementation=implementation,
                             pe_instances=pe_instances)
        self.config = config
        super().__init__({"s_axis": wiring.In(AxiStreamSignature(8)),
                          "m_axis": Out(AxiStreamSignature(8)), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.device = dev = self.device
        m.submodules.frame_end = end = FrameEnd()
        s = self.s_axis
        m.d.comb += [dev.i_stream.payload.eq(s.tdata), dev.i_stream.valid.eq(s.tvalid),
                     s.tready.eq(dev.i_stream.ready), self.busy.eq(dev.busy)]
        wiring.connect(m, dev.o_stream, end.i_stream)
        wiring.connect(m, end.o_axis, wiring.flipped(self.m_axis))
        return m
