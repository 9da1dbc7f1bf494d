"""How fast the host link lets a program run: bytes on the wire and the UART's bound.

:class:`host.Accelerator` runs a batch in chunks of at most ``program.batch`` rows; each chunk
is one exchange of :mod:`hwgen.protocol` frames, each request answered by one response frame.
On a device of protocol version 6 (``packed=True``): the input in LOADs at its own width
(:mod:`hwgen.streams`), one RUN, COUNTERS polls until the run is over (usually one), and the
output in FETCHes at its ``wire_bits``, or, for the output modes ``"argmax"`` and ``("top_k",
k)`` of a raw output, CLASSES answering ``k`` indices per sample. On an older device
(``packed=False``): the input words in WRITEs, the RUN, the polls and the output words in READs.
:func:`wire_bytes_by_direction` counts the bytes of those frames host to device and device to
host, building each frame's size from :mod:`hwgen.protocol`; :func:`wire_bytes_per_run` is
their sum; :func:`link_bound_rate` turns them into inferences per second on a UART, whose 8N1
characters take 10 bit periods per byte.

The UART is full duplex. A version 6 host sends the next chunk's LOADs while the last chunk's
answer streams back, so the bound is the busier direction; a version 5 host waits for each
answer, so there the two directions add up. (The host sends ahead only as many bytes as the
device's receive FIFO holds, INFO's ``rx_fifo``: the overlap needs one that holds a LOAD
frame, ``max_payload`` and 24 bytes; with less, the directions take turns and the sum of
both is the bound.)

Retries after damaged frames, and the INFO and program loading done once per session, are not
counted: this is the steady-state cost of inference.
"""

import functools
import math

from .compiler.classes import class_count, output_mode
from .memmap import regions
from .protocol import (
    DEFAULT_BAUD,
    FRAME_OVERHEAD,
    MAX_PAYLOAD,
    AccessArgs,
    ClassArgs,
    CountersPayload,
    RunArgs,
    StreamArgs,
    layout_bytes,
    read_chunk_words,
    write_ahead_words,
    write_chunk_words,
)
from .streams import (
    class_chunks,
    classes_on_device,
    fetch_chunks,
    fits_fetch,
    fits_load,
    load_chunks,
    loads_may_pass,
)

__all__ = ["BITS_PER_BYTE", "DEFAULT_BAUD", "link_bound_rate", "wire_bytes_by_direction",
           "wire_bytes_per_run"]

#: Bit periods one byte takes on an 8N1 UART: a start bit, 8 data bits, a stop bit.
BITS_PER_BYTE = 10


@functools.cache
def _payload_bytes():
    """Return the bytes of the WRITE/READ access header, the RUN and the COUNTERS payloads."""
    return layout_bytes(AccessArgs), layout_bytes(RunArgs), layout_bytes(CountersPayload)


