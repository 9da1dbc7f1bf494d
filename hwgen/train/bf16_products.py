"""bf16 matrix products on the devices: bf16 operands, fp32 sums in the contract's order
(docs/arithmetic.md, "bfloat16"), whatever the number of devices.

A product ``a · b`` runs as the one-layer :class:`~hwgen.nn.Bf16Network` of
:func:`bf16_product_network`: ``b`` (bf16) as the weights, an fp32 bias, the rows of ``a``
(bf16) streamed through the array; the device returns the fp32 accumulators (raw) or, for a
hidden layer of the forward pass, their ReLU rounded to bf16 by its own output stage.

- :meth:`Bf16Products.rows`: ``a · b`` with the rows of ``a`` split over the devices (the
  forward pass, ``dX = dY · Wᵀ``). A row's result depends on that row alone, so the split
  changes no bit.
- :meth:`Bf16Products.transposed`: ``aᵀ · b`` with the batch as the reduction (``dW = Xᵀ ·
  dY``). fp32 addition is not associative, so the batch is cut into the contract's tiles of
  ``rows`` consecutive batch rows; one program per tile (``b``'s tile as the weights, bias
  +0.0) returns that tile's sum ``s_t`` exactly (``fl32(+0.0 + s_t) = s_t``); the tiles go to
  the devices whole, and the host adds their sums in batch order, ``acc = fl32(acc + s_t)``
  from +0.0 with the zero rule: :func:`~hwgen.nn.bf16.bf16_matmul` of ``aᵀ`` and ``b``,
  the bits one device computing the whole batch in one program gives, on any number of
  devices.
"""

import numpy as np

from ..compiler import compile_network
from ..nn import Bf16Network
from ..nn.bf16 import as_bf16, bf16_array, flush, round_to_fp32
from ..nn.bf16_layers import Bf16Dense
from ..nn.graph import INPUT, Node
from .products import block_sizes

__all__ = ["Bf16Products", "bf16_product_network"]


def bf16_product_network(b, config, *, bias=None, relu=False, raw=True):
    """Return the one-layer :class:`~hwgen.nn.Bf16Network` whose output for rows ``a`` is
    ``a · b + bias`` in the contract's order of sums (tiles of ``config.rows``).

    Parameters
    ----------
    b : numpy.ndarray of bf16, shape (K, N)
        ``ml_dtypes.bfloat16``, or float32 holding bf16 values.
    config : AcceleratorConfig
    bias : array_like of float, shape (N,), optional
        Rounded to fp32 (+0.0 by default).
    relu : bool
        ReLU before the rounding to bf16 (a hidden layer; not with ``raw``).
    raw : bool
        The fp32 accumulators out (True), or the bf16 outputs.
    """
    b = as_bf16(b, "bf16 product", "b")
    k, n = b.shape
    bias = np.zeros(n, dtype=np.float32) if bias is None else round_to_fp32(bias)
    layer = Bf16Dense(weight=bf16_array(b), bias=bias, raw=raw,
                      activation="relu" if relu and not raw else "identity")
    return Bf16Network([Node("product", layer, INPUT)], rows=config.rows,
                       tensor_shapes={INPUT: (k,), "product": (n,)})


