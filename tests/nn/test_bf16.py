"""The bfloat16 primitives of docs/arithmetic.md ("bfloat16"): rounding, the zero rule, NaN,
the tile-ordered fp32 sums, the activations; against exact fractions and a scalar loop."""

import math
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.bf16_reference import (
    bf16_bits_of,
    bits,
    from_bits16,
    from_bits32,
    matmul,
    zero_rule,
)

from hwgen.nn.bf16 import (
    activate,
    as_bf16,
    bf16_matmul,
    flush,
    no_product,
    round_to_bf16,
    round_to_fp32,
)


def _round32(patterns):
    """round_to_bf16 of fp32 bit patterns, as bf16 bit patterns."""
    x = np.array(patterns, dtype=np.uint32).view(np.float32)
    out = round_to_bf16(x)
    assert out.dtype == ml_dtypes.bfloat16
    return [int(v) for v in out.view(np.uint16)]


# (fp32 bits, bf16 bits): what each rule gives, worked out by hand.
EDGES = [
    (0x3F808000, 0x3F80),  # a tie with an even kept part stays
    (0x3F818000, 0x3F82),  # a tie with an odd kept part rounds up
    (0xBF818000, 0xBF82),  # ... with either sign
    (0x3F808001, 0x3F81),  # just above half
    (0x3F807FFF, 0x3F80),  # just below half
    (0x3FFF8000, 0x4000),  # a tie that carries into the exponent
    (0x7F7F7FFF, 0x7F7F),  # the largest finite bf16 stays
    (0x7F7F8000, 0x7F80),  # half a unit above it is a tie to the even Inf
    (0x7F7FFFFF, 0x7F80),  # the largest finite fp32 overflows to Inf
    (0xFF7FFFFF, 0xFF80),  # ... and to -Inf
    (0x7F800000, 0x7F80),  # Inf stays
    (0x00800000, 0x0080),  # the smallest normal stays
    (0x00000001, 0x0000),  # fp32 subnormals are +0 ...
    (0x007FFFFF, 0x0000),  # ... even the one that would round up to 2**-126
    (0x807FFFFF, 0x0000),
    (0x80000000, 0x0000),  # -0 is +0
    (0x7F800001, 0x7FC0),  # every NaN is the canonical one
    (0xFFC00000, 0x7FC0),
    (0x7FFFFFFF, 0x7FC0),
    (0xFF800123, 0x7FC0),
]


@pytest.mark.parametrize(("fp32", "expected"), EDGES)
def test_rounding_edges_by_hand(fp32, expected):
    assert _round32([fp32]) == [expected]
    # The exact-fraction model agrees with the hand-worked table.
    assert bf16_bits_of(float(from_bits32(fp32))) == expected


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(0, 2 ** 32 - 1), min_size=1, max_size=16))
def test_rounding_fp32_matches_exact_fractions(patterns):
    expected = [bf16_bits_of(float(from_bits32(p))) for p in patterns]
    assert _round32(patterns) == expected


@settings(max_examples=400, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=16))
def test_rounding_float64_is_one_rounding_of_the_value(values):
    out = round_to_bf16(np.array(values, dtype=np.float64)).view(np.uint16)
    assert [int(v) for v in out] == [bf16_bits_of(v) for v in values]


def test_float64_is_not_rounded_twice():
    # Through fp32 first, 1 + 2**-8 + 2**-30 would become the tie 1 + 2**-8 and round down
    # to 1; rounded once it is above the tie and rounds up.
    x = 1 + 2 ** -8 + 2 ** -30
    assert int(round_to_bf16(np.array([x])).view(np.uint16)[0]) == 0x3F81
    # Below 2**-126 is +0 even where rounding would reach the smallest normal.
    assert int(round_to_bf16(np.array([2.0 ** -126 * (1 - 2 ** -30)])).view(np.uint16)[0]) == 0


def test_flush_and_fp32_rounding():
    patterns = [0x00000001, 0x807FFFFF, 0x80000000, 0x7F800001, 0xFFFFFFFF, 0x3F800001,
                0xFF800000, 0x00800000]
    out = bits(flush(np.array(patterns, dtype=np.uint32).view(np.float32)))
    assert list(out) == [0, 0, 0, 0x7FC00000, 0x7FC00000, 0x3F800001, 0xFF800000, 0x00800000]
    assert list(bits(round_to_fp32([-0.0, 1e-40, 1e39, 0.1]))) == [
        0, 0, 0x7F800000, 0x3DCCCCCD]


