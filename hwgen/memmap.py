"""Memory regions of the accelerator, the layer descriptor and the host port.

Everything that the compiler, the gateware, the frame engine and the host need to agree on about
memories is derived here from an :class:`~hwgen.config.AcceleratorConfig`, once.
"""

import dataclasses
import math

from amaranth.hdl import signed, unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = [
    "BF16_UNBOUNDED",
    "DESCRIPTOR_BOUNDS",
    "DIAG_FIELDS",
    "DW_FIELDS",
    "GEOMETRY_LIMITS",
    "POOL_FIELDS",
    "TAPS_FIELDS",
    "HostPortSignature",
    "PassKind",
    "Region",
    "RegionGeometry",
    "act_addr_bits",
    "addr_bits",
    "batch_bits",
    "descriptor_layout",
    "descriptor_limits",
    "feeder_rotates",
    "fuses_pool",
    "geometry_layout",
    "geometry_words",
    "has_depthwise",
    "macs_from_busy_cycles",
    "max_word_bits",
    "param_lane_layout",
    "reduction_limits",
    "regions",
    "rotates_lanes",
    "walked_strides",
    "walks_taps",
    "writes_streams",
]


class Region(enum.Enum, shape=unsigned(3)):
    """Memories the host can read and write, word addressed."""

    PROGRAM = 0  #: layer descriptors, one per word
    WEIGHT = 1   #: weight-tile rows: ``cols`` signed ``w_bits`` lanes
    PARAM = 2    #: per-channel parameters, ``cols`` lanes of :func:`param_lane_layout`
    ACT = 3      #: activations: ``act_lanes`` signed ``in_bits`` lanes, rows padded to words
    OUTPUT = 4   #: raw accumulators of a ``raw`` output layer: ``cols`` signed ``acc_bits`` lanes


class PassKind(enum.Enum, shape=unsigned(3)):
    """What a pass of the device computes: the ``kind`` field of its descriptor.

    The gateware grants the activation banks to the pass unit of the current kind, and the
    compiler, the cycle model and the program interpreter find each kind's lowering, cycles and
    step through the registry :mod:`hwgen.passes`.
    """

    MATRIX = 0   #: ``x @ W`` per output pixel, then bias and requantization (or raw sums)
    MAXPOOL = 1  #: the lane-wise maximum of each window's words
    ADD = 2      #: two tensors' words, lane by lane: ``a * mult_a + b * mult_b``, requantized
    #: a depthwise convolution (or average pool): each column a channel, the rows its taps
    DEPTHWISE = 3


# One-bit flags at the bottom of a descriptor, the pass kind, the numeric fields of
# descriptor_limits, then the activation bounds (a design with ``bounds``; without them the
# first flag is ``relu``).
_DESCRIPTOR_FLAGS = ("leaky", "raw", "last", "spatial")
#: The descriptor's signed ``in_bits`` fields, after the numeric ones.
DESCRIPTOR_BOUNDS = ("act_min", "act_max")
#: A bf16 design's ``(act_min, act_max)`` of a side not bounded: -Inf and +Inf, as bf16 bit
#: patterns (a clamp to them changes nothing, a NaN staying NaN).
BF16_UNBOUNDED = (0xFF80, 0x7F80)
#: The largest stride (per axis) and top or left padding of a spatial layer (four bits each in
#: its geometry), and the largest window side of a fused max pool (``p - 1`` in three bits).
GEOMETRY_LIMITS = {"stride": 15, "pad": 15, "pool": 8}


def walked_strides(strides, out_hw):
    """Return the ``(sy, sx)`` a spatial pass walks for ``strides`` and its output's ``(oh,
    ow)``: a stride along an axis of one output pixel is never taken (a pool as large as its
    input, whose stride is its size), so one beyond :data:`GEOMETRY_LIMITS` walks as 1."""
    limit = GEOMETRY_LIMITS["stride"]
    return tuple(1 if n == 1 and s > limit else s for s, n in zip(strides, out_hw, strict=True))


def _held(limit):
    """Return the largest value of a field just wide enough for ``limit``: all its bits set."""
    return (1 << max(1, limit.bit_length())) - 1


