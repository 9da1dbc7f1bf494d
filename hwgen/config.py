"""One validated description of an accelerator design.

The same :class:`AcceleratorConfig` drives the generator, the compiler, the cycle model and the
host's compatibility check, so a host never talks to a device built from other parameters.
"""

import dataclasses
import enum
import hashlib
import json
import math

__all__ = ["DATAFLOWS", "DTYPES", "AcceleratorConfig", "Dataflow"]


class Dataflow(enum.StrEnum):
    """How the systolic array moves its operands."""

    #: Weight-stationary (TPU style): weights preloaded, activations flow, sums flow down.
    WS = "ws"
    #: Output-stationary: each cell keeps one output while operands flow past.
    OS = "os"


#: The values ``AcceleratorConfig.dataflow`` accepts, as strings (command lines, JSON).
DATAFLOWS = tuple(d.value for d in Dataflow)

#: The values ``AcceleratorConfig.dtype`` accepts: int8 integers (the default) or bfloat16.
DTYPES = ("int8", "bf16")

#: The boolean fields: parts of the device that a design may leave out (``True`` by default).
_FLAGS = ("spatial", "bounds", "residual", "taps", "fuse_pool")
#: The boolean fields of parts a design may add (``False`` by default).
_OPT_IN = ("depthwise",)
#: Fields that only a design with ``depthwise`` reads, and their defaults.
_DEPTHWISE_FIELDS = {"dw_lines": 2, "dw_depth": 64, "dw_extra_rows": 0}

# field -> (low, high) inclusive; checked in the order of the dataclass fields.
_RANGES = {
    "rows": (1, 64),
    "cols": (1, 64),
    "in_bits": (2, 16),
    "w_bits": (2, 16),
    "acc_bits": (4, 64),
    "mult_bits": (2, 32),
    "max_k": (1, 1 << 20),
    "act_depth": (16, 1 << 20),
    "weight_depth": (16, 1 << 20),
    "param_depth": (1, 1 << 16),
    "acc_depth": (1, (1 << 16) - 1),
    "out_depth": (16, 1 << 20),
    "prog_depth": (1, 256),
    "clock_hz": (1_000_000, 1_000_000_000),
    "post_lanes": (1, 64),
    "act_spram_depth": (0, 1 << 19),
    "dw_lines": (1, 8),
    "dw_depth": (1, 1 << 12),
    "dw_extra_rows": (0, 8),
}


def _worst_product(in_bits, w_bits):
    # |x * w| is largest for x = -2**(in_bits-1), w = -2**(w_bits-1).
    return 1 << (in_bits + w_bits - 2)


