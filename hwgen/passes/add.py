"""The residual add pass (:attr:`~hwgen.memmap.PassKind.ADD`): an :class:`~hwgen.nn.Add` of
two tensors as a pass over the activation banks.

The pass reads the two inputs word by word, a word of each per output word, and writes, lane
by lane, ``a * mult_a + b * mult_b`` requantized with one rounding shift, saturated and
clamped to the bounds (section 3.2), one word after another from ``dst_base``. Both inputs
and the output take ``src_stride`` words per pixel (row); the second input starts at
``src2_base``. It walks images (``spatial``: 1x1 windows, stride 1, as a 1x1 pool) or rows.

Its PARAM image holds, with ``P = ceil(act_lanes / cols)``, for each channel word ``cw`` (the
``act_lanes`` channels of a pixel's word ``cw``) the ``2 * P`` words from ``p_base + 2 * P *
cw``: word ``j < P``, lane ``l`` is channel ``c = cw * act_lanes + j * cols + l``'s
``{mult: mult_a[c], shift: shift[c]}``, word ``P + j`` lane ``l`` its ``{mult: mult_b[c],
shift: shift[c]}`` (``bias`` and ``mult_neg`` 0; channels ``>= C`` all zeros). The pass walks
channel word by channel word (``cw`` outer, the ``R`` rows inner), so each channel word's
parameters are read once.
"""

import dataclasses
import math

import numpy as np

from ..bf16_cycles import bf16_add_pipeline
from ..compiler.errors import CompileError
from ..compiler.words import pack_words
from ..memmap import PassKind, Region, param_lane_layout
from ..nn import Add
from .base import Lowered, Pass, signed_range
from .bf16_matrix import interpret_bf16_add

__all__ = ["AddParams", "AddPass", "param_words_per_channel_word"]

# The adder's timing (hwgen/device/adder.py), checked against the device's counters: the
# controller's FETCH, DECODE, LOAD, PRIME and PRIME2 before the first read; after the last
# read its word's arrival, the adder's six pipeline registers (operand, product, sum, two
# shifter stages, the written word), the layer's end and the step to the next layer. One
# read a cycle in between: a channel word's parameters load while the previous one's last
# rows are still in the pipeline, so channel words follow each other without a gap.
_ADD_LEAD = 5
_ADD_END = 3            # the last word's arrival, the layer's end, the step
_ADD_TAIL = _ADD_END + 6


def param_words_per_channel_word(config):
    """Return ``P = ceil(act_lanes / cols)``: the PARAM words that hold one input's
    parameters of the ``act_lanes`` channels of a channel word (twice as many per word: the
    first input's, then the second's)."""
    return math.ceil(config.act_lanes / config.cols)


@dataclasses.dataclass(frozen=True)
class AddParams:
    """An Add's parameters as its pass lays them out: per channel ``(C,)`` int64 arrays
    ``mult_a``, ``mult_b``, ``shift``, the resolved bounds ``act_min``, ``act_max`` and the
    layer's ``activation`` (what the program's summary shows)."""

    mult_a: np.ndarray
    mult_b: np.ndarray
    shift: np.ndarray
    act_min: int
    act_max: int
    activation: str = "identity"


def _check_params(index, params, config):
    """Refuse a multiplier or shift the device's PARAM lanes cannot hold."""
    mult_high = (1 << config.mult_bits) - 1
    shift_high = config.acc_bits + config.mult_bits - 1
    for field, high, what in (("mult_a", mult_high, "unsigned mult_bits"),
                              ("mult_b", mult_high, "unsigned mult_bits"),
                              ("shift", shift_high, "acc_bits + mult_bits - 1")):
        values = getattr(params, field)
        bad = np.flatnonzero((values < 0) | (values > high))
        if bad.size:
            channel = int(bad[0])
            raise CompileError(f"{field}[{channel}]={int(values[channel])} does not fit the "
                               f"accelerator; allowed: 0..{high} ({what})", layer=index,
                               resource=field, need=int(values[channel]), limit=high)


