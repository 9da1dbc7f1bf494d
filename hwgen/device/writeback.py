"""The write-back: requantized channels into the activation banks of the next layer's input."""

from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..implementation import Registers
from .layouts import step_layout

__all__ = ["WriteBack"]


class WriteBack(wiring.Component):
    """Write a requantized step's channels into the activation banks.

    Channel ``n = n0 + j`` of a step (``n0``: the step's first channel, lane ``j``) goes to
    bank ``n % lanes``, word ``dst + n // lanes``: lane ``j`` lands in bank
    ``(rem + j) % lanes``, at the step's word or the next one. Lanes past the layer's ``n``
    channels are not written.

    Parameters
    ----------
    config : AcceleratorConfig
    addr_width : int
        Of the banks' addresses.
    stages : int
        0, or 1: the writes leave registers, a cycle after their step came (the banks see
        flip-flops, not the lane rotation; :meth:`stages_for`).

    Members
    -------
    i_step : In(stream.Signature(step_layout(config, addr_width), always_ready=True))
        The requantized steps (``end`` is not used here). Each is written in the cycle it
        comes (the next, with ``stages``): the banks take a write every cycle, so the stream
        has no ``ready``.
    wr_addr : Out(ArrayLayout(unsigned(addr_width), act_lanes))
    wr_data : Out(ArrayLayout(signed(in_bits), act_lanes))
    wr_en : Out(act_lanes)
        Each bank's write.
    """

    @staticmethod
    def stages_for(implementation):
        """Return the write-back's stages on a device built with ``implementation``: one from
        ``Registers.HOST`` on (a cycle more per chunk of a requantized layer, which
        :mod:`hwgen.cycles` counts), none before."""
        return int(implementation.registers >= Registers.HOST)

    def __init__(self, config, addr_width, *, stages=0):
        if stages not in (0, 1):
            raise ValueError(f"WriteBack: stages={stages!r}; allowed: 0, 1")
        self.config = config
        self.stages = stages
        lanes = config.act_lanes
        value = signed(config.in_bits)
        super().__init__({
            "i_step": In(stream.Signature(step_layout(config, addr_width), always_ready=True)),
            "wr_addr": Out(data.ArrayLayout(addr_width, lanes)),
            "wr_data": Out(data.ArrayLayout(value, lanes)),
            "wr_en": Out(lanes),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        lanes, n_req = cfg.act_lanes, cfg.requant_lanes
        step = self.i_step.payload
        rem = step.pos.rem
        write = m.d.sync if self.stages else m.d.comb
        for b in range(lanes):
            # Lane j that lands in bank b: j = (b - rem) mod lanes.
            j = Signal(range(lanes), name=f"lane{b}")
            m.d.comb += j.eq(Mux(Const(b) >= rem, b - rem, b + lanes - rem))
            with m.Switch(j):
                for jj in range(n_req):
                    with m.Case(jj):
                        write += self.wr_data[b].eq(step.y[jj])
            write += [
                self.wr_en[b].eq(self.i_step.valid & (j < n_req)
                                 & step.pos.ok.bit_select(j, 1)),
                self.wr_addr[b].eq(step.pos.base + (Const(b) < rem)),
            ]
        return m
