"""The proofs before layout (hwgen.compiler.proofs): widths, reductions, worst-case
accumulators and channel parameters, each refused with the layer, the need and the limit."""

import numpy as np
import pytest
from support import compile_refused as refused
from support import small_dense_network as small_network

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, compile_network
from hwgen.compiler.proofs import check_channel_params
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

