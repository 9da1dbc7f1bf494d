"""Activation bounds and leaky ReLU through the compiler (section 3.2): each layer's descriptor
holds its resolved bounds and ``leaky`` flag, PARAM its ``mult_neg``, and the program
interpreter's result equals ``hwgen.nn``'s, at the edges (a single value, ReLU6-like clamps,
slopes of 0 and of the largest multiplier)."""

import numpy as np
import pytest
from support import COMPILER_CONFIGS as CONFIGS
from support import check_against_reference

from hwgen.compiler import CompileError
from hwgen.compiler.proofs import check_channel_params
from hwgen.memmap import Region
from hwgen.nn import Conv2D, Dense, Flatten, QuantizedNetwork
from sim.interpreter import ProgramInterpreter

CONFIG = CONFIGS["2x3"]   # in_bits=4: bounds in -8..7, mult_bits=8


def dense(rng, k, n, **kw):
    return Dense(rng.integers(-32, 32, (k, n)), rng.integers(-200, 200, n),
                 rng.integers(1, 256, n), rng.integers(4, 9, n), **kw)


@pytest.mark.parametrize("kw", [
    {"activation": "identity", "act_min": -3, "act_max": 5},
    {"activation": "relu", "act_max": 6},                      # ReLU6-like
    {"activation": "identity", "act_min": 2, "act_max": 2},    # a single value
    {"activation": "leaky_relu", "mult_neg": [0, 255, 1, 26, 128]},
    {"activation": "leaky_relu", "mult_neg": [7, 7, 7, 7, 7], "act_min": -4, "act_max": 3},
])
def test_bounds_and_leaky_layers_run_as_the_reference(kw):
    rng = np.random.default_rng(len(str(kw)))
    net = QuantizedNetwork([dense(rng, 9, 5, **kw), dense(rng, 5, 4, output="raw")],
                           in_bits=4, w_bits=6, acc_bits=24, mult_bits=8)
    program = check_against_reference(net, CONFIG, 12)
    first, last = program.descriptors
    assert (first["leaky"], first["act_min"], first["act_max"]) == (
        int(kw["activation"] == "leaky_relu"), *net.layers[0].bounds(4))
    # A raw layer is neither leaky nor clamped.
    assert (last["leaky"], last["act_min"], last["act_max"]) == (0, -8, 7)
    device = ProgramInterpreter(CONFIG)
    base, words = program.images[Region.PARAM]
    for i, word in enumerate(words):
        device.write(Region.PARAM, base + i, word)
    mult_neg = [device.params(base + n // CONFIG.cols, n % CONFIG.cols)[3] for n in range(5)]
    assert mult_neg == list(kw.get("mult_neg", [0] * 5))


def test_a_leaky_conv_with_bounds_before_a_dense():
    rng = np.random.default_rng(4)
    conv = Conv2D(rng.integers(-32, 32, (3, 3, 2, 4)), rng.integers(-99, 99, 4),
                  rng.integers(1, 256, 4), np.full(4, 7), padding=1, activation="leaky_relu",
                  mult_neg=rng.integers(0, 256, 4), act_min=-5, act_max=6)
    net = QuantizedNetwork([conv, Flatten(), dense(rng, 4 * 4 * 4, 3, activation="relu",
                                                   act_max=4)],
                           in_bits=4, w_bits=6, acc_bits=24, mult_bits=8, input_shape=(4, 4, 2))
    program = check_against_reference(net, CONFIG, 6)
    assert [(d["leaky"], d["act_min"], d["act_max"]) for d in program.descriptors] == [
        (1, -5, 6), (0, 0, 4)]


def test_mult_neg_wider_than_the_design_is_refused_naming_the_channel():
    # (The network's own mult_bits check comes first in compile; the proof guards the rest.)
    layer = dense(np.random.default_rng(1), 4, 3, activation="leaky_relu",
                  mult_neg=[1, 300, 2])
    with pytest.raises(CompileError, match=r"layer 2: mult_neg\[1\]=300 does not fit the "
                                           r"accelerator; allowed: 0..255"):
        check_channel_params(2, layer, CONFIG)
