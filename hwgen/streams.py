"""How a run's input and output cross the packed wire: the LOAD, FETCH and CLASSES requests of
``m`` samples of a program (protocol version 6, :mod:`hwgen.protocol`).

The host (:mod:`host.wire`) sends them and :mod:`hwgen.throughput` counts their bytes, both from
these plans, so that the model is the host's traffic.

- **LOAD**: the input's element stream (:class:`~hwgen.compiler.MatrixSpec`: ``runs`` runs of
  ``run`` values per sample, ``pitch`` elements apart after ``lead`` zeros), split at run counts
  whose ``runs * pitch`` is a multiple of the region's lanes (so that no LOAD writes another's
  words), each frame's payload within the device's ``max_payload``: the arguments and the
  values at the input's ``wire_bits``.
- **FETCH**: the output's stream the same way, each answer within ``max_payload``, the values
  at the output's ``wire_bits`` (a raw output at the width its accumulator proof bounds).
- **CLASSES**: per sample the ``k`` best indices of the scores in OUTPUT
  (:mod:`hwgen.compiler.classes`), samples split so that each answer fits ``max_payload``.

A stream whose smallest LOAD (or FETCH) does not fit ``max_payload`` (a row of more features
than a frame holds) goes in words instead, as on a version 5 device (WRITE, READ):
:func:`fits_load`, :func:`fits_fetch` tell.
"""

import dataclasses
import math

from .memmap import Region
from .protocol import StreamArgs, index_bytes, layout_bytes, packed_bytes

__all__ = ["ClassChunk", "StreamChunk", "class_chunks", "classes_on_device", "fetch_chunks",
           "fits_fetch", "fits_load", "load_chunks", "loads_may_pass", "split_class_chunk",
           "split_stream_chunk", "stream_of"]


@dataclasses.dataclass(frozen=True)
class StreamChunk:
    """One LOAD or FETCH: ``runs`` runs of the stream from run ``first`` on.

    Attributes
    ----------
    region : Region
    addr : int
        The word holding the chunk's first element (lane 0).
    runs, run, lead, pitch, bits : int
        :class:`~hwgen.protocol.StreamArgs`.
    first : int
        Index of the chunk's first run among the runs of the ``m`` samples.
    """

    region: Region
    addr: int
    runs: int
    run: int
    lead: int
    pitch: int
    bits: int
    first: int

    @property
    def elements(self):
        """Values the chunk carries: ``runs * run``."""
        return self.runs * self.run

    @property
    def data_bytes(self):
        """Bytes of the values, packed."""
        return packed_bytes(self.elements, self.bits)

    def args(self):
        """The :class:`~hwgen.protocol.StreamArgs` fields, by name."""
        return {"region": self.region, "addr": self.addr, "runs": self.runs, "run": self.run,
                "lead": self.lead, "pitch": self.pitch, "bits": self.bits}


@dataclasses.dataclass(frozen=True)
class ClassChunk:
    """One CLASSES: ``samples`` samples from sample ``first`` on.

    Attributes
    ----------
    addr, samples, pitch, n, k : int
        :class:`~hwgen.protocol.ClassArgs`.
    first : int
    """

    addr: int
    samples: int
    pitch: int
    n: int
    k: int
    first: int

    @property
    def data_bytes(self):
        """Bytes of the answer: ``samples * k * index_bytes(n)``."""
        return self.samples * self.k * index_bytes(self.n)

    def args(self):
        """The :class:`~hwgen.protocol.ClassArgs` fields, by name."""
        return {"addr": self.addr, "samples": self.samples, "pitch": self.pitch, "n": self.n,
                "k": self.k}


def stream_of(spec):
    """Return ``(runs, run, lead, pitch)`` of the matrix ``spec``'s element stream per
    sample."""
    return spec.runs, spec.run, spec.lead, spec.pitch


def _most_runs(spec, max_payload, overhead):
    """Return the most runs one frame carries after ``overhead`` bytes, a multiple of the runs
    whose elements fill whole words (0: not even those fit)."""
    _, run, _, pitch = stream_of(spec)
    step = spec.lanes // math.gcd(pitch, spec.lanes)   # runs that end on a word boundary
    fit = max(0, max_payload - overhead) * 8 // (run * spec.wire_bits)
    return min(fit, (1 << 16) - 1) // step * step


def fits_load(spec, max_payload):
    """Whether the input ``spec``'s stream goes in LOADs of at most ``max_payload`` bytes."""
    return _most_runs(spec, max_payload, layout_bytes(StreamArgs)) > 0


def fits_fetch(spec, max_payload):
    """Whether the output ``spec``'s stream comes in FETCH answers of at most ``max_payload``
    bytes."""
    return _most_runs(spec, max_payload, 0) > 0


def _chunks(spec, m, max_payload, overhead, what):
    """Yield ``(first, runs)`` of the chunks of ``m`` samples' runs: ``runs`` a multiple of the
    runs whose elements fill whole words (but the last chunk's), each within ``max_payload``
    after ``overhead`` bytes."""
    total = m * stream_of(spec)[0]
    most = _most_runs(spec, max_payload, overhead)
    if most < 1:
        raise ValueError(f"{what}: a whole number of words of the stream's runs does not fit "
                         f"the device's max_payload={max_payload} after {overhead} bytes of "
                         "arguments; allowed: a larger payload buffer, or words (WRITE, READ)")
    first = 0
    while first < total:
        count = min(most, total - first)
        yield first, count
        first += count


