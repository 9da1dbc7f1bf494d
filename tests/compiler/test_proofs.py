"""The proofs before layout (hwgen.compiler.proofs): widths, reductions, worst-case
accumulators and channel parameters, each refused with the layer, the need and the limit."""

import itertools
import math
import re

import numpy as np
import pytest
from support import compile_refused as refused
from support import small_dense_network as small_network

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, compile_network
from hwgen.compiler.proofs import check_channel_params, check_padded_reduction
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


def test_refuses_wide_reduction():
    config = AcceleratorConfig(max_k=64, acc_bits=24)
    network = small_network(config, (3, 65, 2), acc_bits=24)
    error = refused(network, config, "layer 1", "K=65", "max_k=64")
    assert (error.layer, error.need, error.limit) == (1, 65, 64)


@pytest.mark.parametrize("rows", [1, 2, 3, 4])
def test_padded_reduction_is_refused_exactly_past_the_tiles_of_max_k(rows):
    # Brute force: a kernel's tiles (its positions times the channel groups of rows) against
    # the ceil(max_k / rows) tiles a descriptor holds; the channel count it suggests fits.
    def fits(kh, kw, c, max_k):
        return kh * kw * math.ceil(c / rows) <= math.ceil(max_k / rows)

    for max_k, kh, kw, c in itertools.product(range(1, 21), (1, 2, 3), (1, 3), range(1, 9)):
        config = AcceleratorConfig(rows=rows, max_k=max_k)
        if fits(kh, kw, c, max_k):
            check_padded_reduction(2, (kh, kw), c, config)
            continue
        with pytest.raises(CompileError) as info:
            check_padded_reduction(2, (kh, kw), c, config)
        error = info.value
        assert (error.layer, error.resource) == (2, "max_k")
        assert (error.need, error.limit) == (kh * kw * math.ceil(c / rows) * rows,
                                             math.ceil(max_k / rows) * rows)
        # The most channels that fit both the tiles and K <= max_k, if any.
        best = max((f for f in range(1, c) if fits(kh, kw, f, max_k) and kh * kw * f <= max_k),
                   default=None)
        suggested = re.search(r"at most (\d+) channels", str(error))
        assert (int(suggested[1]) if suggested else None) == best, str(error)


def test_refuses_unprovable_accumulator():
    # acc_bits=20 covers 16 worst-case products (2**18) but not with a bias of 300000 on top.
    config = AcceleratorConfig(max_k=16, acc_bits=20)
    layer = Dense(np.full((16, 2), -128), [1, 300000], [1, 1], [0, 0])
    network = QuantizedNetwork([layer], acc_bits=20)
    error = refused(network, config, "layer 0", "no accumulator can leave acc_bits=20",
                    "562144", "524287")
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

