"""The matrix pass (:attr:`~hwgen.memmap.PassKind.MATRIX`): ``x @ W`` per output pixel, then
bias, requantization and activation per channel (or the raw accumulators).

It runs a :class:`~hwgen.nn.Dense` over rows, a :class:`~hwgen.nn.Conv2D` over images (each
output pixel a row over its patch, walked on chip: any rectangular kernel, strides per axis,
zero padding on each side, groups), an :class:`~hwgen.nn.AvgPool2D` or
:class:`~hwgen.nn.GlobalAvgPool2D` as its depthwise convolution of ones (``as_conv``), and a
:class:`Dense` after a :class:`~hwgen.nn.Flatten` as a convolution whose kernel is the whole
image (the images' words are already in ``(h, w, c)`` order).

A spatial matrix pass walks its reduction tiles by kernel position ``(ky, kx)`` and, at each,
by groups of ``rows`` channels of the output tile's channel window: its weight rows are the
kernel's ``[KH, KW, window, N]`` with the window padded to a multiple of ``rows``
(:func:`grouped_matrix`; a dense convolution's window is all ``C`` channels,
:func:`padded_matrix`).

A grouped convolution (``g`` groups of ``C / g`` input and ``N / g`` output channels) whose
group's outputs divide ``cols`` gives each output tile the window of its ``cols * g / N``
groups' inputs, which moves on by as many channels per tile (the geometry's ``cb_word``,
``cb_rem``): a block-diagonal tile, the reduction ``KH * KW * ceil(window / rows)`` tiles instead
of a full convolution's ``KH * KW * ceil(C / rows)``. A depthwise convolution (one input channel
per group) so takes ``ceil(cols / rows)`` rows per kernel position for ``cols`` outputs: ``1 /
max(rows, cols)`` of the array, ``1 / cols`` on a square one. (A window starts in any bank where
the feeder rotates lanes, :func:`~hwgen.memmap.rotates_lanes`; on a square array, whose
depthwise windows are whole words, from its word's first bank, the window then a little
wider for other groupings.) Other groupings (``N / g`` not dividing ``cols``) take every tile's
window as all ``C`` channels: block-diagonal dense weights, correct but ``g`` times the MACs
(and weight words) of the grouped layer. When every weight tile of an average pool is the same
(its window fits one tile of ``rows``, ``cols <= rows``: the identity), WEIGHT holds that one
tile and the feeder reads it again for every ``(nt, kt)`` (the geometry's ``wrep``); with
``cols > rows`` it stores every tile. Tiles that are zero off their diagonal (a depthwise
convolution's, such a pool's) are stored one word each, the diagonal, which the feeder
expands (the geometry's ``wdiag``): WEIGHT holds ``1 / rows`` of their words.
"""

import math

import numpy as np

from ..compiler.images import diagonal_image, is_diagonal, param_image, weight_image
from ..compiler.proofs import check_channel_params, check_padded_reduction, check_reduction
from ..memmap import PassKind, Region, rotates_lanes
from ..nn import AvgPool2D, Conv2D, Dense, GlobalAvgPool2D
from . import taps
from .base import Lowered, Pass, signed_range
from .bf16_matrix import interpret_bf16

__all__ = ["MatrixPass", "activation_fields", "finish_tile", "grouped_matrix", "padded_matrix",
           "tile_macs", "window_start"]

# Controller: FETCH, DECODE, LOAD, two PRIME cycles and the feeders' first read come before
# the engine's cycle 0 of the first chunk; NEXT, PRIME twice and the read before a later
# chunk's.
_LAYER_LEAD = 6
_CHUNK_LEAD = 4


def padded_matrix(weight, rows):
    """Return ``weight[KH, KW, C, N]`` as ``[KH * KW * ceil(C / rows) * rows, N]``: each kernel
    position's channels padded with zero rows to a multiple of ``rows``."""
    kh, kw, c, n = weight.shape
    groups = math.ceil(c / rows)
    padded = np.zeros((kh, kw, groups * rows, n), dtype=weight.dtype)
    padded[:, :, :c, :] = weight
    return padded.reshape(kh * kw * groups * rows, n)


