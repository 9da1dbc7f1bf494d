"""A skid register between a feeder and the stream it drives."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Skid"]


class Skid(wiring.Component):
    """Drive stream ``o`` from a feeder's ``valid``/``payload``; ``take`` says the feeder may
    move on: the skid register is empty.

    The feeder then moves on whenever the register is empty (a register), not when the
    consumer is ready, so that its next read address does not wait for the consumer's decision
    (on a large ECP5 that wait, routed across the die, was the longest path). ``o`` sees the
    same rows in the same cycles as without the register: a row the consumer refuses is held
    and offered first in the next cycle.

    Parameters
    ----------
    shape : shape-like
        Of the payload.

    Members
    -------
    valid : In(1)
    payload : In(shape)
        The feeder's row.
    take : Out(1)
        The feeder's row is taken (or there is none): it may present the next one.
    take_next : Out(1)
        ``take`` of the next cycle, so that a feeder can keep a decision that follows from it
        in a register of its own.
    o : Out(stream.Signature(shape))
    """

    def __init__(self, shape):
        super().__init__({
            "valid": In(1),
            "payload": In(shape),
            "take": Out(1),
            "take_next": Out(1),
            "o": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        full = Signal()
        held = Signal.like(self.payload, reset_less=True)
        o = self.o
        m.d.comb += [o.valid.eq(full | self.valid),
                     o.payload.eq(Mux(full, held, self.payload)),
                     self.take.eq(~full)]
        full_n = Signal(name="full_n")      # its next value
        m.d.comb += [full_n.eq(full), self.take_next.eq(~full_n)]
        m.d.sync += full.eq(full_n)
        with m.If(full & o.ready):
            m.d.comb += full_n.eq(0)
        with m.Elif(~full & self.valid & ~o.ready):
            m.d.comb += full_n.eq(1)
            m.d.sync += held.eq(self.payload)
        return m
