"""The depthwise pass (:attr:`~hwgen.memmap.PassKind.DEPTHWISE`): a depthwise convolution or an
average pool on the array, each column its own channel and the rows the kernel's taps.

It runs, on a device with the depthwise unit (``AcceleratorConfig.depthwise``), a
:class:`~hwgen.nn.Conv2D` whose groups are its input channels, one output channel each, and an
:class:`~hwgen.nn.AvgPool2D` or :class:`~hwgen.nn.GlobalAvgPool2D` (its depthwise convolution of
ones, ``as_conv``), where the unit can (:func:`refusal`); any other such layer stays a matrix
pass (:mod:`hwgen.passes.matrix`, block-diagonal tiles at ``1 / cols`` of the array).

**Weights.** A tile has the array's ``rows`` and the unit's ``dw_extra_rows`` (``rows`` below
stands for their sum, the config's ``array_rows``: a 3x3 kernel in one tile of an 8-row array
with one extra row). Reduction tile ``kt``, row ``i`` is tap ``t = kt * rows + i`` of the kernel
flattened in ``(ky, kx)`` order, ``(ky, kx) = divmod(t, KW)``; lane ``j`` of output tile ``nt``
is channel ``nt * cols + j``: the matrix ``[k_tiles * rows, C]``, zero past the kernel's
``KH * KW`` taps, in WEIGHT as a matrix pass's tiles. A row past the kernel reads zero on the
device (whatever its weight), so an average pool's tiles are all alike, ones: WEIGHT holds one
(the geometry's ``wrep``).

**The stream.** Output tile ``nt`` reads word ``nt`` of each input pixel: its ``cols`` channels
(the unit needs ``act_lanes == cols``). The output pixels run in chunks of ``dw_rows`` output
rows of one sample (every output row of the sample when the kernel is one tile: nothing to
accumulate; else as many as the ``acc_depth`` accumulators hold), and each chunk in a pass per
``(nt, kt)``, as a matrix pass's. A pass streams the padded input rows its tile's taps reach,
``oy0 * sy + ky_min .. oy1 * sy + ky_max`` (``ky_min``, ``ky_max`` the tile's first and last
tap's kernel rows), each of ``dw_wp = (ow - 1) * sx + kw`` pixels, one word a cycle (a pixel
in the padding reads as zero, unread), into the unit's delay lines: line 0 is the stream, line
``l`` the stream ``l * dw_delay`` cycles late (``dw_delay = dw_wp - kw``). Array row ``i`` takes
line ``ky_max - ky`` of its tap's kernel row (zero past the kernel), column ``j`` lane ``j``; the
sums flow down the columns as a matrix pass's do, and the output position of every padded grid
cell ``(oy * sy, ox * sx)`` is a result row, ``lag`` cycles after its row's first element
(:func:`tile_plan`). So every input word is read once per tile, and each array row multiplies a
tap of a new output pixel every cycle: on a 3x3 kernel, ``9 / (rows * k_tiles)`` of the array
over the stream (the rows of a tile past the kernel idle), less the streamed cells that are no
output position (a row's last ``kw - 1`` cells; with stride 2, three in four).

**bf16** (a ``dtype="bf16"`` design): the same layout on bit patterns, its interpreter step
:mod:`hwgen.passes.bf16_depthwise` (each tile's taps summed in fp32 from +0.0, in the order of
the rows, then added to the accumulator: the contract's depthwise order).

**Cycles** (:meth:`DepthwisePass.cycles`): the unit starts a pass's stream once its weight tile
is in the array and the pass before has its first result row coming (``lag``), a cycle after the
last pass's stream; the chunk ends as a matrix pass's chunk does after its last result row.
"""

import dataclasses
import math

import numpy as np

