"""A counter's "last" flag in a register, set a step early from comparisons of registers."""

from amaranth.hdl import Signal

__all__ = ["LastFlag"]


class LastFlag:
    """Whether a counter that steps from 0 by one holds ``bound``, kept in a register.

    The flag is set as the counter moves, from comparisons of registers with ``bound - 1`` (a
    register): a decision that reads it reads a flip-flop, and its comparison is not on the
    path from the decision (on a large ECP5 comparisons with the geometry ahead of a unit's
    decisions were long paths).

    Parameters
    ----------
    m : Module
    name : str
    bound : Value
        The counter's last value; read in the cycle of ``load`` and held until the next.
    load : Value
        The counter starts (the cycle :meth:`reset` with ``at_load`` is called in).

    Attributes
    ----------
    last : Signal
        The counter equals ``bound``, from the cycle after :meth:`reset` or :meth:`step`.
    """

    def __init__(self, m, name, bound, *, load):
        self.bound = bound
        self.last = Signal(name=f"{name}_last")
        self._before = Signal(len(bound), name=f"{name}_before")   # bound - 1
        self._single = Signal(name=f"{name}_single")               # bound == 0
        with m.If(load):
            m.d.sync += [self._before.eq(bound - 1), self._single.eq(bound == 0)]

    def reset(self, m, *, at_load=False):
        """The counter goes to 0 (``at_load``: in the cycle of ``load``)."""
        m.d.sync += self.last.eq((self.bound == 0) if at_load else self._single)

    def step(self, m, value):
        """The counter goes from ``value`` to ``value + 1``."""
        m.d.sync += self.last.eq(value == self._before)
