"""Where a program's activations live, and the batch it is compiled for.

Activation matrix ``i`` is the input of pass ``i`` (``i < L``) or, unless the last pass is
raw, the output of the last pass. A matrix holds, per sample, ``pixels`` rows (``H * W`` for
an image, 1 for a row of features) of ``channels`` values, ``stride = ceil(channels /
act_lanes)`` words each, so a sample takes ``pixels * stride`` words. Matrix ``i`` lives in area
``i % 2`` of ACT, so that each pass reads one area and writes the other: area 0 from word 0,
area 1 right after area 0's largest matrix at the batch. A raw last pass writes ``ceil(N /
cols)`` words per output pixel to OUTPUT from word 0 instead.

With read-out, every matrix has an area of its own instead (area ``i`` right after area
``i - 1``), so that each layer's output of a run can still be read after the run; the batch
is then what fits all of them.
"""

import dataclasses
import math

from .errors import CompileError

__all__ = ["ActivationPlan", "matrix_shape", "plan_activations"]


def matrix_shape(sample_shape):
    """Return ``(pixels, channels)`` of a per-sample shape: ``(H, W, C)`` or ``(F,)``."""
    return (math.prod(sample_shape[:-1]), sample_shape[-1])


@dataclasses.dataclass(frozen=True)
class ActivationPlan:
    """The activation memories of a program, laid out for its batch.

    Attributes
    ----------
    batch : int
        Samples per run.
    shapes : tuple of tuple
        Per-sample shape of each activation matrix.
    strides : tuple of int
        Words per pixel (row) of each.
    area_base : tuple of int
        First ACT word of each area: areas 0 and 1, or one per matrix with read-out.
    out_stride : int
        OUTPUT words per output pixel of a raw last pass; 0 when the last pass requantizes.
    """

    batch: int
    shapes: tuple
    strides: tuple
    area_base: tuple
    out_stride: int

    def base(self, index):
        """Return the first ACT word of activation matrix ``index``."""
        return self.area_base[index % len(self.area_base)]


def _largest_batch(config, act_per_sample, out_per_sample):
    batch = min(config.acc_depth, config.act_depth // act_per_sample)
    if out_per_sample:
        batch = min(batch, config.out_depth // out_per_sample)
    return max(batch, 1)  # batch 1 is then checked and refused with the reason


def plan_activations(in_shape, passes, config, batch, *, readout=False):
    """Return the :class:`ActivationPlan` of ``passes`` (:class:`~.kinds.DeviceLayer`) on
    samples of ``in_shape`` at ``batch`` samples, or at the largest batch that fits every
    memory if ``batch`` is None.

    With ``readout``, every activation matrix gets an area of its own, so that no layer's
    output is overwritten by a later layer.

    Raises
    ------
    CompileError
        If the batch is outside ``1 .. acc_depth``, or the activations (``act_depth``) or raw
        outputs (``out_depth``) do not fit at it; when the batch was chosen, the message says
        that not even one sample fits.
    """
    lanes = config.act_lanes
    last = passes[-1]
    raw = last.raw
    shapes = [tuple(in_shape)] + [p.out_shape for p in passes[:len(passes) - raw]]
    strides = [math.ceil(matrix_shape(s)[1] / lanes) for s in shapes]
    words = [matrix_shape(s)[0] * stride for s, stride in zip(shapes, strides, strict=True)]
    areas = len(words) if readout else 2  # read-out: one area per matrix
    area_words = [max(words[a::areas], default=0) for a in range(areas)]
    out_stride = math.ceil(last.out_shape[-1] / config.cols) if raw else 0
    out_words = matrix_shape(last.out_shape)[0] * out_stride

    chosen = batch is None
    if chosen:
        batch = _largest_batch(config, sum(area_words), out_words)
    batch = int(batch)
    # When the batch was chosen, a refusal below means that not even one sample fits.
    hint = " (not even batch=1 fits)" if chosen else ""
    kept = (f"the {areas} areas of the read-out, one per matrix" if readout
            else "the two ping-pong areas")
    if batch < 1 or batch > config.acc_depth:
        raise CompileError(f"batch={batch} is outside the samples one run can process; "
                           f"allowed: 1..{config.acc_depth} (acc_depth, the largest batch per "
                           "run)", resource="batch", need=batch, limit=config.acc_depth)
    act_need = batch * sum(area_words)
    if act_need > config.act_depth:
        widest = max(range(len(words)), key=lambda i: words[i])
        what = (f"input of layer {passes[widest].source}" if widest < len(passes)
                else f"output of layer {passes[-1].source}")
        raise CompileError(
            f"activations do not fit at batch={batch}: need {act_need} ACT words ({batch} "
            f"samples x ({' + '.join(map(str, area_words))}) words of {kept}; widest: the "
            f"{what}, shape {shapes[widest]}); limit act_depth={config.act_depth}{hint}",
            layer=passes[min(widest, len(passes) - 1)].source, resource="act_depth",
            need=act_need, limit=config.act_depth)
    out_need = batch * out_words
    if out_need > config.out_depth:
        raise CompileError(f"raw outputs do not fit at batch={batch}: need {out_need} OUTPUT "
                           f"words ({batch} samples x {out_words} words of {config.cols} "
                           f"accumulators); limit out_depth={config.out_depth}{hint}",
                           layer=last.source, resource="out_depth", need=out_need,
                           limit=config.out_depth)
    bases = [batch * sum(area_words[:a]) for a in range(areas)]
    return ActivationPlan(batch=batch, shapes=tuple(shapes), strides=tuple(strides),
                          area_base=tuple(bases), out_stride=out_stride)
