"""The interpreter step of a matrix pass on a ``dtype="bf16"`` design (issue 52).

The addressing is the int8 matrix pass's (:mod:`hwgen.passes.matrix`): rows (or output
pixels walked by the geometry, each tile's channel window, or a first convolution's taps
layout, :mod:`hwgen.passes.taps`) of ``k_tiles`` reduction tiles,
weight tile ``(nt, kt)`` at ``w_base + (nt * k_tiles + kt)
* rows``, output tile ``nt``'s PARAM word at ``p_base + nt``. The words hold bit patterns:
ACT lanes and WEIGHT lanes bf16, PARAM lanes the fp32 bias, OUTPUT lanes the fp32 scores of a
raw layer; the descriptor's ``act_min``, ``act_max`` bf16 (:func:`hwgen.memmap.descriptor_layout`).

The arithmetic is the contract's (docs/arithmetic.md, "bfloat16"), with the primitives of
:mod:`hwgen.nn.bf16`: per output pixel and tile, the accumulator starts at the bias and takes
each reduction tile's sum, summed from +0.0 in the order of the rows, a weight ``0x8000``
(-0.0: :func:`~hwgen.nn.bf16.no_product`, a grouped convolution's entries off its groups'
blocks and a spatial pass's padding rows) giving +0.0 whatever the activation, as the
multiplier does; then the clamp to the bounds in fp32 and the rounding to bf16 (or the raw
accumulator).

A bf16 pass writes every lane of its output words, +0.0 past ``n``: the next dense pass's
padding lanes (``K`` up to its tiles) are then products of +0.0 by the zero weights of its
padding rows, +0.0, where a stale Inf or NaN lane would make NaN of them; but a pass that
writes its output as an element stream (``dst_run``) writes only its elements, whose
reader's taps past its kernel read as zero.
"""

import numpy as np

from ..memmap import Region
from ..nn.bf16 import activate, bf16_matmul, flush, round_to_bf16
from . import taps

__all__ = ["bf16_bias", "bf16_max", "finish_bf16", "interpret_bf16", "interpret_bf16_add",
           "lanes_of_bits", "signed_bits", "zero_past_n"]


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


