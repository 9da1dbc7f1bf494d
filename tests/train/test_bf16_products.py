"""bf16 products on the devices (hwgen.train.bf16_products) against an independent NumPy
model, bit for bit, on 1, 2 and 3 in-process devices."""

import ml_dtypes
import numpy as np
import pytest
from support.bf16_tiled import bf16, tiled_matmul

from hwgen import AcceleratorConfig
from hwgen.nn.bf16 import bf16_matmul
from hwgen.train import Bf16Products, DeviceGroup

CONFIG = AcceleratorConfig(dtype="bf16", rows=3, cols=2)


def wide(rng, shape):
    """bf16 values over a wide range of exponents, so that the order of fp32 sums shows."""
    return bf16(rng.normal(size=shape) * np.exp2(rng.integers(-12, 12, size=shape)))


def products(interpreted, n, config=CONFIG):
    return Bf16Products(DeviceGroup(interpreted(config, n), config))


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("m", [1, 4, 20, 31])
def test_weight_gradient_has_one_devices_bits_on_any_number(interpreted, m):
    rng = np.random.default_rng(m)
    x, dy = wide(rng, (m, 7)), wide(rng, (m, 5))
    want = tiled_matmul(x.T, dy, 0.0, CONFIG.rows)   # the batch is the reduction
    for n in (1, 2, 3):
        got = products(interpreted, n).transposed(x, dy)
        assert got.dtype == np.float32
        assert np.array_equal(bits(got), bits(want)), f"{n} device(s), batch {m}"


def test_the_zero_rule_holds_in_the_hosts_sum_of_the_tiles(interpreted):
    # Values near 2**-126: products and sums fall below the smallest normal and become +0.0,
    # in the device's tile sums and in the host's chain of them alike (the contract's
    # reference, bf16_matmul, applies the rule; the plain float32 model does not).
    rng = np.random.default_rng(3)
    x, dy = bf16(rng.normal(size=(20, 7)) * 2.0**-63), bf16(rng.normal(size=(20, 5)) * 2.0**-62)
    want = bf16_matmul(x.T, dy, np.float32(0), CONFIG.rows)
    assert not np.array_equal(bits(tiled_matmul(x.T, dy, 0.0, CONFIG.rows)), bits(want))
    for n in (1, 2, 3):
        got = products(interpreted, n).transposed(x, dy)
        assert np.array_equal(bits(got), bits(want)), f"{n} device(s)"


def test_the_order_of_the_sums_shows_in_these_values():
    # Sums of per-device partial sums (or NumPy's own order) give other bits for these values:
    # the test above would catch a product that is not summed in batch order.
    rng = np.random.default_rng(20)
    x, dy = wide(rng, (20, 7)), wide(rng, (20, 5))
    want = tiled_matmul(x.T, dy, 0.0, CONFIG.rows)
    halves = tiled_matmul(x[:12].T, dy[:12], 0.0, 3) + tiled_matmul(x[12:].T, dy[12:], 0.0, 3)
    assert not np.array_equal(bits(halves), bits(want))
    assert not np.array_equal(bits(x.T @ dy), bits(want))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_row_products_raw_and_hidden(interpreted, n):
    rng = np.random.default_rng(n)
    a, w, bias = wide(rng, (11, 7)), wide(rng, (7, 5)), rng.normal(size=5).astype(np.float32)
    acc = tiled_matmul(a, w, bias, CONFIG.rows)
    group = products(interpreted, n)
    raw = group.rows(a, w, bias=bias)
    assert np.array_equal(bits(raw), bits(acc))
    hidden = group.rows(a.astype(ml_dtypes.bfloat16), w, bias=bias, relu=True, raw=False)
    assert np.array_equal(bits(hidden), bits(bf16(np.maximum(acc, 0))))


def test_columns_beyond_one_program_are_cut(interpreted):
    small = AcceleratorConfig(dtype="bf16", rows=3, cols=2, param_depth=2)
    rng = np.random.default_rng(5)
    a, w = wide(rng, (6, 4)), wide(rng, (4, 9))     # 9 columns: 3 programs of 4, 4 and 1
    got = products(interpreted, 2, small).rows(a, w)
    assert np.array_equal(bits(got), bits(tiled_matmul(a, w, 0.0, 3)))


@pytest.mark.parametrize(("call", "message"), [
    (lambda p: p.rows(np.zeros((2, 3), np.float32), np.zeros((4, 2), np.float32)),
     r"a has shape \(2, 3\) and b \(4, 2\)"),
    (lambda p: p.transposed(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)),
     "the same rows"),
    (lambda p: p.rows(np.full((1, 1), 1.1, np.float32), np.ones((1, 1), np.float32)),
     "not a bf16 value"),
    (lambda p: p.rows(np.zeros((1, 5000), np.float32), np.zeros((5000, 2), np.float32)),
     "reduction of 5000 .* whose programs hold"),
])
def test_bad_operands_are_refused(interpreted, call, message):
    with pytest.raises(ValueError, match=message):
        call(products(interpreted, 1))
