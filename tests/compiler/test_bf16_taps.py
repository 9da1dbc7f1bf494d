"""A bf16 network's first convolution in the taps layout (issue 52): its input stored so that
the walker reads the flattened kernel densely, tap ``kt * rows + r``, which is the contract's
``(ky, kx, c)`` order in tiles of ``rows``; so a first convolution of any channels below
``rows`` compiles and runs bit for bit (vs :meth:`hwgen.nn.Bf16Network.forward`)."""

import numpy as np
import pytest
from support.bf16_programs import bf16_config, check_program, wide

from hwgen.nn import CNN, Flatten, FloatConv2D, FloatDense, MaxPool2D, digits_cnn, to_bf16


def _taps(program):
    """Whether the program's first pass reads its input in the taps layout."""
    return bool(program.descriptors[0].get("geometry", {}).get("taps"))


def _images(net, m, seed, *, scale=1.0):
    rng = np.random.default_rng(seed)
    x = wide(rng, m, *net.input_shape) * scale
    x[0] = 0.0
    return net.quantize_input(x)


@pytest.mark.parametrize(("rows", "cols"), [(4, 4), (8, 8), (4, 8), (8, 3)])
def test_the_demo_cnn_runs_bit_for_bit(rows, cols):
    # hwgen demo --model cnn's architecture: conv 3x3 of one channel, pools, conv, dense.
    net = to_bf16(digits_cnn(seed=rows + cols), rows=rows)
    program, _ = check_program(net, bf16_config(rows, cols), _images(net, 3, seed=rows))
    assert _taps(program)
    # ceil(9 / rows) tiles of taps instead of nine of one channel each.
    assert program.layers[0].k_tiles == -(-9 // rows)


def _first_conv_cnn(seed, channels, side, *, scale=1.0):
    """A float CNN whose first convolution (3x3, ``channels`` inputs, eight outputs, padded,
    strided) reads ``side x side`` images, then a max pool, a flatten and a dense layer."""
    rng = np.random.default_rng(seed)
    conv = FloatConv2D(wide(rng, 3, 3, channels, 8) * scale, wide(rng, 8), stride=(1, 2),
                       padding=(1, 0, 1, 1), activation="relu")
    out_h, out_w = side + 1 - 2, (side + 2 - 3) // 2 + 1   # padded 1, 0 and 1, 1
    pooled = (out_h // 2) * (out_w // 2) * 8
    return CNN([conv, MaxPool2D(2), Flatten(), FloatDense(wide(rng, pooled, 3), wide(rng, 3))],
               input_shape=(side, side, channels))


@pytest.mark.parametrize("rows", [4, 8])
def test_a_28x28_one_channel_cnn_runs_bit_for_bit(rows):
    net = to_bf16(_first_conv_cnn(rows, 1, 28), rows=rows)
    program, _ = check_program(net, bf16_config(rows, 4), _images(net, 2, seed=1))
    assert _taps(program)


@pytest.mark.parametrize(("rows", "cols", "channels"), [(4, 3, 3), (8, 8, 3), (4, 2, 2),
                                                        (8, 5, 5), (2, 2, 1)])
@pytest.mark.parametrize("output", ["raw", "bf16"])
def test_first_convolutions_of_fewer_channels_than_rows_run_bit_for_bit(rows, cols, channels,
                                                                        output):
    net = to_bf16(_first_conv_cnn(rows * cols + channels, channels, 7), rows=rows,
                  output=output)
    program, _ = check_program(net, bf16_config(rows, cols), _images(net, 3, seed=channels),
                               batch=4)
    assert _taps(program)


def test_a_dense_layer_after_a_flatten_of_the_input_takes_the_taps_layout():
    rng = np.random.default_rng(2)
    model = CNN([Flatten(), FloatDense(wide(rng, 5 * 3 * 3, 4), wide(rng, 4), relu=True),
                 FloatDense(wide(rng, 4, 2), wide(rng, 2))], input_shape=(5, 3, 3))
    net = to_bf16(model, rows=4)
    program, _ = check_program(net, bf16_config(4, 4), _images(net, 3, seed=2))
    assert _taps(program)


def test_inf_and_nan_from_the_first_convolution_run_bit_for_bit():
    # Products beyond fp32 make Inf, sums of opposite Infs NaN, in the taps layout's tiles.
    net = to_bf16(_first_conv_cnn(3, 3, 6, scale=1e30), rows=4, output="raw")
    x = _images(net, 4, seed=5, scale=1e10)
    program, _ = check_program(net, bf16_config(4, 4), x)
    hidden = np.asarray(net.forward_tensors(x)[net.nodes[0].name], np.float32)
    assert _taps(program) and np.isinf(hidden).any() and np.isnan(hidden).any()