from ..bf16_cycles import bf16_depthwise_timing
from ..compiler.images import param_image, weight_image
from ..compiler.proofs import check_channel_params
from ..latency import FIFO_LATENCY, STREAM_LATENCY, bank_rest, requant_tail, ws_latency
from ..memmap import (
    GEOMETRY_LIMITS,
    PassKind,
    Region,
    has_depthwise,
    reduction_limits,
    walked_strides,
)
from ..nn import AvgPool2D, Conv2D, Dense, GlobalAvgPool2D
from ..timing import unit_latencies
from .base import Lowered, Pass, signed_range
from .bf16_depthwise import interpret_bf16_depthwise
from .matrix import activation_fields, finish_tile, tile_macs

__all__ = ["DepthwisePass", "TilePlan", "chunks", "depthwise_matrix",
           "kernel_refusal", "refusal", "tile_plan"]

#: Cycles the unit takes between two passes' streams: its next tile's plan, and the start.
PASS_GAP = 2
# Controller and unit before the chunk's first stream element: FETCH, DECODE, LOAD, two PRIME
# cycles and the unit's first plan (a layer); NEXT, PRIME twice and the plan (a later chunk).
_LAYER_LEAD = 6
_CHUNK_LEAD = 4


@dataclasses.dataclass(frozen=True)
class TilePlan:
    """Where a reduction tile's rows take their operands (:func:`tile_plan`).

    Attributes
    ----------
    lines : tuple of int or None
        Per array row, the delay line of its tap's kernel row (``ky_max - ky``), or None for a
        row past the kernel (it reads zero).
    span : int
        Kernel rows the tile's taps reach, ``ky_max - ky_min + 1``: the lines it uses.
    ky_min : int
        The kernel row of its first tap (row 0's).
    kx0 : int
        The kernel column of its first tap.
    """

    lines: tuple
    span: int
    ky_min: int
    kx0: int

    def lag(self, delay, latency):
        """Return the cycles from the pass's first stream element's read to its first output
        position's result row entering the array: the banks' and the unit's ``latency``, and
        the tile's first tap's place in the stream, ``(span - 1) * delay + kx0``."""
        return latency + (self.span - 1) * delay + self.kx0


def tile_plan(kt, rows, kh, kw):
    """Return the :class:`TilePlan` of reduction tile ``kt`` of a ``kh x kw`` kernel on an
    array of ``rows`` rows."""
    taps = [divmod(kt * rows + i, kw) for i in range(rows)]
    inside = [ky for ky, _ in taps if ky < kh]
    ky_min, ky_max = inside[0], inside[-1]
    lines = tuple(ky_max - ky if ky < kh else None for ky, _ in taps)
    return TilePlan(lines, ky_max - ky_min + 1, ky_min, taps[0][1])


def chunks(g, m):
    """Yield ``(sample, oy0, rows)``: each chunk's sample, first output row and output rows,
    in order (``dw_rows`` rows of a sample, the last of each sample fewer)."""
    for sample in range(m):
        for oy0 in range(0, g["oh"], g["dw_rows"]):
            yield sample, oy0, min(g["dw_rows"], g["oh"] - oy0)


def _conv_of(layer, in_shape):
    """Return the depthwise :class:`Conv2D` that ``layer`` is (an average pool's of ones), or
    None where it is no depthwise convolution (grouped otherwise, a channel multiplier)."""
    if isinstance(layer, GlobalAvgPool2D):
        return layer.as_conv(in_shape)
    if isinstance(layer, AvgPool2D):
        return layer.as_conv(in_shape[-1])
    if isinstance(layer, Conv2D):
        _, _, c_group, n = layer.weight.shape
        if c_group == 1 and layer.groups == n:
            return layer
    return None


def refusal(layer, in_shape, config):
    """Return why the depthwise unit of ``config`` cannot run ``layer`` on ``in_shape``
    images (a string), or None if it can."""
    if not has_depthwise(config):
        return "the device has no depthwise unit (depthwise=False)"
    conv = _conv_of(layer, in_shape) if len(in_shape) == 3 else None
    if conv is None:
        return "it is no depthwise convolution (one output channel per input channel)"
    kh, kw, _, _ = conv.weight.shape
    return kernel_refusal((kh, kw, conv.strides, conv.pads), conv.output_shape(in_shape)[:2],
                          config)


