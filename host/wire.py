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
import typing

import numpy as np

from hwgen.compiler.classes import class_count, classes_of
from hwgen.compiler.codec import output_words, unpack_output
from hwgen.memmap import Region
from hwgen.protocol import (
    Features,
    Opcode,
    pack_access,
    pack_classes,
    pack_fetch,
    pack_load,
    pack_read,
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
    stream_of,
)

__all__ = ["Exchange", "RunWire", "device_classes", "host_classes", "packed_device",
           "pipelined_device", "run_wire", "words_ahead"]


class Exchange(typing.NamedTuple):
    """One request: its opcode, its payload, what error messages call it and the bytes of
    data (input values sent, output values or indices answered) it moves."""

    opcode: Opcode
    payload: bytes
    what: str
    data_bytes: int


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


def host_classes(outputs, mode):
    """Return ``outputs`` (the arrays read after a run) with the last one's classes for
    ``mode`` picked on the host (:func:`hwgen.compiler.classes.classes_of`)."""
    return [*outputs[:-1], classes_of(outputs[-1], mode)]


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


def _loads(spec, samples, max_payload):
    m = len(samples)
    runs, run, _, _ = stream_of(spec)
    values = np.asarray(samples, dtype=np.int64).reshape(m * runs, run)
    out = []
    for chunk in load_chunks(spec, m, max_payload):
        args = chunk.args()
        payload = pack_load(**args, values=values[chunk.first:chunk.first + chunk.runs])
        out.append(Exchange(Opcode.LOAD, payload, _name("LOAD", chunk), chunk.data_bytes))
    return out


def _writes(info, write, *, ahead=False):
    """The WRITEs of a :class:`~host.plan.WordWrite`, each within the device's payload (and,
    ``ahead``, each a frame its receive FIFO holds)."""
    geometry = info.regions[write.region]
    words = [int(w) for w in write.words]
    raw, nbytes = pack_words(geometry, words), geometry.word_bytes
    chunk = write_ahead_words(geometry, info.max_payload, info.rx_fifo) if ahead else \
        info.write_chunk_words(write.region)
    out = []
    for start in range(0, len(words), chunk):
        n = min(chunk, len(words) - start)
        at = write.base + start
        out.append(Exchange(Opcode.WRITE, pack_access(write.region, at, n)
                            + raw[start * nbytes:(start + n) * nbytes],
                            f"WRITE {write.region.name}[{at}:{at + n}]", n * nbytes))
    return out


def _reads(info, spec, program_batch, m):
    """The READs of ``m`` samples of ``spec``'s words, and their decoder."""
    region, base, count = output_words(spec, program_batch, m)
    geometry = info.regions[region]
    chunk = info.read_chunk_words(region)
    exchanges = []
    for start in range(0, count, chunk):
        n = min(chunk, count - start)
        exchanges.append(Exchange(Opcode.READ, pack_read(geometry, base + start, n),
                                  f"READ {region.name}[{base + start}:{base + start + n}]",
                                  n * geometry.word_bytes))

    def decode(answers):
        words = [w for answer in answers for w in unpack_words(geometry, answer)]
        return unpack_output(spec, program_batch, words, m)

    return exchanges, decode


def _name(verb, chunk):
    return (f"{verb} {chunk.region.name}[{chunk.addr}:] runs={chunk.runs} run={chunk.run} "
            f"bits={chunk.bits}")


def _fetches(spec, m, max_payload):
    chunks = fetch_chunks(spec, m, max_payload)
    exchanges = [Exchange(Opcode.FETCH, pack_fetch(**chunk.args()), _name("FETCH", chunk),
                          chunk.data_bytes) for chunk in chunks]

    def decode(answers):
        parts = [unpack_elements(answer, chunk.bits, chunk.elements)
                 for chunk, answer in zip(chunks, answers, strict=True)]
        flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return flat.reshape(m, *spec.sample_shape)

    return exchanges, decode


def _classes(spec, m, mode, max_payload):
    chunks = class_chunks(spec, m, class_count(mode), max_payload)
    exchanges = [Exchange(Opcode.CLASSES, pack_classes(**chunk.args()),
                          f"CLASSES samples {chunk.first}..{chunk.first + chunk.samples - 1} "
                          f"k={chunk.k}", chunk.data_bytes) for chunk in chunks]

    def decode(answers):
        parts = [unpack_indices(answer, chunk.samples, chunk.k, chunk.n)
                 for chunk, answer in zip(chunks, answers, strict=True)]
        indices = np.concatenate(parts) if parts else np.zeros((0, chunks[0].k), np.int64)
        return indices[:, 0] if mode == "argmax" else indices

    return exchanges, decode


def run_wire(program, plan, mode, info):
    """Return the :class:`RunWire` of ``plan`` (a :class:`~host.plan.RunPlan` of ``program``,
    with its ``samples``) on a device of protocol version 6 with ``info``, for the output ``mode``
    (the last kept output's classes; ``"scores"`` for none). Outputs whose classes the device
    does not pick are fetched and their classes picked here. On a device without LOAD and
    FETCH (:func:`words_ahead`) the input goes in WRITEs that its receive FIFO holds and the
    outputs come in READs."""
    max_payload = info.max_payload
    packed = packed_device(info)
    outputs, decoders, counts = [], [], []
    last = len(plan.specs) - 1
    for i, spec in enumerate(plan.specs):
        wanted = mode if i == last else "scores"
        if wanted != "scores" and classes_on_device(spec, wanted) and device_classes(info):
            exchanges, decode = _classes(spec, plan.batch, wanted, max_payload)
        else:
            exchanges, fetched = _fetches(spec, plan.batch, max_payload) \
                if packed and fits_fetch(spec, max_payload) else \
                _reads(info, spec, plan.program_batch, plan.batch)
            decode = fetched if wanted == "scores" else \
                (lambda answers, f=fetched, w=wanted: classes_of(f(answers), w))
        outputs += exchanges
        decoders.append(decode)
        counts.append(len(exchanges))
    loads = _loads(program.input, plan.samples, max_payload) \
        if packed and fits_load(program.input, max_payload) else \
        _writes(info, plan.write, ahead=not packed)
    return RunWire(loads, outputs, decoders, counts)
