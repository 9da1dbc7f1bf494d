"""The bf16 residual add: ``y = bf16(bounds(fl32(a + b)))`` lane by lane, as a pass over the
activation banks (docs/arithmetic.md, "bfloat16"; :class:`~hwgen.nn.bf16_layers.Bf16Add`)."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .adder import AddWalk
from .bf16_finish import BF16Finish
from .float_formats import BF16
from .fp32_adder import FP32Adder
from .systolic import delay

__all__ = ["BF16AddLane", "BF16Adder"]


def _fp32(bf16):
    """The fp32 pattern of a bf16 one: its bits over 16 zero bits."""
    return Cat(Const(0, 16), bf16.as_value())


class BF16AddLane(wiring.Component):
    """One lane of a bf16 add: ``y = bf16(min(max(fl32(a + b), act_min), act_max))``.

    The sum is :class:`~hwgen.device.fp32_adder.FP32Adder`'s (the zero rule, Inf - Inf the
    canonical NaN), the bounds and the rounding :class:`~hwgen.device.bf16_finish.BF16Finish`'s
    (the ReLU is in the bounds: the compiler makes ``act_min`` +0.0).

    Parameters
    ----------
    add_latency, finish_latency : int
        The two units' registers.

    Members
    -------
    a, b : In(BF16)
    act_min, act_max : In(BF16)
        The bounds, read with ``a`` and ``b`` (they travel down the pipeline with them).
    y : Out(BF16)
        The result of the operands presented :attr:`latency` cycles before.
    """

    def __init__(self, *, add_latency=4, finish_latency=2):
        self.adder = FP32Adder(add_latency)
        self.finish = BF16Finish(finish_latency)
        super().__init__({"a": In(BF16), "b": In(BF16), "act_min": In(BF16),
                          "act_max": In(BF16), "y": Out(BF16)})

    @property
    def latency(self):
        """Cycles from the operands to ``y``: the adder's and the finish's."""
        return self.adder.latency + self.finish.latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.adder, m.submodules.finish = add, fin = self.adder, self.finish
        # The bounds wait for the sum in registers of their own.
        low, high = (delay(m, _fp32(bound), add.latency, name=name) for bound, name in
                     ((self.act_min, "low"), (self.act_max, "high")))
        m.d.comb += [add.a.as_value().eq(_fp32(self.a)), add.b.as_value().eq(_fp32(self.b)),
                     fin.acc.eq(add.s),
                     fin.layer.relu.eq(0), fin.layer.raw.eq(0),
                     fin.layer.min_en.eq(1), fin.layer.max_en.eq(1),
                     fin.layer.act_min.as_value().eq(low),
                     fin.layer.act_max.as_value().eq(high),
                     self.y.as_value().eq(fin.y.as_value()[16:])]
        return m


class BF16Adder(AddWalk):
    """Add two tensors of bf16 values of the activation banks word by word into a third, as
    :class:`~hwgen.device.adder.Adder` does for int8 (its walk and addresses, the members of
    an :class:`~hwgen.device.adder.AddWalk` without PARAM words): for each channel word, for
    each row, the words of ``a`` and ``b``, one a cycle, then every lane's
    :class:`BF16AddLane` (the bounds the descriptor's bf16 ``act_min``, ``act_max``):
    ``2 * src_stride * R`` reads from the cycle after ``go`` ends.

    Parameters
    ----------
    config : AcceleratorConfig
        With ``dtype="bf16"`` (16-bit lanes).
    read_latency : int
        Cycles from a read's address to its word (1, or 2 with registered reads).
    """

    def __init__(self, config, *, read_latency=1):
        super().__init__(config, read_latency=read_latency)
        self.lanes = [BF16AddLane() for _ in range(config.act_lanes)]

    @property
    def pipeline(self):
        """Registers from the arrival of ``b``'s word to its write: the operands', the
        lane's, the written word's (the cycle model reads it)."""
        return 1 + self.lanes[0].latency + 1

    def elaborate(self, platform):
        m = Module()
        walk = self._walk(m)
        d = self.desc
        # a's word waits in `held`; with b's word both go to the lanes' operand registers
        # (the banks' words enter no arithmetic in the cycle they arrive).
        held = Signal.like(self.rd_data, name="held")
        x_a, x_b = Signal.like(self.rd_data, name="x_a"), Signal.like(self.rd_data, name="x_b")
        with m.If(walk["word"] & ~walk["b"]):
            m.d.sync += held.eq(self.rd_data)
        m.d.sync += [x_a.eq(held), x_b.eq(self.rd_data)]
        for i, lane in enumerate(self.lanes):
            m.submodules[f"lane{i}"] = lane
            m.d.comb += [lane.a.as_value().eq(x_a[i]), lane.b.as_value().eq(x_b[i]),
                         lane.act_min.as_value().eq(d.act_min[:16]),
                         lane.act_max.as_value().eq(d.act_max[:16])]
            m.d.sync += self.wr_data[i].eq(lane.y.as_value())
        # The flags of b's word, to the lanes' results.
        wait = 1 + self.lanes[0].latency
        valid, end, next_ = (delay(m, flag, wait, name=f"y_{name}") for flag, name in
                             ((walk["word"] & walk["b"], "valid"), (walk["end"], "end"),
                              (walk["next"], "next")))
        m.d.sync += [self.wr_en.eq(valid), self.done.eq(end)]
        self._write_addresses(m, next_)
        return m
