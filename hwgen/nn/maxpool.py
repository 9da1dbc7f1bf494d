"""2-D max pooling over NHWC tensors, per docs/arithmetic.md.

Pooling follows the activation, so on integers it is exact: the maximum of the window's int
values. The same layer object serves the integer network and the float :class:`~hwgen.nn.CNN`.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ._ints import int_scalar

__all__ = ["MaxPool2D"]


class MaxPool2D:
    """Max pooling with a square window, no padding, output size rounded down.

    ``y[m, oy, ox, c] = max_{ky, kx < size} x[m, oy*stride + ky, ox*stride + kx, c]``, with
    ``OH = (H - size) // stride + 1`` (the same for ``OW``).

    Parameters
    ----------
    size : int
        Window height and width, ``>= 1``.
    stride : int, optional
        Step between windows, ``>= 1``; ``size`` by default (windows that do not overlap).

    Attributes
    ----------
    size, stride : int

    Raises
    ------
    ValueError
        If ``size`` or ``stride`` is not one integer ``>= 1``.
    """

    def __init__(self, size, stride=None):
        self.size = size
        self.stride = size if stride is None else stride
        self.check("MaxPool2D")

    def __repr__(self):
        return f"MaxPool2D(size={self.size}, stride={self.stride})"

    def check(self, where):
        """Check ``size`` and ``stride``; ``where`` prefixes the error messages.

        Raises
        ------
        ValueError
            As described for the class.
        """
        self.size = int_scalar(self.size, where, "size", 1)
        self.stride = int_scalar(self.stride, where, "stride", 1)

    def output_shape(self, input_shape):
        """Return the per-sample output shape ``(OH, OW, C)`` for an input ``(H, W, C)``.

        Raises
        ------
        ValueError
            If the input is not spatial or the window is larger than it.
        """
        return self._output_shape(tuple(input_shape), "MaxPool2D", "the input")

    def _output_shape(self, shape, where, source):
        if len(shape) != 3:
            raise ValueError(f"{where}: MaxPool2D needs a spatial input (H, W, C) but {source} "
                             f"gives {shape}; allowed: a MaxPool2D after input_shape=(H, W, C), "
                             "a Conv2D or a MaxPool2D")
        h, w, c = shape
        if self.size > min(h, w):
            raise ValueError(f"{where}: field 'size' is {self.size} but {source} gives {shape}; "
                             f"allowed: size <= {min(h, w)} (no padding)")
        return ((h - self.size) // self.stride + 1, (w - self.size) // self.stride + 1, c)

    def windows(self, x):
        """Return a view of NHWC ``x``'s windows, ``(M, OH, OW, C, size, size)``."""
        oh = (x.shape[1] - self.size) // self.stride + 1
        ow = (x.shape[2] - self.size) // self.stride + 1
        view = sliding_window_view(x, (self.size, self.size), axis=(1, 2))
        return view[:, :(oh - 1) * self.stride + 1:self.stride,
                    :(ow - 1) * self.stride + 1:self.stride]

    def forward(self, x):
        """Return the window maxima of NHWC ``x`` (any dtype), ``(M, OH, OW, C)``.

        ``x`` must be at least ``size`` high and wide (:meth:`output_shape` checks that).
        """
        return np.asarray(self.windows(np.asarray(x)).max(axis=(4, 5)))
