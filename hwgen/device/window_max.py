"""The window maximum: a max pool fused into a convolution's pass, after its requantization."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .layouts import step_layout

__all__ = ["WindowMax"]


class WindowMax(wiring.Component):
    """Keep a running maximum per channel over each fused pool window's requantized steps and
    pass on only the window's last, carrying the maximum (:mod:`hwgen.passes.fused_pool`).

    A window's rows come one after another (the patch walker walks the convolution's output
    window by window), each as ``requant_steps`` steps of ``requant_lanes`` channels; so the
    running maxima are ``requant_steps`` slots in a ring that moves on by one per step: the
    slot in front is the step's channels' maximum so far. A step of its window's first row
    (``pos.wfirst``) starts its slot over; one of its last row (``pos.wlast``) goes on to the
    write-back with the maximum. A step outside a fused pool is both, and passes unchanged.
    The maximum is of the values the write-back would have written (after saturation and the
    bounds), so it equals the separate pool's, bit for bit.

    Parameters
    ----------
    config : AcceleratorConfig
        A design that fuses pools (:func:`~hwgen.memmap.fuses_pool`).
    addr_width : int
        Of the banks' addresses.

    Members
    -------
    i_step : In(stream.Signature(step_layout(config, addr_width), always_ready=True))
        The requantizer's steps.
    o_step : Out(stream.Signature(step_layout(config, addr_width), always_ready=True))
        To the write-back, in the same cycle (no register on the way: no cycle more).
    """

    def __init__(self, config, addr_width):
        self.config = config
        layout = step_layout(config, addr_width)
        super().__init__({
            "i_step": In(stream.Signature(layout, always_ready=True)),
            "o_step": Out(stream.Signature(layout, always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        values = data.ArrayLayout(signed(cfg.in_bits), cfg.requant_lanes)
        slots = [Signal(values, name=f"win_max{k}") for k in range(cfg.requant_steps)]
        i, o = self.i_step, self.o_step
        best = Signal(values, name="win_best")
        for j in range(cfg.requant_lanes):
            y, held = i.p.y[j], slots[0][j]
            m.d.comb += best[j].eq(Mux(i.p.pos.wfirst | (y > held), y, held))
        with m.If(i.valid):
            m.d.sync += [*(slots[k].eq(slots[k + 1]) for k in range(len(slots) - 1)),
                         slots[-1].eq(best)]
        m.d.comb += [o.p.eq(i.p), o.p.y.eq(best), o.valid.eq(i.valid & i.p.pos.wlast)]
        return m
