"""How wide a program's raw output is on the wire: the accumulator proof's range in bits.

A raw output lane is ``acc_bits`` wide in OUTPUT, but the accumulator proof of the last layer
(:func:`~hwgen.compiler.proofs.partial_sum_ranges`, from its weights, bias and the range of
its input) bounds every value it can hold: the wire carries each value as that many bits of
two's complement (:attr:`MatrixSpec.wire_bits <hwgen.compiler.specs.MatrixSpec>`). Programs
compiled before the field existed (format 6 and older) get it from their images at load: the
bound they were compiled with, ``2**(in_bits-1) * sum_k |W[k, n]| + |b[n]|``, summed over the
last layer's weight and bias words.
"""

import numpy as np

from ..memmap import param_lane_layout
from .descriptors import field_values
from .proofs import partial_sum_ranges, two_complement_bits
from .words import unpack_words

__all__ = ["bound_bits", "raw_wire_bits", "stored_raw_wire_bits"]


def bound_bits(bound):
    """Return the two's complement width that holds every integer of magnitude <= ``bound``
    (``bound >= 0``): ``bound.bit_length() + 1``."""
    return int(bound).bit_length() + 1


def raw_wire_bits(matrix, config, in_range=None):
    """Return the wire width of the raw output of the pass that runs ``matrix`` (a
    :class:`~hwgen.nn.Dense`: the weights and bias the array runs) on inputs in ``in_range``
    (``(lo, hi)``; None: the signed ``in_bits`` range): the two's complement width of every
    channel's partial sums, at most ``acc_bits``; ``acc_bits`` for a pass without one."""
    if matrix is None:
        return config.acc_bits
    if in_range is None:
        in_range = (-(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1)
    low, high = partial_sum_ranges(matrix.weight, matrix.bias, in_range)
    return min(config.acc_bits, max(two_complement_bits(lo, hi)
                                    for lo, hi in zip(low, high, strict=True)))


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
