"""The float layers: forward against explicit loops, backward against finite differences."""

import numpy as np
import pytest

from hwgen.nn import Flatten, FloatConv2D, FloatDense, MaxPool2D
from hwgen.nn.float_layers import backward, forward_cached

EPS = 1e-6


def conv_loops(x, weight, bias, *, stride, padding, relu):
    """The float convolution, one output element at a time, padding by bounds checks."""
    m, h, w, c_in = x.shape
    kh, kw, _, c_out = weight.shape
    oh, ow = (h + 2 * padding - kh) // stride + 1, (w + 2 * padding - kw) // stride + 1
    out = np.zeros((m, oh, ow, c_out))
    for n, oy, ox, o in np.ndindex(m, oh, ow, c_out):
        acc = bias[o]
        for ky, kx, c in np.ndindex(kh, kw, c_in):
            iy, ix = oy * stride + ky - padding, ox * stride + kx - padding
            if 0 <= iy < h and 0 <= ix < w:
                acc += x[n, iy, ix, c] * weight[ky, kx, c, o]
        out[n, oy, ox, o] = max(acc, 0.0) if relu else acc
    return out


GEOMETRIES = [  # (input (M, H, W, C), kernel, C_out, stride, padding)
    ((2, 5, 4, 3), (3, 3), 2, 1, 1),
    ((1, 6, 6, 2), (3, 2), 3, 2, 0),
    ((2, 4, 4, 1), (1, 1), 2, 1, 0),    # 1x1
    ((1, 3, 2, 2), (5, 4), 2, 1, 1),    # the kernel covers the whole padded input
    ((2, 7, 5, 1), (2, 2), 1, 3, 2),    # stride larger than the kernel
]


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("relu", [False, True])
def test_conv_forward_matches_loops(geometry, relu):
    shape, (kh, kw), c_out, stride, padding = geometry
    rng = np.random.default_rng(0)
    layer = FloatConv2D(rng.normal(size=(kh, kw, shape[3], c_out)), rng.normal(size=c_out),
                        stride=stride, padding=padding, relu=relu)
    x = rng.normal(size=shape)
    np.testing.assert_allclose(layer.forward(x),
                               conv_loops(x, layer.weight, layer.bias, stride=stride,
                                          padding=padding, relu=relu),
                               rtol=1e-12, atol=1e-12)


def numeric_gradient(f, array):
    """Central differences of the scalar ``f()`` with respect to every entry of ``array``."""
    grad = np.zeros_like(array)
    for index in np.ndindex(array.shape):
        saved = array[index]
        array[index] = saved + EPS
        up = f()
        array[index] = saved - EPS
        down = f()
        array[index] = saved
        grad[index] = (up - down) / (2 * EPS)
    return grad


def check_gradients(layer, x):
    """Compare backward() with finite differences of L = sum(forward(x) * r)."""
    rng = np.random.default_rng(1)
    y, cache = forward_cached(layer, x)
    r = rng.normal(size=y.shape)
    grad_x, grads = backward(layer, cache, r)

    def loss():
        return float(np.sum(forward_cached(layer, x)[0] * r))

    np.testing.assert_allclose(grad_x, numeric_gradient(loss, x), rtol=1e-5, atol=1e-7)
    for param, grad in zip(getattr(layer, "params", []), grads, strict=True):
        np.testing.assert_allclose(grad, numeric_gradient(loss, param), rtol=1e-5, atol=1e-7)
    assert backward(layer, cache, r, need_input=False)[0] is None


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("relu", [False, True])
def test_conv_gradients(geometry, relu):
    shape, (kh, kw), c_out, stride, padding = geometry
    rng = np.random.default_rng(2)
    layer = FloatConv2D(rng.normal(size=(kh, kw, shape[3], c_out)), rng.normal(size=c_out),
                        stride=stride, padding=padding, relu=relu)
    check_gradients(layer, rng.normal(size=shape))


@pytest.mark.parametrize("relu", [False, True])
def test_dense_gradients(relu):
    rng = np.random.default_rng(3)
    check_gradients(FloatDense(rng.normal(size=(5, 4)), rng.normal(size=4), relu=relu),
                    rng.normal(size=(3, 5)))


@pytest.mark.parametrize(("size", "stride"), [(2, 2), (2, 1), (3, 2), (1, 1)])
def test_pool_gradients_go_to_the_argmax(size, stride):
    # Overlapping windows (stride < size) send several gradients to one input.
    x = np.random.default_rng(4).normal(size=(2, 6, 5, 3))
    check_gradients(MaxPool2D(size, stride), x)


def test_pool_ties_go_to_the_first_maximum():
    pool = MaxPool2D(2)
    x = np.zeros((1, 2, 2, 1))
    grad_x, grads = backward(pool, forward_cached(pool, x)[1], np.ones((1, 1, 1, 1)))
    assert grad_x[0, :, :, 0].tolist() == [[1.0, 0.0], [0.0, 0.0]] and grads == []


def test_flatten_gradients():
    check_gradients(Flatten(), np.random.default_rng(5).normal(size=(2, 3, 2, 4)))


def test_random_initialisation():
    a = FloatConv2D.random(3, 4, 8, stride=2, padding=1, rng=7)
    b = FloatConv2D.random((3, 3), 4, 8, stride=2, padding=1, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a.weight, b.weight)
    assert a.weight.shape == (3, 3, 4, 8) and not a.bias.any()
    assert (a.stride, a.padding, a.relu) == (2, 1, True)
    big = FloatConv2D.random(3, 64, 64, rng=0)
    assert np.std(big.weight) == pytest.approx(np.sqrt(2 / (3 * 3 * 64)), rel=0.05)
    dense = FloatDense.random(400, 300, relu=False, rng=0)
    assert dense.weight.shape == (400, 300) and not dense.relu
    assert np.std(dense.weight) == pytest.approx(np.sqrt(2 / 400), rel=0.05)
    assert repr(a) == "FloatConv2D(3x3, 4 -> 8, stride=2, padding=1, relu=True)"
    assert repr(dense) == "FloatDense(400 -> 300, relu=False)"


@pytest.mark.parametrize(("make", "pattern"), [
    (lambda: FloatDense(np.ones(3)), r"FloatDense: field 'weight' has shape \(3,\); allowed: "
                                     r"\(K, N\)"),
    (lambda: FloatDense(np.ones((2, 3)), np.ones(2)), r"field 'bias' has shape \(2,\); "
                                                      r"allowed: \(3,\)"),
    (lambda: FloatConv2D(np.ones((3, 3, 2))), r"FloatConv2D: field 'weight' has shape "
                                              r"\(3, 3, 2\); allowed: \(KH, KW, C_in, C_out\)"),
    (lambda: FloatConv2D(np.ones((1, 1, 1, 1)), stride=0), r"field 'stride' is 0"),
    (lambda: FloatConv2D(np.ones((1, 1, 1, 1)), padding=(1, 1, 1)),
     r"field 'padding' is \(1, 1, 1\)"),
])
def test_errors(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()
