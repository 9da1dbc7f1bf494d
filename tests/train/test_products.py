"""Exact integer products on the devices (hwgen.train.products), against NumPy's, on
interpreted devices: one or several, blocks of every size, shards of every size."""

import numpy as np
import pytest
from support import COMPILER_CONFIGS

from hwgen import AcceleratorConfig
from hwgen.train import DeviceGroup, Products
from hwgen.train.products import block_sizes

CONFIG = COMPILER_CONFIGS["3x2"]
# Memories so small that products are cut into blocks on both axes.
TINY = AcceleratorConfig(rows=2, cols=2, max_k=8, act_depth=64, weight_depth=16, param_depth=3,
                         out_depth=16, acc_depth=8, prog_depth=2)


def ints(rng, shape, bits=8):
    top = 2 ** (bits - 1) - 1
    return rng.integers(-top - 1, top + 1, size=shape)


@pytest.mark.parametrize("config", [CONFIG, TINY], ids=["3x2", "tiny"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_transposed_product_is_exact(interpreted, config, n):
    rng = np.random.default_rng(n)
    a, b = ints(rng, (11, 7)), ints(rng, (11, 9))
    products = Products(DeviceGroup(interpreted(config, n), config))
    np.testing.assert_array_equal(products.transposed(a, b), a.T @ b)
    assert products.group.usage.useful_macs == 11 * 7 * 9


@pytest.mark.parametrize("config", [CONFIG, TINY], ids=["3x2", "tiny"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_row_product_is_exact(interpreted, config, n):
    rng = np.random.default_rng(10 + n)
    a, b = ints(rng, (10, 13)), ints(rng, (13, 7))
    products = Products(DeviceGroup(interpreted(config, n), config))
    np.testing.assert_array_equal(products.rows(a, b), a @ b)
    assert products.group.usage.useful_macs == 10 * 13 * 7


def test_fewer_rows_than_devices(interpreted):
    rng = np.random.default_rng(3)
    products = Products(DeviceGroup(interpreted(CONFIG, 3), CONFIG))
    a, b = ints(rng, (2, 4)), ints(rng, (2, 5))
    np.testing.assert_array_equal(products.transposed(a, b), a.T @ b)
    np.testing.assert_array_equal(products.rows(b.T, a), b.T @ a)
    np.testing.assert_array_equal(products.rows(np.zeros((0, 2), dtype=int), a),
                                  np.zeros((0, 4)))


def test_block_sizes_fit_the_memories():
    # TINY: 3 output tiles of 2 (param_depth), then weight_depth 16 = 8 rows x ... tiles.
    assert block_sizes(100, 100, TINY) == (4, 6)
    assert block_sizes(3, 1, TINY) == (3, 1)
    # The default design's 8-bit k_tiles field holds 255 tiles of 8 rows: 2,040 inputs.
    assert block_sizes(3000, 5, AcceleratorConfig()) == (2040, 5)
    # 20-bit accumulators hold 31 worst-case products of 8 by 8 bits (31 * 2**14 < 2**19):
    # 24 in whole tiles of 8 rows.
    narrow = AcceleratorConfig(acc_bits=20)
    assert block_sizes(3000, 5, narrow) == (24, 5)
    assert 31 * 2 ** 14 < 2 ** 19 <= 32 * 2 ** 14


@pytest.mark.parametrize(("a", "b", "message"), [
    (np.zeros((3, 2), dtype=int), np.zeros((4, 2), dtype=int), "3 rows and b 4"),
    (np.zeros((3, 2)), np.zeros((3, 2), dtype=int), "allowed: 2-D integer matrices"),
    (np.zeros(3, dtype=int), np.zeros((3, 2), dtype=int), "allowed: 2-D integer matrices"),
])
def test_bad_transposed_operands(interpreted, a, b, message):
    with pytest.raises(ValueError, match=message):
        Products(DeviceGroup(interpreted(CONFIG, 1), CONFIG)).transposed(a, b)


def test_bad_row_operands(interpreted):
    with pytest.raises(ValueError, match="a has 2 columns and b 3 rows"):
        Products(DeviceGroup(interpreted(CONFIG, 1), CONFIG)).rows(
            np.zeros((4, 2), dtype=int), np.zeros((3, 2), dtype=int))
