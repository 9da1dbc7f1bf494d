"""The float layers of a :class:`~hwgen.nn.CNN`, with their gradients.

:class:`FloatDense` and :class:`FloatConv2D` hold float64 parameters and an optional ReLU (the
integer layers fuse the activation the same way). :class:`~hwgen.nn.MaxPool2D` and
:class:`~hwgen.nn.Flatten` carry no numbers, so the integer network's objects serve here too;
:func:`forward_cached` and :func:`backward` give every layer type its forward and backward pass.

Backward passes: a convolution is a dense layer on the im2col patches, so its weight gradient is
``patches.T @ delta`` and its input gradient :func:`~hwgen.nn.patches.col2im` of
``delta @ W.T``; max pooling sends each window's gradient to the window's argmax (the first one
on ties); a ReLU passes the gradient where its output is positive.
"""

import numpy as np

from ._ints import int_scalar
from .conv import conv_output_shape
from .dense import dense_output_shape
from .flatten import Flatten
from .maxpool import MaxPool2D
from .patches import col2im, im2col

__all__ = ["FloatConv2D", "FloatDense", "backward", "forward_cached"]


def _float_param(value, where, field, ndim, expected):
    arr = np.array(value, dtype=np.float64)
    if arr.ndim != ndim or min(arr.shape, default=0) < 1:
        raise ValueError(f"{where}: field {field!r} has shape {arr.shape}; allowed: {expected}, "
                         "each >= 1")
    return arr


def _bias(bias, n, where):
    if bias is None:
        return np.zeros(n)
    arr = np.array(bias, dtype=np.float64)
    if arr.shape != (n,):
        raise ValueError(f"{where}: field 'bias' has shape {arr.shape}; allowed: ({n},), one "
                         "value per output channel of 'weight'")
    return arr


class FloatDense:
    """A float fully connected layer ``y = x @ weight + bias``, optionally followed by a ReLU.

    Parameters
    ----------
    weight : array_like of float, shape (K, N)
    bias : array_like of float, shape (N,), optional
        Zeros by default.
    relu : bool
        Whether a ReLU follows.

    Attributes
    ----------
    weight, bias : numpy.ndarray of float64
        The parameters, copied; training updates them in place.
    relu : bool

    Raises
    ------
    ValueError
        If a shape is wrong.
    """

    def __init__(self, weight, bias=None, *, relu=True):
        self.weight = _float_param(weight, "FloatDense", "weight", 2, "(K, N)")
        self.bias = _bias(bias, self.weight.shape[1], "FloatDense")
        self.relu = bool(relu)

    @classmethod
    def random(cls, in_features, out_features, *, relu=True, rng=None):
        """Return a layer with He-normal weights (``std = sqrt(2 / K)``) and zero bias.

        ``rng`` is a :class:`numpy.random.Generator` or a seed.
        """
        rng = np.random.default_rng(rng)
        weight = rng.normal(0.0, np.sqrt(2.0 / in_features), size=(in_features, out_features))
        return cls(weight, relu=relu)

    @property
    def params(self):
        """``[weight, bias]``, the arrays training updates."""
        return [self.weight, self.bias]

    def __repr__(self):
        k, n = self.weight.shape
        return f"FloatDense({k} -> {n}, relu={self.relu})"

    def _output_shape(self, shape, where, source):
        return dense_output_shape(shape, self.weight.shape, where, source, "FloatDense")

    def forward(self, x):
        """Return ``x @ weight + bias`` for ``x`` ``(M, K)``, then the ReLU if any."""
        a = x @ self.weight + self.bias
        if self.relu:
            a = np.maximum(a, 0.0)
        return a


