"""Requantization: ``requantize`` against the naive model, ``requant_params`` against its
contract."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import requant_params, requantize

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- requantize ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("acc", "mult", "shift", "expected"), [
    (5, 1, 1, 3),        # 2.5 -> 3
    (-5, 1, 1, -2),      # -2.5 -> -2: ties go to +infinity, not away from zero
    (-3, 1, 1, -1),      # -1.5 -> -1
    (3, 1, 1, 2),        # 1.5 -> 2
    (-6, 1, 2, -1),      # -1.5 -> -1
    (7, 3, 0, 21),       # shift 0: no rounding at all
    (1000, 1, 0, 127),   # saturates high
    (-1000, 1, 0, -128),  # saturates low
    (-129, 1, 0, -128),
    (128, 1, 0, 127),
    (-(2 ** 31), 65535, 47, -1),  # the default maximum shift: -0.99998 -> -1
    (2 ** 31 - 1, 65535, 47, 1),  # 0.99998 -> 1
    (-(2 ** 31), 65535, 46, -2),
])
def test_requantize_table(naive, acc, mult, shift, expected):
    assert requantize(np.array([acc]), np.array([mult]), np.array([shift]), 8)[0] == expected
    assert naive.requant(acc, mult, shift, 8) == expected


@FAST
@given(st.data())
def test_requantize_matches_model(naive, data):
    acc_bits = data.draw(st.integers(2, 64))
    mult_bits = data.draw(st.integers(1, 32))
    out_bits = data.draw(st.integers(2, 16))
    max_shift = acc_bits + mult_bits - 1
    n = data.draw(st.integers(1, 6))
    m = data.draw(st.integers(1, 4))
    acc = [[data.draw(st.integers(-(2 ** (acc_bits - 1)), 2 ** (acc_bits - 1) - 1))
            for _ in range(n)] for _ in range(m)]
    mult = [data.draw(st.integers(0, 2 ** mult_bits - 1)) for _ in range(n)]
    shift = [data.draw(st.sampled_from([0, max_shift]) | st.integers(0, max_shift))
             for _ in range(n)]
    got = requantize(np.array(acc, dtype=np.int64), np.array(mult), np.array(shift), out_bits)
    assert got.dtype == np.int64
    expected = [[naive.requant(a, mult[j], shift[j], out_bits) for j, a in enumerate(row)]
                for row in acc]
    assert got.tolist() == expected


@FAST
@given(k=st.integers(-300, 300), shift=st.integers(1, 54), mult=st.integers(1, 2 ** 16 - 1),
       out_bits=st.integers(2, 10))
def test_requantize_exact_ties(k, shift, mult, out_bits):
    # p = acc * mult lands exactly on k + 1/2 after the shift; choose acc = p / mult.
    p = k * 2 ** shift + 2 ** (shift - 1)
    expected = min(max(k + 1, -(2 ** (out_bits - 1))), 2 ** (out_bits - 1) - 1)
    got = requantize(np.array([p]), np.array([1]), np.array([shift]), out_bits)[0]
    assert got == expected
    # The same tie reached through a multiplier, where mult divides p.
    if p % mult == 0:
        got = requantize(np.array([p // mult]), np.array([mult]), np.array([shift]), out_bits)
        assert got[0] == expected


def test_requantize_spatial_broadcast(naive):
    # NHWC accumulators with one (mult, shift) per channel on the last axis.
    rng = np.random.default_rng(0)
    acc = rng.integers(-(2 ** 20), 2 ** 20, size=(2, 3, 4, 5))
    mult = rng.integers(0, 2 ** 16, size=5)
    shift = rng.integers(0, 30, size=5)
    got = requantize(acc, mult, shift, 8)
    assert got.shape == acc.shape
    for index in np.ndindex(acc.shape):
        n = index[-1]
        assert got[index] == naive.requant(int(acc[index]), int(mult[n]), int(shift[n]), 8)


def test_requantize_object_path_agrees(naive):
    # acc_bits 64 * mult_bits 32 overflows int64: the exact path must take over.
    acc = np.array([2 ** 63 - 1, -(2 ** 63), 12345, -12345], dtype=np.int64)
    mult = np.array([2 ** 32 - 1, 2 ** 32 - 1, 2 ** 31, 3])
    shift = np.array([95, 60, 31, 1])
    expected = [naive.requant(int(a), int(m), int(s), 16)
                for a, m, s in zip(acc, mult, shift, strict=True)]
    assert requantize(acc, mult, shift, 16).tolist() == expected
    assert expected == [1, -32768, 12345, -18517]  # ~0.99999..., -2**35, exact, -18517.5
    # Accumulators wider than int64 are accepted as Python integers.
    wide = np.array([2 ** 70 + 2 ** 59, -(2 ** 70) - 2 ** 59, 2 ** 80], dtype=object)
    assert requantize(wide, np.array([1]), np.array([60]), 16).tolist() == [1025, -1024, 32767]
    with pytest.raises(ValueError, match=r"'acc' holds float 1\.5"):
        requantize(np.array([1.5], dtype=object), np.array([1]), np.array([0]), 8)


def test_requantize_empty():
    assert requantize(np.zeros((0, 3), dtype=int), np.ones(3, int), np.ones(3, int), 8).shape \
        == (0, 3)


def test_requantize_rejects_bad_operands():
    with pytest.raises(ValueError, match="out_bits"):
        requantize(np.array([1]), np.array([1]), np.array([0]), 0)
    with pytest.raises(ValueError, match="'mult'"):
        requantize(np.array([1]), np.array([-1]), np.array([0]), 8)
    with pytest.raises(ValueError, match="'shift'"):
        requantize(np.array([1]), np.array([1]), np.array([-1]), 8)
    with pytest.raises(ValueError, match=r"'acc'.*dtype float64"):
        requantize(np.array([1.0]), np.array([1]), np.array([0]), 8)


# -- requant_params -----------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(ratio=st.floats(1e-12, 1e6), mult_bits=st.integers(2, 32), acc_bits=st.integers(8, 64))
def test_requant_params(ratio, mult_bits, acc_bits):
    max_shift = acc_bits + mult_bits - 1
    mult, shift = (int(v[0]) for v in requant_params([ratio], mult_bits, max_shift))
    assert 0 <= mult < 2 ** mult_bits and 0 <= shift <= max_shift
    approx = mult / 2.0 ** shift
    if 0 < shift < max_shift:
        # The common case: a full-width multiplier, so relative error below 2**-mult_bits.
        assert mult >= 2 ** (mult_bits - 1)
        assert abs(approx - ratio) <= ratio * 2.0 ** -(mult_bits - 1)
    elif shift == max_shift:
        # Ratio too small for a full-width multiplier: the nearest value at the largest shift.
        assert abs(approx - ratio) <= 2.0 ** -(shift + 1)
    else:
        # Ratio too large for any shift: the nearest multiplier, saturated to mult_bits.
        assert mult == min(round(ratio), 2 ** mult_bits - 1)


def test_requant_params_table():
    mult, shift = requant_params([0.5, 0.75, 1.0, 0.0, 3.0], 16, 47)
    assert mult.tolist() == [32768, 49152, 32768, 0, 49152]
    assert shift.tolist() == [16, 16, 15, 0, 14]
    # Rounding up to 2**mult_bits drops one bit of shift instead of overflowing the multiplier.
    mult, shift = requant_params([1 - 2.0 ** -20], 16, 47)
    assert (mult[0], shift[0]) == (32768, 15)
    with pytest.raises(ValueError, match="finite and >= 0"):
        requant_params([-1.0], 16, 47)


# -- requantize with leaky ReLU's second multiplier and the activation bounds (section 3.2) ---

@FAST
@given(st.data())
def test_requantize_leaky_and_bounds_match_model(naive, data):
    acc_bits = data.draw(st.integers(2, 64))
    mult_bits = data.draw(st.integers(1, 32))
    out_bits = data.draw(st.integers(2, 16))
    low, high = -(2 ** (out_bits - 1)), 2 ** (out_bits - 1) - 1
    max_shift = acc_bits + mult_bits - 1
    n, m = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 4))
    acc = [[data.draw(st.integers(-(2 ** (acc_bits - 1)), 2 ** (acc_bits - 1) - 1))
            for _ in range(n)] for _ in range(m)]
    mult = [data.draw(st.integers(0, 2 ** mult_bits - 1)) for _ in range(n)]
    mult_neg = data.draw(st.none() | st.lists(st.integers(0, 2 ** mult_bits - 1), min_size=n,
                                              max_size=n))
    shift = [data.draw(st.sampled_from([0, max_shift]) | st.integers(0, max_shift))
             for _ in range(n)]
    act_min = data.draw(st.none() | st.integers(low, high))
    act_max = data.draw(st.none() | st.integers(low if act_min is None else act_min, high))
    got = requantize(np.array(acc, dtype=np.int64), np.array(mult), np.array(shift), out_bits,
                     mult_neg=mult_neg, act_min=act_min, act_max=act_max)
    lo = low if act_min is None else act_min
    hi = high if act_max is None else act_max
    negative = mult if mult_neg is None else mult_neg
    expected = [[min(max(naive.requant(a, (mult if a >= 0 else negative)[j], shift[j],
                                       out_bits), lo), hi)
                 for j, a in enumerate(row)] for row in acc]
    assert got.dtype == np.int64
    assert got.tolist() == expected


@pytest.mark.parametrize(("acc", "mult_neg", "bounds", "expected"), [
    (-10, 3, (None, None), -7),        # -10 * 3 / 4 = -7.5: the tie goes to +infinity
    (10, 3, (None, None), 20),         # positive: mult = 8, 10 * 8 / 4 = 20
    (0, 3, (None, None), 0),
    (-10, 0, (None, None), 0),         # a zero slope: ReLU through the second multiplier
    (100, 3, (None, 6), 6),            # ReLU6-like ceiling
    (-100, 3, (-5, None), -5),         # Hardtanh-like floor
])
def test_requantize_leaky_table(acc, mult_neg, bounds, expected):
    act_min, act_max = bounds
    got = requantize(np.array([acc]), np.array([8]), np.array([2]), 8,
                     mult_neg=np.array([mult_neg]), act_min=act_min, act_max=act_max)
    assert got.tolist() == [expected]


def test_requantize_leaky_object_path():
    # Accumulators beyond int64 go through Python integers, sign-selected as well.
    wide = np.array([-(2 ** 70), 2 ** 70], dtype=object)
    got = requantize(wide, np.array([3]), np.array([70]), 16, mult_neg=np.array([1]),
                     act_max=2)
    assert got.tolist() == [-1, 2]


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"mult_neg": [-1]}, r"requantize: field 'mult_neg' holds -1; allowed: >= 0"),
    ({"mult_neg": [1.5]}, r"requantize: field 'mult_neg' has dtype float64"),
    ({"act_min": -129}, r"requantize: field 'act_min' is -129; allowed: -128\.\.127"),
    ({"act_max": 128}, r"requantize: field 'act_max' is 128; allowed: -128\.\.127"),
    ({"act_min": 5, "act_max": 4}, r"requantize: field 'act_min' is 5 but 'act_max' is 4; "
                                   r"allowed: act_min <= act_max"),
    ({"act_min": 1.0}, r"requantize: field 'act_min' is 1.0; allowed: an integer or None"),
])
def test_requantize_rejects_bad_bounds(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        requantize(np.array([1]), np.array([1]), np.array([0]), 8, **kwargs)
