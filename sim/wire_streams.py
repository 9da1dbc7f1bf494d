"""LOAD, FETCH and CLASSES of :mod:`hwgen.protocol` on the program interpreter's memories: the
element streams of the packed wire and the class output, as the frame engine carries them out.

:class:`sim.inprocess.InProcessDevice` answers these three commands with the functions here:
``check_*`` gives the status a request deserves (the checks after its length for the opcode, in
the protocol's order), the command functions carry out a checked one. They read and write
whole words through :class:`~sim.interpreter.ProgramInterpreter`'s ``read`` and ``write``, as
the gateware does through the host port.
"""

import numpy as np

from hwgen.compiler.classes import score_keys
from hwgen.memmap import Region
from hwgen.protocol import (
    Status,
    index_bytes,
    pack_elements,
    packed_bytes,
    stream_lanes,
    stream_words,
    unpack_classes,
    unpack_elements,
    unpack_stream,
)

__all__ = ["check_classes", "check_stream", "classes", "fetch", "load", "top_k"]

#: The regions each stream command takes.
_STREAM_REGIONS = {"load": (Region.ACT,), "fetch": (Region.ACT, Region.OUTPUT)}


def check_stream(command, payload, geometry, config, max_payload):
    """Return the :class:`~hwgen.protocol.Status` of a LOAD (``command="load"``) or FETCH
    (``"fetch"``) whose payload length suits the opcode: region, the stream's shape, its bytes,
    its words, in the protocol's order (busy never applies here)."""
    args, rest = unpack_stream(payload)
    region = args["region"]
    if region not in _STREAM_REGIONS[command]:
        return Status.BAD_REGION
    lanes, lane_bits = stream_lanes(config, region)
    runs, run, lead, pitch, bits = (args[k] for k in ("runs", "run", "lead", "pitch", "bits"))
    if 0 in (runs, run, bits) or bits > lane_bits or lead + run > pitch:
        return Status.BAD_LENGTH
    nbytes = packed_bytes(runs * run, bits)
    if nbytes != len(rest) if command == "load" else nbytes > max_payload:
        return Status.BAD_LENGTH
    if args["addr"] + stream_words(runs, pitch, lanes) > geometry[region].depth:
        return Status.BAD_ADDRESS
    return Status.OK


def check_classes(payload, geometry, config, max_payload):
    """Return the :class:`~hwgen.protocol.Status` of a CLASSES of the right length."""
    args = unpack_classes(payload)
    samples, pitch, n, k = (args[name] for name in ("samples", "pitch", "n", "k"))
    if samples == 0 or n == 0 or not 1 <= k <= n or n > pitch:
        return Status.BAD_LENGTH
    if samples * k * index_bytes(n) > max_payload:
        return Status.BAD_LENGTH
    if args["addr"] + stream_words(samples, pitch, config.cols) > geometry[Region.OUTPUT].depth:
        return Status.BAD_ADDRESS
    return Status.OK


def _positions(args):
    """Return the stream positions of the runs' elements, run by run."""
    runs, run, lead, pitch = (args[k] for k in ("runs", "run", "lead", "pitch"))
    return (np.arange(runs)[:, None] * pitch + lead + np.arange(run)[None, :]).ravel()


def _read_lanes(interpreter, config, region, addr, words):
    """Return the signed lanes of ``words`` words from ``addr``, in stream order."""
    lanes, bits = stream_lanes(config, region)
    mask, out = (1 << bits) - 1, []
    for w in range(words):
        word = interpreter.read(region, addr + w)
        for i in range(lanes):
            value = (word >> (i * bits)) & mask
            out.append(value - (1 << bits) if value >> (bits - 1) else value)
    return out


def load(interpreter, config, payload):
    """Carry out a checked LOAD: write the stream's words, the runs' elements sign-extended to
    the lanes, every other lane 0."""
    args, rest = unpack_stream(payload)
    region, bits = args["region"], args["bits"]
    lanes, lane_bits = stream_lanes(config, region)
    words = stream_words(args["runs"], args["pitch"], lanes)
    stream = [0] * (words * lanes)
    values = unpack_elements(rest, bits, args["runs"] * args["run"])
    for position, value in zip(_positions(args).tolist(), values.tolist(), strict=True):
        stream[position] = value
    mask = (1 << lane_bits) - 1
    for w in range(words):
        word = 0
        for i in range(lanes):
            word |= (stream[w * lanes + i] & mask) << (i * lane_bits)
        interpreter.write(region, args["addr"] + w, word)


def fetch(interpreter, config, payload):
    """Carry out a checked FETCH: return the runs' elements, each its low ``bits`` bits,
    packed."""
    args, _ = unpack_stream(payload)
    region, bits = args["region"], args["bits"]
    lanes, _ = stream_lanes(config, region)
    words = stream_words(args["runs"], args["pitch"], lanes)
    stream = _read_lanes(interpreter, config, region, args["addr"], words)
    half = 1 << (bits - 1)
    # The low `bits` bits, read as signed `bits` again (what pack_elements takes).
    values = [((stream[p] + half) & ((1 << bits) - 1)) - half for p in _positions(args).tolist()]
    return pack_elements(values, bits)


def top_k(scores, k):
    """Return the indices of the ``k`` largest of ``scores`` (Python ints), largest first, ties
    to the lowest index."""
    return sorted(range(len(scores)), key=lambda j: (-scores[j], j))[:k]


def classes(interpreter, config, payload):
    """Carry out a checked CLASSES: per sample, the indices of its ``k`` largest scores in
    descending order, ties to the lowest index, :func:`~hwgen.protocol.index_bytes` bytes each,
    little-endian. A ``dtype="bf16"`` design's scores are fp32, ranked by
    :func:`~hwgen.compiler.classes.score_keys` (as floats, a NaN above +Inf)."""
    args = unpack_classes(payload)
    samples, pitch, n, k = (args[name] for name in ("samples", "pitch", "n", "k"))
    words = stream_words(samples, pitch, config.cols)
    stream = _read_lanes(interpreter, config, Region.OUTPUT, args["addr"], words)
    if config.dtype == "bf16":
        stream = score_keys(stream, config.acc_bits).tolist()
    width = index_bytes(n)
    out = bytearray()
    for s in range(samples):
        for j in top_k(stream[s * pitch:s * pitch + n], k):
            out += j.to_bytes(width, "little")
    return bytes(out)
