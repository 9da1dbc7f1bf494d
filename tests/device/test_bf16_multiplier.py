"""The bf16 multiplier against the contract's products (:mod:`hwgen.nn.bf16`): hypothesis-drawn
bit patterns at every latency, and the edge cases of docs/arithmetic.md's bfloat16 rules, also
against the independent scalar model (:mod:`support.bf16_reference`)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import bf16_reference as scalar
from support.float_units import bf16_bits_strategy, fp32_of, ref_product, run_pipeline

from hwgen.device.bf16_multiplier import BF16Multiplier


def check(latency, pairs):
    """Run the pairs through a multiplier of ``latency``, compare bit for bit."""
    a, b = (np.array(v, dtype=np.uint16) for v in zip(*pairs, strict=True))
    got = np.array(run_pipeline(BF16Multiplier(latency), {"a": a, "b": b}, "p"),
                   dtype=np.uint32)
    want = ref_product(a, b)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(hex(a[i]), hex(b[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]
    return got


@settings(max_examples=150, deadline=None)
@given(latency=st.integers(0, 3),
       pairs=st.lists(st.tuples(bf16_bits_strategy, bf16_bits_strategy), min_size=1,
                      max_size=60))
def test_random_patterns(latency, pairs):
    """Every drawn pair of bit patterns gives the contract's product, one pair a cycle."""
    check(latency, pairs)


def bf16(value):
    """The bf16 bit pattern of an exactly representable float."""
    return int(np.array([value], dtype=np.float32).view(np.uint32)[0]) >> 16


MAX = 0x7F7F                    # the largest finite bf16, (2 - 2**-7) * 2**127
INF, NINF, NAN = 0x7F80, 0xFF80, 0x7FC0
EDGES = {
    "zero-times-x": (0x0000, bf16(3.0), 0),
    "minus-zero": (0x8000, bf16(3.0), 0),
    "minus-zero-times-minus": (0x8000, bf16(-3.0), 0),
    "subnormal-operand": (0x0001, bf16(2.0 ** 120), 0),
    "negative-subnormal": (0x807F, bf16(-5.0), 0),
    "zero-times-inf": (0x0000, INF, 0x7FC00000),
    "minus-zero-times-minus-inf": (0x8000, NINF, 0x7FC00000),
    # A weight (b) of sign 1 and exponent 0 is no product: +0.0 whatever the activation.
    "no-product-times-inf": (INF, 0x8000, 0),
    "no-product-times-minus-inf": (NINF, 0x8000, 0),
    "no-product-times-nan": (NAN, 0x8000, 0),
    "no-product-times-nan-payload": (0xFF81, 0x8000, 0),
    "no-product-times-finite": (bf16(-3.0), 0x8000, 0),
    "negative-subnormal-weight-times-inf": (INF, 0x8001, 0),
    "inf-times-zero-weight": (INF, 0x0000, 0x7FC00000),
    "inf-times-subnormal-weight": (NINF, 0x0001, 0x7FC00000),
    "inf-times-negative": (INF, bf16(-2.0), 0xFF800000),
    "inf-times-inf": (NINF, NINF, 0x7F800000),
    "nan-payload": (0xFF81, bf16(1.0), 0x7FC00000),
    "nan-times-inf": (INF, 0x7FFF, 0x7FC00000),
    "overflow": (bf16(2.0 ** 127), bf16(-2.0), 0xFF800000),
    "max-times-max": (MAX, MAX, 0x7F800000),
    "largest-finite": (bf16(2.0 ** 127), bf16(1.9921875), 0x7F7F0000),
    "underflow": (bf16(2.0 ** -100), bf16(-(2.0 ** -30)), 0),
    "just-below-normal": (bf16(1.5 * 2.0 ** -64), bf16(1.25 * 2.0 ** -63), 0),
    "smallest-normal": (bf16(2.0 ** -63), bf16(2.0 ** -63), 0x00800000),
    "carry": (bf16(1.5), bf16(-1.5), 0xC0100000),
    "full-significands": (0x3FFF, 0x3FFF, 0x407E0100),
}


@pytest.mark.parametrize("latency", [0, 2])
def test_edge_cases(latency):
    """The zero rule (signs, subnormal operands, underflow), 0 x Inf, Inf, NaN payloads,
    a weight that is no product, overflow by exponent, the largest finite product and the
    normalisation's carry: the expected bits, the reference's and the scalar model's."""
    pairs = [case[:2] for case in EDGES.values()]
    got = check(latency, pairs)
    for (name, (a, b, want)), bits in zip(EDGES.items(), got, strict=True):
        assert bits == want, (name, hex(bits), hex(want))
        # The scalar model takes an activation the zero rule has already been applied to,
        # and the weight as given (a no-product weight is -0.0 or negative subnormal).
        x, w = scalar.zero_rule(scalar.from_bits16(a)), scalar.from_bits16(b)
        model = scalar.product(x, w)
        assert scalar.bits32(model) == want or np.isnan(fp32_of([want])[0]), name


@pytest.mark.parametrize("latency", [-1, 4, 1.0, True, "2"])
def test_refused_latency(refused, latency):
    """A latency outside 0..3 is refused, naming the parameter and what is allowed."""
    refused(r"latency=.*allowed: an int in 0\.\.3", lambda: BF16Multiplier(latency))


def test_every_significand_pair():
    """All 2**14 pairs of fractions, each with signs and exponents drawn around the ends of
    the range (products that just overflow, just underflow, or stay normal by the
    normalisation's carry) and in the middle."""
    rng = np.random.default_rng(52)
    fa, fb = (v.ravel() for v in np.meshgrid(np.arange(128), np.arange(128)))
    ea = rng.choice([1, 2, 63, 64, 127, 190, 191, 254], fa.size)
    # b's exponent puts the product's exponent ea + eb - 127 at -1..1 or 253..255, or
    # anywhere.
    near = rng.choice([126, 127, 128, 380, 381, 382], fa.size) - ea
    eb = np.where(rng.random(fa.size) < 0.7, near, rng.integers(1, 255, fa.size))
    eb = np.clip(eb, 1, 254)
    signs = rng.integers(0, 4, fa.size)
    a = ((signs & 1) << 15) | (ea << 7) | fa
    b = ((signs >> 1) << 15) | (eb << 7) | fb
    check(1, list(zip(a, b, strict=True)))