def reduction_limits(config):
    """Return ``(tiles, words)``: the most reduction tiles a layer's descriptor holds
    (``k_tiles``, and a geometry's ``cgs``) and the most ACT words of one input row
    (``src_stride``).

    ``max_k`` sizes both fields, for ``ceil(max_k / rows)`` tiles and ``ceil(max_k /
    act_lanes)`` words (at most ``act_depth``); each holds every value of its width, and the
    device's counters, as wide as the field, count to it. So a reduction of ``K`` inputs
    runs when its tiles (``ceil(K / rows)`` over rows; a spatial layer's padded per kernel
    position) are at most ``tiles`` and a row's ``ceil(K / act_lanes)`` words at most
    ``words``: up to ``tiles * rows`` inputs, which is ``max_k`` or more. Whether the sums
    stay within ``acc_bits`` is the accumulator proof's, from the layer's weights.
    """
    tiles = _held(math.ceil(config.max_k / config.rows))
    words = min(_held(math.ceil(config.max_k / config.act_lanes)), config.act_depth)
    return tiles, words


def descriptor_limits(config):
    """Return ``{field: largest value}`` of the numeric descriptor fields a program can hold.

    Each bound follows from a limit the compiler enforces before it packs a descriptor:
    a reduction that :func:`reduction_limits` holds, one PARAM word and at least ``rows``
    WEIGHT words per output tile, and at least one row of every activation (or raw output)
    matrix fitting ACT (or OUTPUT). A design with ``residual`` has ``src2_base`` (an ACT word)
    after ``src_stride``.
    """
    cols = config.cols
    n = _largest_n(config)
    n_tiles = n // cols
    second = {"src2_base": config.act_depth - 1} if config.residual else {}
    k_tiles, src_stride = reduction_limits(config)
    return {
        "k_tiles": k_tiles,
        "n_tiles": n_tiles,
        "n": n,
        "src_base": config.act_depth - 1,
        "src_stride": src_stride,
        **second,
        # Requantized rows go to ACT (ceil(N / lanes) words), raw rows to OUTPUT (ceil(N / cols)).
        "dst_base": max(config.act_depth, config.out_depth) - 1,
        "dst_stride": min(math.ceil(n / cols), max(config.act_depth, config.out_depth)),
        "w_base": config.weight_depth - 1,
        "p_base": config.param_depth - 1,
        **(_stream_limits(config) if writes_streams(config) else {}),
    }


def writes_streams(config):
    """Return whether a pass can write its output as a taps layout's element stream (the
    descriptor's ``dst_run``, ``dst_pitch_word``, ``dst_pitch_rem``): a ``dtype="bf16"`` design
    that walks taps, whose convolutions past the first take their input so when their
    channels do not fill tiles of ``rows`` (the contract's order of the sums)."""
    return config.dtype == "bf16" and walks_taps(config)


def _stream_limits(config):
    # A run is an image row of at most act_depth pixels (the geometry's sides); the pitch a
    # word count and a bank.
    return {"dst_run": config.act_depth, "dst_pitch_word": config.act_depth - 1,
            "dst_pitch_rem": config.act_lanes - 1,
            "dst_step_word": _largest_n(config) // config.act_lanes,
            "dst_step_rem": config.act_lanes - 1}


