"""How wide a program's raw output is on the wire: the accumulator proof's bound in bits.

A raw output lane is ``acc_bits`` wide in OUTPUT, but the worst-case proof of the last layer
(:func:`hwgen.nn.accumulator_bound`) bounds every value it can hold: the wire carries each
value as that many bits of two's complement (:attr:`MatrixSpec.wire_bits
<hwgen.compiler.specs.MatrixSpec>`). Programs compiled before the field existed (format 6 and
older) get it from their images at load: the same bound, summed over the last layer's weight
and bias words.
"""

import numpy as np

from ..memmap import param_lane_layout
from .descriptors import field_values
from .words import unpack_words

__all__ = ["bound_bits", "raw_wire_bits", "stored_raw_wire_bits"]


def bound_bits(bound):
    """Return the two's complement width that holds every integer of magnitude <= ``bound``
    (``bound >= 0``): ``bound.bit_length() + 1``."""
    return int(bound).bit_length() + 1


def raw_wire_bits(matrix, config):
    """Return the wire width of the raw output of the pass that runs ``matrix`` (a
    :class:`~hwgen.nn.Dense`: the weights and bias the array runs), at most ``acc_bits``;
    ``acc_bits`` for a pass without one."""
    from ..nn import accumulator_bound

    if matrix is None:
        return config.acc_bits
    return min(config.acc_bits, bound_bits(accumulator_bound(matrix, config.in_bits)))


def stored_raw_wire_bits(config, layer, weight_words, param_words):
    """Return :func:`raw_wire_bits` of the last pass of a stored program from its images.

    ``layer`` is the pass's :class:`~hwgen.compiler.specs.LayerSpec`, ``weight_words`` and
    ``param_words`` the words of WEIGHT and PARAM (whole images). The bound is
    ``2**(in_bits-1) * sum |W[:, n]| + |b[n]|`` over the weight tiles of the layer (zero lanes
    add nothing); a pass whose image holds one tile for many (a repeated tile) or no weights
    gets ``acc_bits``.
    """
    rows, cols = config.rows, config.cols
    tiles = layer.k_tiles * layer.n_tiles
    if tiles == 0 or layer.w_words != tiles * rows:
        return config.acc_bits
    w = unpack_words(weight_words[layer.w_base:layer.w_base + layer.w_words], cols,
                     config.w_bits)
    # word (nt * k_tiles + kt) * rows + i, lane j: column nt * cols + j
    column = np.abs(w).reshape(layer.n_tiles, layer.k_tiles * rows, cols).sum(axis=1)
    lane = param_lane_layout(config)
    bias = [field_values(lane, word >> (j * lane.size))["bias"]
            for word in param_words[layer.p_base:layer.p_base + layer.n_tiles]
            for j in range(cols)]
    magnitude = [(int(c) << (config.in_bits - 1)) + abs(b)
                 for c, b in zip(column.reshape(-1), bias, strict=True)]
    return min(config.acc_bits, bound_bits(max(magnitude)))