def grouped_matrix(weight, groups, config):
    """Return ``(matrix, window)`` of a convolution's ``weight[KH, KW, C / groups, N]``:
    ``matrix[KH * KW * cgs * rows, N]`` holds, for output channel ``n`` of output tile
    ``nt = n // cols``, at each kernel position the ``cgs * rows`` channels of the tile's
    window (:func:`window_start`), zero but for ``n``'s group's inputs (a block-diagonal
    tile).

    ``window`` is ``cols / (N / groups)`` groups' inputs when a group's outputs divide
    ``cols`` (and a tile holds fewer than all groups), else 0: every tile's window is all
    ``C`` channels from channel 0 (a dense convolution; grouped, block-diagonal dense
    weights).
    """
    kh, kw, c_group, n = weight.shape
    n_group = n // groups
    # A tile's groups (when they divide cols); one tile holding every group reads them all.
    per_tile = config.cols // n_group if config.cols % n_group == 0 else groups
    window = per_tile * c_group if per_tile < groups else 0
    # Each output channel's group's first input, counted from its tile's window's first.
    outputs = np.arange(n)
    first = outputs // n_group * c_group - window_start(outputs // config.cols, window, config)
    cgs = math.ceil(int((first + c_group).max()) / config.rows)
    matrix = np.zeros((kh, kw, cgs * config.rows, n), dtype=weight.dtype)
    for col in range(n):
        matrix[:, :, first[col]:first[col] + c_group, col] = weight[:, :, :, col]
    return matrix.reshape(kh * kw * cgs * config.rows, n), window


def window_start(nt, window, config):
    """Return the first channel of output tile ``nt``'s channel window (``nt`` an int or an
    array): ``nt * window``, rounded down to a word's first bank on a device whose feeder does
    not rotate lanes (:func:`~hwgen.memmap.rotates_lanes`)."""
    start = np.asarray(nt) * window
    if not rotates_lanes(config):
        start = start // config.act_lanes * config.act_lanes
    return start


def _repeats(matrix, config):
    """Whether every weight tile of ``matrix`` (``[k_tiles * rows, N]``) holds the first
    tile's weights in the columns a tile writes (its channels below ``N``)."""
    k, n = matrix.shape
    k_tiles, n_tiles = config.tiles(k, n)
    if k_tiles * n_tiles == 1:
        return False
    r, c = config.rows, config.cols
    padded = np.zeros((k_tiles * r, n_tiles * c), dtype=np.int64)
    padded[:k, :n] = matrix
    tiles = padded.reshape(k_tiles, r, n_tiles, c)
    written = (np.arange(n_tiles * c) < n).reshape(1, 1, n_tiles, c)
    return bool(np.all((tiles == tiles[:1, :, :1, :]) | ~written))


def _checked(index, layer, weight, k, config, *, window=None):
    """Prove what the hardware needs of a matrix layer and return it as a Dense of
    ``weight``; a spatial layer's ``window`` is ``(KH, KW, C, name)``, its reduction padded
    per position (:func:`padded_matrix`). (Its accumulator is proved from the Dense, with
    its input's range, by :func:`~hwgen.compiler.kinds.lower_network`.)"""
    if window is None:
        check_reduction(index, k, config)
    else:
        kh, kw, c, name = window
        check_padded_reduction(index, (kh, kw), c, config, window=name)
    check_channel_params(index, layer, config)
    # The bounds resolved (the descriptor holds them), of a layer that requantizes.
    bounds = ({} if layer.output == "raw" else
              dict(zip(("act_min", "act_max"), layer.bounds(config.in_bits), strict=True)))
    return Dense(weight, layer.bias, layer.mult, layer.shift, activation=layer.activation,
                 output=layer.output, mult_neg=layer.mult_neg, **bounds)


def tile_macs(spec, config):
    """Return ``(useful, issued)`` multiply-accumulates per sample of a pass that runs ``spec``
    in tiles of the array: the layer's own, and every row and column of its padded tiles."""
    return (spec.pixels * spec.k * spec.n,
            spec.pixels * spec.k_tiles * config.rows * spec.n_tiles * config.cols)


