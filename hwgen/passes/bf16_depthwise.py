"""The interpreter step of a depthwise pass on a ``dtype="bf16"`` design (issue 52).

The addressing is the int8 depthwise pass's (:mod:`hwgen.passes.depthwise`): chunks of output
rows of one sample, output tile ``nt`` reading word ``nt`` of each input pixel (its ``cols``
channels, one per column), reduction tile ``kt``'s row ``i`` tap ``t = kt * rows + i`` of the
kernel in ``(ky, kx)`` order; weight tile ``(nt, kt)`` at ``w_base + (nt * k_tiles + kt) *
rows`` (every tile the first with ``wrep``, an average pool's). The words hold bit patterns as
the matrix pass's do (:mod:`hwgen.passes.bf16_matrix`).

The arithmetic is the contract's for a depthwise convolution (docs/arithmetic.md, "bfloat16":
each channel's patch in ``(ky, kx)`` order, tiles of ``rows`` taps): per output pixel and
channel the accumulator starts at the bias and takes each reduction tile's sum, summed from
+0.0 over the tile's taps in the order of the rows; a row past the kernel reads +0.0 (the
device reads zero there whatever its weight), a product that changes no sum, as the padding
pixels' +0.0 products change none. Then the bounds and the rounding to bf16 (or the raw
accumulator).
"""

import numpy as np

from ..memmap import Region
from ..nn.bf16 import flush, no_product
from .bf16_matrix import bf16_bias, finish_bf16, lanes_of_bits, zero_past_n

__all__ = ["interpret_bf16_depthwise"]


def interpret_bf16_depthwise(device, d, g, m, *, chunks, tap):
    """Run the bf16 depthwise pass of descriptor ``d`` and geometry ``g`` on ``m`` samples in
    ``device``; ``chunks(g, m)`` yields the chunks ``(sample, oy0, rows)`` and ``tap(device,
    d, g, sample=, r=, col=, nt=)`` reads the lanes of word ``nt`` of padded grid cells ``(r,
    col)`` (zero in the padding) and the words read, as the int8 pass does
    (:func:`~hwgen.passes.depthwise.chunks`, ``DepthwisePass._tap``; passed in so that this
    module does not import the one that imports it)."""
    rows = device.config.rows
    kh, kw, sy, sx = g["kh"], g["kw"], g["sy"], g["sx"]
    reads, writes = set(), set()
    first = 0
    for sample, oy0, count in chunks(g, m):
        oy = np.repeat(np.arange(oy0, oy0 + count), g["ow"])
        ox = np.tile(np.arange(g["ow"]), count)
        for nt in range(d["n_tiles"]):
            acc = np.broadcast_to(bf16_bias(device, d, nt), (len(oy), device.config.cols))
            for kt in range(d["k_tiles"]):
                tile = 0 if g["wrep"] else nt * d["k_tiles"] + kt
                s = np.zeros(acc.shape, dtype=np.float32)
                # The taps past the kernel (t >= kh * kw) read +0.0: s + (+0.0) is s.
                for i in range(min(rows, kh * kw - kt * rows)):
                    ky, kx = divmod(kt * rows + i, kw)
                    x, read = tap(device, d, g, sample=sample, r=oy * sy + ky,
                                  col=ox * sx + kx, nt=nt)
                    reads |= read
                    w = lanes_of_bits(device.lanes(Region.WEIGHT,
                                                   d["w_base"] + tile * rows + i), 16)
                    with np.errstate(over="ignore", invalid="ignore"):
                        p = flush(lanes_of_bits(x, 16) * w)
                        # The multiplier's: a weight that is no product gives +0.0.
                        s = flush(s + np.where(no_product(w), np.float32(0), p))
                with np.errstate(over="ignore", invalid="ignore"):
                    acc = flush(acc + s)
            writes |= finish_bf16(device, d, nt, acc, start=first)
        if not d["raw"]:
            zero_past_n(device, d, range(first, first + len(oy)))
        first += len(oy)
    assert not reads & writes, "a layer overwrote its own input"