class AddPass(Pass):
    """The residual add pass's hooks (see :class:`~hwgen.passes.base.Pass`)."""

    kind = PassKind.ADD
    layers = (Add,)
    cycle_fields = ("src_stride",)

    def lower(self, index, layer, shapes, config):
        in_shape, _ = shapes
        if not config.residual:
            raise CompileError(
                "an Add (a residual add of two tensors) needs the device's adder, and this "
                "design has none (its configuration has residual=False, as the iCEBreaker "
                "preset does); allowed: networks without Add, or a configuration with "
                "residual=True", layer=index, resource="residual", need=1, limit=0)
        channels = in_shape[-1]
        mult_a, mult_b, shift = layer.per_channel(channels)
        act_min, act_max = layer.bounds(config.in_bits)
        params = AddParams(mult_a, mult_b, shift, int(act_min), int(act_max),
                           layer.activation)
        _check_params(index, params, config)
        # Images are walked as a 1x1 pool; a flattened image stays one (its words are the
        # pixels' in (h, w, c) order), so the pass writes it as an image.
        kernel = (1, 1, (1, 1), (0, 0, 0, 0), 0) if len(in_shape) == 3 else None
        return Lowered(None, 0, kernel, params=params, out_shape=tuple(in_shape))

    def place(self, p, config, w_base, p_base):
        words = math.ceil(p.out_shape[-1] / config.act_lanes)
        return {"k": 0, "n": p.out_shape[-1], "k_tiles": 0, "n_tiles": 0,
                "activation": p.params.activation, "output": "requant", "w_base": 0,
                "w_words": 0,
                "p_base": p_base,
                # A bf16 add has no multipliers: fl32(a + b).
                "p_words": 0 if config.dtype == "bf16" else
                2 * param_words_per_channel_word(config) * words}

    def fields(self, p, spec):
        return {"n": spec.n, "leaky": 0, "act_min": p.params.act_min,
                "act_max": p.params.act_max}

    def cgs(self, p, config, src_stride):
        # The adder counts a pixel's words with the channel-group counter, as the pooler does.
        return src_stride

    def images(self, p, config):
        if config.dtype == "bf16":
            return [], []
        params, lanes, cols = p.params, config.act_lanes, config.cols
        big_p = param_words_per_channel_word(config)
        words = math.ceil(len(params.shift) / lanes)
        # Lane l of word (cw, j) is channel cw * act_lanes + j * cols + l, if j * cols + l
        # is one of the word's act_lanes and the channel one of the C.
        within = np.arange(big_p)[:, None] * cols + np.arange(cols)[None, :]
        channel = np.arange(words)[:, None, None] * lanes + within[None]
        inside = (within < lanes)[None] & (channel < len(params.shift))

        def lane_values(values):
            out = np.zeros(channel.shape, dtype=np.int64)
            out[inside] = values[channel[inside]]
            return out

        layout = param_lane_layout(config)
        fields = []
        for name, field in layout:
            # Per channel word: P words of the first input's, then P of the second's.
            first = lane_values({"mult": params.mult_a, "shift": params.shift}.get(
                name, np.zeros_like(params.shift)))
            second = lane_values({"mult": params.mult_b, "shift": params.shift}.get(
                name, np.zeros_like(params.shift)))
            both = np.concatenate([first, second], axis=1).reshape(words * 2 * big_p, cols)
            fields.append((both, field.offset, field.width))
        return [], pack_words(fields, words * 2 * big_p, cols, layout.size)

    def macs(self, spec, config):
        return 0, 0

    def cycles(self, config, d, g, m, chunk, *, implementation=None):
        # Per channel word: its 2P parameter words, then two reads per row through one port.
        rows = m * g["oh"] * g["ow"]
        if config.dtype == "bf16":
            # No parameters; the bf16 adder's own pipeline.
            return (_ADD_LEAD + d["src_stride"] * 2 * rows + _ADD_END
                    + bf16_add_pipeline(config))
        big_p = param_words_per_channel_word(config)
        return _ADD_LEAD + d["src_stride"] * (2 * big_p + 2 * rows) + _ADD_TAIL

    def busy_rows(self, d, g, m):
        return 0

    def interpret(self, device, d, g, m):
        """For each channel word ``cw``, for each of the ``R = m * oh * ow`` rows ``r``: word
        ``dst_base + r * src_stride + cw`` gets, lane by lane, the requantized
        ``a * mult_a + b * mult_b`` of the words ``src_base + r * src_stride + cw`` and
        ``src2_base + ...`` (every lane, with lane ``l``'s parameters of channel word
        ``cw``)."""
        c, b = device.config, device.b
        assert d["k_tiles"] == d["n_tiles"] == 0, "an add pass has no weight tiles"
        if c.dtype == "bf16":
            interpret_bf16_add(device, d, g, m)
            return
        low, high = signed_range(c.in_bits)
        if "act_min" not in d:   # a design without bounds
            d = {**d, "act_min": 0 if d["relu"] else low, "act_max": high}
        else:
            assert not d["leaky"], "an add has no leaky slope"
        assert low <= d["act_min"] <= d["act_max"] <= high, "bounds outside the saturation range"
        stride = d["src_stride"]
        rows = m * g["oh"] * g["ow"]
        if d["spatial"]:
            assert (g["kh"], g["kw"], g["oh"], g["ow"]) == (1, 1, g["h"], g["w"]), \
                "an add walks every pixel once"
        big_p = math.ceil(b / c.cols)
        reads, writes = set(), set()
        for cw in range(stride):
            mult_a, mult_b, shift = self._lane_params(device, d["p_base"] + 2 * big_p * cw,
                                                      big_p)
            offsets = np.arange(rows) * stride + cw
            first = (d["src_base"] + offsets) % device.wrap
            second = (d["src2_base"] + offsets) % device.wrap
            out = (d["dst_base"] + offsets) % device.wrap
            assert max(first.max(), second.max(), out.max()) < c.act_depth, "a word past ACT"
            a = device.gather(first).astype(object)
            x = device.gather(second).astype(object)
            p = a * mult_a + x * mult_b
            half = np.array([1 << (s - 1) if s > 0 else 0 for s in shift], dtype=object)
            r = (p + half) >> shift
            r = np.minimum(np.maximum(r, low), high)      # saturation, then the bounds
            r = np.minimum(np.maximum(r, d["act_min"]), d["act_max"])
            for addr, lanes in zip(out.tolist(), r.tolist(), strict=True):
                device.write_lanes(Region.ACT, addr, [int(v) for v in lanes])
            reads |= set(first.tolist()) | set(second.tolist())
            writes |= set(out.tolist())
        assert not reads & writes, "a layer overwrote its own input"

    @staticmethod
    def _lane_params(device, base, big_p):
        """Return ``(mult_a, mult_b, shift)``, one per ACT lane, of the channel word whose
        2P PARAM words start at ``base``."""
        cols = device.config.cols
        mult_a, mult_b, shift = [], [], []
        for lane in range(device.b):
            word, col = divmod(lane, cols)
            _, ma, sa, _ = device.params(base + word, col)
            _, mb, sb, _ = device.params(base + big_p + word, col)
            assert sa == sb, "both inputs' lanes hold the channel's one shift"
            mult_a.append(ma)
            mult_b.append(mb)
            shift.append(sa)
        return (np.array(mult_a, dtype=object), np.array(mult_b, dtype=object),
                np.array(shift, dtype=object))

    def output_rows(self, d, channels):
        return d["src_stride"], d["n"]
