"""The interpreter step of a matrix pass on a ``dtype="bf16"`` design (issue 52).

The addressing is the int8 matrix pass's (:mod:`hwgen.passes.matrix`): rows of ``k_tiles``
reduction tiles from ``src_base``, weight tile ``(nt, kt)`` at ``w_base + (nt * k_tiles + kt)
* rows``, output tile ``nt``'s PARAM word at ``p_base + nt``. The words hold bit patterns:
ACT lanes and WEIGHT lanes bf16, PARAM lanes the fp32 bias, OUTPUT lanes the fp32 scores of a
raw layer; the descriptor's ``act_min``, ``act_max`` bf16 (:func:`hwgen.memmap.descriptor_layout`).

The arithmetic is the contract's (docs/arithmetic.md, "bfloat16"), with the primitives of
:mod:`hwgen.nn.bf16`: per output pixel and tile, the accumulator starts at the bias and takes
each reduction tile's sum, summed from +0.0 in the order of the rows; then the clamp to the
bounds in fp32 and the rounding to bf16 (or the raw accumulator).

A bf16 pass writes every lane of its output words, +0.0 past ``n``: the next pass's padding
lanes (``K`` up to its tiles) are then products of +0.0 by the zero weights of its padding
rows, +0.0, where a stale Inf or NaN lane would make NaN of them.
"""

import numpy as np

from ..memmap import Region
from ..nn.bf16 import activate, bf16_matmul, flush, round_to_bf16

__all__ = ["interpret_bf16", "lanes_of_bits", "signed_bits"]


def lanes_of_bits(lanes, bits):
    """Return signed ``bits``-bit lanes (16 or 32) as the float32 values their bit patterns
    are: a bf16 pattern in the top half of an fp32 one."""
    patterns = np.asarray(lanes, dtype=np.int64) & ((1 << bits) - 1)
    if bits == 16:
        patterns = patterns << 16
    return patterns.astype(np.uint32).view(np.float32)


def signed_bits(values, bits):
    """Return float32 ``values`` as signed ``bits``-bit lanes of their patterns: the fp32
    pattern (32) or its top half, the bf16 pattern (16; the values must be bf16)."""
    patterns = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.int64)
    if bits == 16:
        patterns >>= 16
    return np.where(patterns >> (bits - 1), patterns - (1 << bits), patterns)


def interpret_bf16(device, d, g, m, patch_rows):
    """Run the bf16 matrix pass of descriptor ``d`` over rows on ``m`` samples in ``device``;
    ``patch_rows(device, d, g, m, first)`` reads the rows' lanes as the int8 pass does."""
    c = device.config
    rows, cols, b = c.rows, c.cols, device.b
    assert not d["spatial"], "a bf16 matrix pass runs over rows"
    lanes, reads = patch_rows(device, d, g, m, 0)
    # The device reads zeros past a row's words (lanes beyond its src_stride words).
    lanes[:, np.arange(lanes.shape[1]) >= d["src_stride"] * b] = 0
    x = lanes_of_bits(lanes, 16)
    writes = set()
    for nt in range(d["n_tiles"]):
        word = device.read(Region.PARAM, d["p_base"] + nt)
        bias = lanes_of_bits([word >> (32 * j) & 0xFFFFFFFF for j in range(cols)], 32)
        acc = np.broadcast_to(bias, (len(x), cols)).copy()
        for kt in range(d["k_tiles"]):
            base = d["w_base"] + (nt * d["k_tiles"] + kt) * rows
            w = lanes_of_bits([device.lanes(Region.WEIGHT, base + i) for i in range(rows)], 16)
            s = bf16_matmul(x[:, kt * rows:(kt + 1) * rows], w, np.float32(0), rows)
            with np.errstate(over="ignore", invalid="ignore"):
                acc = flush(acc + s)
        writes |= _finish(device, d, nt, acc)
    if not d["raw"]:
        _zero_past_n(device, d, len(x))
    assert not reads & writes, "a layer overwrote its own input"


def _finish(device, d, nt, acc):
    """Write output tile ``nt`` of every row: the raw fp32 sums to OUTPUT, or the clamp to
    the descriptor's bf16 bounds and the rounding to bf16 to ACT; return the ACT words
    written."""
    c, b = device.config, device.b
    cols = c.cols
    if d["raw"]:
        values = signed_bits(acc, 32)
        for r in range(len(acc)):
            channels = [j for j in range(cols) if nt * cols + j < d["n"]]
            device.write_lanes(Region.OUTPUT, d["dst_base"] + r * d["dst_stride"] + nt,
                               [values[r, j] for j in channels])
        return set()
    low, high = lanes_of_bits([d["act_min"], d["act_max"]], 16)
    out = signed_bits(round_to_bf16(activate(acc, "identity", low, high)).astype(np.float32),
                      16)
    writes = set()
    for r in range(len(acc)):
        for j in range(cols):
            n = nt * cols + j
            if n < d["n"]:
                addr = d["dst_base"] + r * d["dst_stride"] + n // b
                device.write_lane(Region.ACT, addr, n % b, out[r, j])
                writes.add(addr)
    return writes


def _zero_past_n(device, d, m):
    """Write +0.0 to the lanes past ``n`` of each output row's last ACT word."""
    b, n = device.b, d["n"]
    if n % b:
        for r in range(m):
            addr = d["dst_base"] + r * d["dst_stride"] + (n - 1) // b
            device.write_lanes(Region.ACT, addr, [0] * (b - n % b), n % b)
