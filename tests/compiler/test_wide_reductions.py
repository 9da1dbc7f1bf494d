"""Reductions past ``max_k`` (issue 50, item 3): a tutorial CNN whose classifier reduces over
its Flatten of 32x7x7 = 1,568 features runs wherever the buffers hold it; what limits a
reduction is the descriptor field that counts it, and what limits its sums is the accumulator
proof from the layer's own weights, channel by channel.

The CNN is the PyTorch tutorials' (Conv-BatchNorm-ReLU-MaxPool twice, Flatten, Linear) with
16 and 32 channels, imported with ``from_torch`` and quantized on calibration data; its device
outputs are compared with the int8 reference, :meth:`hwgen.nn.QuantizedNetwork.forward`.
"""

import functools

import numpy as np
import pytest
from support import BOARD_WS, compile_refused, started_board

import hwgen
from host import Accelerator
from hwgen import AcceleratorConfig
from hwgen.boards import BOARDS, board_config, named_design
from hwgen.models.tutorial_cnn import build_tutorial_cnn
from hwgen.models.zoo import ZooModel, count_macs, count_params
from hwgen.nn import Dense, Flatten, QuantizedNetwork, from_torch, quantize
from sim.inprocess import InProcessDevice
from sim.netgen import random_image

#: The tutorial CNN's input, one MNIST-sized image.
INPUT_SHAPE = (28, 28, 1)


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed")


#: The zoo's tutorial CNN with 16 and 32 channels, made as the zoo's models are: seeded
#: weights, BatchNorm statistics of calibration data.
TUTORIAL_CNN = ZooModel(name="tutorial_cnn_1568", title="the tutorials' CNN, 16 and 32 channels",
                        input_shape=INPUT_SHAPE, params=20_586, macs=1_031_744,
                        build_fn=functools.partial(build_tutorial_cnn, channels=(16, 32)))


@pytest.fixture(scope="module")
def tutorial_cnn(torch):
    return from_torch(TUTORIAL_CNN.model(), input_shape=INPUT_SHAPE)


def _quantized(model, config):
    return quantize(model, TUTORIAL_CNN.calibration(32), in_bits=config.in_bits,
                    w_bits=config.w_bits, acc_bits=config.acc_bits, mult_bits=config.mult_bits)


def _run_in_process(config, program, x):
    with Accelerator(InProcessDevice(config), config=config) as acc:
        acc.load(program)
        return acc.infer(x)


def test_the_tutorial_cnn_is_what_its_record_says(torch):
    module = TUTORIAL_CNN.model()
    assert count_params(module) == TUTORIAL_CNN.params
    assert count_macs(torch, module, TUTORIAL_CNN.torch_input_shape) == TUTORIAL_CNN.macs


@pytest.mark.parametrize("name", ["ulx3s-85f-resnet8", "ulx3s-85f-vww"])
def test_the_tutorial_cnn_runs_on_the_presets_that_hold_it(tutorial_cnn, name):
    _, config = named_design(name)
    net = _quantized(tutorial_cnn, config)
    program = hwgen.compile(net, config, batch=2)
    classifier = program.layers[-1]
    assert classifier.k == 1568 > config.max_k
    assert program.descriptors[-1]["k_tiles"] == 1568 // config.rows
    x = random_image(np.random.default_rng(1), config, 2, INPUT_SHAPE)
    np.testing.assert_array_equal(_run_in_process(config, program, x), net.forward(x))


