"""The finish of a bf16 layer: its fp32 accumulator through the activation and the clamp bounds,
rounded to bf16, as docs/arithmetic.md's bfloat16 contract and
:meth:`hwgen.nn.bf16_layers._Finish.finish` say."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .float_formats import EXP_MAX, FP32, FP32_NAN, cut, ordered, stage_plan

__all__ = ["FINISH_SETTINGS", "BF16Finish"]

# The registered cut points for each latency, after the stages: "compare" (the zero rule,
# the ReLU and the three comparisons of the clamp), "clamp" (the clamped value chosen),
# "round" (rounded to bf16: the result register).
_PLANS = ((), ("round",), ("compare", "round"), ("compare", "clamp", "round"))

#: A layer's run-time settings of :class:`BF16Finish`: ``relu`` (else the identity), the fp32
#: bounds ``act_min`` and ``act_max`` with their enables ``min_en`` and ``max_en`` (a bound
#: not enabled is unbounded), and ``raw`` (the accumulator unchanged: a raw last layer).
FINISH_SETTINGS = data.StructLayout({
    "relu": 1, "raw": 1, "min_en": 1, "max_en": 1, "act_min": FP32, "act_max": FP32,
})


class BF16Finish(wiring.Component):
    """Turn a layer's fp32 accumulator into its bf16 output: ``bf16(bounds(activation(acc)))``.

    The contract (docs/arithmetic.md, "bfloat16", steps 3 and 4 of a dense layer;
    :meth:`~hwgen.nn.bf16_layers._Finish.finish` of :func:`~hwgen.nn.bf16.flush` of ``acc``
    and of the bounds):

    - the accumulator and the bounds are read under the zero rule: an exponent of 0 is +0.0
      (the datapath never carries -0.0 or a subnormal), any NaN is the canonical NaN;
    - ``relu``: ``acc`` where ``acc > 0``, else +0.0 (-Inf too), a NaN staying NaN;
    - then ``max(., act_min)`` if ``min_en``, then ``min(., act_max)`` if ``max_en``, in that
      order (bounds that cross give ``act_max``); a NaN accumulator, or a NaN among the
      enabled bounds, gives NaN, as NumPy's ``maximum`` and ``minimum`` do;
    - then round to bf16, nearest, ties to even, on the 16 bits dropped: a value half a bf16
      unit or more beyond the largest finite bf16 becomes Inf of its sign; every NaN becomes
      ``0x7FC0``. A normal fp32 value never rounds below ``2**-126``, so no zero rule follows.

    The result is ``y``, the fp32 value that holds the bf16 result exactly (its top 16 bits
    are the bf16 pattern, its low 16 bits 0), as the reference returns it. With ``raw`` the
    accumulator passes unchanged, bit for bit (the fp32 scores of a raw last layer).

    The clamp's three comparisons (the value against each bound, and the bounds against each
    other) run side by side on the values as ordered integers, so the stage before rounding
    is one comparator deep; rounding is a 16-bit increment.

    Parameters
    ----------
    latency : int
        Registers from the accumulator to ``y``, 0..3: 1 registers the result; 2 the
        comparisons as well; 3 the clamped value too (a register after each stage). With 2,
        the default, no stage is more than one 32-bit comparison or one 16-bit increment
        deep: well above 50 MHz on an ECP5.

    Members
    -------
    acc : In(FP32)
        The layer's fp32 accumulator (:data:`~hwgen.device.float_formats.FP32`).
    layer : In(FINISH_SETTINGS)
        The layer's settings, read with ``acc`` (they travel with it down the pipeline, so
        they may change from one value to the next).
    y : Out(FP32)
        The finished value of the accumulator presented :attr:`latency` cycles before.
    """

    def __init__(self, latency=2):
        self._cuts = stage_plan("BF16Finish", latency, _PLANS)
        self._latency = latency
        super().__init__({"acc": In(FP32), "layer": In(FINISH_SETTINGS), "y": Out(FP32)})

    @property
    def latency(self):
        """Cycles from the accumulator to its finished value on ``y``."""
        return self._latency

    def elaborate(self, platform):
        m = Module()
        values = self._compare(m, self.acc, self.layer)
        values = cut(m, values, "compare" in self._cuts, "compared")
        values = self._clamp(m, values)
        values = cut(m, values, "clamp" in self._cuts, "clamped")
        result = self._round(m, values)
        out = cut(m, {"y": result}, "round" in self._cuts, "res")
        m.d.comb += self.y.eq(out["y"])
        return m

    @staticmethod
    def _compare(m, acc, layer):
        """The zero rule, the ReLU, whether a NaN decides the result, and the comparisons of
        the value and the bounds."""
        acc_zero, acc_nan = _classify(acc)
        lo_zero, lo_nan = _classify(layer.act_min)
        hi_zero, hi_nan = _classify(layer.act_max)
        raw = layer.raw
        # A raw value passes untouched; otherwise zero, a negative value under the ReLU and
        # (harmlessly: the NaN flag overrides it) a NaN under the ReLU read as +0.0.
        value = Signal(32)
        m.d.comb += value.eq(Mux(~raw & (acc_zero | (layer.relu & acc.sign)), 0,
                                 acc.as_value()))
        lo, hi = Signal(32, name="lo"), Signal(32, name="hi")
        m.d.comb += [lo.eq(Mux(lo_zero, 0, layer.act_min.as_value())),
                     hi.eq(Mux(hi_zero, 0, layer.act_max.as_value()))]
        min_en, max_en = ~raw & layer.min_en, ~raw & layer.max_en
        return {
            "value": value, "lo": lo, "hi": hi, "raw": raw,
            "nan": ~raw & (acc_nan | (min_en & lo_nan) | (max_en & hi_nan)),
            "below": min_en & (ordered(value) < ordered(lo)),
            "above": max_en & (ordered(value) > ordered(hi)),
            "crossed": max_en & (ordered(lo) > ordered(hi)),
        }

    @staticmethod
    def _clamp(m, v):
        """``min(max(value, lo), hi)`` from the comparisons: below ``lo``, the result is
        ``lo`` unless ``lo`` is above ``hi``; otherwise it is ``hi`` if the value is above."""
        clamped = Signal(32)
        m.d.comb += clamped.eq(Mux(v["below"], Mux(v["crossed"], v["hi"], v["lo"]),
                                   Mux(v["above"], v["hi"], v["value"])))
        return {"value": clamped, "raw": v["raw"], "nan": v["nan"]}

    @staticmethod
    def _increment(value):
        """Whether rounding the dropped 16 bits to nearest even carries into the kept ones:
        above half a unit, or exactly half with an odd kept part."""
        return value[15] & (value[:15].any() | value[16])

    def _round(self, m, v):
        """Round to bf16 (a carry out of the fraction steps the exponent: the largest finite
        values round to Inf), or the canonical NaN, or the raw value."""
        value = v["value"]
        # The sign stays; the increment carries through fraction and exponent only. Inf
        # (dropped bits 0) never increments, and a NaN is replaced below.
        rounded = Signal(15)
        m.d.comb += rounded.eq(value[16:31] + self._increment(value))
        result = Signal(FP32)
        with m.If(v["raw"]):
            m.d.comb += result.as_value().eq(value)
        with m.Elif(v["nan"]):
            m.d.comb += result.as_value().eq(FP32_NAN)
        with m.Else():
            m.d.comb += result.as_value().eq(Cat(Const(0, 16), rounded, value[31]))
        return result


def _classify(x):
    """Return ``(zero, nan)`` of an fp32 value: exponent 0 (+0.0 under the zero rule), NaN."""
    return x.exponent == 0, (x.exponent == EXP_MAX) & (x.fraction != 0)

