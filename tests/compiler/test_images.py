"""WEIGHT and PARAM images (hwgen.compiler.images): a small layer's words, lane by lane."""

import numpy as np
from support import COMPILER_CONFIGS as CONFIGS

from hwgen.compiler import compile_network
from hwgen.memmap import Region
from hwgen.nn import Dense, QuantizedNetwork
from sim.interpreter import ProgramInterpreter as Device
from sim.interpreter import signed


def test_tiny_golden_layout():
    # 3 x 5 weights on a 2 x 3 array: k_tiles 2, n_tiles 2, rows = 2 words per tile.
    config = CONFIGS["2x3"]
    weight = np.arange(15).reshape(3, 5) - 7
    net = QuantizedNetwork([Dense(weight, [1, -2, 3, -4, 5], [1, 2, 3, 4, 5], [0, 1, 2, 3, 4])],
                           in_bits=4, w_bits=6, acc_bits=24, mult_bits=8)
    program = compile_network(net, config, batch=2)
    base, words = program.images[Region.WEIGHT]
    assert base == 0 and len(words) == 2 * 2 * 2

    def lanes(word):
        return [signed(word >> (6 * j), 6) for j in range(3)]

    assert lanes(words[0]) == list(weight[0, 0:3])         # (nt 0, kt 0) row 0
    assert lanes(words[3]) == [0, 0, 0]                    # (nt 0, kt 1) row 1: k = 3
    assert lanes(words[5]) == [*weight[1, 3:5], 0]         # (nt 1, kt 0) row 1
    assert lanes(words[6]) == [*weight[2, 3:5], 0]         # (nt 1, kt 1) row 0
    d = program.descriptors[0]
    assert (d["k_tiles"], d["n_tiles"], d["n"], d["raw"], d["last"]) == (2, 2, 5, 0, 1)
    # ReLU is the lower bound 0 (in_bits=4: the saturation range is -8..7); not leaky.
    assert (d["leaky"], d["act_min"], d["act_max"]) == (0, 0, 7)
    # B = 3 lanes: inputs (3) take 1 word per row, outputs (5) take 2.
    assert (d["src_base"], d["src_stride"], d["dst_base"], d["dst_stride"]) == (0, 1, 2, 2)
    device = Device(config)
    _, params = program.images[Region.PARAM]
    device.write(Region.PARAM, 1, params[1])
    assert device.params(1, 0) == (-4, 4, 3, 0)   # mult_neg 0: not a leaky layer
    assert device.params(1, 2) == (0, 0, 0, 0)  # beyond N