class MatrixPass(Pass):
    """The matrix pass's hooks (see :class:`~hwgen.passes.base.Pass`)."""

    kind = PassKind.MATRIX
    layers = (Dense, Conv2D, AvgPool2D, GlobalAvgPool2D)
    cycle_fields = ("k_tiles", "n_tiles", "raw")

    def lower(self, index, layer, shapes, config):
        in_shape, _ = shapes
        pool = isinstance(layer, (AvgPool2D, GlobalAvgPool2D))
        if pool:
            # A depthwise convolution of ones: its tiles are alike (the window's identity).
            layer = layer.as_conv(in_shape if isinstance(layer, GlobalAvgPool2D) else
                                  in_shape[-1])
        if isinstance(layer, Conv2D):
            kh, kw, c, _ = layer.weight.shape
            matrix, window = grouped_matrix(layer.weight, layer.groups, config)
            # The channels each kernel position reads: the tile's window, or all of them.
            channels = matrix.shape[0] // (kh * kw) if window else c * layer.groups
            return Lowered(_checked(index, layer, matrix, kh * kw * c, config,
                                    window=(kh, kw, channels, "kernel")),
                           kh * kw * c, (kh, kw, layer.strides, layer.pads, window),
                           repeat=pool, grouped=layer.groups > 1)
        if len(in_shape) == 1:
            k = layer.weight.shape[0]
            return Lowered(_checked(index, layer, layer.weight, k, config), k, None)
        # After a Flatten: a convolution whose kernel is the whole image, (h, w, c) as Flatten
        # orders the features.
        h, w, c = in_shape
        kernel = layer.weight.reshape(h, w, c, layer.weight.shape[1])
        return Lowered(_checked(index, layer, padded_matrix(kernel, config.rows), h * w * c,
                                config, window=(h, w, c, "image before the Flatten")),
                       h * w * c, (h, w, (1, 1), (0, 0, 0, 0), 0))

    def place(self, p, config, w_base, p_base):
        k_pad, n = p.matrix.weight.shape
        k_tiles, n_tiles = config.tiles(k_pad, n)
        tiles = 1 if self._wrep(p, config) else n_tiles * k_tiles
        words = 1 if self._wdiag(p, config) else config.rows
        return {"k": p.k, "n": n, "k_tiles": k_tiles, "n_tiles": n_tiles,
                "activation": p.matrix.activation, "output": p.matrix.output,
                "w_base": w_base, "w_words": tiles * words,
                "p_base": p_base, "p_words": n_tiles}

    def fields(self, p, spec):
        return {"n": spec.n, **activation_fields(p.matrix)}

    def cgs(self, p, config, src_stride):
        if p.taps:
            # The taps layout: every tile is a "channel group" of its one kernel position.
            return math.ceil(p.matrix.weight.shape[0] / config.rows)
        # A kernel position's reduction tiles: the channels of its window in groups of rows.
        kh, kw = p.kernel[:2]
        return p.matrix.weight.shape[0] // (kh * kw * config.rows)

    @staticmethod
    def _wrep(p, config):
        """Whether the pass's weights are one tile, read for every ``(nt, kt)``."""
        return p.repeat and _repeats(p.matrix.weight, config)

    @classmethod
    def _wdiag(cls, p, config):
        """Whether the pass's weight tiles are stored one word each, their diagonals (a
        depthwise convolution's, and an average pool's whose tiles differ)."""
        return (p.grouped and not p.taps and not cls._wrep(p, config)
                and is_diagonal(p.matrix.weight, config))

    def walk_fields(self, p, config, src_stride=1):
        return {"wrep": int(self._wrep(p, config)), "wdiag": int(self._wdiag(p, config))}

    def images(self, p, config):
        if self._wdiag(p, config):
            return diagonal_image(p.matrix, config), param_image(p.matrix, config)
        weights = weight_image(p.matrix, config)
        if self._wrep(p, config):
            weights = weights[:config.rows]
        return weights, param_image(p.matrix, config)

    def macs(self, spec, config):
        return tile_macs(spec, config)

    def cycles(self, config, d, g, m, chunk, *, implementation=None):
        # The output pixels run in chunks of at most acc_depth, each a pass per reduction and
        # output tile.
        pixels = m * g["oh"] * g["ow"] * _window(g)
        total = _LAYER_LEAD - _CHUNK_LEAD
        for start in range(0, pixels, config.acc_depth):
            rows = min(config.acc_depth, pixels - start)
            total += _CHUNK_LEAD + chunk(d["k_tiles"], d["n_tiles"], rows, bool(d["raw"]))
        return total

    def busy_rows(self, d, g, m):
        return m * g["oh"] * g["ow"] * _window(g) * d["k_tiles"] * d["n_tiles"]

    def interpret(self, device, d, g, m):
        """Per chunk of ``acc_depth`` output pixels, per output tile, the reduction tiles over
        the tile's channel window, then bias, requantization and activation (or the raw
        sums)."""
        c = device.config
        if c.dtype == "bf16":
            interpret_bf16(device, d, g, m, patch_rows=_patch_rows, window_start=window_start)
            return
        rows, cols = c.rows, c.cols
        assert not (d["raw"] and (d.get("leaky") or d.get("relu"))), \
            "leaky and relu are documented for requantized layers only"
        acc_low, acc_high = signed_range(c.acc_bits)
        # Python integers where int64 could be too narrow for the accumulator.
        dtype = object if c.acc_bits > 62 else np.int64
        window = g["cb_word"] * device.b + g["cb_rem"]
        assert g["cb_rem"] < device.b, "cb_rem is a bank"
        xs, reads = {}, set()
        if g.get("taps"):
            xs[0], reads = taps.patch_rows(device, d, g, m)
            xs[0] = xs[0].astype(dtype)
        for nt in () if g.get("taps") else range(d["n_tiles"]) if window else (0,):
            x, read = _patch_rows(device, d, g, m, int(window_start(nt, window, c)))
            xs[nt] = x.astype(dtype)
            reads |= read
        pixels = len(xs[0])
        writes = set()
        for first in range(0, pixels, c.acc_depth):
            chunk = range(first, min(first + c.acc_depth, pixels))
            for nt in range(d["n_tiles"]):
                x = xs[nt if window else 0]
                acc = np.zeros((len(chunk), cols), dtype=dtype)
                for kt in range(d["k_tiles"]):
                    tile = 0 if g["wrep"] else nt * d["k_tiles"] + kt
                    if g.get("wdiag"):   # one word, the tile's diagonal
                        word = device.lanes(Region.WEIGHT, d["w_base"] + tile)
                        w = np.array([[word[j] if i == j else 0 for j in range(cols)]
                                      for i in range(rows)], dtype=dtype)
                    else:
                        base = d["w_base"] + tile * rows
                        w = np.array([device.lanes(Region.WEIGHT, base + i)
                                      for i in range(rows)], dtype=dtype)
                    acc = acc + x[chunk.start:chunk.stop, kt * rows:(kt + 1) * rows] @ w
                    assert acc_low <= acc.min() and acc.max() <= acc_high
                writes |= finish_tile(device, d, nt, chunk, acc, window=_window(g))
        assert not reads & writes, "a layer overwrote its own input"

    def output_rows(self, d, channels):
        return d["dst_stride"], d["n"]