def _stream_chunks(spec, m, max_payload, overhead, what):
    _, run, lead, pitch = stream_of(spec)
    return [StreamChunk(spec.region, spec.base + first * pitch // spec.lanes, count, run, lead,
                        pitch, spec.wire_bits, first)
            for first, count in _chunks(spec, m, max_payload, overhead, what)]


def split_stream_chunk(chunk, lanes, max_payload, overhead):
    """Return ``chunk`` (of a stream of ``lanes`` lanes a word) cut into :class:`StreamChunk` s
    of whole words, in order, each carrying at most ``max_payload`` bytes after ``overhead``
    (a LOAD's arguments; a FETCH's answer has none), but at least the runs of one whole word;
    a dense stream (no lead, no gap, whole words) whose runs are longer is taken as runs of a
    word first (``first`` then counts those). A host sends smaller frames than the device's
    largest this way over a damaged link (:mod:`host.pieces`)."""
    step = lanes // math.gcd(chunk.pitch, lanes)   # runs that end on a word boundary
    fit = max(0, max_payload - overhead) * 8 // (chunk.run * chunk.bits)
    elements = chunk.runs * chunk.run
    if fit < step and chunk.lead == 0 and chunk.pitch == chunk.run and elements % lanes == 0 \
            and chunk.run != lanes:
        words = dataclasses.replace(chunk, runs=elements // lanes, run=lanes, pitch=lanes,
                                    first=chunk.first * chunk.run // lanes)
        return split_stream_chunk(words, lanes, max_payload, overhead)
    most = max(step, min(fit, (1 << 16) - 1) // step * step)
    return [dataclasses.replace(chunk, addr=chunk.addr + first * chunk.pitch // lanes,
                                runs=min(most, chunk.runs - first), first=chunk.first + first)
            for first in range(0, chunk.runs, most)]


def split_class_chunk(chunk, lanes, max_payload):
    """Return ``chunk`` (of scores ``lanes`` to a word) cut into :class:`ClassChunk` s of
    whole samples that start on a word, in order, each answering at most ``max_payload`` bytes
    (but the samples of one word at least)."""
    step = lanes // math.gcd(chunk.pitch, lanes)   # samples that end on a word boundary
    per_sample = chunk.data_bytes // chunk.samples
    most = max(step, max_payload // per_sample // step * step)
    return [dataclasses.replace(chunk, addr=chunk.addr + first * chunk.pitch // lanes,
                                samples=min(most, chunk.samples - first),
                                first=chunk.first + first)
            for first in range(0, chunk.samples, most)]


def load_chunks(spec, m, max_payload):
    """Return the :class:`StreamChunk` s of the LOADs of ``m`` samples of the input ``spec``,
    in order (none for ``m = 0``).

    Raises
    ------
    ValueError
        If the smallest LOAD that keeps to whole words does not fit ``max_payload``.
    """
    return _stream_chunks(spec, m, max_payload, layout_bytes(StreamArgs), "LOAD")


def fetch_chunks(spec, m, max_payload):
    """Return the :class:`StreamChunk` s of the FETCHes of ``m`` samples of the output (or a
    layer's output) ``spec``, in order; each answer within ``max_payload``.

    Raises
    ------
    ValueError
        If one run's values do not fit ``max_payload``.
    """
    return _stream_chunks(spec, m, max_payload, 0, "FETCH")


def class_chunks(spec, m, k, max_payload):
    """Return the :class:`ClassChunk` s of the CLASSES of ``m`` samples of the raw output
    ``spec`` (one row of ``features`` scores per sample in OUTPUT), ``k`` indices each; each
    answer within ``max_payload`` and at most 65535 samples.

    Raises
    ------
    ValueError
        If one sample's ``k`` indices do not fit ``max_payload``.
    """
    per_sample = k * index_bytes(spec.features)
    if per_sample > max_payload:
        raise ValueError(f"CLASSES: {k} indices of {index_bytes(spec.features)} byte(s) do not "
                         f"fit the device's max_payload={max_payload}; allowed: k <= "
                         f"{max_payload // index_bytes(spec.features)}")
    most = min(max_payload // per_sample, (1 << 16) - 1)
    pitch = stream_of(spec)[3]
    return [ClassChunk(spec.base + first * pitch // spec.lanes, min(most, m - first), pitch,
                       spec.features, k, first)
            for first in range(0, m, most)]


def classes_on_device(spec, mode):
    """Whether a device of protocol version 6 picks the classes of ``mode`` for the output
    ``spec`` (CLASSES): an output mode other than ``"scores"`` of a raw output (scores in
    OUTPUT); a requantized output's classes are picked by the host from its FETCH."""
    return mode != "scores" and spec.region == Region.OUTPUT


def loads_may_pass(program, specs):
    """Whether the next chunk's input may go out before this chunk's outputs ``specs``
    (:class:`~hwgen.compiler.MatrixSpec` s of ``program``) are read: none of them lies in the
    input's words (a chain of layers can end in the input's own area). Only then does a
    request sent again after a lost answer find what it asked for: a FETCH sent again after
    the LOAD behind it was carried out would read the new input."""
    inp = program.input
    low, high = inp.base, inp.base + inp.words(program.batch)
    return all(spec.region != inp.region or spec.base + spec.words(program.batch) <= low
               or spec.base >= high for spec in specs)
