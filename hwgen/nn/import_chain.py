"""What the importers share: the error that lists every offender, and the layer ops they fold.

An importer walks a model in order and reports each layer or node to a :class:`Chain` (over
the tensors of :mod:`hwgen.nn.import_graph`, so that a graph is walked alike), which
checks shapes as it goes, converts PyTorch/ONNX's ``(c, h, w)`` flatten order to ours, folds
what docs/arithmetic.md folds at import (activations into the layer they
follow, BatchNorm into the dense or convolution layer before it, a final Softmax, LogSoftmax
or Sigmoid into ``output_function``) and collects every offender, so that one
:class:`UnsupportedModelError` lists them all.
"""

import importlib
import math

import numpy as np

from ._ints import int_pads
from .flatten import Flatten
from .float_layers import FloatConv2D, FloatDense
from .float_pool import FloatAvgPool2D, FloatGlobalAvgPool2D
from .graph import INPUT
from .import_graph import Tensors, is_dense
from .maxpool import MaxPool2D

_ACTIVATION_NAMES = {"relu": "a ReLU", "leaky_relu": "a leaky ReLU", "clamp": "a clamp"}

__all__ = ["Chain", "UnsupportedModelError", "compact", "require", "same_pair"]


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


def _running(field):
    """A property for ``field`` of the running tensor's :class:`TensorState`."""
    return property(lambda self: getattr(self.state, field),
                    lambda self, value: setattr(self.state, field, value))


