"""The bf16 datapath's arithmetic units in the Amaranth simulator, and the bit patterns of
docs/arithmetic.md's bfloat16 reference (:mod:`hwgen.nn.bf16`) to check them against."""

import ml_dtypes
import numpy as np
from amaranth.sim import Simulator
from hypothesis import strategies as st

from hwgen.nn.bf16 import as_bf16, flush, no_product
from hwgen.nn.bf16_layers import Bf16Add

__all__ = ["bf16_bits_strategy", "bf16_moderate", "bf16_special", "bf16_tiny",
           "fp32_bias_strategy", "fp32_bits_strategy", "fp32_of", "ref_finish", "ref_product",
           "ref_sum", "run_pipeline"]


def run_pipeline(dut, inputs, output):
    """Present ``inputs`` (a dict of port name to a list of bit patterns) one set a cycle and
    return the patterns ``output`` shows ``dut.latency`` cycles after each."""
    count = len(next(iter(inputs.values())))
    got = []

    async def bench(ctx):
        for cycle in range(count + dut.latency):
            if cycle < count:
                for name, values in inputs.items():
                    ctx.set(getattr(dut, name).as_value(), int(values[cycle]))
            if cycle >= dut.latency:
                got.append(ctx.get(getattr(dut, output).as_value()))
            # A latency of 0 has no clock domain: let time pass instead.
            await (ctx.tick() if dut.latency else ctx.delay(1e-6))

    sim = Simulator(dut)
    if dut.latency:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


def fp32_of(bits):
    """The float32 values of uint32 bit patterns."""
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def ref_product(a_bits, b_bits):
    """The contract's fp32 products of bf16 bit patterns ``a`` (activations) and ``b``
    (weights), as uint32 bit patterns: the zero rule on the operands
    (:func:`~hwgen.nn.bf16.as_bf16`), ``flush(x * w)``; +0.0 where the weight is no product
    (:func:`~hwgen.nn.bf16.no_product`)."""
    given = [np.asarray(v, dtype=np.uint16).view(ml_dtypes.bfloat16) for v in (a_bits, b_bits)]
    x, w = (as_bf16(v) for v in given)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(no_product(given[1]), np.float32(0), flush(x * w)).view(np.uint32)


def ref_sum(a_bits, b_bits):
    """The contract's fp32 sums of fp32 bit patterns, as uint32 bit patterns: the zero rule
    on the operands, ``flush(a + b)``."""
    a, b = (flush(fp32_of(v)) for v in (a_bits, b_bits))
    with np.errstate(over="ignore", invalid="ignore"):
        return flush(a + b).view(np.uint32)


def ref_finish(acc_bits, relu=False, raw=False, act_min=None, act_max=None):
    """The contract's finish of fp32 accumulators (uint32 bit patterns), as uint32 bit
    patterns: the accumulator unchanged when ``raw``; else, the zero rule on the accumulator
    and on the bounds (fp32 bit patterns, ``None`` for unbounded), the layer's
    :meth:`~hwgen.nn.bf16_layers._Finish.finish` (a float32 holding a bf16 value)."""
    acc_bits = np.asarray(acc_bits, dtype=np.uint32)
    if raw:
        return acc_bits.copy()
    lo, hi = (None if v is None else float(flush(fp32_of([v]))[0]) for v in (act_min, act_max))
    layer = Bf16Add(activation="relu" if relu else "identity", act_min=lo, act_max=hi)
    with np.errstate(invalid="ignore"):
        return layer.finish(flush(fp32_of(acc_bits))).view(np.uint32)


def _pattern(fraction_bits):
    """A strategy of float bit patterns with an 8-bit exponent: uniform, or built from an
    exponent near the ends or the middle and a fraction at its edges."""
    exponents = st.one_of(st.integers(0, 255), st.sampled_from([0, 1, 2, 126, 127, 253, 254,
                                                                255]))
    top = (1 << fraction_bits) - 1
    fractions = st.one_of(st.integers(0, top), st.sampled_from([0, 1, top, top - 1,
                                                                1 << (fraction_bits - 1)]))
    built = st.builds(lambda s, e, f: (s << (fraction_bits + 8)) | (e << fraction_bits) | f,
                      st.integers(0, 1), exponents, fractions)
    return st.one_of(st.integers(0, (1 << (fraction_bits + 9)) - 1), built)


#: Strategies of bf16 and fp32 bit patterns.
bf16_bits_strategy = _pattern(7)
fp32_bits_strategy = _pattern(23)

# bf16 values mostly of moderate exponents (their sums round, cancel and carry), tiny ones
# whose products flush, and zeros, Inf, NaN and the largest finite values: the matrix tests'
# parts of a value strategy.
bf16_moderate = st.builds(lambda s, e, f: (s << 15) | (e << 7) | f, st.integers(0, 1),
                          st.integers(120, 134), st.integers(0, 127))
bf16_tiny = st.builds(lambda s, e, f: (s << 15) | (e << 7) | f, st.integers(0, 1),
                      st.integers(1, 40), st.integers(0, 127))
bf16_special = st.sampled_from([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x7F7F,
                                0xFF7F])
#: fp32 biases: any pattern, moderate values, zeros of either sign, a subnormal, Inf and NaN.
fp32_bias_strategy = st.one_of(st.integers(0, 2 ** 32 - 1),
                               bf16_moderate.map(lambda v: v << 16),
                               st.sampled_from([0, 0x80000000, 0x00000001, 0x7F800000,
                                                0xFFC00001]))
