"""The fp32 adder: IEEE binary32 addition, round to nearest even, then the zero rule of
docs/arithmetic.md ("bfloat16")."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .float_formats import EXP_MAX, FP32, FP32_INF, FP32_NAN, cut, stage_plan

__all__ = ["FP32Adder"]

# The registered cut points for each latency, after the stages: "compare" (the larger
# magnitude, the exponents' difference), "align" (swap, shift the smaller operand), "add",
# "normalize" (leading zeros, shift left), "round" (the result register).
_PLANS = ((), ("round",), ("add", "round"), ("align", "add", "round"),
          ("align", "add", "normalize", "round"),
          ("compare", "align", "add", "normalize", "round"))
# The significands travel with 3 bits below their last: guard, round and sticky.
_EXTRA = 3
_WIDTH = 24 + _EXTRA          # the aligned significands, hidden bit at 26
_SUM = _WIDTH + 1             # their sum, with a carry bit at 27


class FP32Adder(wiring.Component):
    """Add two fp32 values: ``s = fl32(a + b)``, then the zero rule.

    The contract (docs/arithmetic.md, "bfloat16"; :func:`hwgen.nn.bf16.flush` of the float32
    sum):

    - an operand with exponent 0 (zero of either sign, or a subnormal, which the datapath
      never carries) is +0.0;
    - a NaN operand, or Inf + (-Inf), gives the canonical NaN ``0x7FC00000``; Inf plus
      anything else gives that Inf;
    - otherwise the exact sum rounded to 24 significant bits, to nearest, ties to even; a
      rounded magnitude of ``2**128`` or more gives Inf of its sign; one below ``2**-126``
      (exact: the sum of two multiples of ``2**-149``) gives +0.0, as does an exact
      cancellation ``x + (-x)``.

    The stages: align (the larger magnitude first, the other shifted right by the exponents'
    difference, the bits shifted out kept as a sticky bit), add (or subtract, for operands
    of opposite signs), normalize (count the leading zeros, shift left) and round.

    Parameters
    ----------
    latency : int
        Registers from the operands to the sum, 0..5: 1 registers the result; 2 the sum of
        the significands too; 3 the aligned operands as well; 4 the normalized sum as well
        (a register after each stage); 5 the compared operands too, before the shift.

    Members
    -------
    a, b : In(FP32)
        The operands, fp32 bit patterns (:data:`~hwgen.device.float_formats.FP32`).
    s : Out(FP32)
        The sum of the operands presented :attr:`latency` cycles before.
    """

    def __init__(self, latency=4):
        self._cuts = stage_plan("FP32Adder", latency, _PLANS)
        self._latency = latency
        super().__init__({"a": In(FP32), "b": In(FP32), "s": Out(FP32)})

    @property
    def latency(self):
        """Cycles from the operands to their sum on ``s``."""
        return self._latency

    def elaborate(self, platform):
        m = Module()
        values = _compare(m, self.a, self.b)
        values = cut(m, values, "compare" in self._cuts, "compared")
        values = _align(m, values)
        values = cut(m, values, "align" in self._cuts, "aligned")
        values = _add(m, values)
        values = cut(m, values, "add" in self._cuts, "summed")
        values = _normalize(m, values)
        values = cut(m, values, "normalize" in self._cuts, "normal")
        result = _round(m, values)
        out = cut(m, {"s": result}, "round" in self._cuts, "res")
        m.d.comb += self.s.eq(out["s"])
        return m


def _specials(a, b):
    """Return ``(nan, inf, inf_sign)`` of the operands: the cases decided by the operands
    alone."""
    a_top, b_top = a.exponent == EXP_MAX, b.exponent == EXP_MAX
    a_inf, b_inf = a_top & (a.fraction == 0), b_top & (b.fraction == 0)
    nan = (a_top & (a.fraction != 0)) | (b_top & (b.fraction != 0)) \
        | (a_inf & b_inf & (a.sign != b.sign))
    return nan, a_inf | b_inf, Mux(a_inf, a.sign, b.sign)


def _compare(m, a, b):
    """The larger magnitude's significand, exponent and sign, the smaller's significand and
    how far it shifts to the larger's exponent, and whether the significands subtract."""
    nan, inf, inf_sign = _specials(a, b)

    def significand(x):
        # An exponent of 0 reads as +0.0: no hidden bit, no fraction.
        normal = x.exponent != 0
        return Cat(Const(0, _EXTRA), Mux(normal, x.fraction, 0), normal)

    # Magnitudes compare as integers ({exponent, fraction}); ties keep a first.
    swap = Signal()
    m.d.comb += swap.eq(b.as_value()[:31] > a.as_value()[:31])
    big_exp = Mux(swap, b.exponent, a.exponent)
    big = Mux(swap, significand(b), significand(a))
    small = Mux(swap, significand(a), significand(b))
    # A difference of _WIDTH or more shifts every bit out: clamp it to 5 bits. Both
    # differences are computed beside the comparison, which then only picks one.
    diff = Signal(8)
    shift = Signal(range(_WIDTH + 1))
    m.d.comb += [diff.eq(Mux(swap, b.exponent - a.exponent, a.exponent - b.exponent)),
                 shift.eq(Mux(diff >= _WIDTH, _WIDTH, diff))]
    return {"big": big, "small": small, "shift": shift, "exp": big_exp,
            "sign": Mux(swap, b.sign, a.sign), "sub": a.sign ^ b.sign,
            "nan": nan, "inf": inf, "inf_sign": inf_sign}


