"""Where a program's activations live, and the batch it is compiled for.

The activation matrices are the network's stored tensors (:class:`~.kinds.DeviceLayer` names
them): matrix 0 is the input, matrix ``i + 1`` the output of pass ``i`` (unless the last pass
is raw: it writes OUTPUT instead, ``ceil(N / cols)`` words per output pixel from word 0). A
matrix holds, per sample, ``pixels`` rows (``H * W`` for an image, 1 for a row of features) of
``channels`` values, ``stride = ceil(channels / act_lanes)`` words each, so a sample takes
``pixels * stride`` words.

ACT is divided into areas by liveness: a matrix is live from the pass that writes it (the input
from before the first pass) to the last pass that reads it (the output to the end of the run),
and takes the lowest area that no live matrix holds then, so that a pass never writes the area
it reads. An area is as large as its largest matrix at the batch: area 0 from word 0, each next
area right after. A chain thus uses two areas that the passes take turns in (matrix ``i`` in
area ``i % 2``).

With read-out, every matrix has an area of its own instead (area ``i`` right after area
``i - 1``), so that each layer's output of a run can still be read after the run; the batch
is then what fits all of them.
"""

import dataclasses
import math

from ..nn import INPUT
from .errors import CompileError

__all__ = ["ActivationPlan", "assign_areas", "lifetimes", "matrix_shape", "pass_inputs",
           "plan_activations"]


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
    names : tuple of str
        The tensor each activation matrix holds: ``"input"``, then the passes' outputs.
    shapes : tuple of tuple
        Per-sample shape of each activation matrix.
    strides : tuple of int
        Words per pixel (row) of each.
    areas : tuple of int
        The area each matrix lives in.
    area_base : tuple of int
        First ACT word of each area.
    inputs : tuple of tuple of int
        The matrices each pass reads, in the order it takes them.
    out_stride : int
        OUTPUT words per output pixel of a raw last pass; 0 when the last pass requantizes.
    act_words : int
        The ACT words the areas take at the batch.
    """

    batch: int
    names: tuple
    shapes: tuple
    strides: tuple
    areas: tuple
    area_base: tuple
    inputs: tuple
    out_stride: int
    act_words: int

    def base(self, index):
        """Return the first ACT word of activation matrix ``index``."""
        return self.area_base[self.areas[index]]

    def source(self, index):
        """Return the activation matrix that pass ``index`` reads first."""
        return self.inputs[index][0]


def pass_inputs(passes):
    """Return the tensor names each pass reads: its ``inputs``, or for a pass that names none,
    the previous pass's output (the input for pass 0), as in a chain."""
    return [p.inputs or (INPUT if i == 0 else passes[i - 1].name,)
            for i, p in enumerate(passes)]


def lifetimes(passes, raw):
    """Return ``(names, spans)`` of the activation matrices of ``passes``: the tensor names,
    input first, and for each the passes ``(first, last)`` it is live over (``-1`` for the
    input's first; ``len(passes)`` for the output's last). A raw last pass writes no matrix.

    Raises
    ------
    CompileError
        If a pass reads a tensor that no earlier pass writes, or two passes write one name.
    """
    names = [INPUT, *(p.name for p in passes[:len(passes) - raw])]
    position = {}
    for index, name in enumerate(names):
        if name in position:
            raise CompileError(f"two passes write the tensor {name!r}; allowed: one per "
                               "tensor", layer=passes[index - 1].source, resource="tensor")
        position[name] = index
    spans = [[index - 1, index - 1] for index in range(len(names))]
    for index, inputs in enumerate(pass_inputs(passes)):
        for name in inputs:
            if name not in position or position[name] > index:
                raise CompileError(f"pass {index} reads the tensor {name!r}, which no earlier "
                                   f"pass writes; allowed: one of {names[:index + 1]}",
                                   layer=passes[index].source, resource="tensor")
            spans[position[name]][1] = max(spans[position[name]][1], index)
    if not raw:
        spans[-1][1] = len(passes)  # the output is read after the run
    return names, [tuple(span) for span in spans]


def assign_areas(spans):
    """Return the area of each matrix live over ``spans`` (``(first, last)`` pass indices,
    ordered by ``first``): the lowest area whose matrices are all dead before ``first``.

    Matrices whose spans overlap (they share a pass) never share an area; a chain alternates
    between areas 0 and 1.
    """
    ends, areas = [], []  # the last pass of each area's latest matrix
    for first, last in spans:
        area = next((a for a, end in enumerate(ends) if end < first), len(ends))
        if area == len(ends):
            ends.append(last)
        ends[area] = last
        areas.append(area)
    return areas


