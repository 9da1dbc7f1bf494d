"""The float convolution and average pools of issue 31 against per-element loops, and their
gradients against finite differences (hypothesis property tests)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import CNN, Flatten, FloatConv2D, FloatDense
from hwgen.nn.float_layers import backward, forward_cached
from hwgen.nn.float_pool import FloatAvgPool2D, FloatGlobalAvgPool2D

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def naive_conv(x, weight, bias, geometry):
    """Section 3.2's general convolution, one output element at a time; ``geometry`` is
    ``(strides, pads, groups)``."""
    strides, pads, groups = geometry
    m, h, w, _ = x.shape
    kh, kw, cg, c_out = weight.shape
    (sy, sx), (top, bottom, left, right) = strides, pads
    oh, ow = (h + top + bottom - kh) // sy + 1, (w + left + right - kw) // sx + 1
    out = np.zeros((m, oh, ow, c_out))
    for n in range(c_out):
        j = n // (c_out // groups)
        for oy in range(oh):
            for ox in range(ow):
                acc = np.full(m, bias[n])
                for ky in range(kh):
                    for kx in range(kw):
                        iy, ix = oy * sy + ky - top, ox * sx + kx - left
                        if 0 <= iy < h and 0 <= ix < w:
                            for c in range(cg):
                                acc = acc + x[:, iy, ix, j * cg + c] * weight[ky, kx, c, n]
                out[:, oy, ox, n] = acc
    return out


@st.composite
def conv_cases(draw):
    groups = draw(st.integers(1, 3))
    cg, og = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    kh = draw(st.integers(1, h + pads[0] + pads[1]))
    kw = draw(st.integers(1, w + pads[2] + pads[3]))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.normal(size=(2, h, w, groups * cg))
    weight = rng.normal(size=(kh, kw, cg, groups * og))
    return x, weight, rng.normal(size=groups * og), strides, pads, groups


@FAST
@given(conv_cases())
def test_conv_matches_the_loops(case):
    x, weight, bias, strides, pads, groups = case
    layer = FloatConv2D(weight, bias, stride=strides, padding=pads, groups=groups,
                        activation="identity")
    expected = naive_conv(x, weight, bias, (strides, pads, groups))
    assert layer._output_shape(x.shape[1:], "", "") == expected.shape[1:]
    np.testing.assert_allclose(layer.forward(x), expected, atol=1e-12)


@FAST
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.integers(0, 2**16))
def test_avgpool_matches_the_loops(kh, kw, sy, sx, seed):
    x = np.random.default_rng(seed).normal(size=(2, kh + 3, kw + 2, 3))
    pool = FloatAvgPool2D((kh, kw), (sy, sx))
    y = pool.forward(x)
    for oy in range(y.shape[1]):
        for ox in range(y.shape[2]):
            window = x[:, oy * sy:oy * sy + kh, ox * sx:ox * sx + kw, :]
            np.testing.assert_allclose(y[:, oy, ox], window.mean(axis=(1, 2)), atol=1e-12)
    assert y.shape[1:3] == ((x.shape[1] - kh) // sy + 1, (x.shape[2] - kw) // sx + 1)
    np.testing.assert_allclose(FloatGlobalAvgPool2D().forward(x)[:, 0, 0],
                               x.mean(axis=(1, 2)), atol=1e-12)


def numeric_gradient(f, value, eps=1e-6):
    grad = np.zeros_like(value)
    for index in np.ndindex(value.shape):
        saved = value[index]
        value[index] = saved + eps
        up = f()
        value[index] = saved - eps
        down = f()
        value[index] = saved
        grad[index] = (up - down) / (2 * eps)
    return grad


@pytest.mark.parametrize("layer", [
    FloatConv2D(np.random.default_rng(0).normal(size=(2, 3, 1, 4)), np.ones(4),
                stride=(2, 1), padding=(1, 0, 2, 1), groups=2, activation="leaky_relu",
                alpha=0.1, act_min=-0.3, act_max=1.5),
    FloatConv2D(np.random.default_rng(1).normal(size=(3, 3, 2, 3)), stride=1, padding=1,
                act_max=6.0),
    FloatAvgPool2D((2, 3), (1, 2), activation="relu", act_max=0.4),
    FloatGlobalAvgPool2D(act_min=-0.1),
], ids=["grouped-leaky-clamped", "relu6", "avgpool", "global"])
def test_gradients_match_finite_differences(layer):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 5, 6, 2))
    y, cache = forward_cached(layer, x)
    r = rng.normal(size=y.shape)  # the loss is sum(y * r), so dL/dy = r
    grad_x, grads = backward(layer, cache, r)

    def loss():
        return float(np.sum(forward_cached(layer, x)[0] * r))

    np.testing.assert_allclose(grad_x, numeric_gradient(loss, x), atol=1e-6)
    for param, grad in zip(getattr(layer, "params", []), grads, strict=True):
        np.testing.assert_allclose(grad, numeric_gradient(loss, param), atol=1e-6)


def test_a_cnn_with_every_new_layer_trains():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 6, 6, 2))
    y = (x[:, :3].mean(axis=(1, 2, 3)) > 0).astype(np.int64)
    cnn = CNN([FloatConv2D.random((3, 2), 2, 4, padding=(1, 1, 0, 1), rng=1),
               FloatConv2D.random(3, 4, 4, groups=4, stride=(1, 2), rng=2),
               FloatAvgPool2D(2, activation="relu"), FloatGlobalAvgPool2D(), Flatten(),
               FloatDense.random(4, 2, relu=False, rng=3)], input_shape=(6, 6, 2))
    cnn.layers[1].activation, cnn.layers[1].alpha = "leaky_relu", 0.1
    cnn.fit(x, y, epochs=15, lr=0.01)
    assert cnn.history[-1] < cnn.history[0]
