"""A run's frames on the packed wire (protocol version 6): its LOADs, and its FETCHes or
CLASSES with the decoding of their answers.

:func:`run_wire` turns one :class:`~host.plan.RunPlan` into the requests the host sends for it
on a device that has LOAD and FETCH (:func:`packed_device`): the chunk's samples as
:class:`hwgen.streams.StreamChunk` LOADs at the input's width, and its outputs as FETCHes at
each one's ``wire_bits``, or, for a class output of a raw output on a device with CLASSES
(:func:`device_classes`), as CLASSES. The byte model (:mod:`hwgen.throughput`) counts the same
chunks. A stream that no frame holds (a row of more values than ``max_payload`` bytes) goes as
WRITEs or READs of its words among them. On an older device the host writes and reads words
(:mod:`host.plan`) and picks the classes itself; :func:`host_classes` is the one place that does
it, both ways.
"""

import dataclasses

import numpy as np

from hwgen.compiler.classes import class_count, classes_of
from hwgen.compiler.codec import output_words, unpack_output
from hwgen.memmap import Region
from hwgen.protocol import (
    AccessArgs,
    Features,
    Opcode,
    StreamArgs,
    layout_bytes,
    pack_words,
    unpack_elements,
    unpack_indices,
    unpack_words,
    write_ahead_words,
)
from hwgen.streams import (
    class_chunks,
    classes_on_device,
    fetch_chunks,
    fits_fetch,
    fits_load,
    load_chunks,
    split_class_chunk,
    split_stream_chunk,
)

from .pieces import Exchange, class_exchange, stream_exchange, word_reads, word_writes
from .plan import float_bits

__all__ = ["Exchange", "RunWire", "device_classes", "host_classes", "packed_device",
           "pipelined_device", "run_wire", "words_ahead"]

_STREAM_BYTES = layout_bytes(StreamArgs)


def packed_device(info):
    """Whether the device (its :class:`~host.info.DeviceInfo`) takes LOAD and FETCH."""
    return info.version >= 6 and bool(Features(info.features) & Features.PACKED)


def device_classes(info):
    """Whether the device (its :class:`~host.info.DeviceInfo`) answers CLASSES."""
    return info.version >= 6 and bool(Features(info.features) & Features.CLASSES)


def words_ahead(info):
    """Whether the host sends a device without LOAD and FETCH (its
    :class:`~host.info.DeviceInfo`) the next input's WRITEs while the last output's READs are
    answered: a device of protocol version 6 whose receive FIFO holds such a WRITE
    (:func:`hwgen.protocol.write_ahead_words`)."""
    return (info.version >= 6 and not packed_device(info)
            and write_ahead_words(info.regions[Region.ACT], info.max_payload, info.rx_fifo) > 0)


def pipelined_device(info):
    """Whether the host pipelines a chunk's input behind the last chunk's output on the device
    (its :class:`~host.info.DeviceInfo`): by LOAD, or by WRITE (:func:`words_ahead`)."""
    return packed_device(info) or words_ahead(info)


def host_classes(outputs, mode, float_bits=None):
    """Return ``outputs`` (the arrays of lanes read after a run) with the last one's classes
    for ``mode`` picked on the host (:func:`hwgen.compiler.classes.classes_of`; lanes of
    ``float_bits``-bit float patterns rank as floats, as on the device)."""
    return [*outputs[:-1], classes_of(outputs[-1], mode, float_bits=float_bits)]


@dataclasses.dataclass(frozen=True)
class RunWire:
    """The frames of one run beyond RUN and its polls.

    Attributes
    ----------
    loads : list of Exchange
        The LOADs of the chunk's samples, in order.
    outputs : list of Exchange
        The FETCHes of each kept output (in the order of the plan's ``specs``), or the
        CLASSES of the last one.
    decoders : list of callable
        Per kept output, ``decode(answers)``: its array from the answers of its exchanges.
    counts : list of int
        Per kept output, the number of its exchanges in :attr:`outputs`.
    """

    loads: list
    outputs: list
    decoders: list
    counts: list

    def unpack(self, answers):
        """Return one array per kept output from the answers to :attr:`outputs`, in order."""
        arrays, at = [], 0
        for decode, count in zip(self.decoders, self.counts, strict=True):
            arrays.append(decode(answers[at:at + count]))
            at += count
        return arrays


def _loads(spec, samples, max_payload, limit):
    m = len(samples)
    values = np.asarray(samples, dtype=np.int64).reshape(-1)   # the runs' elements, in order
    return [stream_exchange(Opcode.LOAD, piece, spec.lanes, values)
            for chunk in load_chunks(spec, m, max_payload)
            for piece in split_stream_chunk(chunk, spec.lanes, limit, _STREAM_BYTES)]