class Chain(Tensors):
    """Collects float layers and offenders while an importer walks a model.

    The layer ops act on the running tensor (:attr:`state`): in a chain, the previous op's
    output; a graph walker picks it with :meth:`~Tensors.read` and names the output with
    :meth:`~Tensors.write` (see :mod:`hwgen.nn.import_graph`). ``shape`` is the running
    per-sample shape in our layout (``(H, W, C)`` or ``(K,)``), ``None`` while unknown: before
    the first dense layer of a model imported without a shape, and after an offender (whose
    effect on the shape is unknown; later shape checks are skipped rather than guessed, so no
    offender is reported that is not one).

    Parameters
    ----------
    source : str
        ``"PyTorch"`` or ``"ONNX"``, for the error message.
    input_shape : tuple of int or None
    uses : dict, optional
        How many times the source graph reads each of its tensors (see :class:`Tensors`).
    """

    shape = _running("shape")
    # The Flatten whose source order (c, h, w) the next dense layer converts: (name, kind,
    # (H, W, C)), or None.
    pending = _running("pending")
    origin = _running("origin")
    # True while the running tensor is a dense or convolution layer's output with nothing
    # applied after it, so that a BatchNorm can still be folded into it.
    bare = _running("bare")
    # A Softmax, LogSoftmax or Sigmoid seen: (name, kind, function) until another layer
    # follows it (an offender) or the model ends (its output_function).
    final = _running("final")
    # A zero padding seen, (name, kind, (top, bottom, left, right)), until the convolution
    # after it takes it into its own padding.
    padding = _running("padding")

    def dense(self, name, kind, weight, bias):
        """Add ``y = x @ weight + bias`` (``weight`` ``(K, N)``, in the source's feature order)."""
        self.follows(name, kind)
        weight = np.asarray(weight, dtype=np.float64)
        n = weight.shape[1]
        bias = (np.zeros(n) if bias is None
                else np.broadcast_to(np.asarray(bias, dtype=np.float64), (n,)))
        if self.shape is not None and len(self.shape) == 3:
            self.offender(name, kind, f"takes a spatial input {self.shape} ({self.origin}); "
                                      "supported: a Flatten before it")
            return False
        if self.shape is not None and self.shape[0] != weight.shape[0]:
            gives = "the previous layer" if self.state.node != INPUT else "the input"
            self.offender(name, kind, f"takes {weight.shape[0]} inputs but {gives} gives "
                                      f"{self.shape[0]}")
            return False
        if self.pending is not None:
            h, w, c = self.pending[2]
            # Source feature (c*H + y)*W + x is ours (y*W + x)*C + c: permute the rows.
            weight = weight.reshape(c, h, w, n).transpose(1, 2, 0, 3).reshape(h * w * c, n)
            self.pending = None
        self._advance(FloatDense(weight, bias, relu=False), (n,), name)
        self.bare = True
        return True

    def conv(self, name, kind, weight, bias, *, stride, padding, groups=1):
        """Add a convolution; ``weight`` is ours, ``(KH, KW, C_in / groups, C_out)``,
        ``stride`` an int or ``(sy, sx)``, ``padding`` an int or ``(top, bottom, left, right)``
        (plus a zero padding just before it, see :meth:`zero_pad`)."""
        if self.padding is not None:
            padding = np.add(int_pads(padding, kind), self.padding[2])
            self.padding = None
        self.follows(name, kind)
        try:
            layer = FloatConv2D(weight, bias, stride=compact(stride), padding=compact(padding),
                                groups=groups, relu=False)
        except ValueError as exc:
            self.offender(name, kind, str(exc).removeprefix("FloatConv2D: "))
            return
        if self._spatial(layer, name, kind):
            self.bare = True

    def zero_pad(self, name, kind, pads):
        """Note a zero padding ``(top, bottom, left, right)`` (ints >= 0) of the image, which the
        convolution right after it takes into its own padding (Keras-style "same")."""
        self.follows(name, kind)
        if self.shape is not None and len(self.shape) != 3:
            self.offender(name, kind, f"pads a flat input {self.shape}; supported: an image")
            return
        self.padding = (name, kind, tuple(int(p) for p in pads))

    def pool(self, name, kind, size, stride):
        """Add a max pooling layer."""
        self.follows(name, kind)
        self._spatial(MaxPool2D(size, stride), name, kind)

    def avgpool(self, name, kind, size, stride):
        """Add an average pooling layer (``size``, ``stride``: ints or pairs), no padding."""
        self.follows(name, kind)
        self._spatial(FloatAvgPool2D(size, stride), name, kind)

    def global_avgpool(self, name, kind):
        """Add a global average pooling layer, ``(H, W, C) -> (1, 1, C)``."""
        self.follows(name, kind)
        self._spatial(FloatGlobalAvgPool2D(), name, kind)

    def _spatial(self, layer, name, kind):
        """Add a layer whose shape its ``_output_shape`` checks; return whether it fit."""
        if not self.state.known or (self.shape is None and self.offenders):
            self._advance(layer, None, name)
            return True
        try:
            shape = layer._output_shape(self.shape or (), "", self.origin)
        except ValueError as exc:
            # The source's layer type, not the float layer's, in the message.
            self.offender(name, kind, str(exc).removeprefix(": ").replace(
                type(layer).__name__, kind))
            return False
        self._advance(layer, shape, name)
        return True

    def flatten(self, name, kind):
        """Flatten a spatial input in the source's ``(c, h, w)`` order; a no-op on rows."""
        self.follows(name, kind)
        if self.shape is None or len(self.shape) == 1:
            return
        h, w, _ = self.shape
        if h * w > 1:  # one pixel: both orders agree
            self.pending = (name, kind, self.shape)
        self._advance(Flatten(), (math.prod(self.shape),), name)

    def relu(self, name, kind):
        """Fold a ReLU into the last layer that computes (see :meth:`activation`)."""
        self.activation(name, kind, "relu")

    def activation(self, name, kind, op, *, alpha=None, low=None, high=None):
        """Fold an activation into the last dense, convolution or average pooling layer.

        ``op`` is ``"relu"``, ``"leaky_relu"`` (``alpha``) or ``"clamp"`` (``low``, ``high``,
        either ``None``). Every one is monotone, so it commutes with max pooling and
        flattening and may follow them (see :meth:`Activated.then
        <hwgen.nn.float_activation.Activated.then>`).
        """
        self.follows(name, kind)
        state = self.state
        if state.target is None and not state.known:
            return  # after an offender whose output nothing could be folded into
        if state.target is None:
            self.offenders.append((name, kind, f"{_ACTIVATION_NAMES[op]} before the first dense "
                                               "or convolution layer cannot be mapped"))
            return
        if not state.private:
            self.offenders.append((name, kind, _shared(_ACTIVATION_NAMES[op], state)))
            return
        reason = self.layer(state.target).then(op, alpha=alpha, low=low, high=high)
        if reason:
            self.offenders.append((name, kind, reason))

    def batchnorm(self, name, kind, scale, offset):
        """Fold ``y = x * scale + offset`` per channel into the layer before it, in float.

        For BatchNorm ``scale = gamma / sqrt(var + eps)`` and ``offset = beta - mean * scale``,
        so ``W' = W * scale`` (per output channel) and ``b' = b * scale + offset``.
        """
        bare, self.bare = self.bare, False
        self.follows(name, kind)
        layer = self.layers.get(self.state.node) if bare else None
        # A BatchNorm keeps the shape, so later shape checks still hold after an offender.
        if layer is not None and not self.state.private:
            self.offenders.append((name, kind, _shared("a BatchNorm", self.state)))
            return
        if not is_dense(layer):
            self.offenders.append((name, kind, "follows no Linear/Gemm/MatMul or Conv "
                                               "directly, so it cannot be folded; supported: "
                                               "right after one of them"))
            return
        n = layer.bias.shape[0]
        if np.shape(scale) != (n,) or np.shape(offset) != (n,):
            self.offenders.append((name, kind, f"has {np.size(scale)} channels but the layer "
                                               f"before it has {n} outputs; supported: one "
                                               "per output channel"))
            return
        layer.weight *= scale  # broadcasts along the last axis, the output channels
        layer.bias = layer.bias * scale + offset
        self.bare = True  # a second BatchNorm would fold the same way

    def final_function(self, name, kind, function):
        """Record a final Softmax, LogSoftmax or Sigmoid (``function`` as in
        :mod:`hwgen.nn.output_function`); anything computed after it is an offender."""
        self.follows(name, kind)
        if self.shape is not None and len(self.shape) != 1:
            self.offender(name, kind, f"applies to a spatial output {self.shape}; supported: "
                                      "on the class scores (N,) at the end")
            return
        self.final = (name, kind, function)

    def build(self, output=None):
        """Return the model: an :class:`MLP` for a chain of dense layers on rows with ReLUs or
        none, else a :class:`CNN` with ``input_shape`` (a chain, or a graph of nodes); either
        with ``output_function``.

        Parameters
        ----------
        output : str, optional
            The source tensor that is the model's output; by default the running one.

        Raises
        ------
        UnsupportedModelError
            Listing every offender.
        """
        if output is not None:
            self.read(output)
        if self.padding is not None:
            name, kind, _ = self.padding
            self.offenders.append((name, kind, "supported only right before a convolution, but "
                                               "the model ends there"))
        if self.final is not None:
            self.output_function = self.final[2]
        if self.pending is not None:
            name, kind, shape = self.pending
            self.offenders.append((name, kind, f"flattens {shape} in (c, h, w) order but no "
                                               "dense layer follows to convert it to ours "
                                               "(h, w, c); supported: a Linear/Gemm after it"))
        nodes = self.live_nodes(self.state.node)
        if not any(is_dense(node.layer) for node in nodes) and not self.offenders:
            self.offenders.append(("<model>", "-", "no dense layer (or convolution) found"))
        if self.offenders:
            # A misplaced padding or final function read by several nodes is listed once.
            raise UnsupportedModelError(self.source, dict.fromkeys(self.offenders))
        return self.model(nodes)


def _shared(what, state):
    """Why ``what`` cannot fold into ``state.target``: another node reads what it changes."""
    return (f"{what} on {state.origin} cannot be folded into {state.target!r}, whose output "
            "another node also reads (directly or through pooling or flattening); supported: "
            "folding into a layer that nothing else reads")


def compact(value):
    """Return a per-axis stride or padding in its shortest form: one int when every entry is
    the same, ``(ph, pw)`` for ``(ph, ph, pw, pw)``, else as given (a tuple)."""
    values = tuple(int(v) for v in np.reshape(value, -1))
    if len(set(values)) == 1:
        return values[0]
    if len(values) == 4 and values[0] == values[1] and values[2] == values[3]:
        return values[0], values[2]
    return values


def same_pair(value, name):
    """Return ``(a, None)`` if ``value`` is one int or a pair of equal ints, else
    ``(None, reason)``."""
    pair = (value, value) if np.ndim(value) == 0 else tuple(value)
    if len(pair) != 2 or pair[0] != pair[1]:
        return None, f"{name}={value}; supported: the same on both axes"
    return int(pair[0]), None
