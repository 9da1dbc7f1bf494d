"""compile_network (hwgen.compiler.compile) end to end: random networks through the
interpreter of the documented memory images (tests/support.py) against the NumPy reference, and
the network-wide refusals."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import COMPILER_CONFIGS as CONFIGS
from support import check_against_reference
from support import compile_refused as refused
from support import random_dense_network as random_network
from support import small_dense_network as small_network

from hwgen import AcceleratorConfig

MAX_WIDTH = {"1x1": 60, "2x3": 120}


FAST = settings(max_examples=10, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", list(CONFIGS))
@FAST
@given(data=st.data())
def test_matches_reference(name, data):
    config = CONFIGS[name]
    count = data.draw(st.integers(1, 4), label="layers")
    max_width = MAX_WIDTH.get(name, 200)
    sizes = data.draw(st.lists(st.integers(1, max_width) | st.sampled_from([1, max_width]),
                               min_size=count + 1, max_size=count + 1), label="sizes")
    style = data.draw(st.sampled_from(["uniform", "extreme", "sparse"]), label="style")
    last_raw = data.draw(st.booleans(), label="last_raw")
    batch = data.draw(st.none() | st.integers(1, 64), label="batch")
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    network = random_network(rng, config, sizes, style=style, last_raw=last_raw)
    capacity = batch or min(64, config.acc_depth)
    m = data.draw(st.integers(1, capacity) | st.just(capacity), label="m")
    check_against_reference(network, config, m, batch=batch, seed=seed)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_narrower_network_widths(name):
    # A network may use fewer accumulator and multiplier bits than the design has.
    config = CONFIGS[name]
    rng = np.random.default_rng(1)
    acc_bits = max(config.min_acc_bits(config.in_bits, config.w_bits, 40), config.acc_bits - 3)
    network = random_network(rng, config, [40, 9, 5], style="extreme", last_raw=True,
                             acc_bits=acc_bits, mult_bits=config.mult_bits - 1)
    check_against_reference(network, config, 7, seed=1)


def test_refuses_non_network():
    config = AcceleratorConfig()
    refused([], config, "QuantizedNetwork", error=TypeError)
    refused(small_network(config), config.to_dict(), "AcceleratorConfig", error=TypeError)
    refused(small_network(config), config, "batch", error=TypeError, batch=2.0)
    refused(small_network(config), config, "batch", error=TypeError, batch=True)


def test_refuses_weight_overflow():
    config = AcceleratorConfig(rows=2, cols=2, weight_depth=16)
    # Each layer: 2 x 2 tiles of 2 rows = 8 words; the third one overflows.
    network = small_network(config, (4, 4, 4, 4))
    error = refused(network, config, "layer 2", "need 24 words", "weight_depth=16")
    assert (error.layer, error.need, error.limit) == (2, 24, 16)


def test_refuses_param_overflow():
    config = AcceleratorConfig(rows=2, cols=2, param_depth=2)
    refused(small_network(config, (2, 2, 3)), config, "layer 1", "need 3 words",
            "param_depth=2")


def test_refuses_too_many_layers():
    config = AcceleratorConfig(prog_depth=2)
    refused(small_network(config, (3, 3, 3, 3)), config, "3 layers", "prog_depth=2", "layer 2")

