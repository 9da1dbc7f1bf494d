"""How fast the host link lets a program run: bytes on the wire and the UART's bound.

:class:`host.Accelerator` runs a batch in chunks of at most ``program.batch`` rows; each chunk
is one exchange of :mod:`hwgen.protocol` frames: the input words in WRITE requests (as many as
the device's payload buffer requires), one RUN, COUNTERS polls until the run is over (usually
one) and the output words in READ requests, each request answered by one response frame.
:func:`wire_bytes_per_run` counts the bytes of those frames in both directions, building each
frame with :func:`hwgen.protocol.encode_request` / :func:`~hwgen.protocol.encode_response`;
:func:`link_bound_rate` turns them into inferences per second on a UART, whose 8N1 characters
take 10 bit periods per byte. Requests and responses alternate (the host waits for each
answer), so the two directions add up rather than overlap.

Retries after damaged frames, and the INFO and program loading done once per session, are not
counted: this is the steady-state cost of inference.
"""

import functools
import math

from .memmap import regions
from .protocol import (
    DEFAULT_BAUD,
    MAX_PAYLOAD,
    AccessArgs,
    CountersPayload,
    Opcode,
    RunArgs,
    Status,
    encode_request,
    encode_response,
    layout_bytes,
    read_chunk_words,
    write_chunk_words,
)

__all__ = ["BITS_PER_BYTE", "DEFAULT_BAUD", "link_bound_rate", "wire_bytes_per_run"]

#: Bit periods one byte takes on an 8N1 UART: a start bit, 8 data bits, a stop bit.
BITS_PER_BYTE = 10


@functools.cache
def _exchange_bytes(opcode, request_payload, response_payload):
    """Return the bytes of one request with ``request_payload`` bytes and its OK answer."""
    # Cached: a sweep asks for the same few frame sizes thousands of times.
    return (len(encode_request(opcode, 0, bytes(request_payload)))
            + len(encode_response(opcode, 0, Status.OK, bytes(response_payload))))


@functools.cache
def _payload_bytes():
    """Return the bytes of the WRITE/READ access header, the RUN and the COUNTERS payloads."""
    return layout_bytes(AccessArgs), layout_bytes(RunArgs), layout_bytes(CountersPayload)


def _check_count(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < low \
            or (high is not None and value > high):
        allowed = f"an integer in {low}..{high}" if high is not None else f"an integer >= {low}"
        raise ValueError(f"{name}={value!r}; allowed: {allowed}")


def wire_bytes_per_run(program, m, *, polls=1, max_payload=MAX_PAYLOAD):
    """Return the bytes both ways of one :meth:`host.Accelerator.infer` chunk of ``m`` rows.

    Parameters
    ----------
    program : hwgen.compiler.Program
    m : int
        Rows of the chunk, ``1 .. program.batch``.
    polls : int
        COUNTERS requests while waiting for the run (at least 1; the host polls once when its
        estimate of the run time is right).
    max_payload : int
        The device's payload buffer (INFO reports it; :data:`~hwgen.protocol.MAX_PAYLOAD` by
        default), which splits the input into WRITEs and the output into READs.

    Returns
    -------
    int
        Request and response bytes of the WRITEs of the input, the RUN, the polls and the
        READs of the output.

    Raises
    ------
    ValueError
        If ``m`` is outside ``1 .. program.batch``, ``polls`` < 1, or ``max_payload`` cannot
        carry one word of the input or output region.
    """
    _check_count("m", m, 1, program.batch)
    _check_count("polls", polls, 1)
    _check_count("max_payload", max_payload, 1)
    geometry = regions(program.config)
    total = 0
    access, run, counters = _payload_bytes()

    in_geo = geometry[program.input.region]
    in_words = m * program.input.words_per_sample
    chunk = write_chunk_words(in_geo, max_payload)
    if chunk < 1:
        raise ValueError(f"max_payload={max_payload} cannot carry one {in_geo.word_bytes}-byte "
                         f"{in_geo.region.name} word after the {access}-byte access header")
    for start in range(0, in_words, chunk):
        n = min(chunk, in_words - start)
        total += _exchange_bytes(Opcode.WRITE, access + n * in_geo.word_bytes, 0)

    total += _exchange_bytes(Opcode.RUN, run, 0)
    total += polls * _exchange_bytes(Opcode.COUNTERS, 0, counters)

    _, _, out_words = program.output_words(m)
    out_geo = geometry[program.output.region]
    chunk = read_chunk_words(out_geo, max_payload)
    if chunk < 1:
        raise ValueError(f"max_payload={max_payload} cannot carry one {out_geo.word_bytes}-byte "
                         f"{out_geo.region.name} word")
    for start in range(0, out_words, chunk):
        n = min(chunk, out_words - start)
        total += _exchange_bytes(Opcode.READ, access, n * out_geo.word_bytes)
    return total


def link_bound_rate(program, baud=DEFAULT_BAUD, *, max_payload=MAX_PAYLOAD):
    """Return the inferences per second a UART at ``baud`` allows, at full batches.

    The rate when the link is the bottleneck: ``program.batch`` rows per chunk, each chunk
    :func:`wire_bytes_per_run` bytes (one COUNTERS poll) of :data:`BITS_PER_BYTE` bit periods,
    the device taking no time.

    Raises
    ------
    ValueError
        If ``baud`` is not a positive number (or for the reasons of
        :func:`wire_bytes_per_run`).
    """
    if isinstance(baud, bool) or not isinstance(baud, int | float) or not baud > 0 \
            or not math.isfinite(baud):
        raise ValueError(f"baud={baud!r}; allowed: a positive number of bits per second")
    m = program.batch
    seconds = wire_bytes_per_run(program, m, max_payload=max_payload) * BITS_PER_BYTE / baud
    return m / seconds