def _rows(device, d, g, m, *, first, patch_rows):
    """Return ``(x, reads)``: the rows of an output tile whose channel window starts at
    ``first`` (:func:`~hwgen.passes.matrix._patch_rows`) as float32 bf16 values, +0.0 where
    the device reads zeros (padding pixels, and channels past a pixel's ``src_stride``
    words, where the interpreter would read the next pixel's)."""
    rows, b = device.config.rows, device.b
    lanes, reads = patch_rows(device, d, g, m, first)
    kts = np.arange(d["k_tiles"])
    channel = first + (kts % g["cgs"])[:, None] * rows + np.arange(rows)[None, :]
    lanes[:, (channel // b >= d["src_stride"]).reshape(-1)] = 0
    return lanes_of_bits(lanes, 16), reads


def _weights(device, d, g, nt, kt):
    """Return weight tile ``(nt, kt)`` as float32 bf16 values ``[rows, cols]``: its ``rows``
    words, the first tile's with ``wrep``, one word (the diagonal) with ``wdiag``."""
    rows, cols = device.config.rows, device.config.cols
    tile = 0 if g["wrep"] else nt * d["k_tiles"] + kt
    if g.get("wdiag"):
        word = device.lanes(Region.WEIGHT, d["w_base"] + tile)
        lanes = [[word[j] if i == j else 0 for j in range(cols)] for i in range(rows)]
    else:
        base = d["w_base"] + tile * rows
        lanes = [device.lanes(Region.WEIGHT, base + i) for i in range(rows)]
    return lanes_of_bits(lanes, 16)


def interpret_bf16(device, d, g, m, *, patch_rows, window_start):
    """Run the bf16 matrix pass of descriptor ``d`` and geometry ``g`` on ``m`` samples in
    ``device``; ``patch_rows(device, d, g, m, first)`` reads the rows' lanes as the int8
    pass does (:func:`~hwgen.passes.matrix._patch_rows`), per output tile's channel window,
    which starts at ``window_start(nt, window, config)`` (the matrix pass's, passed in so
    that this module does not import the one that imports it)."""
    c = device.config
    rows, cols = c.rows, c.cols
    assert not g.get("pool"), "no fused pool in bf16 passes"
    window = g["cb_word"] * device.b + g["cb_rem"]
    xs, reads = {}, set()
    if g.get("taps"):
        # The taps layout's rows: tap kt * rows + r, the contract's dense (ky, kx, c) order.
        lanes, reads = taps.patch_rows(device, d, g, m)
        xs[0] = lanes_of_bits(lanes, 16)
    for nt in () if g.get("taps") else range(d["n_tiles"]) if window else (0,):
        xs[nt], read = _rows(device, d, g, m, first=int(window_start(nt, window, c)),
                            patch_rows=patch_rows)
        reads |= read
    writes = set()
    for nt in range(d["n_tiles"]):
        x = xs[nt if window else 0]
        acc = np.broadcast_to(bf16_bias(device, d, nt), (len(x), cols)).copy()
        for kt in range(d["k_tiles"]):
            s = bf16_matmul(x[:, kt * rows:(kt + 1) * rows], _weights(device, d, g, nt, kt),
                            np.float32(0), rows)
            with np.errstate(over="ignore", invalid="ignore"):
                acc = flush(acc + s)
        writes |= finish_bf16(device, d, nt, acc)
    if not d["raw"]:
        zero_past_n(device, d, range(len(xs[0])))
    assert not reads & writes, "a layer overwrote its own input"


def bf16_max(lanes):
    """Return the maximum over axis 1 of bf16 lanes (signed 16-bit patterns) as such lanes:
    a window with a NaN gives NaN (the canonical one, the only NaN the datapath holds)."""
    return signed_bits(np.max(lanes_of_bits(lanes, 16), axis=1), 16)


def bf16_bias(device, d, nt):
    """Return output tile ``nt``'s fp32 biases (float32 ``[cols]``): its PARAM word's
    32-bit lanes."""
    word = device.read(Region.PARAM, d["p_base"] + nt)
    return lanes_of_bits([word >> (32 * j) & 0xFFFFFFFF for j in range(device.config.cols)],
                         32)


def finish_bf16(device, d, nt, acc, *, start=0):
    """Write output tile ``nt`` of output rows ``start ..`` (``acc``'s rows): the raw fp32
    sums to OUTPUT, or the clamp to the descriptor's bf16 bounds and the rounding to bf16 to
    ACT; return the ACT words written."""
    c, b = device.config, device.b
    cols = c.cols
    if d["raw"]:
        values = signed_bits(acc, 32)
        for r in range(len(acc)):
            channels = [j for j in range(cols) if nt * cols + j < d["n"]]
            device.write_lanes(Region.OUTPUT,
                               d["dst_base"] + (start + r) * d["dst_stride"] + nt,
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
                addr, lane = _destination(d, start + r, n, b)
                device.write_lane(Region.ACT, addr, lane, out[r, j])
                writes.add(addr)
    return writes


def _destination(d, q, n, b):
    """Return ``(word, lane)`` of channel ``n`` of output pixel ``q``: pixel by pixel, or in
    the element stream of ``dst_run`` pixels a run (:func:`hwgen.memmap.descriptor_layout`)."""
    run = d.get("dst_run", 0)
    if not run:
        return d["dst_base"] + q * d["dst_stride"] + n // b, n % b
    pitch = d["dst_pitch_word"] * b + d["dst_pitch_rem"]
    element = (q // run) * pitch + (q % run) * d["n"] + n
    return d["dst_base"] + element // b, element % b


def zero_past_n(device, d, rows):
    """Write +0.0 to the lanes past ``n`` of the last ACT word of each of the output
    ``rows``."""
    b, n = device.b, d["n"]
    if n % b and not d.get("dst_run"):   # a stream's elements follow each other
        for r in rows:
            addr = d["dst_base"] + r * d["dst_stride"] + (n - 1) // b
            device.write_lanes(Region.ACT, addr, [0] * (b - n % b), n % b)


def interpret_bf16_add(device, d, g, m):
    """Run the bf16 add pass of ``d`` on ``m`` samples: for each of the ``m * oh * ow`` rows
    and each of its ``src_stride`` words, lane by lane, ``fl32(a + b)`` of the words from
    ``src_base`` and ``src2_base``, clamped to the descriptor's bf16 bounds and rounded to
    bf16, written from ``dst_base`` (every lane: the inputs' +0.0 padding gives +0.0)."""
    c = device.config
    stride, rows = d["src_stride"], m * g["oh"] * g["ow"]
    if d["spatial"]:
        assert (g["kh"], g["kw"], g["oh"], g["ow"]) == (1, 1, g["h"], g["w"]), \
            "an add walks every pixel once"
    offsets = (np.arange(rows)[:, None] * stride + np.arange(stride)[None, :]).reshape(-1)
    first, second, out = ((d[name] + offsets) % device.wrap
                          for name in ("src_base", "src2_base", "dst_base"))
    assert max(first.max(), second.max(), out.max()) < c.act_depth, "a word past ACT"
    with np.errstate(over="ignore", invalid="ignore"):
        total = flush(lanes_of_bits(device.gather(first), 16)
                      + lanes_of_bits(device.gather(second), 16))
    low, high = lanes_of_bits([d["act_min"], d["act_max"]], 16)
    lanes = signed_bits(round_to_bf16(activate(total, "identity", low, high))
                        .astype(np.float32), 16)
    for addr, word in zip(out.tolist(), lanes.tolist(), strict=True):
        device.write_lanes(Region.ACT, addr, word)
    assert not (set(first.tolist()) | set(second.tolist())) & set(out.tolist()), \
        "a layer overwrote its own input"