@dataclasses.dataclass(frozen=True)
class AcceleratorConfig:
    """Parameters of one accelerator design.

    Parameters
    ----------
    rows, cols : int
        Processing elements of the systolic array (1..64 each). ``rows`` is the reduction width
        of one weight tile, ``cols`` the number of output channels computed at once.
    dataflow : Dataflow or str
        :attr:`Dataflow.WS` (``"ws"``, weight-stationary, TPU style) or :attr:`Dataflow.OS`
        (``"os"``, output-stationary); a string is converted.
    in_bits, w_bits : int
        Signed widths of activations and weights (2..16). Outputs of requantized layers have
        ``in_bits`` bits too.
    acc_bits : int
        Signed accumulator width. The compiler proves for each layer, from its weights and
        bias, that no partial sum can leave it (:func:`hwgen.compiler.proofs.check_accumulator`);
        the width itself is not tied to ``max_k``, but must hold one product.
    mult_bits : int
        Unsigned width of the per-channel requantization multiplier.
    max_k : int
        The reduction (layer input width) the device's counters are sized for: the
        descriptor's ``k_tiles`` and ``src_stride`` fields are just wide enough for
        ``ceil(max_k / rows)`` tiles and ``ceil(max_k / act_lanes)`` words, and the
        compiler takes every layer whose reduction they hold
        (:func:`hwgen.memmap.reduction_limits`: ``max_k`` or more, e.g. up to 2,040 inputs for
        the default 1,024 on 8 rows).
    act_depth, weight_depth, param_depth, acc_depth, out_depth, prog_depth : int
        Depths of the activation banks, the weight memory (rows of ``cols`` weights), the
        per-channel parameter memory (groups of ``cols`` channels), the accumulator memory (the
        largest batch of one run), the raw-output memory (rows of ``cols`` accumulators) and the
        program memory (layer descriptors).
    clock_hz : int
        Target clock, used for projections and board builds.
    spatial : bool
        Build the patch walker and the pooler: the device then runs convolutions, pooling and
        flattened images besides matrix layers over rows. Without them (``False``) the controller,
        walker and accumulators also drop their geometry, chunk and image-coordinate logic, so
        a device fits where they would not (the iCEBreaker's UP5K), and the compiler refuses
        spatial layers. ``0``/``1`` are taken too.
    bounds : bool
        Activation bounds and leaky ReLU on the device (section 3.2): each layer's descriptor
        holds ``act_min``/``act_max`` and a ``leaky`` flag, each channel's parameters a
        ``mult_neg``. Without them (``False``) a layer is ReLU or identity (a ``relu`` flag),
        the descriptor is ``2 * in_bits`` bits and the parameter word ``cols * mult_bits``
        bits narrower, so a device fits where they would not (the iCEBreaker's block RAMs),
        and the compiler refuses other bounds and leaky layers. ``0``/``1`` are taken too.
    taps : bool
        With ``spatial``: the patch walker can walk a first convolution's *taps layout*
        (:mod:`hwgen.passes.taps`): a convolution of the network's input with fewer input
        channels than ``rows`` packs ``rows`` consecutive taps of its kernel into each
        reduction tile instead of one kernel position's channels. Without it (``False``) the
        walker, the geometry and the feeder stay as before (no per-lane row counters, no lane
        rotation on a square array). Ignored without ``spatial``. ``0``/``1`` are taken too.
    fuse_pool : bool
        With ``spatial``: the patch walker can walk a convolution's output pixels window by
        window of a max pool that follows it, and the post-processing keeps a running maximum
        per channel over each window, so that the pool costs no pass of its own
        (:mod:`hwgen.passes.fused_pool`). Without it (``False``) the walker, the geometry and
        the post-processing stay as before, and the compiler keeps every max pool a pass.
        Ignored without ``spatial``. ``0``/``1`` are taken too.
    post_lanes : int or None
        Requantization lanes: how many of a result row's ``cols`` channels are requantized per
        cycle (a divisor of ``cols``; ``None``, the default, means all ``cols``). Fewer lanes
        save a multiplier and a shifter per lane, which an iCE40 builds from logic cells; rows of
        a requantized layer's last reduction tile then enter the array ``cols // post_lanes``
        cycles apart (:mod:`hwgen.cycles` counts them). Weight-stationary only.
    act_spram_depth : int
        The first ``act_spram_depth`` words of every activation bank in a single-port memory
        (an iCE40UP's SB_SPRAM256KA, two 8-bit banks to each; the rest stays in block RAM): a
        pass may read them or write them, never both, so the compiler puts the network's
        input area there and every other area above. 0 (the default): none. Else a power of
        two, at least half of ``act_depth`` and below it, on a weight-stationary array without
        spatial layers whose rows span the banks (``rows >= cols``: every bank reads and
        writes the same word).
    depthwise : bool
        The depthwise unit (:mod:`hwgen.passes.depthwise`): depthwise convolutions and average
        pools run on the array with each column its own channel and the rows the kernel's taps,
        the input streamed once per reduction tile through ``dw_lines`` delay lines, instead
        of as block-diagonal matrix passes at ``1 / cols`` of the array. Needs ``spatial``, a
        weight-stationary array with ``rows <= cols`` (a word's lanes are the columns'
        channels) and every column requantized per cycle (``post_lanes`` all ``cols``).
        ``False`` by default (the device of before); ``0``/``1`` are taken too.
    dw_lines : int
        With ``depthwise``: delay lines of the depthwise unit (1..8), each ``dw_depth`` words
        of ``cols`` lanes: a reduction tile of ``rows`` taps may span ``dw_lines + 1`` kernel
        rows (2, the default, holds a 3x3 kernel on up to 9 rows).
    dw_depth : int
        With ``depthwise``: words of each delay line (1..4096): a depthwise pass needs
        ``(ow - 1) * sx`` of them (the output row's span in the input).
    dw_extra_rows : int
        With ``depthwise``: rows of multipliers below the array (0..8, 0 by default) that only
        depthwise passes use, their tiles ``array_rows`` taps (one: a 3x3 kernel in one tile of
        8 rows); each costs ``cols`` multipliers and a cycle of every pass's latency. int8 only.
    dtype : {"int8", "bf16"}
        The arithmetic (docs/arithmetic.md): ``"int8"`` (the default) integers of ``in_bits``
        and ``w_bits``, requantized; ``"bf16"`` bfloat16 multiplies and fp32 sums. A bf16
        design's values are 16 bits wide: ``in_bits`` and ``w_bits`` become 16 (given, they
        must be 16; 8, their default, counts as not given) and ``acc_bits`` must be 32;
        ``mult_bits`` is unused (reset to its default). It is weight-stationary with
        ``bounds`` and has no ``post_lanes`` or ``act_spram_depth`` yet.

    Raises
    ------
    ValueError
        Naming the field, its value and what is allowed.
    """

    rows: int = 8
    cols: int = 8
    dataflow: Dataflow = Dataflow.WS
    in_bits: int = 8
    w_bits: int = 8
    acc_bits: int = 32
    mult_bits: int = 16
    max_k: int = 1024
    act_depth: int = 4096
    weight_depth: int = 2048
    param_depth: int = 128
    acc_depth: int = 256
    out_depth: int = 1024
    prog_depth: int = 16
    clock_hz: int = 50_000_000
    post_lanes: int | None = None
    spatial: bool = True
    bounds: bool = True
    residual: bool = True
    taps: bool = True
    fuse_pool: bool = True
    act_spram_depth: int = 0
    depthwise: bool = False
    dw_lines: int = 2
    dw_depth: int = 64
    dw_extra_rows: int = 0
    dtype: str = "int8"

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "post_lanes" and value is None:
                continue
            if field.name in _FLAGS + _OPT_IN:
                if value not in (True, False) or not isinstance(value, int):
                    raise ValueError(f"{field.name}={value!r}; allowed: True or False (1 or 0)")
                object.__setattr__(self, field.name, bool(value))
                continue
            if field.name == "dtype":
                if value not in DTYPES:
                    raise ValueError(f"dtype={value!r} is not supported; allowed: "
                                     + ", ".join(map(repr, DTYPES)))
                continue
            if field.name == "dataflow":
                if value not in DATAFLOWS:
                    raise ValueError(
                        f"dataflow={value!r} is not supported; allowed: "
                        + ", ".join(repr(d) for d in DATAFLOWS))
                object.__setattr__(self, "dataflow", Dataflow(value))
                continue
            low, high = _RANGES[field.name]
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{field.name}={value!r} must be an integer in {low}..{high}")
            if not low <= value <= high:
                raise ValueError(f"{field.name}={value} is out of range; allowed: {low}..{high}")
        need = self.min_acc_bits(self.in_bits, self.w_bits, 1)
        if self.acc_bits < need:
            raise ValueError(
                f"acc_bits={self.acc_bits} cannot hold one product of {self.in_bits}-bit by "
                f"{self.w_bits}-bit operands; allowed: acc_bits >= {need}")
        if self.post_lanes is not None:
            if self.cols % self.post_lanes:
                divisors = [d for d in range(1, self.cols + 1) if self.cols % d == 0]
                raise ValueError(
                    f"post_lanes={self.post_lanes} does not divide cols={self.cols}; allowed: "
                    + ", ".join(map(str, divisors)))
            if self.post_lanes == self.cols:
                # The same hardware as the default: one spelling, one hash.
                object.__setattr__(self, "post_lanes", None)
            elif self.dataflow is not Dataflow.WS:
                raise ValueError(
                    f"post_lanes={self.post_lanes} needs dataflow='ws' (an output-stationary "
                    f"array delivers its rows back to back); allowed with 'os': {self.cols}")
        _check_act_spram(self)
        _check_depthwise(self)
        _check_dtype(self)

    @staticmethod
    def min_acc_bits(in_bits, w_bits, k):
        """Return the smallest signed width that holds any sum of ``k`` products."""
        worst = k * _worst_product(in_bits, w_bits)
        # signed n bits hold -2**(n-1)..2**(n-1)-1; the worst sum is positive.
        return max(2, (worst).bit_length() + 1)

    # -- derived quantities ----------------------------------------------------------------------

    @property
    def act_lanes(self):
        """Number of activation banks: as many as a tile row's ``rows`` elements the array
        reads in a cycle and the ``requant_lanes`` channels the write-back writes in a cycle
        (``max(rows, cols)`` unless ``post_lanes`` is below ``cols``: an output-stationary
        array, the depthwise unit and bf16 requantize all ``cols`` columns at once)."""
        return max(self.rows, self.requant_lanes)

    @property
    def array_rows(self):
        """Rows of multipliers: ``rows`` and the depthwise unit's ``dw_extra_rows``."""
        return self.rows + self.dw_extra_rows

    @property
    def requant_lanes(self):
        """Channels requantized per cycle: ``post_lanes``, or ``cols`` when it is ``None``."""
        return self.cols if self.post_lanes is None else self.post_lanes

    @property
    def requant_steps(self):
        """Cycles the requantization takes per result row: ``cols // requant_lanes``."""
        return self.cols // self.requant_lanes

    @property
    def shift_bits(self):
        """Width of a per-channel shift, which ranges over ``0 .. acc_bits + mult_bits - 1``."""
        return (self.acc_bits + self.mult_bits - 1).bit_length()

    @property
    def name(self):
        """Return a file-name friendly name that identifies the parameters."""
        default = AcceleratorConfig()
        # (A bool field as 0 or 1.)
        extra = "".join(
            f"_{f.name}{int(value) if isinstance(value, bool) else value}"
            for f in dataclasses.fields(self)
            if f.name not in ("rows", "cols", "dataflow", "in_bits", "w_bits")
            and (value := getattr(self, f.name)) != getattr(default, f.name))
        base = f"hwgen_{self.dataflow}_{self.rows}x{self.cols}_i{self.in_bits}w{self.w_bits}"
        if len(extra) > 60:
            extra = "_" + self.hash[:12]
        return base + extra

    # -- serialisation ---------------------------------------------------------------------------

    def to_dict(self):
        """Return the parameters as a plain ``dict``.

        ``post_lanes`` is left out while it is ``None`` and ``spatial``, ``bounds``,
        ``residual``, ``taps`` and ``fuse_pool`` while they are ``True``, ``act_spram_depth``
        while it is 0 and ``depthwise`` while it is ``False`` (with ``dw_lines``, ``dw_depth``
        and ``dw_extra_rows`` while they are their defaults, or without ``depthwise``) and
        ``dtype`` while it is ``"int8"``, so that configurations from before they existed keep
        their :attr:`hash` and load as before.
        """
        d = dataclasses.asdict(self)
        if d["post_lanes"] is None:
            del d["post_lanes"]
        if not d["act_spram_depth"]:
            del d["act_spram_depth"]
        for flag in _FLAGS:
            if d[flag]:
                del d[flag]
        for flag in _OPT_IN:
            if not d[flag]:
                del d[flag]
        for name, default in _DEPTHWISE_FIELDS.items():
            if d[name] == default:
                del d[name]
        if d["dtype"] == "int8":
            del d["dtype"]
        return d

    @classmethod
    def from_dict(cls, data):
        """Build a configuration from :meth:`to_dict` output; unknown keys are an error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown configuration field(s) {', '.join(unknown)}; allowed: "
                + ", ".join(sorted(known)))
        return cls(**data)

    def to_json(self):
        """Return canonical JSON (sorted keys, no whitespace) of the parameters."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text):
        """Inverse of :meth:`to_json`."""
        return cls.from_dict(json.loads(text))

    @property
    def hash(self):
        """Stable 64-bit hash of the parameters, as 16 hex digits."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    @property
    def hash_int(self):
        """:attr:`hash` as an integer, as the device reports it."""
        return int(self.hash, 16)

    def tiles(self, k, n):
        """Return ``(k_tiles, n_tiles)`` for a ``K x N`` weight matrix."""
        return math.ceil(k / self.rows), math.ceil(n / self.cols)


def _check_act_spram(self):
    """Refuse an ``act_spram_depth`` the device cannot have (a method moved out of the class
    for its length)."""
    depth = self.act_spram_depth
    if not depth:
        return
    if depth & (depth - 1) or not self.act_depth // 2 <= depth < self.act_depth:
        raise ValueError(
            f"act_spram_depth={depth} with act_depth={self.act_depth}; allowed: 0 or a "
            f"power of two in {(self.act_depth + 1) // 2}..{self.act_depth - 1}")
    if self.spatial or self.dataflow is not Dataflow.WS or self.rows < self.cols:
        raise ValueError(
            f"act_spram_depth={depth} needs spatial=False, dataflow='ws' and rows >= cols "
            "(every bank at the same word); got "
            f"spatial={self.spatial}, dataflow={self.dataflow.value!r}, "
            f"rows={self.rows}, cols={self.cols}")

def _check_depthwise(self):
    """Refuse a depthwise unit on a design that cannot run it; reset its sizes without it."""
    if not self.depthwise:
        # The same hardware whatever the unit's sizes: one spelling, one hash.
        for name, default in _DEPTHWISE_FIELDS.items():
            object.__setattr__(self, name, default)
        return
    needs = {"spatial": (self.spatial, "True"),
             "dataflow": (self.dataflow is Dataflow.WS, "'ws'"),
             "rows": (self.rows <= self.cols, f"<= cols={self.cols}"),
             "post_lanes": (self.post_lanes is None, f"all {self.cols} columns"),
             "dtype": (self.dtype == "int8" or not self.dw_extra_rows,
                       "'int8' with dw_extra_rows")}
    wrong = [f"{name}={getattr(self, name)!r} (allowed: {allowed})"
             for name, (ok, allowed) in needs.items() if not ok]
    if wrong:
        raise ValueError("depthwise=True needs " + ", ".join(wrong))


def _check_dtype(self):
    """Give a bf16 design its 16-bit values and refuse what the bf16 path does not cover."""
    if self.dtype != "bf16":
        return
    for name in ("in_bits", "w_bits"):
        # 8 is the int8 default: a user writes only dtype="bf16".
        if getattr(self, name) not in (8, 16):
            raise ValueError(f"{name}={getattr(self, name)} with dtype='bf16', whose values "
                             f"are 16-bit bfloat16; allowed: {name}=16 (or left out)")
        object.__setattr__(self, name, 16)
    if self.acc_bits != 32:
        raise ValueError(f"acc_bits={self.acc_bits} with dtype='bf16', whose sums are fp32; "
                         "allowed: acc_bits=32")
    # No requantization: the same hardware whatever mult_bits, one spelling, one hash.
    object.__setattr__(self, "mult_bits", 16)
    needs = {"dataflow": (self.dataflow is Dataflow.WS, "'ws'"),
             "bounds": (self.bounds, "True"),
             "post_lanes": (self.post_lanes is None, f"all {self.cols} columns"),
             "act_spram_depth": (not self.act_spram_depth, "0")}
    wrong = [f"{name}={str(getattr(self, name)) if name == 'dataflow' else getattr(self, name)!r}"
             f" (allowed: {allowed})" for name, (ok, allowed) in needs.items() if not ok]
    if wrong:
        raise ValueError("dtype='bf16' does not cover yet " + ", ".join(wrong))
