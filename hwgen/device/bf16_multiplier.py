"""The bf16 multiplier: two bfloat16 operands, their fp32 product under docs/arithmetic.md's
bfloat16 contract."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_formats import BF16, EXP_MAX, FP32, FP32_INF, FP32_NAN, cut, stage_plan

__all__ = ["BF16Multiplier"]

# The registered cut points for each latency: "operands" (inputs, a DSP block's input
# register), "product" (the significands' product, its output register), "result".
_PLANS = ((), ("product",), ("operands", "product"), ("operands", "product", "result"))
_BIAS = 127


class BF16Multiplier(wiring.Component):
    """Multiply two bf16 values into fp32: ``p = fl32(a * b)``, then the zero rule.

    The contract (docs/arithmetic.md, "bfloat16"; :func:`hwgen.nn.bf16.flush` of the float32
    product):

    - an operand with exponent 0 (zero of either sign, or a subnormal) is +0.0;
    - a NaN operand, or 0 x Inf, gives the canonical NaN ``0x7FC00000``;
    - Inf x finite non-zero, or Inf x Inf, gives Inf, its sign the XOR of the signs;
    - a zero operand gives +0.0 (all bits 0, whatever the other operand's sign);
    - a weight ``b`` of sign 1 and exponent 0 (-0.0, which the zero rule leaves no weight)
      is no product (:func:`hwgen.nn.bf16.no_product`): +0.0 whatever ``a``, Inf and NaN
      included, where the compiler's tiles hold no product of the layer;
    - otherwise the product of two 8-bit significands has 15 or 16 bits, which fp32's 24
      hold exactly: no rounding is ever needed. The product overflows (exponent above 254)
      to Inf of its sign, and underflows (below ``2**-126``) to +0.0.

    Parameters
    ----------
    latency : int
        Registers from the operands to the product, 0..3: 1 registers the significands'
        product; 2 the operands too (the registers of a DSP block's inputs and output);
        3 the result as well.

    Members
    -------
    a, b : In(BF16)
        The activation and the weight, bf16 bit patterns
        (:data:`~hwgen.device.float_formats.BF16`).
    p : Out(FP32)
        The product of the operands presented :attr:`latency` cycles before.
    """

    def __init__(self, latency=2):
        self._cuts = stage_plan("BF16Multiplier", latency, _PLANS)
        self._latency = latency
        super().__init__({"a": In(BF16), "b": In(BF16), "p": Out(FP32)})

    @property
    def latency(self):
        """Cycles from the operands to their product on ``p``."""
        return self._latency

    def elaborate(self, platform):
        m = Module()
        ops = cut(m, {"a": self.a, "b": self.b}, "operands" in self._cuts, "op")
        a, b = ops["a"], ops["b"]

        def classify(x):
            zero = x.exponent == 0
            top = x.exponent == EXP_MAX
            return zero, top & (x.fraction == 0), top & (x.fraction != 0)

        a_zero, a_inf, a_nan = classify(a)
        b_zero, b_inf, b_nan = classify(b)
        # A weight that is no product: +0.0 (b_zero holds it) before NaN and Inf.
        b_none = b.sign & b_zero
        nan = (a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)) & ~b_none
        product = Signal(16)
        # The significands with their hidden 1: [2**7, 2**8) each, so product is in
        # [2**14, 2**16).
        m.d.comb += product.eq(Cat(a.fraction, Const(1, 1)) * Cat(b.fraction, Const(1, 1)))
        # The biased exponent of the product, before normalisation: 1 + 1 - 127 .. 254 + 254
        # - 127 (10 signed bits hold it).
        exponent = Signal(signed(10))
        m.d.comb += exponent.eq(a.exponent + b.exponent - _BIAS)
        mid = cut(m, {"product": product, "exponent": exponent, "sign": a.sign ^ b.sign,
                      "nan": nan, "inf": (a_inf | b_inf) & ~b_none, "zero": a_zero | b_zero},
                  "product" in self._cuts, "mid")
        result = Signal(FP32)
        self._finish(m, mid, result)
        out = cut(m, {"p": result}, "result" in self._cuts, "res")
        m.d.comb += self.p.eq(out["p"])
        return m

    @staticmethod
    def _finish(m, mid, result):
        """Normalise the product (a 16-bit product has its top bit at 15 or 14) and apply the
        special cases, in their order of precedence."""
        product, sign = mid["product"], mid["sign"]
        carry = product[15]
        exponent = Signal(signed(11))
        m.d.comb += exponent.eq(mid["exponent"] + carry)
        # The 15 bits below the leading 1, at the top of fp32's 23 fraction bits.
        fraction = Mux(carry, product[:15], Cat(Const(0, 1), product[:14]))
        inf = Cat(Const(FP32_INF, 31), sign)
        with m.If(mid["nan"]):
            m.d.comb += result.as_value().eq(FP32_NAN)
        with m.Elif(mid["inf"]):
            m.d.comb += result.as_value().eq(inf)
        with m.Elif(mid["zero"] | (exponent <= 0)):
            m.d.comb += result.as_value().eq(0)
        with m.Elif(exponent >= EXP_MAX):
            m.d.comb += result.as_value().eq(inf)
        with m.Else():
            m.d.comb += result.as_value().eq(Cat(Const(0, 8), fraction, exponent[:8], sign))