def _largest_n(config):
    """Return the largest ``n`` (output channels) of a descriptor."""
    return max(1, min(config.param_depth, config.weight_depth // config.rows)) * config.cols


def descriptor_layout(config):
    """Return the layout of one layer of a program, as stored in :attr:`Region.PROGRAM`.

    Fields, least significant first; each numeric field is just wide enough for its bound in
    :func:`descriptor_limits`, so the word (and the program memory) is as narrow as ``config``
    allows.

    leaky
        Leaky ReLU: a channel whose biased accumulator is negative is multiplied by its
        ``mult_neg`` (:func:`param_lane_layout`) instead of its ``mult``. A design without
        ``bounds`` has ``relu`` here (the bounds ``[0, 2**(in_bits-1) - 1]``, else the
        saturation range) and no ``act_min``, ``act_max``.
    raw
        Write the accumulators to :attr:`Region.OUTPUT` instead of requantizing.
    last
        The program ends after this layer.
    spatial
        The layer walks images: :func:`geometry_words` PROGRAM words of
        :func:`geometry_layout` follow the descriptor. Without them a layer is a matrix layer
        over rows (as a 1x1 convolution of 1x1 images whose channels are the row's features).
    kind
        The pass's :class:`PassKind` (a :attr:`PassKind.MAXPOOL` pass is spatial too).
    k_tiles, n_tiles
        Reduction tiles (``ceil(K / rows)``) and output tiles (``ceil(N / cols)``).
    n
        Output features; lanes beyond ``n`` are not written (an :attr:`PassKind.ADD` pass:
        the channels; it writes every lane of its words).
    src_base, src_stride
        Input rows in :attr:`Region.ACT`: row ``m`` starts at word ``src_base + m * src_stride``.
    src2_base
        Only in a design with ``residual``: the first word of an :attr:`PassKind.ADD` pass's
        second input (its rows ``src_stride`` words apart too); 0 in other passes.
    dst_base, dst_stride
        Output rows, in :attr:`Region.ACT` (``raw == 0``) or :attr:`Region.OUTPUT` (``raw == 1``).
    dst_run, dst_pitch_word, dst_pitch_rem, dst_step_word, dst_step_rem
        Only in a design that :func:`writes_streams`: with ``dst_run > 0`` the pass writes its
        output pixels as an element stream of runs of ``dst_run`` pixels, ``P =
        dst_pitch_word * act_lanes + dst_pitch_rem`` elements apart: channel ``c`` of output
        pixel ``q`` (counted over the batch) is element ``E = (q // dst_run) * P + (q %
        dst_run) * n + c``, bank ``E % act_lanes`` of word ``dst_base + E // act_lanes``; no
        other lane is written (:mod:`hwgen.passes.taps`, the layout its reader walks).
        ``dst_step_word * act_lanes + dst_step_rem`` is ``n`` (a pixel's step, without a
        divider). ``dst_run`` 0: the rows of ``dst_base``, ``dst_stride``.
    w_base
        First weight row; tile ``(nt, kt)`` row ``i`` is at ``w_base + (nt * k_tiles + kt) * rows
        + i``.
    p_base
        First parameter word; output tile ``nt`` is at ``p_base + nt``.
    act_min, act_max
        Signed ``in_bits``: the requantized values are clamped to ``[act_min, act_max]``
        after saturation (the saturation range itself for ``identity``, ``act_min = 0`` for
        ReLU); unused by a ``raw`` layer. A ``dtype="bf16"`` design holds bf16 bit patterns
        (16 bits, unsigned) instead, :data:`BF16_UNBOUNDED` where a side is not bounded and
        ``act_min`` at least +0.0 for ReLU (``relu(a)`` is ``max(a, +0.0)``, no -0.0 being
        left by the zero rule): the fp32 result is clamped to them, widened to fp32, then
        rounded to bf16. Rounding is monotone, so that equals rounding the result clamped
        to the layer's fp32 bounds (docs/arithmetic.md, "bfloat16").
    """
    flags = _DESCRIPTOR_FLAGS if config.bounds else ("relu", *_DESCRIPTOR_FLAGS[1:])
    fields = {name: unsigned(1) for name in flags}
    fields["kind"] = PassKind
    for name, limit in descriptor_limits(config).items():
        fields[name] = unsigned(max(1, limit.bit_length()))
    if config.bounds:
        for name in DESCRIPTOR_BOUNDS:
            fields[name] = unsigned(16) if config.dtype == "bf16" else signed(config.in_bits)
    return data.StructLayout(fields)


def rotates_lanes(config):
    """Return whether the activation feeder rotates a row's lanes, so that a row's first
    channel may lie in any bank: with fewer rows than banks (``rows < act_lanes``), and on a
    device with spatial layers and fewer columns than rows (where a grouped convolution's
    channel window of ``cols`` channels starts in any bank). Otherwise a channel window starts
    at its word's bank 0 (:func:`geometry_layout`'s ``cb_word``)."""
    return config.rows < config.act_lanes or (config.spatial and config.cols < config.rows)


def act_addr_bits(config):
    """Return the width of an activation bank's address (``act_depth`` words)."""
    return max(1, (config.act_depth - 1).bit_length())


def geometry_layout(config):
    """Return the layout of a spatial layer's geometry, the PROGRAM words after its descriptor.

    Images are NHWC: pixel ``(m, y, x)`` of the layer's input starts at ACT word
    ``src_base + ((m * h + y + pad_top) * w + x + pad_left) * src_stride`` (modulo the banks'
    address width: a spatial layer's ``src_base`` is the word of pixel ``(-pad_top,
    -pad_left)`` of image 0, where the walk starts) and holds its channels as a row does its
    features. Its output pixel ``(m, oy, ox)`` is a row of the output matrix, ``(m * oh + oy)
    * ow + ox``, and reads input pixel ``(oy * sy + ky - pad_top, ox * sx + kx - pad_left)``
    at kernel position ``(ky, kx)``; a pixel outside the image reads as zeros, so the bottom
    and right padding follow from ``oh``, ``ow`` (nothing to store).

    h, w, oh, ow
        Input and output sides, in pixels.
    kh, kw
        The kernel (or pooling window), any rectangle.
    sy, sx, pad_top, pad_left
        Strides per axis and the top and left zero padding (:data:`GEOMETRY_LIMITS`).
    cgs
        Channel groups of ``rows`` channels a kernel position reads: its reduction tiles (a
        convolution: the pixel's channels, or a grouped convolution's channel window, see
        ``cb_word``), or ``src_stride`` words per pixel (a pooling pass).
    col_step, row_step, img_step
        ACT words (modulo the bank's address width) from an output pixel's first input pixel
        to the next output pixel's: in the same output row, at the start of the next output row,
        at the start of the next image.
    ky_step
        Words from kernel position ``(ky, kw - 1)`` to ``(ky + 1, 0)`` (``(ky, kx)`` to
        ``(ky, kx + 1)`` is ``src_stride``).
    cb_word, cb_rem
        A grouped convolution's step of the channel window per output tile: output tile ``nt``
        reads, at each kernel position, the ``cgs * rows`` channels from channel
        ``c = nt * (cb_word * act_lanes + cb_rem)`` of the pixel (``cb_rem < act_lanes``); on a
        device whose feeder does not rotate lanes (:func:`rotates_lanes`: a square array),
        from ``c`` rounded down to a multiple of ``act_lanes`` (its word's first bank). The
        walker keeps
        the window's first word and bank as running counters (no multiplier).
        A tile's weight rows are zero for the window's channels outside its outputs' groups
        (a block-diagonal tile); 0 and 0 for a dense convolution (every tile reads channel 0
        on) and a pooling pass.
    wrep
        Every weight tile of the layer is its first: the weight feeder reads the ``rows``
        words from ``w_base`` for each ``(nt, kt)`` (an average pool: a depthwise convolution
        of ones whose tile, the identity of the window's channels, is the same for every
        kernel position and output tile).

    A design with taps (:func:`walks_taps`) has :func:`_taps_fields` after these, one that
    fuses pools (:func:`fuses_pool`) :func:`_pool_fields`, one with the depthwise unit
    (:func:`has_depthwise`) :func:`_dw_fields` (each 0 in every layer that does not use
    them).

    Last, in every spatial design:

    wdiag
        Each weight tile is stored as one word, its diagonal (a depthwise convolution's tile,
        zero off it): the weight feeder reads the word ``rows`` times and sends row ``i`` as
        the word's lane ``i`` with the other lanes zero, so WEIGHT holds ``1 / rows`` of the
        tiles' words.
    """
    side = unsigned(max(1, config.act_depth.bit_length()))
    addr = unsigned(act_addr_bits(config))
    desc = descriptor_layout(config)
    bank = unsigned(max(1, (config.act_lanes - 1).bit_length()))
    return data.StructLayout({
        "h": side, "w": side, "oh": side, "ow": side, "kh": side, "kw": side,
        "sy": unsigned(GEOMETRY_LIMITS["stride"].bit_length()),
        "sx": unsigned(GEOMETRY_LIMITS["stride"].bit_length()),
        "pad_top": unsigned(GEOMETRY_LIMITS["pad"].bit_length()),
        "pad_left": unsigned(GEOMETRY_LIMITS["pad"].bit_length()),
        "cgs": desc.members["k_tiles"],
        "col_step": addr, "row_step": addr, "img_step": addr, "ky_step": addr,
        "cb_word": desc.members["src_stride"],
        "cb_rem": bank,
        "wrep": unsigned(1),
        **(_taps_fields(config, addr, bank) if walks_taps(config) else {}),
        **(_pool_fields(config, addr, bank) if fuses_pool(config) else {}),
        **(_dw_fields(config, addr, side) if has_depthwise(config) else {}),
        "wdiag": unsigned(1),
    })


def _taps_fields(config, addr, bank):
    """Return the geometry's taps fields (:data:`TAPS_FIELDS`).

    A first convolution whose input is stored in the *taps layout*
    (:mod:`hwgen.passes.taps`: an element stream of one image row per run, ``pitch`` ``P``
    elements apart, ``P % act_lanes == kwc % act_lanes``). Its reduction tile ``kt``, lane
    ``r`` is tap ``t = kt * rows + r`` of the kernel flattened in ``(ky, kx, c)`` order; for
    output pixel ``(m, oy, ox)`` it is stream element ``e0 + t + q * d_word * act_lanes``
    with ``q = t // kwc`` (the kernel row) and ``e0 = m * h * P + (oy * sy - pad_top) * P +
    ox * sx * C``, and it reads as zero where ``q >= kh`` or the image row ``oy * sy -
    pad_top + q`` is outside ``0 .. h - 1`` (the left and right padding are stored zeros).
    The walk's element ``e0`` is a word and a bank: ``src_base`` and ``rem0`` at output pixel
    ``(0, 0, 0)``, then the ``*_step`` words and ``*_rem`` banks on (a carry into the word
    past the last bank). Such a layer has ``kw = 1``, ``pad_left = 0``, ``cgs = k_tiles``
    (every tile one "channel group" of one kernel position) and ``w`` at least
    ``ow * sx``.

    taps
        The layer walks the taps layout.
    kwc
        Taps per kernel row, ``KW * C``.
    tq, tr
        ``divmod(rows, kwc)``: a lane's kernel row and column move on by them per tile (and
        the row by one more where the column passes ``kwc``).
    d_word
        Words from a kernel row's taps to the next's beyond ``kwc`` elements,
        ``(P - kwc) / act_lanes``.
    tq_word
        ``tq * d_word`` (modulo the banks' address width).
    rem0, col_rem, row_rem, img_rem
        The banks of the walk's start and of its steps (``*_step`` the words).
    """
    return {
        "taps": unsigned(1), "kwc": unsigned(config.max_k.bit_length()),
        "tq": unsigned(config.rows.bit_length()), "tr": unsigned(config.rows.bit_length()),
        "d_word": addr, "tq_word": addr,
        "rem0": bank, "col_rem": bank, "row_rem": bank, "img_rem": bank,
    }


def _pool_fields(config, addr, bank):
    """Return the geometry's fused pool fields (:data:`POOL_FIELDS`).

    With a ``p x p``, stride ``p`` max pool fused, ``oh``, ``ow`` are the pooled
    sides and output pixel ``(m, oy, ox)`` is the maximum of conv pixels ``(oy * p + wy, ox *
    p + wx)``, walked window by window, ``wx`` fastest (:mod:`hwgen.passes.fused_pool`).
    ``col_step`` steps along a window's row; ``row_step``, ``img_step`` are a convolution's
    of ``oh * p`` by ``ow * p`` pixels; a window's next row starts ``down_step`` on from its
    row's first, the next window ``col_step`` on from its first row's last (registers).

    pool
        ``p - 1``: the window's last ``wx`` and ``wy`` (0: no pool).
    down_step, down_rem
        One conv output row down (``sy`` input rows): words, and banks with taps.
    """
    return {"pool": unsigned(GEOMETRY_LIMITS["pool"].bit_length() - 1), "down_step": addr,
            **({"down_rem": bank} if walks_taps(config) else {})}


def _dw_fields(config, addr, side):
    """Return the geometry's depthwise fields (:data:`DW_FIELDS`).

    Read by a :attr:`PassKind.DEPTHWISE` pass, which streams
    its input row by row (:mod:`hwgen.passes.depthwise`; its ``col_step``, ``row_step`` and
    ``img_step`` are one input pixel, row and image, its ``cgs`` 0):

    dw_wp
        The padded input row the pass streams: ``(ow - 1) * sx + kw`` pixels.
    dw_delay
        ``dw_wp - kw``: the cycles between two kernel rows' delay lines.
    dw_rows
        Output rows per chunk (the accumulators hold a chunk's pixels).
    dw_tq, dw_tr
        ``divmod(array_rows, kw)``: a row's tap moves on by them per reduction tile (its kernel row
        by one more where its column passes ``kw``).
    dw_cstep, dw_tqstep
        Words from a chunk's first input row to the next chunk's (``dw_rows * sy`` rows on),
        and ``dw_tq`` input rows.
    """
    return {"dw_wp": side, "dw_delay": unsigned(config.dw_depth.bit_length()),
            "dw_rows": side, "dw_tq": unsigned(config.array_rows.bit_length()),
            "dw_tr": unsigned(config.array_rows.bit_length()), "dw_cstep": addr, "dw_tqstep": addr}


#: The geometry fields of a first convolution's taps layout (:func:`geometry_layout`), last
#: in the layout of a design that :func:`walks_taps`.
TAPS_FIELDS = ("taps", "kwc", "tq", "tr", "d_word", "tq_word", "rem0", "col_rem", "row_rem",
               "img_rem")


#: The geometry fields of a fused max pool (:func:`geometry_layout`), after the taps fields in
#: the layout of a design that :func:`fuses_pool`.
POOL_FIELDS = ("pool", "down_step", "down_rem")

#: The geometry fields of a depthwise pass (:func:`geometry_layout`), after the pool fields in
#: the layout of a design that :func:`has_depthwise`.
DW_FIELDS = ("dw_wp", "dw_delay", "dw_rows", "dw_tq", "dw_tr", "dw_cstep", "dw_tqstep")

#: The geometry fields of diagonal weight tiles (:func:`geometry_layout`), last in the layout
#: of every spatial design.
DIAG_FIELDS = ("wdiag",)


def fuses_pool(config):
    """Return whether the device walks a convolution's output window by window of a max pool
    that it fuses: a design with ``spatial`` and ``fuse_pool``."""
    return config.spatial and config.fuse_pool


def has_depthwise(config):
    """Return whether the device has the depthwise unit (``config.depthwise``), which runs
    :attr:`PassKind.DEPTHWISE` passes."""
    return config.depthwise


def walks_taps(config):
    """Return whether the device walks a first convolution's taps layout: a design with
    ``spatial`` and ``taps`` (:class:`~hwgen.config.AcceleratorConfig`)."""
    return config.spatial and config.taps


def feeder_rotates(config):
    """Return whether the activation feeder rotates a row's lanes: where a channel window
    starts in any bank (:func:`rotates_lanes`), and on a device that walks taps (a tile's
    first tap lies in any bank)."""
    return rotates_lanes(config) or walks_taps(config)


def geometry_words(config):
    """Return the PROGRAM words a spatial layer's geometry takes after its descriptor."""
    return math.ceil(geometry_layout(config).size / descriptor_layout(config).size)


def addr_bits(config):
    """Return the width of a word address in any region (the host port's ``addr``)."""
    return max(1, (max(g.depth for g in regions(config).values()) - 1).bit_length())


def batch_bits(config):
    """Return the width of a batch (``1 .. acc_depth`` rows)."""
    return config.acc_depth.bit_length()


def param_lane_layout(config):
    """Return the layout of one output channel's parameters in :attr:`Region.PARAM`.

    bias
        Added to the accumulator.
    mult, shift
        The requantization's multiplier and shift.
    mult_neg
        The multiplier of a negative biased accumulator in a ``leaky`` layer
        (:func:`descriptor_layout`); unused otherwise (zero in a compiled program). Only in a
        design with ``bounds``.

    A ``dtype="bf16"`` design has one field, no requantization:

    bias
        The channel's fp32 bias as its 32-bit pattern (unsigned): the accumulator of each
        output pixel starts at it (docs/arithmetic.md, "bfloat16").
    """
    if config.dtype == "bf16":
        return data.StructLayout({"bias": unsigned(32)})
    fields = {
        "bias": signed(config.acc_bits),
        "mult": unsigned(config.mult_bits),
        "shift": unsigned(config.shift_bits),
    }
    if config.bounds:
        fields["mult_neg"] = unsigned(config.mult_bits)
    return data.StructLayout(fields)


@dataclasses.dataclass(frozen=True)
class RegionGeometry:
    """Shape of one memory region: ``depth`` words of ``word_bits`` bits.

    On the wire a word takes ``word_bytes`` bytes, little-endian, the unused top bits zero.
    """

    region: Region
    word_bits: int
    depth: int

    @property
    def word_bytes(self):
        return math.ceil(self.word_bits / 8)


def regions(config):
    """Return ``{Region: RegionGeometry}`` for ``config``."""
    p = param_lane_layout(config).size
    return {
        Region.PROGRAM: RegionGeometry(Region.PROGRAM, descriptor_layout(config).size,
                                       config.prog_depth),
        Region.WEIGHT: RegionGeometry(Region.WEIGHT, config.cols * config.w_bits,
                                      config.weight_depth),
        Region.PARAM: RegionGeometry(Region.PARAM, config.cols * p, config.param_depth),
        Region.ACT: RegionGeometry(Region.ACT, config.act_lanes * config.in_bits,
                                   config.act_depth),
        Region.OUTPUT: RegionGeometry(Region.OUTPUT, config.cols * config.acc_bits,
                                      config.out_depth),
    }


def max_word_bits(config):
    """Return the widest word of any region."""
    return max(g.word_bits for g in regions(config).values())


class HostPortSignature(wiring.Signature):
    """The accelerator's port towards the host link (seen from the accelerator).

    Memory accesses are honoured only while ``busy`` is low. A write takes effect in the cycle
    ``we`` is high. A read is requested by a one-cycle ``re`` pulse; ``rdata`` is valid in the
    cycle ``rvalid`` is high (a fixed, small latency), its bits above the region's word zero.
    ``start`` (one cycle, while idle) runs the program in :attr:`Region.PROGRAM` from word 0 on
    ``batch`` rows (1..``acc_depth``); ``busy`` rises in the next cycle and falls when the last
    layer's results are written. ``clear`` zeroes the counters. ``snapshot`` asks for a copy of
    the counters: a port that crosses clock domains (:class:`hwgen.link.bridge.HostPortBridge`)
    shows the copy when ``rvalid`` pulses; the accelerator's own counters are always current and it
    ignores ``snapshot``.

    Members
    -------
    region : In(Region)
    addr : In(addr_bits(config))
    wdata : In(max_word_bits)
    we, re : In(1)
    rdata : Out(max_word_bits)
    rvalid : Out(1)
    start : In(1)
    batch : In(batch_bits(config))
    busy : Out(1)
    clear, snapshot : In(1)
    cycles, busy_cycles, macs : Out(64)
        Since ``clear``: cycles with ``busy`` high; cycles in which an activation row entered
        the array; multiply-accumulates issued (rows entered times ``rows * cols``, see
        :func:`macs_from_busy_cycles`).
    """

    def __init__(self, config):
        w = max_word_bits(config)
        super().__init__({
            "region": In(Region),
            "addr": In(addr_bits(config)),
            "wdata": In(w),
            "we": In(1),
            "re": In(1),
            "rdata": Out(w),
            "rvalid": Out(1),
            "start": In(1),
            "batch": In(batch_bits(config)),
            "busy": Out(1),
            "clear": In(1),
            "snapshot": In(1),
            "cycles": Out(64),
            "busy_cycles": Out(64),
            "macs": Out(64),
        })


def macs_from_busy_cycles(busy_cycles, config):
    """Return the host port's ``macs`` from its ``busy_cycles``: each row entered is
    ``rows * cols`` multiply-accumulates (a product by a constant, not a third counter; the
    depthwise unit's ``dw_extra_rows`` are not counted)."""
    return _times_constant(busy_cycles, config.rows * config.cols)


def _times_constant(value, constant):
    """Return ``value * constant`` (``constant`` >= 1) as shifted copies of ``value`` added and
    subtracted, one per nonzero digit of the constant's canonical signed-digit form.

    Yosys maps a product by a constant onto DSP multipliers, which the array needs: a 64-bit
    count times 48 took four ECP5 MULT18X18Ds. This takes one adder (none for a power of two).
    """
    digits = []                      # (sign, shift), lowest first
    rest, shift = constant, 0
    while rest:
        if rest & 1:
            sign = 2 - (rest & 3)    # +1 ends a run of ones, -1 starts one (..011 -> ..100 - 1)
            digits.append((sign, shift))
            rest -= sign
        rest >>= 1
        shift += 1
    total = None
    for sign, shift in sorted(digits, key=lambda d: -d[0]):   # a positive digit first
        term = value << shift
        total = term if total is None else (total + term if sign > 0 else total - term)
    return total
