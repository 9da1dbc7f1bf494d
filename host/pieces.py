"""Requests that can be cut into smaller ones: what a host sends, and how to send less of it.

An :class:`Exchange` is one request (its opcode, payload and name) and, when it moves several
words, stream runs or samples, how to cut it in pieces (:attr:`Exchange.split`): a WRITE or READ
into WRITEs or READs of fewer words, a LOAD or FETCH into LOADs or FETCHes of fewer runs
(whole words each, :func:`hwgen.streams.split_stream_chunk`), CLASSES into CLASSES of fewer
samples; and how the pieces' answers make the whole one's (a FETCH's packed values are
unpacked and packed again: a piece's last byte is padded). The word builders cut what they are given
to a payload ``limit`` (:attr:`host.frame_plan.FramePlan.limit`, at most the device's
``max_payload``; :mod:`host.wire` cuts streams with :func:`hwgen.streams.split_stream_chunk`);
:func:`host.pipeline.pipeline` cuts a piece again after it was damaged.
"""

import functools
import typing

import numpy as np

from hwgen.protocol import (
    AccessArgs,
    Opcode,
    StreamArgs,
    layout_bytes,
    pack_access,
    pack_classes,
    pack_elements,
    pack_fetch,
    pack_load,
    pack_read,
    unpack_elements,
)
from hwgen.streams import split_class_chunk, split_stream_chunk

__all__ = ["Exchange", "class_exchange", "stream_exchange", "stream_name", "word_reads",
           "word_writes"]

_ACCESS_BYTES = layout_bytes(AccessArgs)
_STREAM_BYTES = layout_bytes(StreamArgs)


class Exchange(typing.NamedTuple):
    """One request: its opcode, its payload, what error messages call it, the bytes of data
    (input values sent, output values or indices answered) it moves, and how to cut it.

    ``split(limit)`` returns ``(pieces, join)``: two or more smaller exchanges, each of at most
    ``limit`` bytes and at most half of this one's (of its payload, or of its answer for READ,
    FETCH and CLASSES) where whole units allow (a word, a stream's runs of a whole word, a
    sample), and ``join(answers)``, this one's answer payload from theirs; or ``None`` when it
    cannot be cut. ``split`` itself is ``None`` for a request of one unit (one word, RUN,
    COUNTERS...)."""

    opcode: Opcode
    payload: bytes
    what: str
    data_bytes: int
    split: typing.Any = None


def _nothing(answers):
    return b""


def _joined(answers):
    return b"".join(answers)


# -- WRITE, READ --------------------------------------------------------------------------------

def word_writes(geometry, addr, raw, limit, *, name=None):
    """Return the WRITEs of the words whose wire bytes are ``raw`` (``word_bytes`` each) to
    ``geometry.region`` from ``addr``, each of at most ``limit`` payload bytes (a word at
    least)."""
    nbytes = geometry.word_bytes
    per = max(1, (limit - _ACCESS_BYTES) // nbytes)
    count = len(raw) // nbytes
    return [_write(geometry, addr + start, raw[start * nbytes:(start + per) * nbytes], name)
            for start in range(0, count, per)]


def _write(geometry, addr, raw, name):
    count = len(raw) // geometry.word_bytes
    region = name or geometry.region.name
    split = functools.partial(_split_write, geometry, addr, raw, name) if count > 1 else None
    return Exchange(Opcode.WRITE, pack_access(geometry.region, addr, count) + raw,
                    f"WRITE {region}[{addr}:{addr + count}]", len(raw), split)


def _split_write(geometry, addr, raw, name, limit):
    half = -(-len(raw) // geometry.word_bytes // 2) * geometry.word_bytes   # half the words
    return word_writes(geometry, addr, raw, min(limit, _ACCESS_BYTES + half), name=name), \
        _nothing


def word_reads(geometry, addr, count, limit):
    """Return the READs of ``count`` words of ``geometry.region`` from ``addr``, each
    answering at most ``limit`` payload bytes (a word at least); their answers joined are
    the words' wire bytes."""
    per = max(1, limit // geometry.word_bytes)
    return [_read(geometry, addr + start, min(per, count - start))
            for start in range(0, count, per)]


def _read(geometry, addr, count):
    split = functools.partial(_split_read, geometry, addr, count) if count > 1 else None
    return Exchange(Opcode.READ, pack_read(geometry, addr, count),
                    f"READ {geometry.region.name}[{addr}:{addr + count}]",
                    count * geometry.word_bytes, split)


def _split_read(geometry, addr, count, limit):
    # The answer is what counts: a READ's request is a few bytes whatever it asks for.
    return word_reads(geometry, addr, count, min(limit, -(-count // 2) * geometry.word_bytes)), \
        _joined


# -- LOAD, FETCH, CLASSES -------------------------------------------------------------------------

def stream_name(verb, chunk):
    """Return what messages call the LOAD or FETCH of ``chunk``."""
    return (f"{verb} {chunk.region.name}[{chunk.addr}:] runs={chunk.runs} run={chunk.run} "
            f"bits={chunk.bits}")


def stream_exchange(opcode, chunk, lanes, values=None):
    """Return the LOAD (``values``: the whole stream's run elements, in order, flat) or FETCH
    of the :class:`~hwgen.streams.StreamChunk` ``chunk`` of a stream of ``lanes`` lanes a
    word."""
    split = functools.partial(_split_stream, opcode, chunk, lanes, values)
    if opcode == Opcode.LOAD:
        first = chunk.first * chunk.run
        payload = pack_load(**chunk.args(), values=values[first:first + chunk.elements])
        return Exchange(opcode, payload, stream_name("LOAD", chunk), chunk.data_bytes, split)
    return Exchange(opcode, pack_fetch(**chunk.args()), stream_name("FETCH", chunk),
                    chunk.data_bytes, split)


def _split_stream(opcode, chunk, lanes, values, limit):
    half = -(-chunk.data_bytes // 2)
    if opcode == Opcode.LOAD:
        pieces = split_stream_chunk(chunk, lanes, min(limit, _STREAM_BYTES + half),
                                    _STREAM_BYTES)
        join = _nothing
    else:
        pieces = split_stream_chunk(chunk, lanes, min(limit, half), 0)
        join = functools.partial(_repack, [p.elements for p in pieces], chunk.bits)
    if len(pieces) < 2:
        return None
    return [stream_exchange(opcode, piece, lanes, values) for piece in pieces], join


def _repack(counts, bits, answers):
    """A FETCH's answer from its pieces': their values, packed again as one stream."""
    parts = [unpack_elements(answer, bits, count) for answer, count in zip(answers, counts,
                                                                             strict=True)]
    return pack_elements(np.concatenate(parts), bits)


def class_exchange(chunk, lanes):
    """Return the CLASSES of the :class:`~hwgen.streams.ClassChunk` ``chunk`` (of scores
    ``lanes`` to a word)."""
    split = functools.partial(_split_classes, chunk, lanes)
    return Exchange(Opcode.CLASSES, pack_classes(**chunk.args()),
                    f"CLASSES samples {chunk.first}..{chunk.first + chunk.samples - 1} "
                    f"k={chunk.k}", chunk.data_bytes, split)


def _split_classes(chunk, lanes, limit):
    pieces = split_class_chunk(chunk, lanes, min(limit, -(-chunk.data_bytes // 2)))
    if len(pieces) < 2:
        return None
    return [class_exchange(piece, lanes) for piece in pieces], _joined
