"""One column of bf16 processing elements: the tile sums of docs/arithmetic.md ("bfloat16")
in the order of the rows, and their fp32 accumulation."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .bf16_multiplier import BF16Multiplier
from .float_formats import BF16, FP32
from .fp32_adder import FP32Adder
from .systolic import delay

__all__ = ["BF16Column"]


class BF16Column(wiring.Component):
    """A column of ``rows`` processing elements and its accumulator.

    Row ``r``'s element multiplies its activation ``x[r]`` by its weight ``w[r]``
    (:class:`~hwgen.device.bf16_multiplier.BF16Multiplier`) and adds the product to the
    partial sum coming down from row ``r - 1`` (:class:`~hwgen.device.fp32_adder.FP32Adder`);
    row 0 adds it to +0.0. So the column's output is the contract's tile sum: ``s = +0.0``;
    for ``r = 0 .. rows - 1``: ``s = fl32(s + p[r])``, with ``p[r] = fl32(x[r] * w[r])``,
    each with the zero rule. The accumulator then gives ``acc = fl32(acc + s)``, where
    ``acc`` starts at the fp32 bias with a tile marked ``first``.

    Timing (the systolic skew): a partial sum spends :attr:`skew` cycles (the adder's latency)
    in each row, so the activations of one vector enter skewed: if row 0's ``x[0]`` (with
    ``valid``) enters in cycle ``t``, row ``r``'s ``x[r]`` and ``w[r]`` must be presented in
    cycle ``t + r * skew``. In a weight-stationary array the weights are held for a whole
    tile; here they are read with their activation, so they may change from one vector to the
    next. The tile sum shows on ``s`` (with ``s_valid``) in cycle ``t +`` :attr:`sum_latency`
    and the accumulator on ``acc`` (with ``acc_valid``) in cycle ``t +`` :attr:`latency`.
    The accumulator's register takes ``acc`` in that cycle: a tile without ``first`` adds to
    what the last tile before it left there, so it must enter :attr:`acc_interval` cycles or
    more after that tile (a tile with ``first`` reads ``bias`` instead, and may enter in any
    cycle).

    Parameters
    ----------
    rows : int
        The processing elements, ``R >= 1``: the length of a tile.
    mul_latency : int
        The multipliers' latency (:class:`~hwgen.device.bf16_multiplier.BF16Multiplier`).
        The default, 3, registers the product, so that the multiplier's last stage and the
        adder's alignment are not one path (together they miss 50 MHz on an ECP5).
    add_latency : int
        The adders' latency (:class:`~hwgen.device.fp32_adder.FP32Adder`).

    Members
    -------
    x, w : In(ArrayLayout(BF16, rows))
        Row ``r``'s activation and weight, bf16 bit patterns, skewed as above.
    valid : In(1)
        A vector enters: its row 0's ``x[0]`` and ``w[0]`` are presented.
    first : In(1)
        With ``valid``: the vector's tile starts an accumulation (its ``acc`` is ``bias +
        s``).
    bias : In(FP32)
        The accumulation's start, read in the cycle its first tile's sum shows on ``s``.
    s : Out(FP32)
        The tile sum (meaningful with ``s_valid``).
    s_valid : Out(1)
    acc : Out(FP32)
        The accumulator after the tile (meaningful with ``acc_valid``).
    acc_valid : Out(1)
    """

    def __init__(self, rows, *, mul_latency=3, add_latency=4):
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ValueError(f"BF16Column: rows={rows!r}; allowed: an int >= 1")
        self._rows = rows
        # Made here, so that their own checks refuse a bad latency at construction.
        self._muls = [BF16Multiplier(mul_latency) for _ in range(rows)]
        self._adds = [FP32Adder(add_latency) for _ in range(rows + 1)]
        super().__init__({
            "x": In(data.ArrayLayout(BF16, rows)), "w": In(data.ArrayLayout(BF16, rows)),
            "valid": In(1), "first": In(1), "bias": In(FP32),
            "s": Out(FP32), "s_valid": Out(1), "acc": Out(FP32), "acc_valid": Out(1),
        })

    @property
    def skew(self):
        """Cycles between the entries of a vector's consecutive rows (the adder's latency)."""
        return self._adds[0].latency

    @property
    def sum_latency(self):
        """Cycles from a vector's ``valid`` to its tile sum on ``s``."""
        return self._muls[0].latency + self._rows * self.skew

    @property
    def latency(self):
        """Cycles from a vector's ``valid`` to its accumulator on ``acc``."""
        return self.sum_latency + self.skew

    @property
    def acc_interval(self):
        """The fewest cycles between two tiles of one accumulation."""
        return self.skew + 1

    def elaborate(self, platform):
        m = Module()
        partial = 0     # row 0 adds its product to +0.0
        for r, (mul, add) in enumerate(zip(self._muls, self._adds, strict=False)):
            m.submodules[f"mul{r}"] = mul
            m.submodules[f"add{r}"] = add
            # The product leaves the multiplier in the cycle the partial sum of row r - 1
            # leaves its adder: both took mul_latency + r * skew cycles from valid.
            m.d.comb += [mul.a.eq(self.x[r]), mul.b.eq(self.w[r]),
                         add.a.as_value().eq(partial), add.b.eq(mul.p)]
            partial = add.s
        m.d.comb += self.s.eq(partial)

        s_valid = delay(m, self.valid, self.sum_latency, name="s_valid")
        s_first = delay(m, self.first, self.sum_latency, name="s_first")
        m.d.comb += self.s_valid.eq(s_valid)

        acc_add = m.submodules.acc_add = self._adds[-1]
        acc = Signal(FP32)
        m.d.comb += [acc_add.a.as_value().eq(Mux(s_first, self.bias.as_value(),
                                                 acc.as_value())),
                     acc_add.b.eq(partial),
                     self.acc.eq(acc_add.s),
                     self.acc_valid.eq(delay(m, s_valid, self.skew, name="acc_valid"))]
        with m.If(self.acc_valid):
            m.d.sync += acc.eq(acc_add.s)
        return m