def test_bf16_arrays_accepted_and_float32_checked():
    given_bf16 = np.array([1.5, -0.0, 3.0], dtype=ml_dtypes.bfloat16)
    assert list(bits(as_bf16(given_bf16))) == [0x3FC00000, 0, 0x40400000]
    assert list(bits(as_bf16(np.array([1.5, -0.0], dtype=np.float32)))) == [0x3FC00000, 0]
    with pytest.raises(ValueError, match=r"index \(1, 0\), not a bf16 value"):
        as_bf16(np.array([[1.0, 2.0], [0.1, 1.0]], dtype=np.float32))
    with pytest.raises(ValueError, match="dtype float64"):
        as_bf16(np.array([1.0]))


def _random_bf16(rng, shape):
    """bf16 values of every kind: ordinary, zero, tiny (products flush), huge (products
    overflow), negative."""
    kind = rng.integers(0, 5, size=shape)
    scale = np.choose(kind, [1.0, 0.0, 2.0 ** -70, 2.0 ** 70, 2.0 ** -20])
    values = rng.normal(size=shape) * scale
    return values.astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("rows", [1, 2, 3, 8])
@pytest.mark.parametrize("seed", range(6))
def test_matmul_matches_the_scalar_loop(rows, seed):
    rng = np.random.default_rng(seed)
    m, k, n = rng.integers(1, 4), rng.integers(1, 14), rng.integers(1, 4)
    x, w = _random_bf16(rng, (m, k)), _random_bf16(rng, (k, n))
    b = rng.normal(size=n).astype(np.float32) * np.float32(rng.choice([0.0, 1.0, 2.0 ** 100]))
    expected = matmul(x.astype(np.float32), w.astype(np.float32), b, rows)
    np.testing.assert_array_equal(bits(bf16_matmul(x, w, b, rows)), bits(expected))


@pytest.mark.parametrize("rows", [1, 2, 3, 8])
def test_matmul_batched_over_groups(rows):
    rng = np.random.default_rng(7)
    x, w = _random_bf16(rng, (3, 4, 5)), _random_bf16(rng, (3, 5, 2))
    b = rng.normal(size=(3, 1, 2)).astype(np.float32)
    out = bf16_matmul(x, w, b, rows)
    for g in range(3):
        expected = matmul(x[g].astype(np.float32), w[g].astype(np.float32), b[g, 0], rows)
        np.testing.assert_array_equal(bits(out[g]), bits(expected))


def _one(x, w, b=0.0, rows=8):
    """One accumulator of a single row and column, as fp32 bits."""
    out = bf16_matmul(np.array([x], dtype=ml_dtypes.bfloat16),
                      np.array(w, dtype=ml_dtypes.bfloat16)[:, None],
                      np.array([b], dtype=np.float32), rows)
    return int(bits(out)[0, 0])


def test_the_order_of_the_sums_matters():
    # Products 1, 0, 2**-24, 2**-24. In tiles of 2, 2**-24 + 2**-24 = 2**-23 is one unit of
    # 1 and survives; one at a time, or in tiles of 3 or 4, each 2**-24 is half a unit, a tie
    # that rounds back to the even 1.
    products = ([1.0] * 4, [1.0, 0.0, 2.0 ** -24, 2.0 ** -24])
    assert _one(*products, rows=2) == 0x3F800001
    for rows in (1, 3, 4):
        assert _one(*products, rows=rows) == 0x3F800000


def test_zero_rule_nan_and_overflow_in_sums():
    # -1 * 0 is -0 and the bias -0: +0, all bits 0.
    assert _one([-1.0], [0.0], b=-0.0) == 0
    # 2**-70 * 2**-70 is subnormal: +0, so the bias alone remains.
    assert _one([2.0 ** -70], [2.0 ** -70], b=1.0) == 0x3F800000
    # ... before it meets the sum so far: 2**-126, not 2**-126 + 2**-140.
    assert _one([1.0, 2.0 ** -70], [2.0 ** -126, 2.0 ** -70]) == 0x00800000
    # 1.5 * 2**-126 - 1.25 * 2**-126 = 2**-128, a subnormal sum: +0.
    assert _one([1.5, -1.25], [2.0 ** -126, 2.0 ** -126]) == 0
    # ... also inside a tile: +0 + 2**-126, not 2**-128 + 2**-126.
    assert _one([1.5, -1.25, 1.0], [2.0 ** -126] * 3) == 0x00800000
    # 2**100 * 2**100 overflows to Inf; Inf - Inf is the canonical NaN, in a tile or across.
    assert _one([2.0 ** 100], [2.0 ** 100]) == 0x7F800000
    assert _one([2.0 ** 100, -(2.0 ** 100)], [2.0 ** 100] * 2, rows=2) == 0x7FC00000
    assert _one([2.0 ** 100, -(2.0 ** 100)], [2.0 ** 100] * 2, rows=1) == 0x7FC00000
    assert _one([2.0 ** 100], [2.0 ** 100], b=-math.inf) == 0x7FC00000


