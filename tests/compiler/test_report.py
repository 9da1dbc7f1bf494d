"""The summary of a program (hwgen.compiler.report)."""

import numpy as np
from support import COMPILER_CONFIGS as CONFIGS
from support import random_dense_network as random_network

from hwgen.compiler import compile_network
from hwgen.memmap import Region, regions


def test_summary_lists_each_layer_and_the_memory_use():
    config = CONFIGS["2x3"]
    network = random_network(np.random.default_rng(6), config, [7, 4, 5], style="uniform",
                             last_raw=True)
    program = compile_network(network, config, batch=3)
    lines = program.summary().splitlines()
    assert lines[0] == f"program for {config.name} (config {config.hash}), batch 3"
    # K, N, k_tiles, n_tiles, activation, output, weight and parameter words per layer.
    first = network.layers[0]
    assert lines[2].split() == ["0", "7", "4", "4", "2", first.activation, "requant",
                                str(2 * 4 * 2), "2"]
    assert lines[3].split() == ["1", "4", "5", "2", "2", "-", "raw", str(2 * 2 * 2), "2"]
    depth = regions(config)
    assert lines[4] == (f"words used: PROGRAM 2/{depth[Region.PROGRAM].depth}, WEIGHT 24/"
                        f"{depth[Region.WEIGHT].depth}, PARAM 4/{depth[Region.PARAM].depth}")
    useful, issued = 7 * 4 + 4 * 5, 4 * 2 * 2 * 3 + 2 * 2 * 2 * 3
    assert lines[6] == (f"MACs per row: {useful} useful of {issued} issued "
                        f"({100 * useful / issued:.1f} %)")
