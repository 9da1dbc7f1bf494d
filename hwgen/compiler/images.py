"""The WEIGHT and PARAM images of a matrix layer, laid out as :mod:`hwgen.compiler` documents.

A matrix layer is what the array runs: ``x[M, K] @ W[K, N]``, then bias, requantization and
activation per output channel (a :class:`hwgen.nn.Dense`, or what another kind of layer is
lowered to, see :mod:`hwgen.passes.matrix`).
"""

import math

import numpy as np

from ..memmap import Region, param_lane_layout
from .words import pack_words

__all__ = ["IMAGE_REGIONS", "diagonal_image", "is_diagonal", "param_image", "weight_image",
           "weight_tiles"]

#: Regions whose images a program carries; ACT and OUTPUT hold run-time data only.
IMAGE_REGIONS = (Region.PROGRAM, Region.WEIGHT, Region.PARAM)


def weight_tiles(weight, config, rows=None):
    """Return ``weight[K, N]`` as its tiles, ``[n_tiles, k_tiles, rows, cols]`` in the order
    WEIGHT holds them (zero beyond ``K`` or ``N``); ``rows`` a tile's, the config's by
    default (a depthwise pass's are its ``array_rows``)."""
    r, c = rows or config.rows, config.cols
    k, n = weight.shape
    k_tiles, n_tiles = math.ceil(k / r), math.ceil(n / c)
    padded = np.zeros((k_tiles * r, n_tiles * c), dtype=np.int64)
    padded[:k, :n] = weight
    # (kt, i, nt, j) -> (nt, kt, i, j)
    return padded.reshape(k_tiles, r, n_tiles, c).transpose(2, 0, 1, 3)


def weight_image(layer, config, rows=None):
    """Return the weight words of ``layer``, tile by tile.

    Tile ``(nt, kt)`` is the ``rows`` words from ``(nt * k_tiles + kt) * rows``; row ``i``,
    lane ``j`` holds ``W[kt * rows + i, nt * cols + j]`` (zero beyond ``K`` or ``N``);
    ``rows`` as for :func:`weight_tiles`.
    """
    tiles = weight_tiles(layer.weight, config, rows)
    lanes = tiles.reshape(-1, config.cols)
    return pack_words([(lanes, 0, config.w_bits)], len(lanes), config.cols, config.w_bits)


def diagonal_image(layer, config):
    """Return the weight words of ``layer`` whose tiles are zero off their diagonal
    (:func:`is_diagonal`), one word a tile: word ``nt * k_tiles + kt``, lane ``j`` holds the
    tile's row ``j``, lane ``j`` (zero for ``j >= rows``)."""
    tiles = weight_tiles(layer.weight, config)
    d = min(config.rows, config.cols)
    lanes = np.zeros((*tiles.shape[:2], config.cols), dtype=np.int64)
    lanes[..., :d] = np.diagonal(tiles[..., :d, :d], axis1=2, axis2=3)
    lanes = lanes.reshape(-1, config.cols)
    return pack_words([(lanes, 0, config.w_bits)], len(lanes), config.cols, config.w_bits)


def is_diagonal(weight, config):
    """Whether every tile of ``weight[K, N]`` is zero off its diagonal (row ``i``, lane ``i``),
    so that :func:`diagonal_image` holds it (a depthwise convolution's tiles are)."""
    tiles = weight_tiles(weight, config)
    off = ~np.eye(config.rows, config.cols, dtype=bool)
    return config.rows > 1 and not np.any(tiles[..., off])


def param_image(layer, config):
    """Return the parameter words of ``layer``: one per output tile, zero beyond ``N``.

    Lane ``j`` of word ``nt`` is channel ``nt * cols + j`` in
    :func:`~hwgen.memmap.param_lane_layout` (bias, mult, shift and, of a leaky layer,
    mult_neg; zero otherwise).
    """
    c = config.cols
    n = layer.weight.shape[1]
    n_tiles = math.ceil(n / c)
    layout = param_lane_layout(config)
    lanes = {"bias": layer.bias, "mult": layer.mult, "shift": layer.shift,
             "mult_neg": 0 if layer.mult_neg is None else layer.mult_neg}
    fields = []
    for name, field in layout:
        values = np.zeros(n_tiles * c, dtype=np.int64)
        values[:n] = lanes[name]
        fields.append((values.reshape(n_tiles, c), field.offset, field.width))
    return pack_words(fields, n_tiles, c, layout.size)
