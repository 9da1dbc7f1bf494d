"""The taps layout of a first convolution: ``rows`` consecutive kernel taps per reduction tile.

A convolution with ``C < rows`` input channels walked position by position keeps ``C`` of
the array's ``rows`` busy (one of eight for a one-channel image). When it reads the network's
input, the compiler stores that input as an element stream of one image row per run
(:class:`~hwgen.compiler.specs.MatrixSpec`: ``runs = H``, ``run = W * C``, ``lead =
pad_left * C``, ``pitch = P``) and flattens the kernel in ``(ky, kx, c)`` order: tap ``t``
of output pixel ``(oy, ox)`` is stream element ``e0 + t + (t // kwc) * (P - kwc)`` with
``kwc = KW * C`` and ``e0 = (oy * sy - pad_top) * P + ox * sx * C`` (plus the sample's
``H * P``). With ``P % act_lanes == kwc % act_lanes`` the jump to the next kernel row is whole
words, so the ``rows`` taps ``kt * rows ..`` of reduction tile ``kt`` lie in distinct banks (a
rotation of the lanes) and the tile is one read of the banks: ``ceil(KH * KW * C / rows)``
tiles instead of ``KH * KW * ceil(C / rows)``. A tap in a kernel row above or below the image
reads as zero; the left and right padding are the stream's stored zeros (``P`` is at least
the padded row). See :func:`hwgen.memmap.geometry_layout` for the walk's fields.
"""

import dataclasses

import numpy as np

from ..memmap import PassKind, act_addr_bits, walks_taps
from ..nn import Dense
from .fused_pool import conv_steps, walk

__all__ = ["eligible", "flat_kernel", "geometry", "lowered", "patch_rows", "pitch", "stream"]


def eligible(p, config):
    """Return whether pass ``p`` (a :class:`~hwgen.compiler.kinds.DeviceLayer` reading the
    network's input, and its only reader) can take its input in the taps layout: a matrix
    pass that walks an image of fewer than ``rows`` channels on a device that
    :func:`~hwgen.memmap.walks_taps`, whose weight tiles are not one repeated tile (an
    average pool's) and whose kernel has at most ``max_k`` taps (the taps lanes' counters and
    the geometry's ``kwc`` are sized by it; a larger kernel walks position by position)."""
    return (walks_taps(config) and p.kind is PassKind.MATRIX and p.spatial
            and p.matrix is not None and not p.repeat
            and len(p.in_shape) == 3 and p.in_shape[2] < config.rows
            and p.kernel[4] == 0 and p.k <= config.max_k)


def pitch(p, config):
    """Return the taps layout's row pitch ``P`` of pass ``p``: the smallest number of
    elements that holds the padded row the kernel reaches and is ``KW * C`` modulo
    ``act_lanes``."""
    _, kw, (_, sx), (_, _, left, _), _ = p.kernel
    _, w, c = p.in_shape
    ow = p.out_shape[1] if len(p.out_shape) == 3 else 1
    # The columns the kernel reads (the right padding it reaches is stored as zeros).
    need = max(left + w, (ow - 1) * sx + kw) * c
    lanes = config.act_lanes
    return need + (kw * c - need) % lanes


def stream(p, config):
    """Return the element stream of ``p``'s input in the taps layout: the
    :class:`~hwgen.compiler.specs.MatrixSpec` fields ``runs``, ``run``, ``lead``,
    ``pitch``."""
    h, w, c = p.in_shape
    left = p.kernel[3][2]
    # The pitch its lowering chose (before a fused pool made the pass's output the pool's).
    return {"runs": h, "run": w * c, "lead": left * c, "pitch": p.taps or pitch(p, config)}


def lowered(p, config):
    """Return pass ``p`` in the taps layout: its matrix the kernel flattened in ``(ky, kx,
    c)`` order (``[KH * KW * C, N]``, no padding per position) and ``taps`` its pitch."""
    flat = flat_kernel(p)
    old = p.matrix
    matrix = Dense(flat, old.bias, old.mult, old.shift, activation=old.activation,
                   output=old.output, act_min=old.act_min, act_max=old.act_max,
                   mult_neg=old.mult_neg)
    return dataclasses.replace(p, matrix=matrix, taps=pitch(p, config))


