"""The fp32 adder against the contract's sums (:mod:`hwgen.nn.bf16`): hypothesis-drawn bit
patterns at every latency (uniform, and pairs close in magnitude, where cancellation and
normalisation happen), and the edge cases of docs/arithmetic.md's bfloat16 rules, also against
the independent scalar model (:mod:`support.bf16_reference`)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import bf16_reference as scalar
from support.float_units import fp32_bits_strategy, ref_sum, run_pipeline

from hwgen.device.fp32_adder import FP32Adder


def check(latency, pairs):
    """Run the pairs through an adder of ``latency``, compare bit for bit."""
    a, b = (np.array(v, dtype=np.uint32) for v in zip(*pairs, strict=True))
    got = np.array(run_pipeline(FP32Adder(latency), {"a": a, "b": b}, "s"), dtype=np.uint32)
    want = ref_sum(a, b)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(hex(a[i]), hex(b[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]
    return got


@st.composite
def close_pair(draw):
    """A pattern and another near it: the exponent moved by -30..30 (now and then the same
    exponent or the same magnitude), the sign and the fraction's low bits at random, then
    the lowest 0..23 of them cleared."""
    a = draw(fp32_bits_strategy)
    exponent = min(254, max(0, ((a >> 23) & 0xFF) + draw(st.integers(-30, 30))))
    fraction = (a & 0x7FFFFF) ^ draw(st.one_of(st.integers(0, 0x7FFFFF),
                                               st.integers(0, 0xFF), st.just(0)))
    # Low bits cleared: sparse significands, whose sums often end exactly half-way.
    fraction &= ~((1 << draw(st.integers(0, 23))) - 1)
    sign = draw(st.integers(0, 1))
    b = (sign << 31) | (exponent << 23) | fraction
    return draw(st.permutations([a, b]))


pairs_strategy = st.one_of(st.tuples(fp32_bits_strategy, fp32_bits_strategy), close_pair())


@settings(max_examples=120, deadline=None)
@given(latency=st.integers(0, 5), pairs=st.lists(pairs_strategy, min_size=1, max_size=60))
def test_random_patterns(latency, pairs):
    """Every drawn pair of bit patterns gives the contract's sum, one pair a cycle."""
    check(latency, pairs)


def f32(value):
    """The fp32 bit pattern of an exactly representable float."""
    return int(np.array([value], dtype=np.float32).view(np.uint32)[0])


MAX = 0x7F7FFFFF                # the largest finite fp32, (2 - 2**-23) * 2**127
INF, NINF, NAN = 0x7F800000, 0xFF800000, 0x7FC00000
ONE = f32(1.0)
EDGES = {
    "zeros": (0, 0, 0),
    "minus-zeros": (0x80000000, 0x80000000, 0),
    "minus-zero-plus-x": (0x80000000, f32(-3.5), f32(-3.5)),
    "subnormal-operand": (0x00000001, f32(2.0 ** -126), 0x00800000),
    "cancellation": (f32(1.75), f32(-1.75), 0),
    "negative-cancellation": (f32(-(2.0 ** 100)), f32(2.0 ** 100), 0),
    "to-subnormal": (f32(1.5 * 2.0 ** -126), f32(-(2.0 ** -126)), 0),
    "to-smallest-normal": (f32(2.0 ** -125), f32(-(2.0 ** -126)), 0x00800000),
    "tie-even-stays": (ONE, f32(2.0 ** -24), ONE),
    "tie-odd-rounds-up": (ONE + 1, f32(2.0 ** -24), ONE + 2),
    "above-tie": (ONE, f32(2.0 ** -24 + 2.0 ** -40), ONE + 1),
    "below-tie": (ONE, f32(2.0 ** -24 - 2.0 ** -48), ONE),
    "sticky-far": (ONE, f32(2.0 ** -60), ONE),
    "sticky-far-negative": (f32(-1.0), f32(2.0 ** -60), f32(-1.0)),
    "subtract-tie": (ONE, f32(-(2.0 ** -25)), ONE),
    "subtract-above-tie": (ONE, f32(-(2.0 ** -25 + 2.0 ** -45)), ONE - 1),
    "subtract-below-tie": (ONE, f32(-(2.0 ** -25 - 2.0 ** -49)), ONE),
    "huge-difference": (f32(2.0 ** 127), f32(-(2.0 ** -126)), f32(2.0 ** 127)),
    "carry-out": (f32(1.5), f32(1.5), f32(3.0)),
    "round-carry": (0x3FFFFFFF, f32(2.0 ** -23), f32(2.0)),
    "max-plus-max": (MAX, MAX, INF),
    "max-plus-half-ulp": (MAX, f32(2.0 ** 103), INF),
    "max-plus-below-half": (MAX, f32(2.0 ** 102), MAX),
    "minus-max-twice": (MAX | 0x80000000, MAX | 0x80000000, NINF),
    "inf-minus-inf": (INF, NINF, NAN),
    "inf-plus-x": (INF, f32(-5.0), INF),
    "x-plus-minus-inf": (f32(5.0), NINF, NINF),
    "inf-plus-inf": (NINF, NINF, NINF),
    "nan-payload": (0xFF800001, ONE, NAN),
    "nan-plus-inf": (INF, 0x7FFFFFFF, NAN),
}


@pytest.mark.parametrize("latency", [0, 4, 5])
def test_edge_cases(latency):
    """The zero rule (signs, subnormal operands and sums, cancellation), ties to even and the
    sticky bit when adding and subtracting, carries, overflow to Inf, Inf - Inf and NaN
    payloads: the expected bits, the reference's and the scalar model's."""
    got = check(latency, [case[:2] for case in EDGES.values()])
    for (name, (a, b, want)), bits in zip(EDGES.items(), got, strict=True):
        assert bits == want, (name, hex(bits), hex(want))
        x, y = (scalar.zero_rule(scalar.from_bits32(v)) for v in (a, b))
        with np.errstate(over="ignore", invalid="ignore"):
            model = scalar.zero_rule(x + y)
        assert scalar.bits32(model) == want, name


@pytest.mark.parametrize("latency", [-1, 6, 2.0, False, None])
def test_refused_latency(refused, latency):
    """A latency outside 0..5 is refused, naming the parameter and what is allowed."""
    refused(r"latency=.*allowed: an int in 0\.\.5", lambda: FP32Adder(latency))
