"""Float average pooling of a :class:`~hwgen.nn.CNN`, with its gradient.

docs/arithmetic.md's pooling in floats: :class:`FloatAvgPool2D` is the mean of each
``kh x kw`` window at stride ``(sy, sx)``, no padding; :class:`FloatGlobalAvgPool2D` the mean
over the whole ``H x W`` image, output ``(1, 1, C)``. Either may be followed by a ReLU and clamp
bounds (never a leaky ReLU: the integer pools have no negative multiplier).
"""

import numpy as np

from ._ints import int_pair
from .float_activation import Activated
from .float_geometry import check_window
from .patches import col2im, im2col

__all__ = ["FloatAvgPool2D", "FloatGlobalAvgPool2D"]

_NO_PADS = (0, 0, 0, 0)


class FloatAvgPool2D(Activated):
    """The mean of every ``kh x kw`` window, windows at ``(oy*sy, ox*sx)``, no padding.

    Parameters
    ----------
    size : int or (int, int)
        ``kh = kw`` or ``(kh, kw)``, each ``>= 1``.
    stride : int or (int, int), optional
        ``>= 1``; ``size`` by default (windows that do not overlap).
    activation : {"identity", "relu"}
    act_min, act_max : float, optional
        Clamp bounds after the activation.

    Attributes
    ----------
    size, stride
        As given (``stride`` is ``size`` when not given).
    kernel_size, strides : (int, int)
    activation, act_min, act_max
        See :class:`~hwgen.nn.float_activation.Activated`.

    Raises
    ------
    ValueError
        Naming the field, for a bad size, stride or activation.
    """

    _allowed = ("identity", "relu")

    def __init__(self, size, stride=None, *, activation="identity", act_min=None,
                 act_max=None):
        self.size = size
        self.stride = size if stride is None else stride
        self.kernel_size = int_pair(size, "FloatAvgPool2D", "size", 1)
        self.strides = int_pair(self.stride, "FloatAvgPool2D", "stride", 1)
        self._set_activation("FloatAvgPool2D", None, activation, 0.0,
                             (act_min, act_max))

    def __repr__(self):
        return (f"FloatAvgPool2D({self.size}, stride={self.stride}, "
                f"{self._activation_repr()})")

    def _output_shape(self, shape, where, source):
        oh, ow = check_window(shape, self.kernel_size, self.strides, _NO_PADS, where=where,
                              source=source, kind="FloatAvgPool2D",
                              field="size")
        return oh, ow, shape[2]

    def forward(self, x):
        """Return the window means of NHWC ``x``, then the activation."""
        return self.forward_cached(x)[0]

    def forward_cached(self, x):
        """Return ``(y, cache)``: the output and what :meth:`backward` needs."""
        patches = im2col(x, self.kernel_size, self.strides, _NO_PADS)
        m, oh, ow, _ = patches.shape
        y = self.activate(patches.reshape(m, oh, ow, -1, x.shape[3]).mean(axis=3))
        return y, (x.shape, y)

    def backward(self, cache, grad, need_input=True):
        """Return ``(grad_x, [])``: each window's gradient shared equally by its inputs."""
        if not need_input:
            return None, []
        shape, y = cache
        kh, kw = self.kernel_size
        delta = grad * self.derivative(y) / (kh * kw)
        grid = np.broadcast_to(delta[:, :, :, None, :], (*delta.shape[:3], kh * kw,
                                                          delta.shape[3]))
        return col2im(grid.reshape(*delta.shape[:3], -1), shape, self.kernel_size,
                      self.strides, _NO_PADS), []


class FloatGlobalAvgPool2D(Activated):
    """The mean over the whole image: ``(H, W, C) -> (1, 1, C)``.

    Parameters
    ----------
    activation : {"identity", "relu"}
    act_min, act_max : float, optional

    Attributes
    ----------
    activation, act_min, act_max
        See :class:`~hwgen.nn.float_activation.Activated`.
    """

    _allowed = ("identity", "relu")

    def __init__(self, *, activation="identity", act_min=None, act_max=None):
        self._set_activation("FloatGlobalAvgPool2D", None, activation, 0.0,
                             (act_min, act_max))

    def __repr__(self):
        return f"FloatGlobalAvgPool2D({self._activation_repr()})"

    def _output_shape(self, shape, where, source):
        if len(shape) != 3:
            raise ValueError(f"{where}: FloatGlobalAvgPool2D needs a spatial input (H, W, C) "
                             f"but {source} gives {shape}; allowed: after a spatial layer")
        return 1, 1, shape[2]

    def forward(self, x):
        """Return the image means of NHWC ``x``, ``(M, 1, 1, C)``, then the activation."""
        return self.forward_cached(x)[0]

    def forward_cached(self, x):
        """Return ``(y, cache)``: the output and what :meth:`backward` needs."""
        y = self.activate(x.mean(axis=(1, 2), keepdims=True))
        return y, (x.shape, y)

    def backward(self, cache, grad, need_input=True):
        """Return ``(grad_x, [])``: the gradient shared equally by every pixel."""
        if not need_input:
            return None, []
        shape, y = cache
        delta = grad * self.derivative(y) / (shape[1] * shape[2])
        return np.broadcast_to(delta, shape).copy(), []
