"""The layer kinds of a training (hwgen.train.layers): the forward network equals
hwgen.nn.quantize's for the same scales; the backward passes agree with the float model's
gradients to within the quantization of their operands."""

import numpy as np
import pytest

from hwgen import AcceleratorConfig
from hwgen.compiler import compile_network
from hwgen.nn import MLP, Flatten, FloatConv2D, FloatDense, MaxPool2D, digits_cnn, quantize
from hwgen.nn.float_layers import backward as float_backward
from hwgen.train import ActivationScales, kind_of
from hwgen.train.layers import Step, quantize_model
from hwgen.train.trainer import float_layers

WIDE = AcceleratorConfig(in_bits=16, w_bits=16, acc_bits=48)


class ExactProducts:
    """The products as NumPy computes them, to test a backward pass without devices."""

    def transposed(self, a, b):
        return np.asarray(a).T @ np.asarray(b)

    def rows(self, a, b):
        return np.asarray(a) @ np.asarray(b)


def same_networks(ours, theirs):
    assert len(ours.layers) == len(theirs.layers)
    for a, b in zip(ours.layers, theirs.layers, strict=True):
        assert type(a) is type(b)
        for field in ("weight", "bias", "mult", "shift"):
            if hasattr(b, field):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        for field in ("activation", "output", "stride", "padding", "size"):
            assert getattr(a, field, None) == getattr(b, field, None)
    assert ours.input_scale == theirs.input_scale
    np.testing.assert_array_equal(ours.output_scale, theirs.output_scale)


@pytest.mark.parametrize("config", [AcceleratorConfig(), WIDE], ids=["int8", "int16"])
def test_mlp_quantizes_as_hwgen_nn_quantize(config):
    mlp = MLP([64, 12, 10], seed=4)
    calib = np.random.default_rng(4).random((30, 64))
    layers, shape = float_layers(mlp)
    scales = ActivationScales.calibrate(layers, calib, config.in_bits)
    same_networks(quantize_model(layers, scales, config, shape),
                  quantize(mlp, calib, in_bits=config.in_bits, w_bits=config.w_bits,
                           acc_bits=config.acc_bits, mult_bits=config.mult_bits))


def test_cnn_quantizes_as_hwgen_nn_quantize():
    cnn = digits_cnn(seed=2)
    calib = np.random.default_rng(2).random((10, 8, 8, 1))
    scales = ActivationScales.calibrate(cnn.layers, calib, 8)
    same_networks(quantize_model(cnn.layers, scales, AcceleratorConfig(), cnn.input_shape),
                  quantize(cnn, calib))


def test_a_bias_without_room_is_clipped_so_the_layer_compiles():
    config = AcceleratorConfig(rows=2, cols=2, acc_bits=24, max_k=64)
    layer = FloatDense(np.full((4, 2), 1e-6), np.array([5.0, -5.0]), relu=False)
    scales = ActivationScales(1 / 127, [1.0], [False], 8)
    network = quantize_model([layer], scales, config, None)
    bias = network.layers[0].bias
    assert abs(int(bias[0])) == (1 << 23) - 1 - 128 * 4 * 127 and bias[1] == -bias[0]
    compile_network(network, config)


def dense_case(relu, rng):
    layer = FloatDense(rng.normal(size=(6, 4)), rng.normal(size=4), relu=relu)
    x = rng.integers(-3000, 3000, size=(9, 6))
    y = rng.integers(-5, 5, size=(9, 4))
    return layer, Step(x=x, y=y, x_scale=0.001, widths=WIDE)


@pytest.mark.parametrize("relu", [True, False])
def test_dense_backward_follows_the_float_gradient(relu):
    rng = np.random.default_rng(5)
    layer, step = dense_case(relu, rng)
    delta = rng.normal(size=(9, 4))
    d_x, (d_w, d_b) = kind_of(layer, 0).backward(layer, step, delta, ExactProducts(), True)
    # The float model's gradients at the same input and ReLU mask.
    expected_x, (expected_w, expected_b) = float_backward(
        layer, (step.x * step.x_scale, step.y.astype(float)), delta)
    np.testing.assert_allclose(d_w, expected_w, rtol=0, atol=1e-3 * np.abs(expected_w).max())
    np.testing.assert_allclose(d_x, expected_x, rtol=0, atol=1e-3 * np.abs(expected_x).max())
    np.testing.assert_array_equal(d_b, expected_b)


def test_first_layer_skips_the_input_gradient():
    rng = np.random.default_rng(6)
    layer, step = dense_case(True, rng)
    d_x, grads = kind_of(layer, 0).backward(layer, step, rng.normal(size=(9, 4)),
                                            ExactProducts(), False)
    assert d_x is None and len(grads) == 2


def test_conv_backward_follows_the_float_gradient():
    rng = np.random.default_rng(7)
    layer = FloatConv2D(rng.normal(size=(3, 3, 2, 4)), rng.normal(size=4), padding=1)
    x = rng.integers(-3000, 3000, size=(3, 5, 5, 2))
    y = rng.integers(-4, 5, size=(3, 5, 5, 4))
    step = Step(x=x, y=y, x_scale=0.002, widths=WIDE)
    delta = rng.normal(size=(3, 5, 5, 4))
    d_x, (d_w, d_b) = kind_of(layer, 1).backward(layer, step, delta, ExactProducts(), True)
    from hwgen.nn.patches import im2col

    rows = im2col(x * step.x_scale, (3, 3), 1, 1).reshape(-1, 18)
    cache = (x.shape, rows, y.reshape(-1, 4).astype(float))
    expected_x, (expected_w, expected_b) = float_backward(layer, cache, delta)
    np.testing.assert_allclose(d_w, expected_w, rtol=0, atol=1e-3 * np.abs(expected_w).max())
    np.testing.assert_allclose(d_x, expected_x, rtol=0, atol=1e-3 * np.abs(expected_x).max())
    np.testing.assert_allclose(d_b, expected_b, rtol=1e-12)


def test_pool_and_flatten_route_the_gradient_exactly():
    rng = np.random.default_rng(8)
    x = rng.integers(-100, 100, size=(2, 4, 4, 3))
    pool = MaxPool2D(2)
    delta = rng.normal(size=(2, 2, 2, 3))
    step = Step(x=x, y=pool.forward(x), x_scale=0.5, widths=WIDE)
    d_x, grads = kind_of(pool, 1).backward(pool, step, delta, None, True)
    np.testing.assert_array_equal(d_x, float_backward(pool, x.astype(float), delta)[0])
    assert grads == []
    flat = Flatten()
    d_x, _ = kind_of(flat, 2).backward(flat, Step(x=x, y=None, x_scale=1, widths=WIDE),
                                       rng.normal(size=(2, 48)), None, True)
    assert d_x.shape == x.shape


def test_layer_of_another_type_is_refused():
    with pytest.raises(TypeError, match="layer 3 is a str; allowed in a training on the "
                                        "devices: FloatDense, FloatConv2D, MaxPool2D, Flatten"):
        kind_of("conv", 3)


def test_issue_31_fields_are_refused_by_name():
    layer = FloatConv2D(np.ones((1, 1, 1, 2)), groups=2, activation="leaky_relu")
    with pytest.raises(TypeError, match=r"layer 3 \(FloatConv2D.*\) sets activation, groups; "
                                        r"allowed in a training on the devices"):
        kind_of(layer, 3)