def test_a_weight_of_sign_1_and_exponent_0_is_no_product():
    # -0.0 and negative subnormals, which no layer's weight is (the zero rule), give +0.0
    # whatever the activation: Inf and NaN included. A +0.0 weight is a product: Inf * 0 is
    # NaN.
    inf, nan = math.inf, math.nan
    assert _one([inf], [-0.0]) == 0 and _one([nan], [-0.0]) == 0
    assert _one([inf, 1.5], [-0.0, 2.0], rows=1) == 0x40400000
    assert _one([inf], [0.0]) == 0x7FC00000
    tiny = np.array([0x8001, 0x807F, 0x8000, 0x0001], dtype=np.uint16).view(ml_dtypes.bfloat16)
    got = bf16_matmul(np.array([[inf]], dtype=np.float32), tiny[None, :], 0.0, 2)
    assert list(bits(got)[0]) == [0, 0, 0, 0x7FC00000]
    assert list(no_product(tiny)) == [True, True, True, False]
    assert list(no_product(np.array([-0.0, 0.0, -1.0, -2.0 ** -130], np.float32))) == [
        True, False, False, True]


@pytest.mark.parametrize("rows", [1, 3])
def test_no_products_match_the_scalar_loop(rows):
    # Activations of Inf and NaN among weights of -0.0: the scalar model's products agree.
    rng = np.random.default_rng(rows)
    x = _random_bf16(rng, (3, 7)).astype(np.float32)
    x[rng.random(x.shape) < 0.3] = rng.choice([math.inf, -math.inf, math.nan])
    w = _random_bf16(rng, (7, 4)).astype(np.float32)
    w[rng.random(w.shape) < 0.4] = -0.0
    b = rng.normal(size=4).astype(np.float32)
    want = matmul(x, w, b, rows)
    np.testing.assert_array_equal(bits(bf16_matmul(x, w, b, rows)), bits(want))


def test_scalar_reference_helpers_agree_with_hand_values():
    # The scalar model's own zero rule and NaN, so that the loop comparison is worth trusting.
    assert int(bits(np.array([zero_rule(from_bits32(0x80000000))]))[0]) == 0
    assert int(bits(np.array([zero_rule(from_bits32(0xFFC00001))]))[0]) == 0x7FC00000
    assert float(from_bits16(0x3F82)) == 1.015625


def test_activations_keep_nan_and_give_plus_zero():
    acc = np.array([-2.0, -0.0, 0.5, 7.0, np.nan, np.inf, -np.inf], dtype=np.float32)
    relu = bits(activate(acc, "relu"))
    assert list(relu[:4]) == [0, 0, 0x3F000000, 0x40E00000]
    assert list(relu[4:]) == [0x7FC00000, 0x7F800000, 0]
    relu6 = activate(acc, "relu", None, 6.0)
    assert list(relu6[:4]) == [0.0, 0.0, 0.5, 6.0] and math.isnan(relu6[4])
    assert list(relu6[5:]) == [6.0, 0.0]
    clamp = activate(acc, "identity", -1.0, 1.0)
    assert list(clamp[[0, 2, 3, 5, 6]]) == [-1.0, 0.5, 1.0, 1.0, -1.0]
    assert int(bits(clamp)[4]) == 0x7FC00000
    with pytest.raises(ValueError, match="leaky_relu"):
        activate(acc, "leaky_relu")


def test_ml_dtypes_loads_on_the_first_bf16_use_only():
    """ml_dtypes takes about a second to import (0.7.0): the compiler, the host driver and a
    cocotb bench's modules never load it for int8 work; bfloat16() does, is_bfloat16 never."""
    code = ("import sys; import numpy as np; import hwgen.compiler, host, host.plan, "
            "sim.tb_network, sim.interpreter; from hwgen.nn.bf16 import bfloat16, is_bfloat16; "
            "assert not is_bfloat16(np.float32); assert 'ml_dtypes' not in sys.modules; "
            "dtype = bfloat16(); assert 'ml_dtypes' in sys.modules and is_bfloat16(dtype); "
            "assert not is_bfloat16(np.float32)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