def _check_count(name, value, low, high=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < low \
            or (high is not None and value > high):
        allowed = f"an integer in {low}..{high}" if high is not None else f"an integer >= {low}"
        raise ValueError(f"{name}={value!r}; allowed: {allowed}")


def wire_bytes_by_direction(program, m, *, polls=1, max_payload=MAX_PAYLOAD, output=None,
                            packed=True, rx_fifo=None):
    """Return ``(host_to_device, device_to_host)``: the bytes of one
    :meth:`host.Accelerator.infer` chunk of ``m`` rows in each direction.

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
        default), which splits the input and the output into frames.
    output : {None, "scores", "argmax"} or ("top_k", k)
        The output mode (:mod:`hwgen.compiler.classes`); None: ``program.output_mode``.
    packed : bool
        A device of protocol version 6 (LOAD, FETCH, CLASSES), or an older one (WRITE, READ;
        the host picks the classes, so ``output`` changes nothing).
    rx_fifo : int or None
        The receive FIFO of a version 6 device without LOAD (INFO's ``rx_fifo``; None: an
        older device): its host sends WRITEs that the FIFO holds
        (:func:`hwgen.protocol.write_ahead_words`), when that is at least half a payload.

    Returns
    -------
    tuple of int
        Request bytes (LOADs or WRITEs, the RUN, the polls, the FETCHes, CLASSES or READs) and
        response bytes.

    Raises
    ------
    ValueError
        If ``m`` is outside ``1 .. program.batch``, ``polls`` < 1, ``output`` is not allowed
        for the program, or ``max_payload`` cannot carry the smallest frame of the input or
        output.
    """
    _check_count("m", m, 1, program.batch)
    _check_count("polls", polls, 1)
    _check_count("max_payload", max_payload, 1)
    mode = program.output_mode if output is None else \
        output_mode(output, "wire_bytes_by_direction", spec=program.output)
    # A stream that no frame holds goes in words, as the host sends it.
    parts = [_load_bytes(program, m, max_payload)
             if packed and fits_load(program.input, max_payload)
             else _write_bytes(program, m, max_payload, None if packed else rx_fifo),
             _control_bytes(polls),
             _answer_bytes(program, m, max_payload, mode) if packed
             else _read_bytes(program, m, max_payload)]
    return tuple(sum(part[i] for part in parts) for i in (0, 1))


def _load_bytes(program, m, max_payload):
    """Return ``(sent, received)`` of the LOADs of ``m`` samples."""
    chunks = load_chunks(program.input, m, max_payload)
    return (sum(FRAME_OVERHEAD + layout_bytes(StreamArgs) + c.data_bytes for c in chunks),
            len(chunks) * FRAME_OVERHEAD)


def _answer_bytes(program, m, max_payload, mode):
    """Return ``(sent, received)`` of the CLASSES or FETCHes of ``m`` samples' output (READs
    of its words, for a stream that no FETCH answer holds)."""
    spec = program.output
    if classes_on_device(spec, mode):
        chunks = class_chunks(spec, m, class_count(mode), max_payload)
        args = layout_bytes(ClassArgs)
    elif fits_fetch(spec, max_payload):
        chunks = fetch_chunks(spec, m, max_payload)
        args = layout_bytes(StreamArgs)
    else:
        return _read_bytes(program, m, max_payload)
    return (len(chunks) * (FRAME_OVERHEAD + args),
            sum(FRAME_OVERHEAD + c.data_bytes for c in chunks))


def _control_bytes(polls):
    """Return ``(sent, received)`` of the RUN and ``polls`` COUNTERS exchanges."""
    _, run, counters = _payload_bytes()
    return (2 * FRAME_OVERHEAD + run + (polls - 1) * FRAME_OVERHEAD,
            2 * FRAME_OVERHEAD + counters + (polls - 1) * (FRAME_OVERHEAD + counters))


def wire_bytes_per_run(program, m, *, polls=1, max_payload=MAX_PAYLOAD, output=None,
                       packed=True):
    """Return the bytes both ways of one :meth:`host.Accelerator.infer` chunk of ``m`` rows:
    the sum of :func:`wire_bytes_by_direction` (same parameters and errors)."""
    return sum(wire_bytes_by_direction(program, m, polls=polls, max_payload=max_payload,
                                       output=output, packed=packed))


def _write_bytes(program, m, max_payload, rx_fifo=None):
    """Return ``(sent, received)`` of the WRITEs of ``m`` samples' input words (in frames that
    a receive FIFO of ``rx_fifo`` bytes holds, when it holds half a payload)."""
    geo = regions(program.config)[program.input.region]
    access = _payload_bytes()[0]
    words = program.input.words(m)
    ahead = 0 if rx_fifo is None else write_ahead_words(geo, max_payload, rx_fifo)
    chunk = ahead or write_chunk_words(geo, max_payload)
    if chunk < 1:
        raise ValueError(f"max_payload={max_payload} cannot carry one {geo.word_bytes}-byte "
                         f"{geo.region.name} word after the {access}-byte access header")
    frames = math.ceil(words / chunk)
    return frames * (FRAME_OVERHEAD + access) + words * geo.word_bytes, frames * FRAME_OVERHEAD


def _read_bytes(program, m, max_payload):
    """Return ``(sent, received)`` of the READs of ``m`` samples' output words."""
    geo = regions(program.config)[program.output.region]
    words = program.output_words(m)[2]
    chunk = read_chunk_words(geo, max_payload)
    if chunk < 1:
        raise ValueError(f"max_payload={max_payload} cannot carry one {geo.word_bytes}-byte "
                         f"{geo.region.name} word")
    frames = math.ceil(words / chunk)
    return (frames * (FRAME_OVERHEAD + _payload_bytes()[0]),
            frames * FRAME_OVERHEAD + words * geo.word_bytes)


def link_bound_rate(program, baud=DEFAULT_BAUD, *, max_payload=MAX_PAYLOAD, output=None,
                    packed=True, rx_fifo=None):
    """Return the inferences per second a UART at ``baud`` allows, at full batches.

    The rate when the link is the bottleneck: ``program.batch`` rows per chunk, each chunk
    :func:`wire_bytes_by_direction` bytes (one COUNTERS poll) of :data:`BITS_PER_BYTE` bit
    periods, the device taking no time: the busier direction's bytes on a device of protocol
    version 6 (full duplex: the next chunk's input goes while the last one's output comes),
    both directions' on an older one (``packed=False``) and for an output that lies in the
    input's words (the host reads it before the next input goes:
    :func:`hwgen.streams.loads_may_pass`). A version 6 device without LOAD whose receive
    FIFO (``rx_fifo``, as for :func:`wire_bytes_by_direction`) holds a WRITE of at least half
    a payload overlaps too: its host sends the next input's WRITEs behind the last output's
    READs.

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
    both = wire_bytes_by_direction(program, m, max_payload=max_payload, output=output,
                                   packed=packed, rx_fifo=rx_fifo)
    geo = regions(program.config)[program.input.region]
    ahead = not packed and rx_fifo is not None \
        and write_ahead_words(geo, max_payload, rx_fifo) > 0
    overlap = (packed or ahead) and loads_may_pass(program, [program.output])
    seconds = (max(both) if overlap else sum(both)) * BITS_PER_BYTE / baud
    return m / seconds
