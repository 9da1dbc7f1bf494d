"""The maximum of two bf16 values: a step of a bf16 max pool (docs/arithmetic.md, "bfloat16":
``MaxPool2D``)."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_formats import BF16, BF16_NAN, EXP_MAX, cut, ordered, stage_plan

__all__ = ["BF16Max"]

# The registered cut points for each latency: "result" (the output register).
_PLANS = ((), ("result",))


class BF16Max(wiring.Component):
    """The larger of two bf16 values, as :class:`~hwgen.nn.MaxPool2D` takes the maximum of a
    window's bf16 values (NumPy's ``max``): a window's maximum is a chain of these.

    The contract:

    - a NaN operand (any payload) gives the canonical NaN ``0x7FC0``: NumPy's ``max`` returns
      a NaN when the window holds one, and every NaN of the datapath is canonical;
    - an operand with exponent 0 is +0.0 (the zero rule). The datapath never carries -0.0 or
      a subnormal (every unit before this one flushes them), and the reference sees none: it
      reads its bf16 values through :func:`~hwgen.nn.bf16.as_bf16`, which flushes them. So
      NumPy's choice between -0.0 and +0.0, which depends on their order, never arises;
    - otherwise the larger value, Inf included; equal values have equal bits.

    Parameters
    ----------
    latency : int
        0 (combinational) or 1 (the result registered).

    Members
    -------
    a, b : In(BF16)
        The operands, bf16 bit patterns (:data:`~hwgen.device.float_formats.BF16`).
    y : Out(BF16)
        The maximum of the operands presented :attr:`latency` cycles before.
    """

    def __init__(self, latency=0):
        self._cuts = stage_plan("BF16Max", latency, _PLANS)
        self._latency = latency
        super().__init__({"a": In(BF16), "b": In(BF16), "y": Out(BF16)})

    @property
    def latency(self):
        """Cycles from the operands to their maximum on ``y``."""
        return self._latency

    def elaborate(self, platform):
        m = Module()
        a, b = self._operand(m, self.a, "a"), self._operand(m, self.b, "b")
        result = Signal(16)
        m.d.comb += result.eq(Mux(self._nan(self.a, self.b), BF16_NAN,
                                  Mux(ordered(b) > ordered(a), b, a)))
        out = cut(m, {"y": result}, "result" in self._cuts, "res")
        m.d.comb += self.y.as_value().eq(out["y"])
        return m

    @staticmethod
    def _nan(a, b):
        """Whether an operand is a NaN: exponent 255, a fraction that is not 0."""
        return ((a.exponent == EXP_MAX) & (a.fraction != 0)) \
            | ((b.exponent == EXP_MAX) & (b.fraction != 0))

    @staticmethod
    def _operand(m, x, name):
        """The 16 bits of ``x`` under the zero rule: +0.0 for an exponent of 0."""
        bits = Signal(16, name=f"{name}_flushed")
        m.d.comb += bits.eq(Mux(x.exponent == 0, 0, x.as_value()))
        return bits