def _window(g):
    """Return the conv pixels each output pixel of geometry ``g`` takes: ``p * p`` with a
    fused max pool (:mod:`hwgen.passes.fused_pool`), else 1."""
    side = g.get("pool", 0) + 1
    return side * side


def _patch_rows(device, d, g, m, first):
    """Return ``(x, reads)``: the engine's rows of the layer for an output tile whose channel
    window starts at channel ``first``, ``x[p, kt * rows + i]`` for output pixel ``p``,
    reduction tile ``kt`` (kernel position ``kt // cgs``, channel group ``kt % cgs``), lane
    ``i``, and the ACT words read inside the pixels."""
    c, b, rows = device.config, device.b, device.config.rows
    cgs = g["cgs"]
    kernel = device.kernel_offsets(d, g)
    assert d["k_tiles"] == len(kernel) * cgs, "k_tiles is not kh * kw * cgs"
    oy, ox, pix = device.pixel_words(d, g, m)
    kts = np.arange(d["k_tiles"])
    ky = np.array([kernel[kt // cgs][0] for kt in kts], dtype=np.int64)
    kx = np.array([kernel[kt // cgs][1] for kt in kts], dtype=np.int64)
    off = np.array([kernel[kt // cgs][2] for kt in kts], dtype=np.int64)
    channel = first + (kts % cgs)[:, None] * rows + np.arange(rows)[None, :]   # [KT, rows]
    word, lane = channel // b, channel % b
    iy = oy[:, None] * g["sy"] + ky[None, :] - g["pad_top"]                # [P, KT]
    ix = ox[:, None] * g["sx"] + kx[None, :] - g["pad_left"]
    inside = (iy >= 0) & (iy < g["h"]) & (ix >= 0) & (ix < g["w"])
    addr = (pix[:, None, None] + off[None, :, None] + word[None]) % device.wrap
    shape = addr.shape                                                     # [P, KT, rows]
    mask = np.broadcast_to(inside[:, :, None], shape)
    x = np.zeros(shape, dtype=np.int64)   # padding reads as zeros
    if mask.any():
        x[mask] = device.gather(addr[mask])[np.arange(mask.sum()),
                                            np.broadcast_to(lane[None], shape)[mask]]
    in_pixel = mask & np.broadcast_to((word < d["src_stride"])[None], shape)
    reads = {int(a) for a in np.unique(addr[in_pixel])}
    assert not reads or max(reads) < c.act_depth, "a pixel's word lies past ACT"
    return x.reshape(shape[0], -1), reads


def activation_fields(matrix):
    """Return the descriptor fields of ``matrix``'s activation (its bounds resolved by
    :func:`_checked`): ``leaky``, ``act_min``, ``act_max``; none for a raw layer."""
    if matrix.output == "raw":
        return {}
    return {"leaky": int(matrix.activation == "leaky_relu"), "act_min": matrix.act_min,
            "act_max": matrix.act_max}


def finish_tile(device, d, nt, chunk, acc, *, window=1):
    """Add the bias to output tile ``nt``'s sums of the output pixels ``chunk``, requantize
    and write them (or write the raw sums); return the ACT words written.

    With a fused max pool (``window`` conv pixels per output pixel, walked window by window)
    each window's ``window`` consecutive rows are reduced to their maximum per channel after
    the requantization and the bounds, written at the pooled pixel ``p // window``.

    Requantization (section 3.2): ``p = a * mult`` (``a * mult_neg`` for ``a < 0`` in a
    ``leaky`` layer), the rounding shift, saturation to ``in_bits``, then the clamp to
    ``[act_min, act_max]`` (on a design without bounds: ``[0, high]`` with ``relu``, else the
    saturation range).
    """
    c, b = device.config, device.b
    cols = c.cols
    acc_low, acc_high = signed_range(c.acc_bits)
    low, high = signed_range(c.in_bits)
    if "act_min" not in d:   # a design without bounds
        d = {**d, "leaky": 0, "act_min": 0 if d["relu"] else low, "act_max": high}
    assert low <= d["act_min"] <= d["act_max"] <= high, "bounds outside the saturation range"
    channels = [j for j in range(cols) if nt * cols + j < d["n"]]
    values = np.zeros((len(chunk), len(channels)), dtype=object)
    for i, j in enumerate(channels):
        bias, mult, shift, mult_neg = device.params(d["p_base"] + nt, j)
        a = acc[:, j].astype(object) + bias
        assert all(acc_low <= v <= acc_high for v in a)
        if not d["raw"]:
            p = a * (np.where(a < 0, mult_neg, mult) if d["leaky"] else mult)
            a = (p + (1 << (shift - 1))) >> shift if shift > 0 else p
            a = np.minimum(np.maximum(a, low), high)      # saturation, then the bounds
            a = np.minimum(np.maximum(a, d["act_min"]), d["act_max"])
        values[:, i] = a
    if window > 1:
        assert not d["raw"] and len(chunk) % window == 0 and chunk.start % window == 0, \
            "a fused pool's chunk holds whole windows of a requantized layer"
        values = values.reshape(-1, window, len(channels)).max(axis=1)
        chunk = range(chunk.start // window, chunk.stop // window)
    region, lanes = (Region.OUTPUT, cols) if d["raw"] else (Region.ACT, b)
    writes = set()
    for r, p in enumerate(chunk):
        for i, j in enumerate(channels):
            n = nt * cols + j
            addr = d["dst_base"] + p * d["dst_stride"] + n // lanes
            device.write_lane(region, addr, n % lanes, values[r, i])
            if region == Region.ACT:
                writes.add(addr)
    return writes
