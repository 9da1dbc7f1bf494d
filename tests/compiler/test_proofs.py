"""The proofs before layout (hwgen.compiler.proofs): widths, reductions, worst-case
accumulators and channel parameters, each refused with the layer, the need and the limit."""

import itertools
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import check_against_reference
from support import compile_refused as refused
from support import small_dense_network as small_network

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, compile_network
from hwgen.compiler.proofs import (
    check_accumulator,
    check_channel_params,
    check_padded_reduction,
    check_reduction,
    partial_sum_ranges,
)
from hwgen.nn import Dense, QuantizedNetwork


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("in_bits", 7, "in_bits=8"),
    ("w_bits", 6, "w_bits=8"),
    ("acc_bits", 33, "acc_bits <= 32"),
    ("mult_bits", 17, "mult_bits <= 16"),
])
def test_refuses_width_mismatch(field, value, fragment):
    config = AcceleratorConfig()
    widths = {"in_bits": 8, "w_bits": 8, "acc_bits": 32, "mult_bits": 16, field: value}
    layer = Dense(np.ones((2, 2), int), [0, 0], [1, 1], [0, 0])
    error = refused(QuantizedNetwork([layer], **widths), config, fragment, f"{field}={value}")
    assert isinstance(error, ValueError) and error.resource == field


def _all_ones(value):
    """The largest number a field of ``value``'s width holds (an independent count)."""
    width = 1
    while value >= 1 << width:
        width += 1
    return (1 << width) - 1


def test_refuses_a_reduction_past_the_k_tiles_field():
    # max_k = 64 sizes k_tiles for 8 tiles of 8 rows: 4 bits hold 15 tiles, 120 inputs.
    config = AcceleratorConfig(max_k=64, acc_bits=24)
    check_against_reference(small_network(config, (3, 120, 2), acc_bits=24), config, 2)
    network = small_network(config, (3, 121, 2), acc_bits=24)
    error = refused(network, config, "layer 1", "K=121", "16 reduction tiles of rows=8",
                    "k_tiles field (4 bits, sized by max_k=64) holds 15 tiles", "K <= 120",
                    "max_k >= 121")
    assert (error.layer, error.resource, error.need, error.limit) == (1, "max_k", 121, 120)


def test_a_row_longer_than_act_is_refused_by_act_depth():
    # src_stride holds 1,023 words for max_k = 1024 on 2 lanes, but ACT has 16.
    config = AcceleratorConfig(rows=2, cols=2, act_depth=16)
    check_reduction(0, 32, config)
    with pytest.raises(CompileError, match=r"a row of K=33 inputs takes 17 ACT words of "
                       r"act_lanes=2; limit act_depth=16") as info:
        check_reduction(0, 33, config)
    assert (info.value.resource, info.value.need, info.value.limit) == ("act_depth", 17, 16)


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (2, 2), (3, 3), (4, 4), (2, 5)])
def test_a_reduction_over_rows_is_refused_exactly_past_its_fields(rows, cols):
    # Brute force: a row of K inputs takes ceil(K / rows) tiles and ceil(K / lanes) ACT words;
    # each field holds all ones of the width ceil(max_k / rows) (or / lanes) needs.
    lanes = max(rows, cols)
    for max_k, k in itertools.product(range(1, 21), range(1, 80)):
        config = AcceleratorConfig(rows=rows, cols=cols, max_k=max_k)
        fits = (math.ceil(k / rows) <= _all_ones(math.ceil(max_k / rows))
                and math.ceil(k / lanes) <= _all_ones(math.ceil(max_k / lanes)))
        if fits:
            check_reduction(1, k, config)
            continue
        with pytest.raises(CompileError) as info:
            check_reduction(1, k, config)
        error = info.value
        assert (error.layer, error.resource, error.need) == (1, "max_k", k)
        assert error.limit == max(f for f in range(k) if f <= rows * _all_ones(
            math.ceil(max_k / rows)) and f <= lanes * _all_ones(math.ceil(max_k / lanes)))


@pytest.mark.parametrize("rows", [1, 2, 3, 4])
def test_padded_reduction_is_refused_exactly_past_the_k_tiles_field(rows):
    # Brute force: a kernel's tiles (its positions times the channel groups of rows) against
    # the tiles the k_tiles field holds; the channel count it suggests fits.
    def fits(kh, kw, c, max_k):
        return kh * kw * math.ceil(c / rows) <= _all_ones(math.ceil(max_k / rows))

    for max_k, kh, kw, c in itertools.product(range(1, 21), (1, 2, 3, 5), (1, 3), range(1, 9)):
        config = AcceleratorConfig(rows=rows, max_k=max_k)
        if fits(kh, kw, c, max_k):
            check_padded_reduction(2, (kh, kw), c, config)
            continue
        with pytest.raises(CompileError) as info:
            check_padded_reduction(2, (kh, kw), c, config)
        error = info.value
        assert (error.layer, error.resource) == (2, "max_k")
        assert (error.need, error.limit) == (kh * kw * math.ceil(c / rows) * rows,
                                             _all_ones(math.ceil(max_k / rows)) * rows)
        # The most channels that fit the tiles, if any.
        best = max((f for f in range(1, c) if fits(kh, kw, f, max_k)), default=None)
        suggested = re.search(r"at most (\d+) channels", str(error))
        assert (int(suggested[1]) if suggested else None) == best, str(error)


