"""The load/run/read loop of a compiled program, written once, as data (sans I/O).

A device runs a :class:`~hwgen.compiler.Program` in two steps, whatever the link:

* the **load** (:func:`load_plan`): each memory image written to its region at its base;
* the **runs** (:func:`run_plans`): per chunk of at most ``program.batch`` samples, the input
  words written to ACT, a RUN of the chunk's rows, the output words read back and unpacked
  into samples (:meth:`RunPlan.unpack`).

The plans hold no I/O. Small executors carry them out on anything with ``write(region, base,
words)``, ``run(batch)`` (returning once the program is done) and ``read(region, base, count)``:
:func:`execute_load` and :func:`execute_run` synchronously (the host driver over
:class:`~host.client.DeviceClient`), :func:`execute_load_async` and :func:`execute_run_async`
in a simulator's test bench (the Amaranth host port in ``tests/support/accelerator_sim.py``,
the cocotb one in :mod:`sim.tb_network`), where each call is awaited.

Also here, because every executor's caller needs them: the checks of the samples
(:func:`check_samples`) and of ``outputs`` (:func:`readout_specs`).

Plans, words and wire elements hold signed lanes. On a ``dtype="bf16"`` design a lane is a
value's bit pattern: :func:`sample_lanes` makes the input's, :func:`output_values` turns an
output's back into floats (fp32 scores, bf16 values), and :func:`float_bits` says how wide
the patterns are where classes are picked from lanes.
"""

import dataclasses
import typing

import numpy as np

from hwgen.compiler.bf16 import bf16_input_lanes
from hwgen.compiler.classes import output_mode
from hwgen.compiler.codec import check_input_samples, output_words, pack_input, unpack_output
from hwgen.memmap import Region
from hwgen.nn.bf16 import bfloat16

__all__ = ["RunPlan", "WordRead", "WordWrite", "check_samples", "execute_load",
           "execute_load_async", "execute_run", "execute_run_async", "float_bits",
           "infer_mode", "load_plan", "output_dtype", "output_values", "readout_specs",
           "run_plans", "sample_lanes", "sample_unit"]


class WordWrite(typing.NamedTuple):
    """Words to write to ``region`` from word ``base`` on."""

    region: Region
    base: int
    words: typing.Any  # a sequence or array of ints


class WordRead(typing.NamedTuple):
    """``count`` words to read from ``region`` from word ``base`` on."""

    region: Region
    base: int
    count: int


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """One RUN of a program: its input, its rows, what to read after it and how to unpack it.

    Attributes
    ----------
    start : int
        Index of the chunk's first sample in the whole input.
    batch : int
        Samples in the chunk: the RUN's batch, ``1 .. program.batch``.
    write : WordWrite
        The chunk's input words (ACT, at the program's input base).
    reads : tuple of WordRead
        The words of each output kept (one per entry of ``specs``).
    specs : tuple of MatrixSpec
        The outputs kept: the network's, or every layer's.
    program_batch : int
        The compiled batch (fixes the output layout).
    samples : numpy.ndarray or None
        The chunk's checked samples as lanes (:func:`sample_lanes`: what the packed wire's
        LOADs carry, :mod:`host.wire`).
    """

    start: int
    batch: int
    write: WordWrite
    reads: tuple
    specs: tuple
    program_batch: int
    samples: typing.Any = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def stop(self):
        """Index after the chunk's last sample."""
        return self.start + self.batch

    def unpack(self, words):
        """Return one int64 array ``[batch, *spec.sample_shape]`` of lanes per kept output,
        from the words each read returned (in the order of :attr:`reads`)."""
        return [unpack_output(spec, self.program_batch, list(map(int, w)), self.batch)
                for spec, w in zip(self.specs, words, strict=True)]


def sample_unit(program):
    """Return what the samples of ``program`` are called in messages: ``"rows"`` (of features)
    or ``"samples"`` (images)."""
    return "rows" if len(program.input.sample_shape) == 1 else "samples"


def check_samples(program, x, what):
    """Return ``x`` as an int64 ``[M, *program.input.sample_shape]`` array of the program's
    signed input values; on a ``dtype="bf16"`` design, as an ``ml_dtypes.bfloat16`` array.

    Raises
    ------
    ValueError
        Starting with ``what``, naming the allowed shape (and, for images given NCHW, how to
        convert them), dtype or range (see :func:`hwgen.compiler.codec.check_input_samples`);
        on a bf16 design, a dtype other than bf16 or float32, a float32 value that is not a
        bf16 value, or an Inf or NaN (naming the first index).
    """
    spec = program.input
    lanes = sample_lanes(program, x, what)
    checked = check_input_samples(lanes, spec.sample_shape, spec.lane_bits, what,
                                  rows=sample_unit(program))
    if program.config.dtype != "bf16":
        return checked
    return checked.astype(np.int16).view(bfloat16())


def sample_lanes(program, x, what):
    """Return samples ``x`` as the signed lanes the wire carries: ``x`` itself on an int8
    design, the bf16 bit patterns on a ``dtype="bf16"`` one
    (:func:`hwgen.compiler.bf16.bf16_input_lanes`: finite bf16 values, or float32 holding
    them, refused otherwise with ``ValueError`` naming ``what``)."""
    if program.config.dtype != "bf16":
        return x
    return bf16_input_lanes(x, what)