def test_the_tutorial_cnn_is_refused_by_the_buffer_or_field_that_is_short(tutorial_cnn):
    # The 85F's small design: its 2,048 WEIGHT words are short (a real buffer).
    _, config = named_design("ulx3s-85f-small")
    error = compile_refused(_quantized(tutorial_cnn, config), config,
                            "limit weight_depth=2048",
                            "the presets of ulx3s-85f, ulx3s-85f-resnet8, ulx3s-85f-vww")
    assert error.resource == "weight_depth"
    # The 85F's preset, the zoo's design, holds it.
    _, config = named_design("ulx3s-85f")
    net = _quantized(tutorial_cnn, config)
    x = random_image(np.random.default_rng(1), config, 1, INPUT_SHAPE)
    program = hwgen.compile(net, config, batch=1)
    np.testing.assert_array_equal(_run_in_process(config, program, x), net.forward(x))
    # A 5x5 array (the zoo's design before it): the classifier's 32 channels pad to 35 at each
    # of 49 positions, 343 tiles of 5 rows, and its k_tiles field holds 255 (8 bits for
    # max_k=1024).
    config = board_config(BOARDS["ulx3s-85f"], rows=5, cols=5, acc_bits=26, max_k=1024,
                          weight_depth=55296, act_depth=18432, param_depth=1024,
                          prog_depth=256, acc_depth=32, out_depth=512, bounds=False)
    net = _quantized(tutorial_cnn, config)
    error = compile_refused(net, config, "layer 5", "= 1715 exceeds", "343 tiles",
                            "k_tiles field (8 bits, sized by max_k=1024) holds 255 tiles",
                            "max_k >= 1715")
    assert (error.resource, error.need, error.limit) == ("max_k", 1715, 1275)
    # Sized for it, the same buffers run it, with 26-bit accumulators.
    grown = AcceleratorConfig.from_dict({**config.to_dict(), "max_k": 1715})
    program = hwgen.compile(net, grown, batch=1)
    x = random_image(np.random.default_rng(2), grown, 1, INPUT_SHAPE)
    np.testing.assert_array_equal(_run_in_process(grown, program, x), net.forward(x))


def test_a_1568_input_classifier_runs_on_the_simulated_board():
    """A Dense over a Flatten of 7x7x32 (1,568 inputs, 784 tiles of 2 rows, beyond max_k =
    1024) on the shared CNN board, through the real host driver; its raw scores go over the
    wire at the width the accumulator proof gives, which holds them."""
    config = BOARD_WS
    rng = np.random.default_rng(3)
    k, n = 7 * 7 * 32, 3
    dense = Dense(rng.integers(-128, 128, (k, n)), rng.integers(-10**6, 10**6, n),
                  np.ones(n, int), np.zeros(n, int), output="raw")
    net = QuantizedNetwork([Flatten(), dense], input_shape=(7, 7, 32))
    program = hwgen.compile(net, config, batch=2)
    assert program.layers[-1].k_tiles == k // config.rows > config.max_k // config.rows
    # The proof's range by hand: each input at the end its weight's sign picks.
    w = dense.weight
    high = 127 * np.where(w > 0, w, 0).sum(0) + 128 * np.where(w < 0, -w, 0).sum(0)
    low = -128 * np.where(w > 0, w, 0).sum(0) - 127 * np.where(w < 0, -w, 0).sum(0)
    ends = [*(high + np.maximum(dense.bias, 0)), *(low + np.minimum(dense.bias, 0))]
    assert program.output.wire_bits == _bits_of(ends) < config.acc_bits
    x = random_image(rng, config, 2, (7, 7, 32))
    x[1] = np.where(w[:, 0] > 0, 127, -128).reshape(7, 7, 32)  # channel 0 at its greatest sum
    with started_board(config) as board, Accelerator(board.url, config=config) as acc:
        acc.load(program)
        out = acc.infer(x)
    np.testing.assert_array_equal(out, net.forward(x))
    assert out[1, 0] == high[0] + dense.bias[0]


@pytest.mark.slow
def test_the_tutorial_cnn_runs_on_the_simulated_board_of_its_preset(tutorial_cnn):
    """The whole tutorial CNN on the ResNet-8 preset's design simulated in Verilator (a build
    of its own, hence slow; the default run has the classifier on the shared board above)."""
    _, config = named_design("ulx3s-85f-resnet8")
    net = _quantized(tutorial_cnn, config)
    program = hwgen.compile(net, config, batch=2)
    x = random_image(np.random.default_rng(4), config, 2, INPUT_SHAPE)
    with started_board(config) as board, Accelerator(board.url, config=config) as acc:
        acc.load(program)
        np.testing.assert_array_equal(acc.infer(x), net.forward(x))


def _bits_of(values):
    """The narrowest two's complement width holding every value (an independent count)."""
    bits = 1
    while not all(-(1 << (bits - 1)) <= int(v) < (1 << (bits - 1)) for v in values):
        bits += 1
    return bits
