"""The kinds of :mod:`hwgen.nn` layer the compiler takes, each lowered to a pass the device runs.

The device runs two kinds of pass. A *matrix* pass is ``x @ W`` then bias, requantization and
activation per channel (or the raw accumulators): over rows (a :class:`~hwgen.nn.Dense`), or
over images (a :class:`~hwgen.nn.Conv2D`: each output pixel a row over its patch, walked on
chip). A *pool* pass is a :class:`~hwgen.nn.MaxPool2D`. A :class:`~hwgen.nn.Flatten` costs
nothing: the images' words are already in ``(h, w, c)`` order, and a :class:`Dense` after it
runs as a convolution whose kernel is the whole image. :func:`lower_network` lowers a network
and proves what the hardware needs of each pass; a kind it does not know is refused with a
:class:`CompileError` naming it.

A spatial matrix pass walks its reduction tiles by kernel position ``(ky, kx)`` and, at each,
by groups of ``rows`` channels: its weight rows are the kernel's ``[KH, KW, C, N]`` with ``C``
padded to a multiple of ``rows`` (:func:`padded_matrix`).
"""

import dataclasses
import math

import numpy as np

from ..nn import INPUT, Conv2D, Dense, Flatten, MaxPool2D
from .errors import CompileError
from .proofs import (
    check_accumulator,
    check_channel_params,
    check_padded_reduction,
    check_reduction,
)

__all__ = ["DeviceLayer", "lower_network", "padded_matrix"]


@dataclasses.dataclass(frozen=True)
class DeviceLayer:
    """One pass of the device.

    Attributes
    ----------
    source : int
        The network layer whose output it computes.
    kind : str
        ``"matrix"`` or ``"pool"``.
    matrix : Dense or None
        A matrix pass's weights (for a spatial pass padded by :func:`padded_matrix`), biases
        and requantization.
    k : int
        A matrix pass's reduction (``KH * KW * C``, unpadded).
    in_shape, out_shape : tuple of int
        Per sample: ``(H, W, C)`` for images, ``(F,)`` for rows.
    kernel : tuple of int or None
        ``(kh, kw, stride, pad)`` of a spatial pass; None for a matrix pass over rows.
    name : str
        The tensor it writes: its network node's name.
    inputs : tuple of str
        The tensors it reads, in the order it takes them: ``"input"`` or an earlier pass's
        ``name`` (a :class:`~hwgen.nn.Flatten` is no tensor of its own: a pass after it reads
        the tensor it flattens).
    """

    source: int
    kind: str
    matrix: Dense | None
    k: int
    in_shape: tuple
    out_shape: tuple
    kernel: tuple | None
    name: str = ""
    inputs: tuple = ()

    @property
    def spatial(self):
        return self.kernel is not None


def padded_matrix(weight, rows):
    """Return ``weight[KH, KW, C, N]`` as ``[KH * KW * ceil(C / rows) * rows, N]``: each kernel
    position's channels padded with zero rows to a multiple of ``rows``."""
    kh, kw, c, n = weight.shape
    groups = math.ceil(c / rows)
    padded = np.zeros((kh, kw, groups * rows, n), dtype=weight.dtype)
    padded[:, :, :c, :] = weight
    return padded.reshape(kh * kw * groups * rows, n)


def _checked(index, layer, weight, k, config, *, window=None):
    """Prove what the hardware needs of a matrix layer and return it as a Dense of
    ``weight``; a spatial layer's ``window`` is ``(KH, KW, C, name)``, its reduction padded
    per position (:func:`padded_matrix`)."""
    check_reduction(index, k, config)
    if window is not None:
        kh, kw, c, name = window
        check_padded_reduction(index, (kh, kw), c, config, window=name)
    check_accumulator(index, layer, k, config)
    check_channel_params(index, layer, config)
    return Dense(weight, layer.bias, layer.mult, layer.shift, activation=layer.activation,
                 output=layer.output)


def _lower_dense(index, layer, shapes, config):
    in_shape, out_shape = shapes
    if len(in_shape) == 1:
        return DeviceLayer(index, "matrix", _checked(index, layer, layer.weight,
                                                     layer.weight.shape[0], config),
                           layer.weight.shape[0], in_shape, out_shape, None)
    # After a Flatten: a convolution whose kernel is the whole image, (h, w, c) as Flatten
    # orders the features.
    h, w, c = in_shape
    kernel = layer.weight.reshape(h, w, c, layer.weight.shape[1])
    return DeviceLayer(index, "matrix",
                       _checked(index, layer, padded_matrix(kernel, config.rows), h * w * c,
                                config, window=(h, w, c, "image before the Flatten")),
                       h * w * c, in_shape, out_shape, (h, w, 1, 0))


def _lower_conv(index, layer, shapes, config):
    in_shape, out_shape = shapes
    kh, kw, c, _ = layer.weight.shape
    return DeviceLayer(index, "matrix",
                       _checked(index, layer, padded_matrix(layer.weight, config.rows),
                                kh * kw * c, config, window=(kh, kw, c, "kernel")),
                       kh * kw * c, in_shape, out_shape, (kh, kw, layer.stride, layer.padding))


def _lower_pool(index, layer, shapes, config):
    return DeviceLayer(index, "pool", None, 0, *shapes,
                       (layer.size, layer.size, layer.stride, 0))


_LOWERINGS = {Dense: _lower_dense, Conv2D: _lower_conv, MaxPool2D: _lower_pool}


def lower_network(network, config):
    """Return the :class:`DeviceLayer` passes that compute ``network``.

    A :class:`~hwgen.nn.Flatten` becomes part of the next pass (or of how the output is read,
    when it is last).

    Raises
    ------
    CompileError
        If a kind of layer has no lowering, or a layer does not fit ``config`` (its reduction,
        its worst-case accumulator or a channel's parameters).
    """
    passes = []
    shapes = network.shapes
    # The stored tensor and its shape that each network tensor is: itself, or for a Flatten's
    # output the image it flattens (which the next pass takes over).
    stored = {INPUT: (INPUT, shapes[0][0])}
    for index, (node, layer) in enumerate(zip(network.nodes, network.layers, strict=True)):
        in_shape, out_shape = shapes[index]
        if isinstance(layer, Flatten):
            stored[node.name] = stored[node.inputs[0]]
            continue
        lowering = next((f for kind, f in _LOWERINGS.items() if isinstance(layer, kind)), None)
        if lowering is None:
            allowed = ", ".join(kind.__name__ for kind in (*_LOWERINGS, Flatten))
            raise CompileError(f"{type(layer).__name__} layers cannot be compiled; allowed: "
                               f"{allowed}", layer=index, resource="layer")
        in_shape = stored[node.inputs[0]][1]
        lowered = lowering(index, layer, (in_shape, out_shape), config)
        if lowered.spatial and not config.spatial:
            what = "a Dense after a Flatten" if isinstance(layer, Dense) else \
                f"a {type(layer).__name__}"
            raise CompileError(f"{what} walks images, and this device has no patch walker "
                               "(its configuration has spatial=False, as the iCEBreaker preset "
                               "does to fit the UP5K); allowed: Dense layers over rows, or a "
                               "configuration with spatial=True", layer=index,
                               resource="spatial")
        passes.append(dataclasses.replace(
            lowered, name=node.name, inputs=tuple(stored[name][0] for name in node.inputs)))
        stored[node.name] = (node.name, out_shape)
    return passes
