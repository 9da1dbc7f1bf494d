"""Quantization of the float fields of docs/arithmetic.md: clamp bounds, the leaky multiplier,
average pooling's multiplier, checked against the formulas on the calibrated scales, and the integer
network tracking the float one."""

import numpy as np
import pytest

from hwgen.nn import (
    CNN,
    AvgPool2D,
    Conv2D,
    Dense,
    Flatten,
    FloatAvgPool2D,
    FloatConv2D,
    FloatDense,
    FloatGlobalAvgPool2D,
    GlobalAvgPool2D,
    quantize,
)


def everyday_cnn():
    rng = np.random.default_rng(0)
    return CNN([
        FloatConv2D(rng.normal(size=(3, 2, 2, 6)), rng.normal(size=6) * 0.1, stride=(1, 2),
                    padding=(1, 0, 1, 1), act_max=1.5),                     # a ReLU6-like clamp
        FloatConv2D(rng.normal(size=(3, 3, 1, 6)) * 0.5, stride=1, padding=1, groups=6,
                    activation="leaky_relu", alpha=0.1),                   # depthwise, leaky
        FloatAvgPool2D((2, 1), activation="relu"),
        FloatConv2D(rng.normal(size=(1, 1, 6, 4)), activation="identity", act_min=-0.5,
                    act_max=0.8),                                          # a Hardtanh
        FloatGlobalAvgPool2D(), Flatten(),
        FloatDense(rng.normal(size=(4, 3)), activation="leaky_relu", alpha=0.3),
        FloatDense(rng.normal(size=(3, 2)), relu=False),
    ], input_shape=(6, 7, 2), output_function="softmax")


@pytest.fixture(scope="module")
def quantized():
    cnn = everyday_cnn()
    calib = np.random.default_rng(1).normal(size=(300, 6, 7, 2))
    return cnn, quantize(cnn, calib)


def scale_of(net, index):
    """The calibrated scale of layer ``index``'s output and of its input."""
    names = list(net.tensors)
    return net.tensors[names[index + 1]].scale, net.tensors[names[index]].scale


def test_layer_kinds_and_fields(quantized):
    _, net = quantized
    assert [type(layer) for layer in net.layers] == [
        Conv2D, Conv2D, AvgPool2D, Conv2D, GlobalAvgPool2D, Flatten, Dense, Dense]
    assert net.output_function == "softmax"
    first, depthwise = net.layers[0], net.layers[1]
    assert (first.stride, first.padding, first.groups) == ((1, 2), (1, 0, 1, 1), 1)
    assert (depthwise.groups, depthwise.activation) == (6, "leaky_relu")
    assert net.layers[2].activation == "relu" and net.layers[2].size == (2, 1)


def test_clamp_bounds_are_the_float_limits_at_the_output_scale(quantized):
    _, net = quantized
    s_y, _ = scale_of(net, 0)
    assert net.layers[0].activation == "relu" and net.layers[0].act_min is None
    assert net.layers[0].act_max == min(round(1.5 / s_y), 127)
    s_y, _ = scale_of(net, 3)
    assert net.layers[3].activation == "identity"
    assert (net.layers[3].act_min, net.layers[3].act_max) == (
        int(np.rint(-0.5 / s_y)), int(np.rint(0.8 / s_y)))


@pytest.mark.parametrize(("index", "alpha"), [(1, 0.1), (6, 0.3)])
def test_leaky_multiplier_shares_the_shift(quantized, index, alpha):
    cnn, net = quantized
    layer = net.layers[index]
    s_y, s_x = scale_of(net, index)
    weight = cnn.layers[index].weight
    s_w = np.abs(weight.reshape(-1, weight.shape[-1])).max(axis=0) / 127
    ratio = s_x * s_w / s_y
    np.testing.assert_allclose(layer.mult / 2.0 ** layer.shift, ratio, rtol=2 ** -14)
    np.testing.assert_allclose(layer.mult_neg / 2.0 ** layer.shift, alpha * ratio,
                               rtol=2 ** -10)
    assert np.all(layer.mult >= 1 << 15)  # mult as large as mult_bits allows


def test_average_pool_multipliers(quantized):
    _, net = quantized
    for index, window in ((2, 2 * 1), (4, np.prod(net.shapes[4][0][:2]))):
        s_y, s_x = scale_of(net, index)
        pool = net.layers[index]
        np.testing.assert_allclose(pool.mult / 2.0 ** pool.shift, s_x / (s_y * window),
                                   rtol=2 ** -14)


def test_integer_network_tracks_the_float_one(quantized):
    cnn, net = quantized
    x = np.random.default_rng(2).normal(size=(100, 6, 7, 2))
    expected = cnn.forward(x)
    got = net.forward(net.quantize_input(x)) * net.output_scale
    assert np.abs(got - expected).max() < 0.05 * np.abs(expected).max()
    assert np.mean(np.argmax(got, 1) == np.argmax(expected, 1)) >= 0.95
    np.testing.assert_allclose(net.probabilities(net.forward(net.quantize_input(x))).sum(1), 1)
