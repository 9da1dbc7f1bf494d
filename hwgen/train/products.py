"""Exact integer matrix products on the devices, as raw-output single-layer programs.

A product ``a · b`` runs as the network ``QuantizedNetwork([Dense(b, 0, 1, 0,
output="raw")])``: ``b`` is loaded as the weights, the rows of ``a`` stream through the array,
and the raw accumulators come back, exact (docs/arithmetic.md). A ``b`` too
large for one program (its reduction beyond the descriptor's fields, the weight memory or
what the accumulator holds for any operands, its columns beyond the parameter or output
memory) is cut into blocks whose products are summed on the host, in integers, so the result
is still exact.

Two shapes of product spread the rows of a batch over the devices (shard ``d`` on device
``d``, see :meth:`DeviceGroup.shards <hwgen.train.devices.DeviceGroup.shards>`):

- :meth:`Products.transposed`: ``aᵀ · b`` with the batch as the reduction, the weight
  gradient ``dW = Xᵀ · dY``; each device computes ``a_dᵀ · b_d`` of its shard (``b_d`` its
  program's weights) and the host sums the integer partial products, exactly;
- :meth:`Products.rows`: ``a · b`` with the rows of ``a`` split, the input gradient
  ``dX = dY · Wᵀ``; one program (``b`` as weights) on every device.
"""

import math

import numpy as np

from ..compiler import compile_network
from ..memmap import reduction_limits
from ..nn import Dense, QuantizedNetwork

__all__ = ["Products", "block_sizes", "product_network"]


def product_network(b, config):
    """Return the single raw layer whose output for rows ``a`` is ``a · b``, exactly.

    ``b`` is ``(K, N)`` signed ``w_bits`` integers; the network's widths are the
    configuration's.
    """
    b = np.asarray(b, dtype=np.int64)
    n = b.shape[1]
    zeros, ones = np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64)
    return QuantizedNetwork([Dense(b, zeros, ones, zeros, output="raw")], in_bits=config.in_bits,
                            w_bits=config.w_bits, acc_bits=config.acc_bits,
                            mult_bits=config.mult_bits)


def block_sizes(k, n, config):
    """Return ``(k_block, n_block)``: the largest blocks of a ``(k, n)`` weight matrix that
    one raw single-layer program holds on ``config`` (reduction and columns).

    Columns: as many output tiles as PARAM, OUTPUT (one row) and WEIGHT (one reduction tile)
    hold. Reduction: what the descriptor's fields (:func:`~hwgen.memmap.reduction_limits`),
    WEIGHT (for those columns) and ACT (one row) allow, and the accumulator for any operands
    (``k`` products of ``-2**(in_bits-1)`` by ``-2**(w_bits-1)`` within signed
    ``acc_bits``: the compiler's proof of any ``b``; not for bf16, whose fp32 sums have no
    width to overflow), in whole ``rows`` tiles when at least one fits.
    """
    c = config
    n_tiles = max(1, min(c.param_depth, c.out_depth, c.weight_depth // c.rows,
                         math.ceil(n / c.cols)))
    n_block = min(n, n_tiles * c.cols)
    tiles, words = reduction_limits(c)
    limits = [tiles * c.rows, words * c.act_lanes,
              (c.weight_depth // (n_tiles * c.rows)) * c.rows, c.act_depth * c.act_lanes]
    # fp32 sums reach Inf rather than overflow a width: only an integer reduction is bounded.
    if c.dtype != "bf16":
        limits.append(((1 << (c.acc_bits - 1)) - 1) >> (c.in_bits + c.w_bits - 2))
    k_limit = min(limits)
    if k_limit >= c.rows:
        k_limit -= k_limit % c.rows  # whole reduction tiles: no padding inside a block
    return max(1, min(k, k_limit)), max(1, n_block)


class Products:
    """Integer matrix products on the devices of a :class:`~hwgen.train.devices.DeviceGroup`.

    Parameters
    ----------
    group : DeviceGroup
    """

    def __init__(self, group):
        self.group = group
        self.config = group.config

    def _programs(self, b):
        """Return ``[(k0, k1, n0, n1, program)]``: the blocks of ``b`` and their programs."""
        k, n = b.shape
        k_block, n_block = block_sizes(k, n, self.config)
        blocks = []
        for n0 in range(0, n, n_block):
            for k0 in range(0, k, k_block):
                k1, n1 = min(k0 + k_block, k), min(n0 + n_block, n)
                network = product_network(b[k0:k1, n0:n1], self.config)
                blocks.append((k0, k1, n0, n1, compile_network(network, self.config)))
        return blocks

    def _apply(self, device, blocks, a, n):
        """Return ``a · b`` on ``device`` from the blocks of ``b``, summed exactly."""
        out = np.zeros((a.shape[0], n), dtype=np.int64)
        if a.shape[0] == 0:
            return out
        for k0, k1, n0, n1, program in blocks:
            out[:, n0:n1] += self.group.run(device, program, a[:, k0:k1])
        return out

    def _check(self, a, b, what):
        a, b = np.asarray(a), np.asarray(b)
        if a.ndim != 2 or b.ndim != 2 or a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
            raise ValueError(f"{what}: operands of shapes {a.shape} ({a.dtype}) and {b.shape} "
                             f"({b.dtype}); allowed: 2-D integer matrices")
        return a.astype(np.int64), b.astype(np.int64)

    def transposed(self, a, b):
        """Return ``aᵀ · b`` (``(K, N)``) for ``a`` ``(M, K)`` and ``b`` ``(M, N)``, the rows
        ``M`` split over the devices and the partial products summed exactly.

        ``a`` must hold signed ``in_bits`` and ``b`` signed ``w_bits`` integers.

        Raises
        ------
        ValueError
            If the operands are not integer matrices with as many rows.
        """
        a, b = self._check(a, b, "transposed product")
        if a.shape[0] != b.shape[0]:
            raise ValueError(f"transposed product: a has {a.shape[0]} rows and b "
                             f"{b.shape[0]}; allowed: the same rows (the batch)")
        shards = self.group.shards(a.shape[0])

        def work(index, device):
            lo, hi = shards[index]
            if hi == lo:
                return None
            return self._apply(device, self._programs(b[lo:hi]), a[lo:hi].T, b.shape[1])

        total = np.zeros((a.shape[1], b.shape[1]), dtype=np.int64)
        for part in self.group.each(work):  # in device order; integer sums are exact anyway
            if part is not None:
                total += part
        return total

    def rows(self, a, b):
        """Return ``a · b`` (``(M, N)``) for ``a`` ``(M, K)`` and ``b`` ``(K, N)``, the rows of
        ``a`` split over the devices.

        ``a`` must hold signed ``in_bits`` and ``b`` signed ``w_bits`` integers.

        Raises
        ------
        ValueError
            If the operands are not integer matrices whose inner sizes agree.
        """
        a, b = self._check(a, b, "product")
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"product: a has {a.shape[1]} columns and b {b.shape[0]} rows; "
                             "allowed: equal")
        blocks = self._programs(b)
        shards = self.group.shards(a.shape[0])
        parts = self.group.each(
            lambda index, device: self._apply(device, blocks, a[slice(*shards[index])],
                                              b.shape[1]))
        return np.concatenate(parts, axis=0)
