"""A max pool fused into the convolution before it: no pass of its own.

A ``p x p``, stride ``p`` :class:`~hwgen.nn.MaxPool2D` that reads a requantized spatial matrix
pass (a convolution, after its activation) and is that pass's only reader costs a pass over
the banks (``kh * kw`` reads per output word) and the ACT area of the convolution's output.
Fused, the convolution's pass walks its output pixels window by window of the pool (the
windows in ``(m, oy, ox)`` order, each window's ``p * p`` pixels row by row), and the
post-processing keeps a running maximum per channel over each window's requantized (and
activated) values, writing only the window's maximum, at the pooled pixel's place. The
maximum of the values the separate pass would read is the value it would write (section
3.1: the pool follows the activation, pooling ints is exact), so the fused pass is bit-exact;
conv pixels in no window (a side not a multiple of ``p``) are not computed at all.

The compiler fuses where the design can (:func:`~hwgen.memmap.fuses_pool`: ``fuse_pool``),
``hwgen.compile(..., fuse_pool=True)`` asks for it (the default), no read-out plan needs the
convolution's output, and a chunk of ``acc_depth`` output pixels holds whole windows
(``acc_depth % (p * p) == 0``); otherwise the pool stays a pass of its own.

The walk (:func:`walk`) is the device's: the windows move on by the geometry's steps, a
window's pixels by ``col_step`` along a row and ``down_step`` from a row's first pixel to the
next row's, and the next window in a row of windows starts ``col_step`` after the last pixel
of the window's first row (see :func:`hwgen.memmap.geometry_layout`).
"""

import dataclasses

import numpy as np

from ..memmap import GEOMETRY_LIMITS, PassKind, fuses_pool

__all__ = ["conv_steps", "fused", "walk"]


def _fusable(conv, pool, readers, config):
    """Whether the max pool ``pool`` (a DeviceLayer) can run in ``conv``'s pass."""
    if pool.kind is not PassKind.MAXPOOL or conv.kind is not PassKind.MATRIX:
        return False
    if not conv.spatial or conv.raw or len(conv.out_shape) != 3:
        return False
    # The pool reads the convolution's output, and nothing else does.
    if readers.count(conv.name) != 1 or pool.inputs != (conv.name,):
        return False
    kh, kw, (sy, sx), pads, _ = pool.kernel
    side = kh
    return (kw == side and sy == sx == side and pads == (0, 0, 0, 0)
            and 2 <= side <= GEOMETRY_LIMITS["pool"]
            and config.acc_depth % (side * side) == 0)


def fused(passes, config, *, readout=False):
    """Return ``passes`` (:class:`~hwgen.compiler.kinds.DeviceLayer`) with each max pool that
    can run in the convolution before it fused into that pass: the pass then writes the
    pool's tensor (its ``out_shape`` and ``name``) and has ``pool`` its window side."""
    if not fuses_pool(config) or readout:
        return list(passes)
    readers = [name for p in passes for name in p.inputs]
    out, i = [], 0
    while i < len(passes):
        p = passes[i]
        if i + 1 < len(passes) and _fusable(p, passes[i + 1], readers, config):
            pool = passes[i + 1]
            out.append(dataclasses.replace(p, out_shape=pool.out_shape, name=pool.name,
                                           pool=pool.kernel[0]))
            i += 2
        else:
            out.append(p)
            i += 1
    return out


def conv_steps(oh, ow, pool, *, unit_row, unit_col, h_units):
    """Return ``{name: step}`` of a walk of output ``oh x ow`` (windows, when ``pool`` > 1)
    in units whose output row is ``unit_row`` on and output column ``unit_col`` on, an image
    ``h_units`` on: ``col``, ``row``, ``img`` (and ``down`` with a pool): what the geometry's
    ``*_step`` fields hold, before the modulo."""
    p = max(1, pool)
    oh_e, ow_e = oh * p, ow * p
    steps = {"col": unit_col, "row": unit_row - (ow_e - 1) * unit_col,
             "img": h_units - (oh_e - 1) * unit_row - (ow_e - 1) * unit_col}
    if pool > 1:
        steps["down"] = unit_row
    return steps


def walk(g, m, start, *, lanes=None, rem0=0, wrap):
    """Return ``(oy, ox, word, rem)`` arrays of the output pixels a pass of geometry ``g``
    walks on ``m`` samples from ``start`` (conv coordinates: with a fused pool, each window's
    pixels in turn), stepped as the device steps them. Without ``lanes`` the walk is in
    words (``rem`` all 0); with it, in elements (a word and a bank, the ``*_rem`` fields),
    as a taps layer's."""
    p = g.get("pool", 0) + 1
    oy, ox, word, rem = [], [], [], []

    def step(at, name):
        w, r = at
        if lanes is None:
            return (w + g[f"{name}_step"]) % wrap, 0
        carry, r = divmod(r + g[f"{name}_rem"], lanes)
        return (w + g[f"{name}_step"] + carry) % wrap, r

    at = (start, rem0)
    for _ in range(m):
        for y in range(g["oh"]):
            for x in range(g["ow"]):
                row_first, nxt = at, None
                for wy in range(p):
                    for wx in range(p):
                        oy.append(y * p + wy)
                        ox.append(x * p + wx)
                        word.append(at[0])
                        rem.append(at[1])
                        if wx != p - 1:
                            at = step(at, "col")
                        elif wy == 0 and p > 1:
                            nxt = step(at, "col")
                        if wx == p - 1 and wy != p - 1:
                            at = row_first = step(row_first, "down")
                if x != g["ow"] - 1:
                    at = nxt if p > 1 else step(at, "col")
                elif y != g["oh"] - 1:
                    at = step(at, "row")
                else:
                    at = step(at, "img")
    return tuple(np.array(v, dtype=np.int64) for v in (oy, ox, word, rem))