def _writes(info, write, limit, *, ahead=False):
    """The WRITEs of a :class:`~host.plan.WordWrite`, each within the device's payload and
    ``limit`` (and, ``ahead``, each a frame its receive FIFO holds)."""
    geometry = info.regions[write.region]
    raw = pack_words(geometry, [int(w) for w in write.words])
    if ahead:
        words = write_ahead_words(geometry, info.max_payload, info.rx_fifo)
        limit = min(limit, layout_bytes(AccessArgs) + words * geometry.word_bytes)
    return word_writes(geometry, write.base, raw, limit)


def _reads(info, spec, program_batch, m, limit):
    """The READs of ``m`` samples of ``spec``'s words, and their decoder."""
    region, base, count = output_words(spec, program_batch, m)
    geometry = info.regions[region]
    exchanges = word_reads(geometry, base, count, limit)

    def decode(answers):
        words = [w for answer in answers for w in unpack_words(geometry, answer)]
        return unpack_output(spec, program_batch, words, m)

    return exchanges, decode


def _fetches(spec, m, max_payload, limit):
    chunks = [piece for chunk in fetch_chunks(spec, m, max_payload)
              for piece in split_stream_chunk(chunk, spec.lanes, limit, 0)]
    exchanges = [stream_exchange(Opcode.FETCH, chunk, spec.lanes) for chunk in chunks]

    def decode(answers):
        parts = [unpack_elements(answer, chunk.bits, chunk.elements)
                 for chunk, answer in zip(chunks, answers, strict=True)]
        flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return flat.reshape(m, *spec.sample_shape)

    return exchanges, decode


def _classes(spec, m, mode, max_payload, limit):
    chunks = [piece for chunk in class_chunks(spec, m, class_count(mode), max_payload)
              for piece in split_class_chunk(chunk, spec.lanes, limit)]
    exchanges = [class_exchange(chunk, spec.lanes) for chunk in chunks]

    def decode(answers):
        parts = [unpack_indices(answer, chunk.samples, chunk.k, chunk.n)
                 for chunk, answer in zip(chunks, answers, strict=True)]
        indices = np.concatenate(parts) if parts else np.zeros((0, chunks[0].k), np.int64)
        return indices[:, 0] if mode == "argmax" else indices

    return exchanges, decode


def _picked(fetched, mode, bits):
    """Return ``decode(answers)``: the classes of ``mode`` of ``fetched(answers)``'s lanes
    (``bits``-bit float patterns ranked as floats, :func:`~hwgen.compiler.classes.classes_of`)."""
    return lambda answers: classes_of(fetched(answers), mode, float_bits=bits)


def run_wire(program, plan, mode, info, limit=None):
    """Return the :class:`RunWire` of ``plan`` (a :class:`~host.plan.RunPlan` of ``program``,
    with its ``samples``) on a device of protocol version 6 with ``info``, for the output ``mode``
    (the last kept output's classes; ``"scores"`` for none), each frame's payload (or answer)
    within ``limit`` bytes where whole words allow (:attr:`host.frame_plan.FramePlan.limit`;
    None: the device's ``max_payload``). Outputs whose classes the device does not pick are
    fetched and their classes picked here. On a device without LOAD and FETCH
    (:func:`words_ahead`) the input goes in WRITEs that its receive FIFO holds and the outputs
    come in READs."""
    max_payload = info.max_payload
    limit = max_payload if limit is None else min(limit, max_payload)
    packed = packed_device(info)
    outputs, decoders, counts = [], [], []
    last = len(plan.specs) - 1
    for i, spec in enumerate(plan.specs):
        wanted = mode if i == last else "scores"
        if wanted != "scores" and classes_on_device(spec, wanted) and device_classes(info):
            exchanges, decode = _classes(spec, plan.batch, wanted, max_payload, limit)
        else:
            exchanges, fetched = _fetches(spec, plan.batch, max_payload, limit) \
                if packed and fits_fetch(spec, max_payload) else \
                _reads(info, spec, plan.program_batch, plan.batch, limit)
            decode = fetched if wanted == "scores" else \
                _picked(fetched, wanted, float_bits(program, spec))
        outputs += exchanges
        decoders.append(decode)
        counts.append(len(exchanges))
    loads = _loads(program.input, plan.samples, max_payload, limit) \
        if packed and fits_load(program.input, max_payload) else \
        _writes(info, plan.write, limit, ahead=not packed)
    return RunWire(loads, outputs, decoders, counts)