def kernel_refusal(kernel, out_hw, config):
    """Return why the depthwise unit of ``config`` cannot walk a depthwise convolution of
    ``kernel`` ``(kh, kw, (sy, sx), (top, bottom, left, right))`` whose output is ``(oh, ow)``
    pixels (a string), or None if it can. A stride along an axis of one output pixel is
    never taken (:func:`~hwgen.memmap.walked_strides`: KWS's pool over all its 24 x 5)."""
    kh, kw, strides, (top, _, left, _) = kernel
    sy, sx = walked_strides(strides, out_hw)
    ow = out_hw[1]
    k_tiles = math.ceil(kh * kw / config.array_rows)
    span = max(tile_plan(kt, config.array_rows, kh, kw).span for kt in range(k_tiles))
    limits = (
        (max(sy, sx) > GEOMETRY_LIMITS["stride"] or max(top, left) > GEOMETRY_LIMITS["pad"],
         "its strides or padding are beyond the geometry's"),
        ((ow - 1) * sx > config.dw_depth,
         f"an output row spans {(ow - 1) * sx + kw} input pixels; the delay lines hold "
         f"dw_depth={config.dw_depth} + kw"),
        (span > config.dw_lines + 1,
         f"a tile of {config.array_rows} taps spans {span} kernel rows; the unit has "
         f"dw_lines={config.dw_lines} delay lines"),
        (k_tiles > 1 and ow > config.acc_depth,
         f"an output row of {ow} pixels exceeds the acc_depth={config.acc_depth} sums"),
        (k_tiles > reduction_limits(config)[0],
         f"its {kh * kw} taps take {k_tiles} tiles; the descriptor's k_tiles holds "
         f"{reduction_limits(config)[0]}"),
    )
    return next((why for broken, why in limits if broken), None)


def depthwise_matrix(conv, rows):
    """Return ``[k_tiles * rows, C]``: row ``t`` the kernel's tap ``t`` (``(ky, kx)`` order)
    for every channel, zero past its ``KH * KW`` taps."""
    kh, kw, _, c = conv.weight.shape
    taps = kh * kw
    matrix = np.zeros((math.ceil(taps / rows) * rows, c), dtype=conv.weight.dtype)
    matrix[:taps] = conv.weight.reshape(taps, c)
    return matrix


