"""The run statistics the device keeps itself: cycles, array-busy cycles, MACs."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..memmap import macs_from_busy_cycles

__all__ = ["CounterBlock", "split_counter"]


def split_counter(m, out, inc, clear, name):
    """Drive ``out`` from a counter of its width that adds ``inc`` and resets on ``clear``.

    Two halves, the upper one enabled when the lower is all ones: two short carry chains
    instead of a 64-bit one (an iCE40's longest path otherwise). Both halves change in the
    same cycle, so the count is exact at every cycle. (Written as a comparison: with
    ``lo.all()`` Yosys 0.70's ABC9 pass failed an assertion on a 2x2 ECP5 device.)
    """
    half = (len(out) + 1) // 2
    lo = Signal(half, name=f"{name}_lo")
    hi = Signal(len(out) - half, name=f"{name}_hi")
    m.d.comb += out.eq(Cat(lo, hi))
    with m.If(clear):
        m.d.sync += [lo.eq(0), hi.eq(0)]
    with m.Elif(inc):
        m.d.sync += lo.eq(lo + 1)
        with m.If(lo == (1 << half) - 1):
            m.d.sync += hi.eq(hi + 1)


class CounterBlock(wiring.Component):
    """Count the cycles a program runs, the cycles a row enters the array and the MACs.

    Members
    -------
    busy, issue, clear : In(1)
        A program runs; an activation row enters the array (``rows * cols`` MACs); zero all.
    cycles, busy_cycles, macs : Out(64)
    """

    def __init__(self, config):
        self.config = config
        super().__init__({"busy": In(1), "issue": In(1), "clear": In(1),
                          "cycles": Out(64), "busy_cycles": Out(64), "macs": Out(64)})

    def elaborate(self, platform):
        m = Module()
        split_counter(m, self.cycles, self.busy, self.clear, "cycles")
        split_counter(m, self.busy_cycles, self.issue, self.clear, "busy_cycles")
        # Every issue is rows * cols MACs: a product, not a third 64-bit counter.
        m.d.comb += self.macs.eq(macs_from_busy_cycles(self.busy_cycles, self.config))
        return m