def _align(m, v):
    """The smaller significand shifted to the larger's exponent, its bits shifted out ORed
    into the lowest bit (exact enough for rounding, see below)."""
    # The small significand above _WIDTH zeros, shifted right: the top half is the aligned
    # value, the bottom half what fell out.
    wide = Signal(2 * _WIDTH)
    m.d.comb += wide.eq(Cat(Const(0, _WIDTH), v["small"]) >> v["shift"])
    # With the sticky bit in the lowest place, the computed sum lies strictly between the
    # same two multiples of 2 (in units of that place) as the exact sum, and rounding points
    # are such multiples: rounding the computed sum rounds the exact one. (Only a difference
    # of 4 or more sets it, and then normalisation shifts left by 1 at most.)
    aligned = wide[_WIDTH:] | Cat(wide[:_WIDTH].any(), Const(0, _WIDTH - 1))
    return {**{k: v[k] for k in v if k != "shift"}, "small": aligned}


def _add(m, v):
    """The significands' sum or difference (never negative: the larger comes first)."""
    total = Signal(_SUM)
    m.d.comb += total.eq(Mux(v["sub"], v["big"] - v["small"], v["big"] + v["small"]))
    return {**{k: v[k] for k in ("exp", "sign", "nan", "inf", "inf_sign")}, "sum": total}


def _normalize(m, v):
    """The sum shifted left until its top bit (bit 27) is 1, and its exponent: the larger
    operand's, plus 1 for the carry bit, less the shift."""
    total = v["sum"]
    zeros = Signal(range(_SUM + 1))
    m.d.comb += zeros.eq(_SUM)
    # The last assignment wins: the highest set bit decides.
    for i in range(_SUM):
        with m.If(total[i]):
            m.d.comb += zeros.eq(_SUM - 1 - i)
    shifted, exponent = Signal(_SUM, name="shifted"), Signal(signed(10), name="exponent")
    m.d.comb += [shifted.eq(total << zeros),
                 exponent.eq(v["exp"] + 1 - zeros)]
    return {**{k: v[k] for k in ("sign", "nan", "inf", "inf_sign")},
            "sig": shifted, "exp": exponent, "zero": total == 0}


def _round(m, v):
    """Round the normalized significand to 24 bits (nearest, ties to even), then the special
    cases in their order of precedence."""
    sig, sign = v["sig"], v["sign"]
    kept = sig[_SUM - 24:]
    guard = sig[_SUM - 25]
    sticky = sig[:_SUM - 25].any()
    rounded = Signal(25)
    m.d.comb += rounded.eq(kept + (guard & (sticky | kept[0])))
    # A carry out of the 24 bits leaves 2**24: fraction 0, one more in the exponent.
    exponent = Signal(signed(11))
    m.d.comb += exponent.eq(v["exp"] + rounded[24])
    result = Signal(FP32)
    with m.If(v["nan"]):
        m.d.comb += result.as_value().eq(FP32_NAN)
    with m.Elif(v["inf"]):
        m.d.comb += result.as_value().eq(Cat(Const(FP32_INF, 31), v["inf_sign"]))
    with m.Elif(v["zero"] | (exponent <= 0)):
        m.d.comb += result.as_value().eq(0)
    with m.Elif(exponent >= EXP_MAX):
        m.d.comb += result.as_value().eq(Cat(Const(FP32_INF, 31), sign))
    with m.Else():
        m.d.comb += result.as_value().eq(Cat(rounded[:23], exponent[:8], sign))
    return result