class FloatConv2D:
    """A float 2-D convolution on NHWC input, optionally followed by a ReLU.

    The same arithmetic as :class:`~hwgen.nn.Conv2D` in floats: zero padding, then
    ``y[m, oy, ox, n] = sum_{ky, kx, c} xpad[m, oy*stride + ky, ox*stride + kx, c] *
    weight[ky, kx, c, n] + bias[n]``.

    Parameters
    ----------
    weight : array_like of float, shape (KH, KW, C_in, C_out)
    bias : array_like of float, shape (C_out,), optional
        Zeros by default.
    stride, padding : int
        The same on both axes; ``stride >= 1``, ``padding >= 0``.
    relu : bool
        Whether a ReLU follows.

    Attributes
    ----------
    weight, bias : numpy.ndarray of float64
        The parameters, copied; training updates them in place.
    stride, padding : int
    relu : bool

    Raises
    ------
    ValueError
        If a shape is wrong or ``stride`` or ``padding`` is not one integer in range.
    """

    def __init__(self, weight, bias=None, *, stride=1, padding=0, relu=True):
        self.weight = _float_param(weight, "FloatConv2D", "weight", 4,
                                   "(KH, KW, C_in, C_out)")
        self.bias = _bias(bias, self.weight.shape[3], "FloatConv2D")
        self.stride = int_scalar(stride, "FloatConv2D", "stride", 1)
        self.padding = int_scalar(padding, "FloatConv2D", "padding", 0)
        self.relu = bool(relu)

    @classmethod
    def random(cls, kernel_size, in_channels, out_channels, *, stride=1, padding=0, relu=True,
               rng=None):
        """Return a layer with He-normal weights (``std = sqrt(2 / (KH*KW*C_in))``), zero bias.

        ``kernel_size`` is ``KH = KW`` or ``(KH, KW)``; ``rng`` a
        :class:`numpy.random.Generator` or a seed.
        """
        kh, kw = (kernel_size, kernel_size) if np.ndim(kernel_size) == 0 else kernel_size
        rng = np.random.default_rng(rng)
        fan_in = kh * kw * in_channels
        weight = rng.normal(0.0, np.sqrt(2.0 / fan_in), size=(kh, kw, in_channels, out_channels))
        return cls(weight, stride=stride, padding=padding, relu=relu)

    @property
    def params(self):
        """``[weight, bias]``, the arrays training updates."""
        return [self.weight, self.bias]

    @property
    def kernel_size(self):
        """``(KH, KW)``."""
        return self.weight.shape[0], self.weight.shape[1]

    def __repr__(self):
        kh, kw, c_in, c_out = self.weight.shape
        return (f"FloatConv2D({kh}x{kw}, {c_in} -> {c_out}, stride={self.stride}, "
                f"padding={self.padding}, relu={self.relu})")

    def _output_shape(self, shape, where, source):
        return conv_output_shape(shape, self.weight.shape, self.stride, self.padding,
                                 where=where, source=source, kind="FloatConv2D")

    def forward(self, x):
        """Return the convolution of NHWC ``x`` ``(M, H, W, C_in)``, then the ReLU if any."""
        return forward_cached(self, x)[0]


def forward_cached(layer, x):
    """Return ``(y, cache)``: ``layer``'s output for ``x`` and what :func:`backward` needs."""
    if isinstance(layer, FloatConv2D):
        patches = im2col(x, layer.kernel_size, layer.stride, layer.padding)
        rows = patches.reshape(-1, patches.shape[-1])
        a = rows @ layer.weight.reshape(rows.shape[1], -1) + layer.bias
        if layer.relu:
            a = np.maximum(a, 0.0)
        return a.reshape(*patches.shape[:3], -1), (x.shape, rows, a)
    if isinstance(layer, FloatDense):
        y = layer.forward(x)
        return y, (x, y)
    if isinstance(layer, MaxPool2D):
        return layer.forward(x), x
    if isinstance(layer, Flatten):
        return layer.forward(x), x.shape
    raise TypeError(f"{type(layer).__name__} is not a float layer")


def backward(layer, cache, grad, need_input=True):
    """Return ``(grad_x, param_grads)`` for the output gradient ``grad`` of ``layer``.

    ``param_grads`` is ``[grad_weight, grad_bias]`` for a layer with parameters, ``[]``
    otherwise; ``grad_x`` is ``None`` when ``need_input`` is false (the first layer).
    """
    if isinstance(layer, FloatConv2D):
        shape, rows, a = cache
        delta = grad.reshape(a.shape)
        if layer.relu:
            delta = delta * (a > 0)  # the ReLU passes the gradient where its output is positive
        matrix = layer.weight.reshape(rows.shape[1], -1)
        grads = [(rows.T @ delta).reshape(layer.weight.shape), delta.sum(axis=0)]
        if not need_input:
            return None, grads
        patches = (delta @ matrix.T).reshape(*grad.shape[:3], -1)
        return col2im(patches, shape, layer.kernel_size, layer.stride, layer.padding), grads
    if isinstance(layer, FloatDense):
        x, y = cache
        delta = grad * (y > 0) if layer.relu else grad
        grads = [x.T @ delta, delta.sum(axis=0)]
        return (delta @ layer.weight.T if need_input else None), grads
    if isinstance(layer, MaxPool2D):
        return (_pool_backward(layer, cache, grad) if need_input else None), []
    if isinstance(layer, Flatten):
        return (grad.reshape(cache) if need_input else None), []
    raise TypeError(f"{type(layer).__name__} is not a float layer")


def _pool_backward(layer, x, grad):
    """Send each window's gradient to the window's argmax; overlapping windows add up."""
    windows = layer.windows(x)
    size, stride = layer.size, layer.stride
    winner = windows.reshape(*windows.shape[:4], size * size).argmax(axis=-1)
    out = np.zeros(x.shape, dtype=grad.dtype)
    oh, ow = grad.shape[1], grad.shape[2]
    for ky in range(size):
        for kx in range(size):
            routed = np.where(winner == ky * size + kx, grad, 0.0)
            out[:, ky:ky + (oh - 1) * stride + 1:stride,
                kx:kx + (ow - 1) * stride + 1:stride, :] += routed
    return out
