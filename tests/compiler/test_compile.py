"""compile_network (hwgen.compiler.compile) end to end: random dense and convolutional networks
through the interpreter of the documented memory images (sim/interpreter.py) against the NumPy
reference, and the network-wide refusals."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import COMPILER_CONFIGS as CONFIGS
from support import check_against_reference
from support import compile_refused as refused
from support import documented_descriptor_fields as descriptor_fields
from support import documented_geometry_fields as geometry_fields
from support import random_dense_network as random_network
from support import small_dense_network as small_network

from hwgen import AcceleratorConfig
from hwgen.compiler import compile_network
from hwgen.memmap import PassKind, Region
from hwgen.nn import Conv2D, Dense, Flatten, MaxPool2D, QuantizedNetwork
from sim.netgen import pooled_cnn, random_cnn, random_graph, taps_cnn

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



# -- convolutional networks ---------------------------------------------------------------------

#: The compiler's configurations with room for the geometry words of a few spatial layers, and
#: few accumulator rows, so that a layer's pixels run in several chunks (some ending in an
#: image).
CNN_CONFIGS = {name: dataclasses.replace(config, prog_depth=64, acc_depth=24)
               for name, config in CONFIGS.items()}


@pytest.mark.parametrize("name", list(CNN_CONFIGS))
@FAST
@given(data=st.data())
def test_cnn_matches_reference(name, data):
    # Convolutions with padding and strides, pooling, Flatten and Dense, raw or requantized
    # ends, in chunks of acc_depth output pixels when the batch's pixels are more.
    config = CNN_CONFIGS[name]
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="seed")
    network = random_cnn(np.random.default_rng(seed), config, max_channels=12)
    m = data.draw(st.integers(1, 6), label="m")
    check_against_reference(network, config, m, seed=seed)


def test_cnn_that_ends_in_pooling_then_flatten():
    # The output is the pooling's words, read as the flat rows the Flatten makes.
    config = CNN_CONFIGS["3x2"]
    rng = np.random.default_rng(7)
    conv = Conv2D(rng.integers(-20, 21, (3, 3, 4, 5)), rng.integers(-99, 99, 5),
                  np.full(5, 300), np.full(5, 12), stride=1, padding=1)
    network = QuantizedNetwork([conv, MaxPool2D(2), Flatten()], input_shape=(6, 5, 4))
    program = check_against_reference(network, config, 5, seed=3, fuse_pool=False)
    assert program.output.sample_shape == (3 * 2 * 5,)
    assert [layer.kind for layer in program.layers] == [PassKind.MATRIX, PassKind.MAXPOOL]
    # The pool fused into the convolution's pass: its output read alike.
    program = check_against_reference(network, config, 5, seed=3)
    assert program.output.sample_shape == (3 * 2 * 5,)
    assert [layer.kind for layer in program.layers] == [PassKind.MATRIX]


@pytest.mark.parametrize(("layer", "field", "shape"), [
    (lambda: _conv(1, 1, 1, stride=16), "stride=16", (17, 17, 1)),
    (lambda: _conv(1, 1, 1, padding=16), "pad=16", (1, 1, 1)),
    (lambda: MaxPool2D(1, 16), "stride=16", (17, 17, 1)),
])
def test_refuses_geometry_beyond_the_walk(layer, field, shape):
    config = AcceleratorConfig(rows=2, cols=2, act_depth=1 << 12)
    network = QuantizedNetwork([layer()], input_shape=shape)
    error = refused(network, config, "layer 0", field, field.split("=")[0] + " <= 15")
    assert (error.need, error.limit) == (16, 15)
    # One less is walked.
    smaller = QuantizedNetwork([layer()], input_shape=shape)
    kind = smaller.layers[0]
    if field.startswith("pad"):
        kind.padding = 15
    else:
        kind.stride = 15
    compile_network(smaller, config)


def test_refuses_a_network_of_only_flatten():
    network = QuantizedNetwork([Flatten()], input_shape=(2, 3, 4))
    error = refused(network, AcceleratorConfig(), "only Flatten",
                    "Dense, Conv2D, AvgPool2D, GlobalAvgPool2D, MaxPool2D or Add")
    assert error.layer is None


def test_program_depth_counts_the_geometry_words():
    # conv -> flatten -> dense: both passes walk images, so each takes its descriptor and its
    # geometry words (as many as the documented geometry needs descriptor words).
    config = AcceleratorConfig(rows=2, cols=2, prog_depth=2)
    dense = Dense(np.ones((2 * 2 * 3, 2), int), np.zeros(2, int), np.ones(2, int),
                  np.zeros(2, int))
    network = QuantizedNetwork([_conv(2, 1, 3), Flatten(), dense], input_shape=(3, 3, 1))
    per_layer = 1 + math.ceil(sum(w for _, w in geometry_fields(config))
                              / sum(w for _, w in descriptor_fields(config)))
    words = 2 * per_layer
    error = refused(network, config, f"takes {words} words", "2 layers", "2 of them spatial",
                    f"{per_layer - 1} geometry words each", "prog_depth=2")
    assert (error.resource, error.need, error.limit) == ("prog_depth", words, 2)
    fits = dataclasses.replace(config, prog_depth=words)
    assert len(compile_network(network, fits).images[Region.PROGRAM][1]) == words


def test_padded_kernel_tiles_each_position_and_is_refused_past_the_k_tiles_field():
    # Each kernel position's channels fill whole tiles: 3 x 3 positions x ceil(5 / 4) groups.
    config = AcceleratorConfig(rows=4, cols=2, max_k=128, act_depth=1 << 10)
    network = QuantizedNetwork([_conv(3, 5, 2)], input_shape=(4, 4, 5))
    program = check_against_reference(network, config, 3)
    (layer,) = program.layers
    assert (layer.k, layer.k_tiles, program.descriptors[0]["k_tiles"]) == (45, 18, 18)
    assert layer.w_words == layer.n_tiles * 18 * config.rows
    # max_k = 48 sizes k_tiles for 12 tiles of 4 rows: 4 bits, 15 tiles. K = 45 padded is
    # 3 * 3 * 8 = 72, 18 tiles: the proof says so, in the user's terms, before any
    # descriptor field is packed.
    narrow = dataclasses.replace(config, max_k=48)
    padded = 3 * 3 * math.ceil(5 / 4) * 4
    error = refused(network, narrow, "layer 0", "padded reduction", f"= {padded} exceeds "
                    "what the device's counters hold", "5 channels",
                    "3x3 positions of the kernel", "K=45", "18 tiles",
                    "k_tiles field (4 bits, sized by max_k=48) holds 15 tiles", "<= 60",
                    "at most 4 channels", "a smaller kernel", f"max_k >= {padded}")
    assert (error.layer, error.resource, error.need, error.limit) == (0, "max_k", padded, 60)
    assert "descriptor field k_tiles=" not in str(error)
    # The remedies it names do fit: 4 channels (no padding), or a smaller kernel.
    check_against_reference(QuantizedNetwork([_conv(3, 4, 2)], input_shape=(4, 4, 4)),
                            narrow, 3)
    check_against_reference(QuantizedNetwork([_conv(2, 5, 2)], input_shape=(4, 4, 5)),
                            narrow, 3)


def _flatten_dense(shape, n=3):
    """Flatten an image of ``shape`` into a Dense of ``n`` outputs."""
    rng = np.random.default_rng(math.prod(shape))
    dense = Dense(rng.integers(-3, 4, (math.prod(shape), n)), rng.integers(-9, 10, n),
                  np.ones(n, int), np.zeros(n, int))
    return QuantizedNetwork([Flatten(), dense], input_shape=shape)


def test_dense_after_flatten_is_refused_past_the_k_tiles_field():
    # max_k = 50 sizes k_tiles for 13 tiles of 4 rows: 4 bits, which hold 15. The device
    # walks (1, 13, 3) pixel by pixel in 13 tiles (without the taps layout, which packs the
    # 39 taps into 10) and (2, 7, 3) in 14: a padded reduction of 56 > max_k, within the field.
    config = AcceleratorConfig(rows=4, cols=2, max_k=50, act_depth=1 << 10, taps=False)
    program = check_against_reference(_flatten_dense((1, 13, 3)), config, 3)
    assert program.layers[0].k_tiles == 13
    taps = check_against_reference(_flatten_dense((1, 13, 3)),
                                   dataclasses.replace(config, taps=True), 3)
    assert taps.layers[0].k_tiles == 10
    program = check_against_reference(_flatten_dense((2, 7, 3)), config, 3)
    assert program.layers[0].k_tiles == 14
    # (2, 8, 3): 2 * 8 positions of ceil(3 / 4) = 1 tile: 16 > 15.
    padded = 2 * 8 * math.ceil(3 / 4) * 4
    error = refused(_flatten_dense((2, 8, 3)), config, "layer 1", f"= {padded} exceeds",
                    "2x8 positions of the image before the Flatten", "<= 60",
                    "k_tiles field (4 bits, sized by max_k=50) holds 15 tiles",
                    "e.g. a smaller image before the Flatten or a "
                    f"configuration with max_k >= {padded}")
    assert (error.need, error.limit) == (padded, 60)  # no number of channels would fit


def _conv(k, c, n, **kwargs):
    """A k x k convolution of c -> n channels with small weights and unit requantization."""
    rng = np.random.default_rng(k * 100 + c * 10 + n)
    return Conv2D(rng.integers(-3, 4, (k, k, c, n)), rng.integers(-9, 10, n), np.ones(n, int),
                  np.zeros(n, int), **kwargs)


#: Arrays of more columns than rows with fewer requantization lanes than columns: fewer banks
#: (``max(rows, post_lanes)``) than an output tile's channels.
NARROW_BANKS = {
    "2x4-lanes1": AcceleratorConfig(rows=2, cols=4, post_lanes=1, act_depth=1 << 13,
                                    weight_depth=1 << 14, param_depth=512, out_depth=1 << 12,
                                    acc_depth=24, prog_depth=64),
    "2x6-lanes3": AcceleratorConfig(rows=2, cols=6, post_lanes=3, act_depth=1 << 13,
                                    weight_depth=1 << 14, param_depth=512, out_depth=1 << 12,
                                    acc_depth=24, prog_depth=64),
    "8x16-lanes4": AcceleratorConfig(rows=8, cols=16, post_lanes=4, act_depth=1 << 13,
                                     weight_depth=1 << 14, out_depth=1 << 12, acc_depth=24,
                                     prog_depth=64),
}


@pytest.mark.parametrize("name", list(NARROW_BANKS))
@pytest.mark.parametrize("seed", range(4))
def test_fewer_banks_than_columns_match_reference(name, seed):
    """The documented images over ``act_lanes < cols`` banks (an output tile's channels over
    several words) in the interpreter: dense layers, convolutions with pools (the first in
    the taps layout now and then, grouped ones among them) and residual graphs."""
    config = NARROW_BANKS[name]
    assert config.act_lanes == max(config.rows, config.post_lanes) < config.cols
    rng = np.random.default_rng(seed)
    sizes = [int(v) for v in rng.integers(1, 40, 4)]
    nets = [random_network(rng, config, sizes, style="uniform", last_raw=bool(seed % 2)),
            taps_cnn(rng, config, max_channels=20), pooled_cnn(rng, config, max_channels=20),
            random_cnn(rng, config, max_channels=20),
            random_graph(rng, config, max_channels=2 * config.cols)]
    for net in nets:
        check_against_reference(net, config, 3, seed=seed)