def float_bits(program, spec):
    """Return the width of the float patterns in the lanes of ``spec`` (an output of
    ``program``): 32 for fp32 scores, 16 for bf16 values; None on an int8 design."""
    return spec.lane_bits if program.config.dtype == "bf16" else None


def output_dtype(program, spec):
    """Return the dtype of the values of ``spec`` (an output of ``program``) that
    :func:`output_values` gives: int64; float32 scores or ``ml_dtypes.bfloat16`` on a
    ``dtype="bf16"`` design."""
    if program.config.dtype != "bf16":
        return np.dtype(np.int64)
    return np.dtype(np.float32) if spec.lane_bits == 32 else bfloat16()


def output_values(program, spec, lanes):
    """Return the signed lanes of ``spec`` (an output of ``program``) as its values: the lanes
    on an int8 design; on a ``dtype="bf16"`` one, the floats of their bit patterns, as
    :meth:`hwgen.nn.Bf16Network.forward` gives them (:func:`output_dtype`)."""
    if program.config.dtype != "bf16":
        return lanes
    bits = spec.lane_bits
    patterns = np.asarray(lanes, dtype=np.int64) & ((1 << bits) - 1)
    return patterns.astype(np.uint32 if bits == 32 else np.uint16).view(
        output_dtype(program, spec))


def readout_specs(program, outputs, what):
    """Return the matrices read after each run: ``[program.output]`` for ``outputs="last"``,
    every layer's for ``"all"``.

    Raises
    ------
    ValueError
        Naming ``what``, for another ``outputs``, or ``"all"`` of a program compiled without
        read-out (saying how to compile one).
    """
    if outputs == "last":
        return [program.output]
    if outputs != "all":
        raise ValueError(f"{what}: outputs={outputs!r}; allowed: 'last' (the network's output) "
                         "or 'all' (every layer's)")
    if not program.layer_outputs:
        raise ValueError(f"{what}: outputs='all' needs every layer's output of the run, but "
                         "the program was compiled without read-out (its layers reuse two "
                         "areas); compile it with hwgen.compile(network, config, readout=True)")
    return list(program.layer_outputs)


def infer_mode(program, outputs, output, probabilities, what="infer"):
    """Return the output mode of an infer call: ``output``, or the program's
    (:attr:`~hwgen.compiler.Program.output_mode`) for None.

    Raises
    ------
    ValueError
        Naming ``what``: ``output`` is not a mode the program's output allows
        (:func:`hwgen.compiler.classes.output_mode`), classes with ``outputs="all"``, or
        ``probabilities`` with ``outputs="all"``, with classes or of a program without an
        output scale.
    """
    mode = program.output_mode if output is None else \
        output_mode(output, what, spec=program.output)
    if probabilities:
        if outputs != "last":
            raise ValueError(f"{what}: probabilities=True needs outputs='last', not "
                             f"{outputs!r}")
        if mode != "scores":
            raise ValueError(f"{what}: probabilities=True needs the scores, not the classes "
                             f"of output={mode!r}; allowed: output='scores'")
        program.check_probabilities(what)
    if mode != "scores" and outputs != "last":
        raise ValueError(f"{what}: outputs={outputs!r} reads every layer's output as it is; "
                         f"allowed with output='scores' (the classes of output={mode!r} are "
                         "of the last output only)")
    return mode


def load_plan(program):
    """Return the :class:`WordWrite` s that load ``program``: each non-empty image at its
    base (PROGRAM, WEIGHT, PARAM)."""
    return [WordWrite(region, base, words)
            for region, (base, words) in program.images.items() if len(words)]


def run_plans(program, x, outputs="last"):
    """Yield the :class:`RunPlan` of each chunk of ``x``, in order.

    Parameters
    ----------
    program : Program
    x : numpy.ndarray
        Checked samples (:func:`check_samples`); may be empty (no plan).
    outputs : {"last", "all"}
        Read the network's output, or every layer's (:func:`readout_specs`).
    """
    specs = tuple(readout_specs(program, outputs, "run_plans"))
    for start in range(0, len(x), program.batch):
        m = min(program.batch, len(x) - start)
        lanes = sample_lanes(program, x[start:start + m], "run_plans")
        words = pack_input(program.input, program.batch, lanes)
        reads = tuple(WordRead(*output_words(spec, program.batch, m)) for spec in specs)
        yield RunPlan(start=start, batch=m, write=WordWrite(Region.ACT, program.input.base, words),
                      reads=reads, specs=specs, program_batch=program.batch, samples=lanes)


def execute_load(port, program):
    """Write ``program`` to ``port`` (``port.write(region, base, words)`` per image)."""
    for write in load_plan(program):
        port.write(*write)


def execute_run(port, plan):
    """Carry out one :class:`RunPlan` on ``port``; return :meth:`RunPlan.unpack` 's arrays.

    ``port.run(batch)`` must return once the program has finished.
    """
    port.write(*plan.write)
    port.run(plan.batch)
    return plan.unpack([port.read(*read) for read in plan.reads])


async def execute_load_async(port, program):
    """:func:`execute_load` with each ``port`` call awaited."""
    for write in load_plan(program):
        await port.write(*write)


async def execute_run_async(port, plan):
    """:func:`execute_run` with each ``port`` call awaited."""
    await port.write(*plan.write)
    await port.run(plan.batch)
    return plan.unpack([await port.read(*read) for read in plan.reads])