def flat_kernel(p):
    """Return the weights of pass ``p`` (its matrix padded per kernel position,
    :func:`~hwgen.passes.matrix.padded_matrix`) flattened in ``(ky, kx, c)`` order, without
    the padding: ``[KH * KW * C, N]``, the taps layout's matrix."""
    kh, kw = p.kernel[:2]
    c = p.in_shape[2]
    weight = p.matrix.weight
    n = weight.shape[1]
    return weight.reshape(kh, kw, -1, n)[:, :, :c, :].reshape(kh * kw * c, n)


def geometry(p, config, base):
    """Return ``(origin, fields)`` of pass ``p`` in the taps layout whose input stream starts
    at ACT word ``base``: the word of the walk's first element ``e0`` (output pixel
    ``(0, 0)`` of sample 0, modulo the banks' addresses) and the geometry fields
    (:func:`hwgen.memmap.geometry_layout`)."""
    kh, kw, (sy, sx), (top, _, _, _), _ = p.kernel
    h, _, c = p.in_shape
    oh, ow = p.out_shape[:2] if len(p.out_shape) == 3 else (1, 1)
    lanes, rows, big_p = config.act_lanes, config.rows, p.taps
    wrap = 1 << act_addr_bits(config)
    kwc = kw * c
    start = base * lanes - top * big_p
    steps = conv_steps(oh, ow, p.pool, unit_row=sy * big_p, unit_col=sx * c,
                       h_units=h * big_p)
    d_word = (big_p - kwc) // lanes
    tq, tr = divmod(rows, kwc)
    fields = {"h": h, "w": ow * max(1, p.pool) * sx, "oh": oh, "ow": ow, "kh": kh, "kw": 1,
              "sy": sy, "sx": sx,
              "pad_top": top, "pad_left": 0, "ky_step": 0, "cb_word": 0, "cb_rem": 0,
              "wrep": 0, "taps": 1, "kwc": kwc, "tq": tq, "tr": tr, "d_word": d_word,
              "tq_word": tq * d_word % wrap, "rem0": start % lanes}
    if p.pool:
        fields["pool"] = p.pool - 1
    for name, elements in steps.items():
        word, rem = divmod(elements, lanes)
        fields[f"{name}_step"] = word % wrap
        fields[f"{name}_rem"] = rem
    return (start // lanes) % wrap, fields


def patch_rows(device, d, g, m):
    """Return ``(x, reads)`` of a taps layer on the interpreter ``device``: the engine's rows,
    ``x[p, kt * rows + r]`` tap ``kt * rows + r`` of output pixel ``p``, and the ACT words
    read. Elements are walked from ``src_base``, ``rem0`` with the geometry's steps (words and
    banks), as the device walks them; the taps' places are the memory map's arithmetic."""
    b, rows, wrap = device.b, device.config.rows, device.wrap
    oy, _, word, rem = walk(g, m, d["src_base"], lanes=b, rem0=g["rem0"], wrap=wrap)
    t = np.arange(d["k_tiles"] * rows, dtype=np.int64)
    q = t // g["kwc"]                                                  # the kernel row
    iy = oy[:, None] * g["sy"] - g["pad_top"] + q[None, :]             # [P, T]
    valid = (iy >= 0) & (iy < g["h"]) & (q < g["kh"])[None, :]
    element = rem[:, None] + t[None, :]
    addr = (word[:, None] + element // b + q[None, :] * g["d_word"]) % wrap
    lane = element % b
    x = np.zeros(addr.shape, dtype=np.int64)
    if valid.any():
        x[valid] = device.gather(addr[valid])[np.arange(valid.sum()), lane[valid]]
    reads = {int(a) for a in np.unique(addr[valid])}
    assert not reads or max(reads) < device.config.act_depth, "a tap's word lies past ACT"
    return x, reads

