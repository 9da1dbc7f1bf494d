"""The float layers of a :class:`~hwgen.nn.CNN`, with their gradients.

:class:`FloatDense` and :class:`~hwgen.nn.FloatConv2D` hold float64 parameters and an
activation (ReLU, leaky ReLU or none, then optional clamp bounds: the integer layers fuse the
activation the same way); :class:`~hwgen.nn.FloatAvgPool2D` and
:class:`~hwgen.nn.FloatGlobalAvgPool2D` average. :class:`~hwgen.nn.MaxPool2D` and
:class:`~hwgen.nn.Flatten` carry no numbers, so the integer network's objects serve here too;
:func:`forward_cached` and :func:`backward` give every layer type its forward and backward pass.

Backward passes: a dense layer's weight gradient is ``x.T @ delta``; a convolution is a dense
layer per group on its patches (see :mod:`hwgen.nn.float_conv`); max pooling sends each window's
gradient to the window's argmax (the first one on ties); average pooling shares it equally; an
activation multiplies it by its derivative (0 where a ReLU or a bound cut the value off).
"""

import numpy as np

from ._floats import float_bias, float_param
from .dense import dense_output_shape
from .flatten import Flatten
from .float_activation import Activated
from .float_conv import FloatConv2D
from .float_pool import FloatAvgPool2D, FloatGlobalAvgPool2D
from .maxpool import MaxPool2D

__all__ = ["FloatConv2D", "FloatDense", "backward", "forward_cached"]


class FloatDense(Activated):
    """A float fully connected layer ``y = f(x @ weight + bias)``, ``f`` a ReLU by default.

    Parameters
    ----------
    weight : array_like of float, shape (K, N)
    bias : array_like of float, shape (N,), optional
        Zeros by default.
    relu : bool, optional
        The older spelling: ``activation="relu"`` (the default) or ``"identity"``.
    activation : {"identity", "relu", "leaky_relu"}, optional
    alpha : float
        Leaky ReLU's negative slope.
    act_min, act_max : float, optional
        Clamp bounds after the activation (ReLU6 is ``relu`` with ``act_max=6``).

    Attributes
    ----------
    weight, bias : numpy.ndarray of float64
        The parameters, copied; training updates them in place.
    activation, alpha, act_min, act_max, relu
        See :class:`~hwgen.nn.float_activation.Activated`.

    Raises
    ------
    ValueError
        If a shape or an activation field is wrong.
    """

    def __init__(self, weight, bias=None, *, relu=None, activation=None, alpha=0.01,
                 act_min=None, act_max=None):
        self.weight = float_param(weight, "FloatDense", "weight", 2, "(K, N)")
        self.bias = float_bias(bias, self.weight.shape[1], "FloatDense")
        self._set_activation("FloatDense", relu, activation, alpha, (act_min, act_max))

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
        return f"FloatDense({k} -> {n}, {self._activation_repr()})"

    def _output_shape(self, shape, where, source):
        return dense_output_shape(shape, self.weight.shape, where, source, "FloatDense")

    def forward(self, x):
        """Return ``x @ weight + bias`` for ``x`` ``(M, K)``, then the activation."""
        return self.activate(x @ self.weight + self.bias)

    def forward_cached(self, x):
        """Return ``(y, cache)``: the output and what :meth:`backward` needs."""
        y = self.activate(x @ self.weight + self.bias)
        return y, (x, y)

    def backward(self, cache, grad, need_input=True):
        """Return ``(grad_x, [grad_weight, grad_bias])`` for the output gradient ``grad``."""
        x, y = cache
        delta = grad * self.derivative(y)
        grads = [x.T @ delta, delta.sum(axis=0)]
        return (delta @ self.weight.T if need_input else None), grads


_COMPUTED = (FloatDense, FloatConv2D, FloatAvgPool2D, FloatGlobalAvgPool2D)


def forward_cached(layer, x):
    """Return ``(y, cache)``: ``layer``'s output for ``x`` and what :func:`backward` needs."""
    if isinstance(layer, _COMPUTED):
        return layer.forward_cached(x)
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
    if isinstance(layer, _COMPUTED):
        return layer.backward(cache, grad, need_input)
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