def _brute_force_extremes(weight, bias, x_range):
    """The least and greatest partial sum of each channel's accumulator over every input
    vector (each input in ``x_range`` or 0, a zero of padding) and every order of adding
    its products and bias, by enumeration."""
    k, n = weight.shape
    values = sorted(set(range(x_range[0], x_range[1] + 1)) | {0})
    low, high = [], []
    for col in range(n):
        sums = {0}
        for x in itertools.product(values, repeat=k):
            terms = [int(weight[i, col]) * x[i] for i in range(k)] + [int(bias[col])]
            for order in itertools.permutations(terms):
                sums.update(itertools.accumulate(order))
        low.append(min(sums))
        high.append(max(sums))
    return low, high


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 3), n=st.integers(1, 3), data=st.data())
def test_partial_sum_ranges_are_the_brute_force_extremes(k, n, data):
    weight = np.array(data.draw(st.lists(st.integers(-8, 8), min_size=k * n,
                                         max_size=k * n))).reshape(k, n)
    bias = np.array(data.draw(st.lists(st.integers(-50, 50), min_size=n, max_size=n)))
    lo = data.draw(st.integers(-4, 3))
    x_range = (lo, data.draw(st.integers(lo, 4)))
    assert partial_sum_ranges(weight, bias, x_range) == \
        _brute_force_extremes(weight, bias, x_range)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 3), n=st.integers(1, 4), acc_bits=st.integers(11, 13), data=st.data())
def test_accumulator_proof_refuses_exactly_the_channels_that_can_leave(k, n, acc_bits, data):
    # in_bits = 3: inputs in -4..3 (a product needs 11 bits, the design's least acc_bits; up
    # to 3 x 4 x 128 + 100 leaves 11 to 13). A channel is refused iff some partial sum of it,
    # by brute force, leaves the signed acc_bits range; the first such channel is named.
    config = AcceleratorConfig(rows=2, cols=2, in_bits=3, w_bits=8, acc_bits=acc_bits,
                               mult_bits=8)
    weight = np.array(data.draw(st.lists(st.integers(-128, 127), min_size=k * n,
                                         max_size=k * n))).reshape(k, n)
    bias = np.array(data.draw(st.lists(st.integers(-100, 100), min_size=n, max_size=n)))
    layer = Dense(weight, bias, np.ones(n, int), np.zeros(n, int))
    low, high = _brute_force_extremes(weight, bias, (-4, 3))
    bad = [c for c in range(n) if low[c] < -(1 << (acc_bits - 1)) or
           high[c] > (1 << (acc_bits - 1)) - 1]
    if not bad:
        check_accumulator(3, layer, k, config)
        return
    with pytest.raises(CompileError) as info:
        check_accumulator(3, layer, k, config)
    error = info.value
    assert f"output channel {bad[0]}" in str(error)
    assert (error.layer, error.resource) == (3, "acc_bits")
    worst = high[bad[0]] if high[bad[0]] > (1 << (acc_bits - 1)) - 1 else low[bad[0]]
    assert error.need == abs(worst) and f"partial sum of {worst} " in str(error)
    # The width it suggests holds every channel's sums, and one bit less does not.
    need = int(re.search(r"acc_bits >= (\d+)", str(error))[1])
    assert all(-(1 << (need - 1)) <= v < 1 << (need - 1) for v in low + high)
    assert not all(-(1 << (need - 2)) <= v < 1 << (need - 2) for v in low + high)


def test_the_proof_is_within_the_simple_bound():
    # The contract's bound: sum_k |W[k, n]| * 2**(in_bits-1) + |b[n]| holds every partial sum;
    # the proof's range is within it, so nothing the bound accepts is refused.
    rng = np.random.default_rng(5)
    weight, bias = rng.integers(-128, 128, (300, 6)), rng.integers(-10**6, 10**6, 6)
    low, high = partial_sum_ranges(weight, bias, (-128, 127))
    simple = np.abs(weight).sum(axis=0) * 128 + np.abs(bias)
    assert all(-s <= lo <= 0 <= hi <= s for lo, hi, s in zip(low, high, simple, strict=True))


def test_refuses_unprovable_accumulator():
    # acc_bits=20 covers 16 worst-case products (2**18) but not with a bias of 300000 on top.
    config = AcceleratorConfig(max_k=16, acc_bits=20)
    layer = Dense(np.full((16, 2), -128), [1, 300000], [1, 1], [0, 0])
    network = QuantizedNetwork([layer], acc_bits=20)
    error = refused(network, config, "layer 0", "no accumulator can leave acc_bits=20",
                    "output channel 1 has a partial sum of 562144", "K=16 inputs in [-128, "
                    "127], sum_k |W[k, 1]| = 2048, bias 300000", "-524288..524287",
                    "acc_bits >= 21")
    assert error.resource == "acc_bits"
    layer.bias[1] = 300000 - 562144 + 524287  # exactly at the limit: accepted
    compile_network(network, config)


def test_refuses_shift_outside_config():
    # QuantizedNetwork's own checks (validate, and shapes, which the compiler reads first) stop
    # this before the compiler does; the compiler's proof checks again anyway.
    config = AcceleratorConfig()
    network = small_network(config)
    network.layers[0].shift[1] = 48
    with pytest.raises(ValueError, match="shift"):
        compile_network(network, config)
    with pytest.raises(CompileError) as info:
        check_channel_params(0, network.layers[0], config)
    for fragment in ("layer 0", "shift[1]=48", "0..47"):
        assert fragment in str(info.value)

