"""The activation areas and the batch (hwgen.compiler.activations): the largest batch that
fits, and the refusals of activations, raw outputs and batches that do not."""

import numpy as np
import pytest
from support import compile_refused as refused
from support import random_dense_network as random_network
from support import small_dense_network as small_network

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, compile_network


def test_largest_batch_is_chosen():
    config = AcceleratorConfig(rows=2, cols=2, act_depth=100, out_depth=60, acc_depth=256)
    network = random_network(np.random.default_rng(3), config, [5, 7, 3], style="uniform",
                             last_raw=True)
    program = compile_network(network, config)
    # Areas: input 3 words per row; layer 0 output 4 words per row; raw output 2 words per row.
    assert program.batch == min(100 // 7, 60 // 2) == 14
    compile_network(network, config, batch=14)
    with pytest.raises(CompileError, match="act_depth=100"):
        compile_network(network, config, batch=15)
    assert compile_network(network, AcceleratorConfig(acc_depth=5)).batch == 5


def test_refuses_activation_overflow():
    config = AcceleratorConfig(rows=1, cols=1, act_depth=64, max_k=64, acc_bits=24)
    network = small_network(config, (10, 20, 3), acc_bits=24)
    # 10 + 20 words per row, the last layer writes its 3 outputs back into area 0 (10 wide).
    assert compile_network(network, config).batch == 2
    refused(network, config, "batch=3", "need 90 ACT words", "act_depth=64",
            "input of layer 1", batch=3)
    wide = small_network(config, (40, 30, 3), acc_bits=24)
    refused(wide, config, "not even batch=1 fits", "need 70", "act_depth=64")


def test_refuses_output_overflow():
    config = AcceleratorConfig(rows=2, cols=2, out_depth=16)
    network = small_network(config, (3, 9), last_raw=True)
    assert compile_network(network, config).batch == 3  # 5 words per row
    refused(network, config, "layer 0", "need 20 OUTPUT words", "out_depth=16", batch=4)
    refused(small_network(config, (3, 40), last_raw=True), config, "not even batch=1",
            "out_depth=16")


def test_refuses_batch_outside_capacity():
    config = AcceleratorConfig(acc_depth=8)
    network = small_network(config)
    refused(network, config, "batch=9", "1..8", "acc_depth", batch=9)
    refused(network, config, "batch=0", batch=0)
    refused(network, config, "batch=-1", batch=-1)

