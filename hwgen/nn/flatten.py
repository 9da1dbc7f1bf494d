"""Flattening an NHWC tensor into feature rows, per docs/arithmetic.md."""

import math

import numpy as np

__all__ = ["Flatten"]


class Flatten:
    """Reshape ``(M, H, W, C)`` to ``(M, H*W*C)``, feature index ``(y*W + x)*C + c``.

    This is the ``(h, w, c)`` order of NHWC memory, not PyTorch's ``(c, h, w)``: the importers
    permute the rows of the following dense layer's weight so that imported models compute
    the same function. It has no parameters and no cost (the hardware reads the same memory).
    The same object serves the integer network and the float :class:`~hwgen.nn.CNN`.
    """

    def __repr__(self):
        return "Flatten()"

    def check(self, where):
        """Nothing to check; present so that every layer answers the same calls."""

    def output_shape(self, input_shape):
        """Return ``(H*W*C,)`` for an input ``(H, W, C)``.

        Raises
        ------
        ValueError
            If the input is not spatial.
        """
        return self._output_shape(tuple(input_shape), "Flatten", "the input")

    def _output_shape(self, shape, where, source):
        if len(shape) != 3:
            raise ValueError(f"{where}: Flatten needs a spatial input (H, W, C) but {source} "
                             f"gives {shape}; allowed: a Flatten after input_shape=(H, W, C), "
                             "a Conv2D or a MaxPool2D")
        return (math.prod(shape),)

    def forward(self, x):
        """Return NHWC ``x`` as ``(M, H*W*C)`` rows."""
        x = np.asarray(x)
        return x.reshape(x.shape[0], math.prod(x.shape[1:]))