class DepthwisePass(Pass):
    """The depthwise pass's hooks (see :class:`~hwgen.passes.base.Pass`)."""

    kind = PassKind.DEPTHWISE
    layers = (Conv2D, AvgPool2D, GlobalAvgPool2D)
    spatial_only = True
    cycle_fields = ("k_tiles", "n_tiles", "raw")

    def accepts(self, layer, in_shape, config):
        return refusal(layer, in_shape, config) is None

    def lower(self, index, layer, shapes, config):
        in_shape, _ = shapes
        pool = isinstance(layer, (AvgPool2D, GlobalAvgPool2D))
        conv = _conv_of(layer, in_shape)
        kh, kw, _, _ = conv.weight.shape
        # (Its accumulator is proved from the matrix, with its input's range, by
        # hwgen.compiler.kinds.lower_network; refusal() checked its tiles.)
        check_channel_params(index, conv, config)
        bounds = ({} if conv.output == "raw" else
                  dict(zip(("act_min", "act_max"), conv.bounds(config.in_bits), strict=True)))
        matrix = Dense(depthwise_matrix(conv, config.array_rows), conv.bias, conv.mult, conv.shift,
                       activation=conv.activation, output=conv.output, mult_neg=conv.mult_neg,
                       **bounds)
        return Lowered(matrix, kh * kw, (kh, kw, conv.strides, conv.pads, 0), repeat=pool)

    def place(self, p, config, w_base, p_base):
        k_pad, n = p.matrix.weight.shape
        k_tiles, n_tiles = k_pad // config.array_rows, config.tiles(k_pad, n)[1]
        tiles = 1 if p.repeat else n_tiles * k_tiles
        return {"k": p.k, "n": n, "k_tiles": k_tiles, "n_tiles": n_tiles,
                "activation": p.matrix.activation, "output": p.matrix.output,
                "w_base": w_base, "w_words": tiles * config.array_rows,
                "p_base": p_base, "p_words": n_tiles}

    def fields(self, p, spec):
        return {"n": spec.n, **activation_fields(p.matrix)}

    def cgs(self, p, config, src_stride):
        return 0

    def walk_fields(self, p, config, src_stride=1):
        _, kw, strides, _, _ = p.kernel
        h, w, _ = p.in_shape
        oh, ow = p.out_shape[:2]
        sy, sx = walked_strides(strides, (oh, ow))
        k_tiles = p.matrix.weight.shape[0] // config.array_rows
        rows = oh if k_tiles == 1 else min(oh, config.acc_depth // ow)
        tq, tr = divmod(config.array_rows, kw)
        wrap = 1 << max(1, (config.act_depth - 1).bit_length())
        row = w * src_stride
        return {"col_step": src_stride % wrap, "row_step": row % wrap,
                "img_step": (h * row) % wrap, "ky_step": 0, "wrep": int(p.repeat),
                "dw_wp": (ow - 1) * sx + kw, "dw_delay": (ow - 1) * sx, "dw_rows": rows,
                "dw_tq": tq, "dw_tr": tr, "dw_cstep": (rows * sy * row) % wrap,
                "dw_tqstep": (tq * row) % wrap}

    def images(self, p, config):
        weights = weight_image(p.matrix, config, config.array_rows)
        if p.repeat:
            weights = weights[:config.array_rows]
        return weights, param_image(p.matrix, config)

    def macs(self, spec, config):
        # The MAC counter's: ``rows * cols`` a row entered (macs_from_busy_cycles), the
        # unit's extra rows not counted.
        return tile_macs(spec, config)

    def cycles(self, config, d, g, m, chunk, *, implementation=None):
        units = unit_latencies(config, implementation)
        latency = units.read + STREAM_LATENCY
        if config.dtype == "bf16":
            # The bf16 datapath's: its banks' rewrite, its row rule and its rows' way out.
            timing = bf16_depthwise_timing(config, implementation)
            banks, after = {"rewrite": timing.rewrite, "gap": timing.gap}, timing.after
        else:
            banks = {}
            after = (ws_latency(config, units.array) + FIFO_LATENCY
                     + requant_tail(config, bool(d["raw"]), units.requant))
        plans = [tile_plan(kt, config.array_rows, g["kh"], g["kw"])
                 for kt in range(d["k_tiles"])]
        total = _LAYER_LEAD - _CHUNK_LEAD
        for _, _, rows in chunks(g, m):
            last = _chunk_last_row(config, d, g, rows=rows, plans=plans, latency=latency,
                                   weight_rows=units.weight_rows, **banks)
            total += _CHUNK_LEAD + last + after + 1
        return total

    def busy_rows(self, d, g, m):
        return m * g["oh"] * g["ow"] * d["k_tiles"] * d["n_tiles"]

    def interpret(self, device, d, g, m):
        """Per chunk, per output tile: every output pixel's sums over the kernel's taps of its
        channels, read through the memory map (padding as zeros), tile by tile; then bias,
        requantization and activation (or the raw sums)."""
        c = device.config
        rows, cols = c.array_rows, c.cols
        assert device.b == cols, "the depthwise unit reads a word's lanes as its columns"
        if c.dtype == "bf16":
            interpret_bf16_depthwise(device, d, g, m, chunks=chunks, tap=self._tap)
            return
        acc_low, acc_high = signed_range(c.acc_bits)
        dtype = object if c.acc_bits > 62 else np.int64
        kh, kw, sy, sx = g["kh"], g["kw"], g["sy"], g["sx"]
        taps = [divmod(t, kw) for t in range(kh * kw)]
        reads, writes = set(), set()
        first = 0
        for sample, oy0, count in chunks(g, m):
            oy = np.repeat(np.arange(oy0, oy0 + count), g["ow"])
            ox = np.tile(np.arange(g["ow"]), count)
            chunk = range(first, first + len(oy))
            for nt in range(d["n_tiles"]):
                acc = np.zeros((len(chunk), cols), dtype=dtype)
                for kt in range(d["k_tiles"]):
                    tile = 0 if g["wrep"] else nt * d["k_tiles"] + kt
                    for i in range(rows):
                        t = kt * rows + i
                        if t >= kh * kw:
                            break   # the rows past the kernel read zero
                        x, read = self._tap(device, d, g, sample=sample,
                                            r=oy * sy + taps[t][0], col=ox * sx + taps[t][1],
                                            nt=nt)
                        w = device.lanes(Region.WEIGHT, d["w_base"] + tile * rows + i)
                        acc = acc + x.astype(dtype) * np.array(w, dtype=dtype)
                        reads |= read
                    assert acc_low <= acc.min() and acc.max() <= acc_high
                writes |= finish_tile(device, d, nt, chunk, acc)
            first = chunk.stop
        assert not reads & writes, "a layer overwrote its own input"

    @staticmethod
    def _tap(device, d, g, *, sample, r, col, nt):
        """Return ``(x, reads)``: the lanes of word ``nt`` of the padded grid's cells ``(r,
        col)`` (arrays) of ``sample``, zero in the padding, and the ACT words read."""
        inside = ((r >= g["pad_top"]) & (r < g["pad_top"] + g["h"])
                  & (col >= g["pad_left"]) & (col < g["pad_left"] + g["w"]))
        addr = (d["src_base"] + sample * g["img_step"] + r * g["row_step"]
                + col * g["col_step"] + nt) % device.wrap
        x = np.zeros((len(r), device.b), dtype=np.int64)
        if inside.any():
            x[inside] = device.gather(addr[inside])
        read = {int(a) for a in np.unique(addr[inside])}
        assert not read or max(read) < device.config.act_depth, "a pixel's word lies past ACT"
        return x, read

    def output_rows(self, d, channels):
        return d["dst_stride"], d["n"]


def _chunk_last_row(config, d, g, *, rows, plans, latency, weight_rows=1, rewrite=1, gap=0):
    """Return the cycle of a chunk's last result row entering the array, counted from the
    chunk's cycle 0 (the weights' first row): the passes in order, each streamed once its
    tile is in the array (tile loads as the matrix engine's: ``array_rows`` rows each,
    ``weight_rows`` a cycle, into a bank
    its pass before last has left ``rewrite`` cycles before), :data:`PASS_GAP` cycles after
    the last pass's stream and not before that pass's first result row (the unit holds one
    pass waiting), nor so early that its first result row comes less than ``gap`` cycles
    after that one's (the depthwise unit's ``pass_gap``)."""
    wp, delay, sy = g["dw_wp"], g["dw_delay"], g["sy"]
    free = [0, 0]           # the first cycle each weight bank may be loaded again
    load_end = 0
    load_cycles = -(-config.array_rows // weight_rows)
    rest = rewrite + bank_rest(config, weight_rows)
    start = 1               # the first cycle the next stream may start (after its plan)
    slot = 0                # the first cycle the unit can hold the next pass
    last = 0
    steps = (rows - 1) * sy * wp + (g["ow"] - 1) * g["sx"] + 1     # a pass's output cells
    for p in range(d["n_tiles"] * d["k_tiles"]):
        plan = plans[p % d["k_tiles"]]
        load = max(load_end, free[p % 2])
        load_end = load + load_cycles
        # The start is decided a cycle ahead, from the bank's full flag.
        lag = plan.lag(delay, latency)
        stream = max(start, load_end + 1, slot, slot + gap - lag if p else 0)
        last = stream + lag + steps - 1
        free[p % 2] = last + rest
        start = stream + ((rows - 1) * sy + plan.span) * wp + PASS_GAP
        slot = stream + lag
    return last
