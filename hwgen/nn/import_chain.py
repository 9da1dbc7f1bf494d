"""What the importers share: the error that lists every offender, and the chain they build.

An importer walks a model in order and reports each layer or node to a :class:`Chain`, which
checks shapes as it goes, converts PyTorch/ONNX's ``(c, h, w)`` flatten order to ours and
collects every offender, so that one :class:`UnsupportedModelError` lists them all.
"""

import importlib
import math

import numpy as np

from .cnn import CNN
from .conv import conv_output_shape
from .flatten import Flatten
from .float_layers import FloatConv2D, FloatDense
from .maxpool import MaxPool2D
from .mlp import MLP

__all__ = ["Chain", "UnsupportedModelError", "require", "same_pair"]


class UnsupportedModelError(ValueError):
    """A model holds layers or nodes that cannot be mapped onto the supported layers.

    Attributes
    ----------
    offenders : list of (str, str, str)
        ``(name, type, reason)`` of every offending layer or node, in model order.
    """

    def __init__(self, source, offenders):
        self.offenders = list(offenders)
        lines = [f"  - {name} ({kind}): {reason}" for name, kind, reason in self.offenders]
        super().__init__(f"{source} model has {len(self.offenders)} unsupported layer(s)/node(s):\n"
                         + "\n".join(lines))


def require(module, extra):
    """Import an optional dependency, or raise ``ImportError`` saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{module} is needed to import this model; install it with "
                          f"`pip install {module}` (or `pip install hwgen[{extra}]`)") from exc


class Chain:
    """Collects float layers and offenders while an importer walks a model.

    ``shape`` is the running per-sample shape in our layout (``(H, W, C)`` or ``(K,)``),
    ``None`` while unknown: before the first dense layer of a model imported without a shape,
    and after an offender (whose effect on the shape is unknown; later shape checks are
    skipped rather than guessed, so no offender is reported that is not one).

    Parameters
    ----------
    source : str
        ``"PyTorch"`` or ``"ONNX"``, for the error message.
    input_shape : tuple of int or None
    """

    def __init__(self, source, input_shape):
        self.source = source
        self.input_shape = input_shape
        self.shape = input_shape
        self.layers = []
        self.offenders = []
        # The Flatten whose source order (c, h, w) the next dense layer converts: (name, kind,
        # (H, W, C)), or None.
        self.pending = None
        self.origin = "the input"

    def offender(self, name, kind, reason):
        """Record an unsupported layer; the running shape becomes unknown."""
        self.offenders.append((name, kind, reason))
        self.shape = None
        self.pending = None

    def _advance(self, layer, shape, name):
        self.layers.append(layer)
        self.shape = shape
        self.origin = f"{name!r}"

    def dense(self, name, kind, weight, bias):
        """Add ``y = x @ weight + bias`` (``weight`` ``(K, N)``, in the source's feature order)."""
        weight = np.asarray(weight, dtype=np.float64)
        n = weight.shape[1]
        bias = (np.zeros(n) if bias is None
                else np.broadcast_to(np.asarray(bias, dtype=np.float64), (n,)))
        if self.shape is not None and len(self.shape) == 3:
            self.offender(name, kind, f"takes a spatial input {self.shape} ({self.origin}); "
                                      "supported: a Flatten before it")
            return False
        if self.shape is not None and self.shape[0] != weight.shape[0]:
            gives = "the previous layer" if self.layers else "the input"
            self.offender(name, kind, f"takes {weight.shape[0]} inputs but {gives} gives "
                                      f"{self.shape[0]}")
            return False
        if self.pending is not None:
            h, w, c = self.pending[2]
            # Source feature (c*H + y)*W + x is ours (y*W + x)*C + c: permute the rows.
            weight = weight.reshape(c, h, w, n).transpose(1, 2, 0, 3).reshape(h * w * c, n)
            self.pending = None
        self._advance(FloatDense(weight, bias, relu=False), (n,), name)
        return True

    def conv(self, name, kind, weight, bias, *, stride, padding):
        """Add a convolution; ``weight`` is ours, ``(KH, KW, C_in, C_out)``."""
        layer = FloatConv2D(weight, bias, stride=stride, padding=padding, relu=False)
        if self.shape is None and self.offenders:
            self._advance(layer, None, name)
            return
        try:
            shape = conv_output_shape(self.shape or (), layer.weight.shape, stride, padding,
                                      where="", source=self.origin, kind=kind)
        except ValueError as exc:
            self.offender(name, kind, str(exc).removeprefix(": "))
            return
        self._advance(layer, shape, name)

    def pool(self, name, kind, size, stride):
        """Add a max pooling layer."""
        layer = MaxPool2D(size, stride)
        if self.shape is None and self.offenders:
            self._advance(layer, None, name)
            return
        try:
            shape = layer._output_shape(self.shape or (), "", self.origin)
        except ValueError as exc:
            self.offender(name, kind, str(exc).removeprefix(": "))
            return
        self._advance(layer, shape, name)

    def flatten(self, name, kind):
        """Flatten a spatial input in the source's ``(c, h, w)`` order; a no-op on rows."""
        if self.shape is None or len(self.shape) == 1:
            return
        h, w, _ = self.shape
        if h * w > 1:  # one pixel: both orders agree
            self.pending = (name, kind, self.shape)
        self._advance(Flatten(), (math.prod(self.shape),), name)

    def relu(self, name, kind):
        """Fold a ReLU into the last dense or convolution layer.

        ReLU commutes with max pooling and flattening, so it may follow them.
        """
        params = [layer for layer in self.layers if isinstance(layer, FloatDense | FloatConv2D)]
        if not params:
            self.offenders.append((name, kind, "a ReLU before the first dense or convolution "
                                               "layer cannot be mapped"))
        else:
            params[-1].relu = True  # relu(relu(a)) == relu(a), so repeats are harmless

    def build(self):
        """Return the model: an :class:`MLP` for a chain of dense layers on rows, else a
        :class:`CNN` with ``input_shape``.

        Raises
        ------
        UnsupportedModelError
            Listing every offender.
        """
        if self.pending is not None:
            name, kind, shape = self.pending
            self.offenders.append((name, kind, f"flattens {shape} in (c, h, w) order but no "
                                               "dense layer follows to convert it to ours "
                                               "(h, w, c); supported: a Linear/Gemm after it"))
        if not any(isinstance(layer, FloatDense | FloatConv2D) for layer in self.layers) \
                and not self.offenders:
            self.offenders.append(("<model>", "-", "no dense layer (or convolution) found"))
        if self.offenders:
            raise UnsupportedModelError(self.source, self.offenders)
        if all(isinstance(layer, FloatDense) for layer in self.layers):
            return MLP.from_layers([(layer.weight, layer.bias) for layer in self.layers],
                                   [layer.relu for layer in self.layers])
        return CNN(self.layers, input_shape=self.input_shape)


def same_pair(value, name):
    """Return ``(a, None)`` if ``value`` is one int or a pair of equal ints, else
    ``(None, reason)``."""
    pair = (value, value) if np.ndim(value) == 0 else tuple(value)
    if len(pair) != 2 or pair[0] != pair[1]:
        return None, f"{name}={value}; supported: the same on both axes"
    return int(pair[0]), None
