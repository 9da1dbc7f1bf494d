"""The chunks of one :meth:`host.Accelerator.infer` call on the device, in order.

Each chunk of at most ``program.batch`` samples is a :class:`~host.plan.RunPlan`. On a device
of protocol version 6 (:func:`host.wire.packed_device`) a chunk is its LOADs, the RUN, the polls
and its FETCHes or CLASSES (:mod:`host.wire`), and the next chunk's LOADs go out right behind the
last chunk's FETCHes or CLASSES, before their answers are read (:func:`host.pipeline.pipeline`,
within the device's ``rx_fifo``): the input streams in while the output streams out. A device of
version 6 without LOAD and FETCH whose receive FIFO holds a WRITE (:func:`host.wire.words_ahead`,
the iCEBreaker's) gets the same overlap in words: the next chunk's WRITEs behind the last
chunk's READs. On an older device a chunk is its WRITEs, the RUN, the polls and its READs
(:func:`host.plan.execute_run`), and the host picks the classes
(:func:`host.wire.host_classes`): the same results.
"""

import sys

import numpy as np

from hwgen.compiler.classes import class_count
from hwgen.streams import loads_may_pass

from .pipeline import pipeline
from .plan import (
    execute_run,
    float_bits,
    output_dtype,
    output_values,
    readout_specs,
    run_plans,
    sample_unit,
)
from .wire import host_classes, pipelined_device, run_wire, words_ahead

__all__ = ["StagedPort", "empty_output", "infer_chunks", "progress_bar", "run_all"]

# A progress bar appears on its own for runs of more chunks than this (and a terminal).
_PROGRESS_CHUNKS = 20


class StagedPort:
    """The port the executors drive: the accelerator's client, each call named by the current
    ``stage`` in its errors, RUN waiting for the program's end, the payload bytes counted.

    ``acc`` is the :class:`~host.Accelerator` (its ``_call``, ``client``, ``info``, pacer and
    counters snapshot)."""

    def __init__(self, acc, stage):
        self.acc = acc
        self.stage = stage
        self.payload_bytes = 0

    def _count(self, region, words):
        self.payload_bytes += words * self.acc.info.regions[region].word_bytes

    def write(self, region, base, words):
        if self.stage == "load":
            stage = f"load: write {region.name}"
        else:
            stage = self.stage
            self._count(region, len(words))
        self.acc._call(stage, self.acc.client.write, region, base, words)

    def run(self, batch):
        acc = self.acc
        acc._call(self.stage, acc.client.run, batch)
        acc._snapshot = acc._pacer.wait(
            self.stage, batch, acc._snapshot.cycles,
            lambda: acc._call(self.stage, acc.client.counters))

    def read(self, region, base, count):
        self._count(region, count)
        return self.acc._call(self.stage, self.acc.client.read, region, base, count)

    def pipeline(self, exchanges):
        """Send ``exchanges`` (:class:`host.wire.Exchange`) in flight within the device's
        ``rx_fifo``; return their answers' payloads."""
        self.payload_bytes += sum(e.data_bytes for e in exchanges)
        return self.acc._call(self.stage, pipeline, self.acc.client, exchanges,
                              self.acc.info.rx_fifo)


def infer_chunks(port, program, x, outputs, mode):
    """Yield ``(plan, arrays)`` for each chunk of the checked samples ``x``, in order:
    ``arrays`` one per kept output (:func:`host.plan.readout_specs`), the last one the classes
    of ``mode`` (``"scores"``: the output itself), as values (:func:`host.plan.output_values`)."""
    for plan, arrays in _chunk_lanes(port, program, x, outputs, mode):
        last = len(arrays) - 1
        yield plan, [a if i == last and mode != "scores" else output_values(program, spec, a)
                     for i, (spec, a) in enumerate(zip(plan.specs, arrays, strict=True))]


