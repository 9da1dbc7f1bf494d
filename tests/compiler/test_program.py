"""The Program artifact (hwgen.compiler.program): its attributes as callers read them."""

import numpy as np
from support import COMPILER_CONFIGS as CONFIGS
from support import random_dense_network as random_network

import hwgen
from hwgen.memmap import Region


def test_program_attributes():
    config = CONFIGS["3x2"]
    network = random_network(np.random.default_rng(2), config, [7, 5, 3], style="uniform",
                             last_raw=False)
    program = hwgen.compile(network, config)
    assert program.config == config and program.config_hash == config.hash
    assert program.macs_per_row == 7 * 5 + 5 * 3
    assert program.padded_macs_per_row == 3 * 3 * 3 * 2 + 2 * 3 * 2 * 2
    assert [d["last"] for d in program.descriptors] == [0, 1]
    assert program.input.region == Region.ACT and program.input.base == 0
    assert (program.input.stride, program.output.stride) == (3, 1)  # B = 3
    assert program.output.region == Region.ACT and program.output.kind == "requant"
    # The second layer's destination is the first layer's source area.
    assert program.output.base == program.descriptors[1]["dst_base"] == 0
    text = program.summary()
    assert "k_tiles" in text and program.config_hash in text
    assert len(text.splitlines()[2].split()) == 9  # layer, K, N, tiles x2, act, out, words x2