class Bf16Products:
    """bf16 matrix products on the devices of a :class:`~hwgen.train.devices.DeviceGroup`.

    Parameters
    ----------
    group : DeviceGroup
        Of a ``dtype="bf16"`` configuration.
    """

    def __init__(self, group):
        self.group = group
        self.config = group.config

    def max_reduction(self, n):
        """Return the longest reduction ``K`` one program of ``n`` columns holds: a longer one
        cannot be cut into programs, whose partial sums would be added in another order."""
        return block_sizes(1 << 30, n, self.config)[0]

    def _programs(self, b, bias, relu, raw):
        """Return ``[(n0, n1, program)]``: the column blocks of ``b`` and their programs."""
        k, n = b.shape
        k_block, n_block = block_sizes(k, n, self.config)
        if k_block < k:
            raise ValueError(f"a bf16 product with a reduction of {k} on {self.config.name}, "
                             f"whose programs hold {k_block}: fp32 partial sums of several "
                             "programs would be added in another order than the contract's; "
                             "allowed: smaller layers, or a design with more weight and "
                             "activation memory")
        bias = np.zeros(n) if bias is None else np.asarray(bias)
        return [(n0, min(n0 + n_block, n), compile_network(
            bf16_product_network(b[:, n0:n0 + n_block], self.config,
                                 bias=bias[n0:n0 + n_block], relu=relu, raw=raw),
            self.config)) for n0 in range(0, n, n_block)]

    def _apply(self, device, blocks, a, n):
        """Return the products of rows ``a`` by the column blocks, as float32 (bf16 outputs
        held exactly)."""
        out = np.zeros((a.shape[0], n), dtype=np.float32)
        if a.shape[0]:
            for n0, n1, program in blocks:
                out[:, n0:n1] = np.asarray(self.group.run(device, program, a),
                                           dtype=np.float32)
        return out

    def rows(self, a, b, *, bias=None, relu=False, raw=True):
        """Return ``a · b (+ bias)`` ``(M, N)`` as float32, the rows of ``a`` split over the
        devices: the fp32 accumulators (``raw``), or their (ReLU'd) bf16 roundings.

        ``a`` ``(M, K)`` and ``b`` ``(K, N)`` hold bf16 values (``ml_dtypes.bfloat16`` or
        float32), see :func:`bf16_product_network` for the rest.

        Raises
        ------
        ValueError
            If the inner sizes differ, an operand is not bf16, or ``K`` is beyond one program.
        """
        a, b = as_bf16(a, "bf16 product", "a"), as_bf16(b, "bf16 product", "b")
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
            raise ValueError(f"bf16 product: a has shape {a.shape} and b {b.shape}; allowed: "
                             "(M, K) and (K, N)")
        blocks = self._programs(b, bias, relu, raw)
        shards = self.group.shards(a.shape[0])
        parts = self.group.each(lambda index, device: self._apply(
            device, blocks, a[slice(*shards[index])], b.shape[1]))
        return np.concatenate(parts, axis=0)

    def transposed(self, a, b):
        """Return ``aᵀ · b`` ``(K, N)`` as fp32, summed over the batch ``M`` in the contract's
        order: ``bf16_matmul(aᵀ, b, 0, rows)`` on any number of devices.

        ``a`` ``(M, K)`` and ``b`` ``(M, N)`` hold bf16 values. The batch is cut into tiles
        of ``rows`` consecutive rows, each a program of its own; device ``d`` runs shard
        ``d`` of the tiles, and the host adds the tiles' sums in batch order.

        Raises
        ------
        ValueError
            If the operands' rows differ or an operand is not bf16.
        """
        a, b = as_bf16(a, "bf16 product", "a"), as_bf16(b, "bf16 product", "b")
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0]:
            raise ValueError(f"bf16 transposed product: a has shape {a.shape} and b "
                             f"{b.shape}; allowed: (M, K) and (M, N), the same rows (the "
                             "batch)")
        size = self.config.rows
        tiles = [(lo, min(lo + size, a.shape[0])) for lo in range(0, a.shape[0], size)]
        shards = self.group.shards(len(tiles))

        def work(index, device):
            return [self._apply(device, self._programs(b[lo:hi], None, False, True),
                                np.ascontiguousarray(a[lo:hi].T), b.shape[1])
                    for lo, hi in tiles[slice(*shards[index])]]

        acc = np.zeros((a.shape[1], b.shape[1]), dtype=np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            for sums in self.group.each(work):   # device order: the tiles in batch order
                for tile_sum in sums:
                    acc = flush(acc + tile_sum)
        return acc
