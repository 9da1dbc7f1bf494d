"""Where a program's activations live, and the batch it is compiled for.

Activation matrix ``i`` is the input of layer ``i`` (``i < L``) or, unless the last layer is
raw, the output of the last layer. A matrix ``[M, F]`` takes ``stride = ceil(F / act_lanes)``
words per row, and lives in area ``i % 2`` of ACT, so that each layer reads one area and writes
the other: area 0 from word 0, area 1 right after area 0's largest matrix at the batch. A raw
last layer writes ``ceil(N / cols)`` words per row to OUTPUT from word 0 instead.

With read-out, every matrix has an area of its own instead (area ``i`` right after area
``i - 1``), so that each layer's output of a run can still be read after the run; the batch
is then what fits all of them.
"""

import dataclasses
import math

from .errors import CompileError

__all__ = ["ActivationPlan", "plan_activations"]


@dataclasses.dataclass(frozen=True)
class ActivationPlan:
    """The activation memories of a program, laid out for its batch.

    Attributes
    ----------
    batch : int
        Rows per run.
    features, strides : tuple of int
        Features and words per row of each activation matrix.
    area_base : tuple of int
        First ACT word of each area: areas 0 and 1, or one per matrix with read-out.
    out_stride : int
        OUTPUT words per row of a raw last layer; 0 when the last layer requantizes.
    """

    batch: int
    features: tuple
    strides: tuple
    area_base: tuple
    out_stride: int

    def base(self, index):
        """Return the first ACT word of activation matrix ``index``."""
        return self.area_base[index % len(self.area_base)]


def _largest_batch(config, act_per_row, out_per_row):
    batch = min(config.acc_depth, config.act_depth // act_per_row)
    if out_per_row:
        batch = min(batch, config.out_depth // out_per_row)
    return max(batch, 1)  # batch 1 is then checked and refused with the reason


def plan_activations(in_features, specs, config, batch, *, readout=False):
    """Return the :class:`ActivationPlan` of layers ``specs`` (:class:`LayerSpec`) at
    ``batch`` rows, or at the largest batch that fits every memory if ``batch`` is None.

    With ``readout``, every activation matrix gets an area of its own, so that no layer's
    output is overwritten by a later layer.

    Raises
    ------
    CompileError
        If the batch is outside ``1 .. acc_depth``, or the activations (``act_depth``) or raw
        outputs (``out_depth``) do not fit at it; when the batch was chosen, the message says
        that not even one row fits.
    """
    lanes = config.act_lanes
    raw = specs[-1].output == "raw"
    features = [in_features] + [s.n for s in specs[:len(specs) - raw]]
    strides = [math.ceil(f / lanes) for f in features]
    areas = len(strides) if readout else 2  # read-out: one area per matrix
    area_rows = [max(strides[a::areas], default=0) for a in range(areas)]
    out_stride = math.ceil(specs[-1].n / config.cols) if raw else 0

    chosen = batch is None
    if chosen:
        batch = _largest_batch(config, sum(area_rows), out_stride)
    batch = int(batch)
    # When the batch was chosen, a refusal below means that not even one row fits.
    hint = " (not even batch=1 fits)" if chosen else ""
    kept = (f"the {areas} areas of the read-out, one per matrix" if readout
            else "the two ping-pong areas")
    if batch < 1 or batch > config.acc_depth:
        raise CompileError(f"batch={batch} is outside the rows one run can process; allowed: "
                           f"1..{config.acc_depth} (acc_depth, the largest batch per run)",
                           resource="batch", need=batch, limit=config.acc_depth)
    act_need = batch * sum(area_rows)
    if act_need > config.act_depth:
        widest = max(range(len(strides)), key=lambda i: strides[i])
        what = (f"input of layer {widest}" if widest < len(specs)
                else f"output of layer {widest - 1}")
        raise CompileError(
            f"activations do not fit at batch={batch}: need {act_need} ACT words ({batch} rows "
            f"x ({' + '.join(map(str, area_rows))}) words of {kept}; widest: the "
            f"{what}, {features[widest]} features); limit act_depth={config.act_depth}{hint}",
            layer=min(widest, len(specs) - 1), resource="act_depth", need=act_need,
            limit=config.act_depth)
    out_need = batch * out_stride
    if out_need > config.out_depth:
        raise CompileError(f"raw outputs do not fit at batch={batch}: need {out_need} OUTPUT "
                           f"words ({batch} rows x {out_stride} words of {config.cols} "
                           f"accumulators); limit out_depth={config.out_depth}{hint}",
                           layer=len(specs) - 1, resource="out_depth", need=out_need,
                           limit=config.out_depth)
    bases = [batch * sum(area_rows[:a]) for a in range(areas)]
    return ActivationPlan(batch=batch, features=tuple(features), strides=tuple(strides),
                          area_base=tuple(bases), out_stride=out_stride)
