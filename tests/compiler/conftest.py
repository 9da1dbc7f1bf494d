"""Fixtures of the compiler's tests."""

import pytest
from support import COMPILER_CONFIGS as CONFIGS
from support import small_dense_network as small_network

from hwgen.compiler import compile_network


@pytest.fixture
def program():
    config = CONFIGS["2x3"]
    network = small_network(config, (5, 4), last_raw=True, acc_bits=24, seed=4)
    return compile_network(network, config, batch=4)