def _chunk_lanes(port, program, x, outputs, mode):
    """:func:`infer_chunks` with the outputs as the lanes read (the classes as they are)."""
    info = port.acc.info
    unit, rows = sample_unit(program), len(x)
    plans = run_plans(program, x, outputs)
    if not pipelined_device(info):
        for plan in plans:
            port.stage = f"infer {unit} {plan.start}..{plan.stop - 1} of {rows}"
            arrays = execute_run(port, plan)
            yield plan, arrays if mode == "scores" else \
                host_classes(arrays, mode, float_bits(program, plan.specs[-1]))
        return
    overlap = loads_may_pass(program, readout_specs(program, outputs, "infer"))
    # WRITEs go one behind each READ: each one what the device's receive FIFO holds while
    # the READ's answer streams out (the READs all first would leave the input idle).
    interleave = words_ahead(info)
    pending = None   # the chunk that has run and whose outputs are still on the device
    for plan in plans:
        # Frames cut to the link's payload size now (host.frame_plan): smaller while it damages.
        wire = run_wire(program, plan, mode, info, port.acc.client.plan.limit)
        ahead = [] if pending is None else pending[1].outputs
        first = plan if pending is None else pending[0]
        port.stage = f"infer {unit} {first.start}..{plan.stop - 1} of {rows}"
        if overlap and interleave:
            exchanges, at = _alternate(ahead, wire.loads)
            answers = port.pipeline(exchanges)
            answers = [answers[i] for i in at]
        elif overlap:
            answers = port.pipeline(ahead + wire.loads)
        else:   # the outputs first: the LOADs would overwrite them
            answers = port.pipeline(ahead) if ahead else []
            port.pipeline(wire.loads)
        if pending is not None:
            yield pending[0], pending[1].unpack(answers[:len(ahead)])
        port.stage = f"infer {unit} {plan.start}..{plan.stop - 1} of {rows}"
        port.run(plan.batch)
        pending = plan, wire
    if pending is not None:
        yield pending[0], pending[1].unpack(port.pipeline(pending[1].outputs))


def _alternate(first, second):
    """Return ``first`` and ``second`` alternated (the longer one's rest at the end), and the
    positions of ``first`` 's items in it."""
    merged, at = [], []
    for i in range(max(len(first), len(second))):
        if i < len(first):
            at.append(len(merged))
            merged.append(first[i])
        if i < len(second):
            merged.append(second[i])
    return merged, at


def empty_output(spec, mode, rows=0, dtype=np.int64):
    """Return an array of ``rows`` samples of the output ``spec`` in ``mode``: ``(rows,
    *sample_shape)`` of scores of ``dtype`` (:func:`host.plan.output_dtype`), int64 ``(rows,)``
    of argmax, ``(rows, k)`` of top-k."""
    if mode == "scores":
        return np.zeros((rows, *spec.sample_shape), dtype=dtype)
    return np.zeros((rows,) if mode == "argmax" else (rows, class_count(mode)), dtype=np.int64)


def run_all(port, program, x, outputs, mode, *, kept, bar=None):
    """Return one array per kept output (``kept``, :func:`host.plan.readout_specs`) over all
    samples of ``x``: the chunks of :func:`infer_chunks` put in place (``bar`` updated after
    each)."""
    outs = [empty_output(spec, mode if i == len(kept) - 1 else "scores", len(x),
                         output_dtype(program, spec)) for i, spec in enumerate(kept)]
    for plan, arrays in infer_chunks(port, program, x, outputs, mode):
        for out, array in zip(outs, arrays, strict=True):
            out[plan.start:plan.stop] = array
        if bar is not None:
            bar.update(plan.batch)
    return outs


def progress_bar(show, rows, chunks):
    """Return a :mod:`tqdm` bar over ``rows`` samples, or None: ``show`` True always, False
    never, None for more than 20 chunks on a terminal."""
    if show is None:
        show = chunks > _PROGRESS_CHUNKS and sys.stderr.isatty()
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=rows, unit="sample", desc="infer", leave=False)