def _largest_batch(config, area_words, out_per_sample):
    split = config.act_spram_depth
    if split:
        batch = min(config.acc_depth, split // area_words[0])
        if len(area_words) > 1:
            batch = min(batch, (config.act_depth - split) // sum(area_words[1:]))
    else:
        batch = min(config.acc_depth, config.act_depth // sum(area_words))
    if out_per_sample:
        batch = min(batch, config.out_depth // out_per_sample)
    return max(batch, 1)  # batch 1 is then checked and refused with the reason


def plan_activations(in_shape, passes, config, batch, *, readout=False, stream_words=None):
    """Return the :class:`ActivationPlan` of ``passes`` (:class:`~.kinds.DeviceLayer`) on
    samples of ``in_shape`` at ``batch`` samples, or at the largest batch that fits every
    memory if ``batch`` is None.

    ``stream_words``, if given, is ``{matrix index: words}``: what a sample of each of those
    activation matrices takes instead of its pixels' words (the taps layout's element stream,
    :mod:`hwgen.passes.taps`: of the input, and of a bf16 convolution's input,
    :mod:`hwgen.compiler.bf16_streams`).

    With ``readout``, every activation matrix gets an area of its own, so that no layer's
    output is overwritten by a later layer.

    Raises
    ------
    CompileError
        If the batch is outside ``1 .. acc_depth``, or the activations (``act_depth``: the
        message names the widest tensor) or raw outputs (``out_depth``) do not fit at it;
        when the batch was chosen, the message says that not even one sample fits; or if a
        pass reads a tensor no earlier pass writes.
    """
    lanes = config.act_lanes
    last = passes[-1]
    raw = last.raw
    names, spans = lifetimes(passes, raw)
    shapes = [tuple(in_shape)] + [p.out_shape for p in passes[:len(passes) - raw]]
    strides = [math.ceil(matrix_shape(s)[1] / lanes) for s in shapes]
    words = [matrix_shape(s)[0] * stride for s, stride in zip(shapes, strides, strict=True)]
    for m, stream in (stream_words or {}).items():
        words[m] = stream
    areas = list(range(len(words))) if readout else assign_areas(spans)
    area_words = [max(w for w, a in zip(words, areas, strict=True) if a == area)
                  for area in range(max(areas) + 1)]
    out_stride = math.ceil(last.out_shape[-1] / config.cols) if raw else 0
    out_words = matrix_shape(last.out_shape)[0] * out_stride

    chosen = batch is None
    if chosen:
        batch = _largest_batch(config, area_words, out_words)
    batch = int(batch)
    # When the batch was chosen, a refusal below means that not even one sample fits.
    hint = " (not even batch=1 fits)" if chosen else ""
    if batch < 1 or batch > config.acc_depth:
        raise CompileError(f"batch={batch} is outside the samples one run can process; "
                           f"allowed: 1..{config.acc_depth} (acc_depth, the largest batch per "
                           "run)", resource="batch", need=batch, limit=config.acc_depth)
    bases = area_bases(config, area_words, batch)
    act_need = bases[-1] + batch * area_words[-1]
    if act_need > config.act_depth or (config.act_spram_depth
                                       and batch * area_words[0] > config.act_spram_depth):
        _refuse_activations(passes, (names, shapes, words, spans), area_words,
                            (batch, act_need, readout, hint), config)
    out_need = batch * out_words
    if out_need > config.out_depth:
        raise CompileError(f"raw outputs do not fit at batch={batch}: need {out_need} OUTPUT "
                           f"words ({batch} samples x {out_words} words of {config.cols} "
                           f"accumulators); limit out_depth={config.out_depth}{hint}",
                           layer=last.source, resource="out_depth", need=out_need,
                           limit=config.out_depth)
    position = {name: index for index, name in enumerate(names)}
    inputs = tuple(tuple(position[name] for name in names_read)
                   for names_read in pass_inputs(passes))
    return ActivationPlan(batch=batch, names=tuple(names), shapes=tuple(shapes),
                          strides=tuple(strides), areas=tuple(areas), area_base=tuple(bases),
                          inputs=inputs, out_stride=out_stride, act_words=act_need)


def area_bases(config, area_words, batch):
    """Return the first ACT word of each area of ``area_words`` words a sample at ``batch``:
    one after the other, but with ``act_spram_depth`` area 0 (the network's input, which no
    pass both reads and writes: the lifetimes keep a pass's input and output areas apart) in
    the single-port words below it and the others from it on."""
    bases = [batch * sum(area_words[:a]) for a in range(len(area_words))]
    split = config.act_spram_depth
    if split and len(bases) > 1:
        bases = [0] + [split + base - bases[1] for base in bases[1:]]
    return bases


def _refuse_activations(passes, matrices, area_words, at, config):
    """Raise the :class:`CompileError` of activations that do not fit ACT, naming the widest
    tensor."""
    names, shapes, words, spans = matrices
    batch, act_need, readout, hint = at
    widest = max(range(len(words)), key=lambda i: words[i])
    first, last = spans[widest]
    # A tensor is named by the first pass that reads it, or else by the pass that writes it.
    reader = next((i for i, inputs in enumerate(pass_inputs(passes))
                   if names[widest] in inputs), None)
    what = (f"input of layer {passes[reader].source}" if reader is not None
            else f"output of layer {passes[first].source}")
    kept = (f"the {len(area_words)} areas of the read-out, one per matrix" if readout
            else "the two ping-pong areas" if len(area_words) == 2
            else "one area" if len(area_words) == 1
            else f"the {len(area_words)} areas the tensors' lifetimes need")
    split = config.act_spram_depth
    where = (f", area 0 in the {split} single-port words (act_spram_depth), the others "
             "above" if split else "")
    raise CompileError(
        f"activations do not fit at batch={batch}: need {act_need} ACT words ({batch} "
        f"samples x ({' + '.join(map(str, area_words))}) words of {kept}{where}; widest: tensor "
        f"{names[widest]!r}, the {what}, shape {shapes[widest]}, {words[widest]} words per "
        f"sample, live from pass {max(first, 0)} to {min(last, len(passes) - 1)}); limit "
        f"act_depth={config.act_depth}{hint}",
        layer=passes[reader if reader is not None else first].source, resource="act_depth",
        need=act_need, limit=config.act_depth)
