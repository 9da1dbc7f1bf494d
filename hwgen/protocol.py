"""The wire schema of the host protocol: framing, commands, payloads. Defined here once.

The gateware (:class:`hwgen.link.frame.FrameEngine`), the host driver (:mod:`host.client`) and the
device models take every constant, layout and code from this module, in the way Glasgow shares
one command enum between its gateware and its host code. It holds the schema only: the opcodes,
statuses, layouts, CRC and framing constants, and the packing of each layout to and from bytes.
The host's stream decoder is :mod:`host.frames`, its reading of INFO :mod:`host.info`.

Frames
------
Requests and responses have the same shape; only the sync byte tells them apart, so that a host
reading its own echo (a ``loop://`` port, a half-duplex adaptor) never mistakes it for an answer.

======  ======  ===============================================================================
offset  bytes   field
======  ======  ===============================================================================
0       1       ``sync``: :data:`SYNC_REQUEST` (``0xA5``) or :data:`SYNC_RESPONSE` (``0x5A``)
1       1       ``opcode``: an :class:`Opcode`; a response echoes the request's
2       1       ``seq``: chosen by the host; a response echoes the request's
3       1       ``status``: a :class:`Status` in a response; 0 in a request (ignored)
4       2       ``length``: payload bytes, little-endian
6       2       header CRC over bytes 0..5, **big-endian**
8       length  payload
8+len   2       payload CRC over the payload bytes only, **big-endian**
======  ======  ===============================================================================

Both CRCs are CRC-16/XMODEM (:data:`CRC_PARAMETERS`; on the host :func:`binascii.crc_hqx` with
initial value 0). They are sent most significant byte first because then a CRC register fed with
the data *and* its CRC ends at 0 (the algorithm's residue): a receiver checks a codeword with one
comparison, and after a good header CRC the register is back at its initial value, ready for the
payload. All other multi-byte fields are little-endian, in the order of the
:mod:`amaranth.lib.data` layouts below (``data.Struct`` fields are laid out from bit 0, so byte
``i`` of the little-endian image is bits ``8*i .. 8*i+7`` of the layout).

Why a header CRC: a receiver hunting for the sync byte will sooner or later find one inside
garbage. With a CRC over the header the false header is refused seven bytes later, before its
``length`` is believed, so the parser never waits for a payload that is not coming (it returns
to hunting; at most a frame that began inside those seven bytes is lost, and the host's retry
covers it). The idle timeout of the frame engine catches the rest: a truncated frame, or the
1-in-65536 false header that passes its CRC.

Commands
--------
========  ==========================================  ======================================
opcode    request payload                             response payload (status OK)
========  ==========================================  ======================================
INFO      (none)                                      :class:`InfoHeader`, then a
                                                      :class:`RegionInfo` per region
WRITE     :class:`AccessArgs`, then ``count`` words   (none)
READ      :class:`AccessArgs`                         ``count`` words
RUN       :class:`RunArgs`                            (none)
COUNTERS  (none)                                      :class:`CountersPayload`
RESET     (none)                                      (none)
LOAD      :class:`StreamArgs`, then the elements,     (none)
          packed (:func:`pack_elements`)
FETCH     :class:`StreamArgs`                         the elements, packed
CLASSES   :class:`ClassArgs`                          ``k`` indices per sample, each
                                                      :func:`index_bytes` bytes
========  ==========================================  ======================================

A word of region ``r`` is ``regions(config)[r].word_bytes`` bytes, little-endian, the bits above
``word_bits`` zero. A response with a status other than OK has no payload. A device takes payloads
of up to ``max_payload`` bytes (reported by INFO, :data:`MAX_PAYLOAD` by default); a longer frame
is still received whole and answered BAD_LENGTH. The device checks a request in this order and
answers the first failure: frame CRC (BAD_CRC), opcode (BAD_OPCODE), payload length for the opcode
(BAD_LENGTH), region (BAD_REGION), ``count`` (BAD_LENGTH: zero, inconsistent with the length, or
more than ``max_payload`` bytes to read), ``addr + count`` (BAD_ADDRESS), batch (BAD_BATCH), busy
(BUSY; WRITE, READ and RUN only), program loaded (NO_PROGRAM). A request that fails changes
nothing. A frame whose header CRC fails gets no answer at all: its opcode and sequence number
cannot be trusted.

Element streams (LOAD, FETCH, CLASSES)
--------------------------------------
A region's word holds ``lanes`` signed lanes of ``lane_bits`` (:func:`stream_lanes`: ACT
``act_lanes`` lanes of ``in_bits``, OUTPUT ``cols`` lanes of ``acc_bits``), lane ``i`` at bits
``i*lane_bits ..``. A :class:`StreamArgs` stream starts at lane 0 of word ``addr`` and covers
``runs * pitch`` elements, element ``E`` in lane ``E % lanes`` of word ``addr + E // lanes``:
run ``j`` is elements ``j*pitch + lead .. j*pitch + lead + run - 1``; the others (each run's
``lead`` and the gap up to ``pitch``, and the lanes of the last word past the stream) are zero.
LOAD writes the :func:`stream_words` words of the stream, each run's elements taken from its
payload in order and sign-extended from ``bits`` to the lane; FETCH reads the same words and
answers the runs' elements, each its low ``bits`` bits. On the wire elements are packed LSB first
(:func:`pack_elements`). CLASSES reads, per sample ``s``, the ``n`` scores (OUTPUT lanes) at
elements ``s*pitch .. s*pitch + n - 1`` of the stream from ``addr`` and answers the indices of
the ``k`` largest in descending order, ties to the lowest index (NumPy's
``np.argsort(-scores, kind="stable")[:k]``), each :func:`index_bytes` bytes little-endian.

A device checks these requests in the order above, in these terms: payload CRC, opcode
(BAD_OPCODE also where the device lacks the command: :class:`Features`), the length for the
opcode (LOAD: from its arguments to ``max_payload``; FETCH, CLASSES: exactly the arguments),
region (LOAD: ACT only; FETCH: ACT or OUTPUT; CLASSES reads OUTPUT), the stream's shape
(BAD_LENGTH: ``runs``, ``run`` or ``bits`` zero, ``bits`` wider than the lane, ``lead + run >
pitch``; CLASSES: ``samples`` or ``n`` zero, ``k`` not in ``1 .. n``, ``n > pitch``), its bytes
(BAD_LENGTH: a LOAD payload not exactly the arguments plus :func:`packed_bytes` of
``runs * run`` elements; a response longer than ``max_payload``), the words (BAD_ADDRESS:
``addr + stream_words(...)`` past the region, CLASSES with ``runs = samples``), busy (BUSY).
None needs a program.
"""

import binascii
import dataclasses
import enum as py_enum
import functools
import math
import operator

import numpy as np
from amaranth.lib import crc, data, enum

from .config import DATAFLOWS
from .memmap import Region, regions

__all__ = [
    "CRC_BYTES",
    "CRC_PARAMETERS",
    "DEFAULT_BAUD",
    "FRAME_OVERHEAD",
    "FRAME_TIMEOUT_MS",
    "HEADER_BYTES",
    "MAX_PAYLOAD",
    "PROTOCOL_VERSION",
    "RX_FIFO",
    "STATUS_TEXT",
    "SYNC_REQUEST",
    "SYNC_RESPONSE",
    "AccessArgs",
    "ClassArgs",
    "CounterValues",
    "CountersPayload",
    "Features",
    "FrameHeader",
    "InfoHeader",
    "Opcode",
    "RegionInfo",
    "RunArgs",
    "Status",
    "StreamArgs",
    "crc16",
    "encode_frame",
    "encode_request",
    "encode_response",
    "frame_timeout_cycles",
    "index_bytes",
    "info_bytes",
    "layout_bytes",
    "pack_access",
    "pack_classes",
    "pack_counters",
    "pack_elements",
    "pack_fetch",
    "pack_layout",
    "pack_load",
    "pack_read",
    "pack_run",
    "pack_words",
    "pack_write",
    "packed_bytes",
    "read_chunk_words",
    "stream_lanes",
    "stream_words",
    "unpack_access",
    "unpack_classes",
    "unpack_counters",
    "unpack_elements",
    "unpack_indices",
    "unpack_layout",
    "unpack_run",
    "unpack_stream",
    "unpack_words",
    "write_ahead_words",
    "write_chunk_words",
]

#: Version of this byte layout; reported by INFO. Bump on any incompatible change.
# 6: LOAD, FETCH, CLASSES (the packed wire, class output), INFO's rx_fifo and features;
# 5: INFO reports the UART's baud rate; 4: activation bounds (descriptor act_min/act_max/leaky,
# PARAM mult_neg); 3: spatial layers (descriptor flags, geometry words); 2: per-config layout
PROTOCOL_VERSION = 6

#: First byte of a request frame.
SYNC_REQUEST = 0xA5
#: First byte of a response frame.
SYNC_RESPONSE = 0x5A

#: Default (and largest useful) payload buffer of the frame engine, in bytes. The device reports
#: its own value in INFO; hosts chunk WRITE and READ to what the device reports.
MAX_PAYLOAD = 1024
#: Default receive FIFO of a device's UART, in bytes (reported by INFO as ``rx_fifo``): what
#: arrives while the frame engine answers waits there. A host never has more bytes than the
#: device reports in flight beyond the request being answered.
RX_FIFO = 64
#: The boards' UART rate unless told otherwise (8N1); ignored by ``socket://`` links.
DEFAULT_BAUD = 1_000_000
#: A request that stops arriving for this long is dropped by the device: longer than any gap of
#: a working host, shorter than a person waits.
FRAME_TIMEOUT_MS = 100


def frame_timeout_cycles(clock_hz):
    """Return the cycles of a ``clock_hz`` clock in :data:`FRAME_TIMEOUT_MS`."""
    return clock_hz * FRAME_TIMEOUT_MS // 1000


#: CRC of both header and payload: CRC-16/XMODEM over bytes (``binascii.crc_hqx(data, 0)``).
CRC_PARAMETERS = crc.catalog.CRC16_XMODEM(data_width=8)
CRC_BYTES = 2


class Opcode(enum.Enum, shape=8):
    """Request codes."""

    INFO = 0x01      #: describe the device (:class:`InfoHeader`)
    WRITE = 0x02     #: write words to a region
    READ = 0x03      #: read words from a region
    RUN = 0x04       #: start the program on a batch; answers at once
    COUNTERS = 0x05  #: busy flag and performance counters (:class:`CountersPayload`)
    RESET = 0x06     #: clear counters, run count and program-loaded flag
    LOAD = 0x07      #: write an element stream, packed, to ACT (:class:`StreamArgs`)
    FETCH = 0x08     #: read an element stream, packed (:class:`StreamArgs`)
    CLASSES = 0x09   #: the top-k indices of each sample's scores (:class:`ClassArgs`)


class Features(py_enum.IntFlag):
    """The optional commands a device has (INFO's ``features``); a device without one answers
    its opcode BAD_OPCODE, and a host falls back to WRITE / READ and computes the classes."""

    NONE = 0
    PACKED = 1   #: LOAD and FETCH
    CLASSES = 2  #: CLASSES
    ALL = 3


class Status(enum.Enum, shape=8):
    """Response codes; see :data:`STATUS_TEXT` for their meaning."""

    OK = 0x00
    BAD_CRC = 0x01
    BAD_OPCODE = 0x02
    BAD_LENGTH = 0x03
    BAD_REGION = 0x04
    BAD_ADDRESS = 0x05
    BUSY = 0x06
    NO_PROGRAM = 0x07
    BAD_BATCH = 0x08
    REFUSED = 0x09  #: sent by ``hwgen serve`` (:mod:`host.serve`), never by the device


#: One sentence per :class:`Status`, for error messages.
STATUS_TEXT = {
    Status.OK: "the request was carried out",
    Status.BAD_CRC: "the request's payload CRC did not match; nothing was done",
    Status.BAD_OPCODE: "the opcode is unknown to this device",
    Status.BAD_LENGTH: "the payload length does not fit the opcode or the word count (count 0, "
                       "or more than the device's payload buffer), or a stream's shape is "
                       "impossible (runs, run or bits 0, bits wider than the lane, lead + run > "
                       "pitch, k not in 1..n)",
    Status.BAD_REGION: "the region number names no memory (or one the command does not take: "
                       "LOAD writes ACT, FETCH reads ACT or OUTPUT)",
    Status.BAD_ADDRESS: "addr + count (a stream's words) runs past the end of the region",
    Status.BUSY: "the device is running a program; only INFO, COUNTERS and RESET are served",
    Status.NO_PROGRAM: "RUN before any WRITE to the PROGRAM region since reset",
    Status.BAD_BATCH: "the batch is 0 or larger than the accumulator depth (acc_depth)",
    Status.REFUSED: "refused by hwgen serve: another client is connected to this board (one at "
                    "a time); try again once it has disconnected",
}


class FrameHeader(data.Struct):
    """The first :data:`HEADER_BYTES` bytes of every frame (the header CRC follows).

    Members
    -------
    sync : 8
        :data:`SYNC_REQUEST` or :data:`SYNC_RESPONSE`.
    opcode : Opcode
    seq : 8
    status : Status
        0 (OK) in requests.
    length : 16
        Payload bytes.
    """

    sync: 8
    opcode: Opcode
    seq: 8
    status: Status
    length: 16


class AccessArgs(data.Struct):
    """Leading payload of WRITE and READ; WRITE's words follow it.

    Members
    -------
    region : 8
        A :class:`~hwgen.memmap.Region` value (kept 8 bits wide so that a bad one is visible).
    addr : 32
        First word.
    count : 16
        Words to transfer, at least 1.
    """

    region: 8
    addr: 32
    count: 16


class RunArgs(data.Struct):
    """Payload of RUN.

    Members
    -------
    batch : 16
        Rows to run, ``1 .. acc_depth``.
    """

    batch: 16


class StreamArgs(data.Struct):
    """Leading payload of LOAD and FETCH; LOAD's packed elements follow it.

    Members
    -------
    region : 8
        A :class:`~hwgen.memmap.Region` value: ACT (LOAD, FETCH) or OUTPUT (FETCH).
    addr : 32
        The stream's first word (its element 0 is lane 0 of it).
    runs : 16
        Runs, at least 1.
    run : 16
        Elements per run sent on the wire, at least 1.
    lead : 16
        Zero elements before each run's.
    pitch : 16
        Elements from one run's start to the next, at least ``lead + run``.
    bits : 8
        Bits of an element on the wire, ``1 ..`` the region's lane width.
    """

    region: 8
    addr: 32
    runs: 16
    run: 16
    lead: 16
    pitch: 16
    bits: 8


class ClassArgs(data.Struct):
    """Payload of CLASSES: ``samples`` score vectors in OUTPUT.

    Members
    -------
    addr : 32
        OUTPUT word whose lane 0 is sample 0's score 0.
    samples : 16
        At least 1.
    pitch : 16
        Elements (OUTPUT lanes) from one sample's scores to the next, at least ``n``.
    n : 16
        Scores per sample, at least 1.
    k : 16
        Indices per sample, ``1 .. n``.
    """

    addr: 32
    samples: 16
    pitch: 16
    n: 16
    k: 16


class InfoHeader(data.Struct):
    """Fixed part of the INFO response; ``n_regions`` :class:`RegionInfo` follow it.

    Members
    -------
    version : 8
        :data:`PROTOCOL_VERSION`.
    config_hash : 64
        :attr:`AcceleratorConfig.hash_int <hwgen.config.AcceleratorConfig.hash_int>`.
    rows, cols, dataflow, in_bits, w_bits, acc_bits, mult_bits : 8
        As in the configuration; ``dataflow`` is the index in :data:`hwgen.config.DATAFLOWS`.
    max_payload : 16
        Payload buffer of the frame engine, in bytes.
    acc_depth : 32
        Batch capacity of one RUN.
    baud : 32
        The UART's rate, bits per second (0: a device behind plain byte streams, as the
        simulated board over TCP).
    rx_fifo : 32
        Bytes the receive FIFO holds while the frame engine answers (:data:`RX_FIFO`).
    features : 8
        The optional commands the device has, a :class:`Features`.
    n_regions : 8
        Number of :class:`RegionInfo` records that follow, one per region in value order.
    """

    version: 8
    config_hash: 64
    rows: 8
    cols: 8
    dataflow: 8
    in_bits: 8
    w_bits: 8
    acc_bits: 8
    mult_bits: 8
    max_payload: 16
    acc_depth: 32
    baud: 32
    rx_fifo: 32
    features: 8
    n_regions: 8


class RegionInfo(data.Struct):
    """Geometry of one region in the INFO response.

    Members
    -------
    word_bits : 16
    depth : 32
    """

    word_bits: 16
    depth: 32


class CountersPayload(data.Struct):
    """Payload of the COUNTERS response.

    Members
    -------
    busy : 1
        A program is running.
    program_loaded : 1
        PROGRAM was written since the last reset.
    reserved : 6
        Zero.
    runs : 32
        RUN requests started since the last reset (lets a host tell whether a RUN whose answer
        was lost has started).
    cycles, busy_cycles, macs : 64
        The accelerator's counters (see :class:`~hwgen.memmap.HostPortSignature`).
    """

    busy: 1
    program_loaded: 1
    reserved: 6
    runs: 32
    cycles: 64
    busy_cycles: 64
    macs: 64


def layout_bytes(layout):
    """Return the size of a byte-aligned layout in bytes."""
    size = data.Layout.cast(layout).size
    assert size % 8 == 0, f"{layout!r} is not a whole number of bytes"
    return size // 8


HEADER_BYTES = layout_bytes(FrameHeader)
#: Bytes of a frame beyond its payload.
FRAME_OVERHEAD = HEADER_BYTES + 2 * CRC_BYTES


# -- layouts as bytes --------------------------------------------------------------------------

@functools.cache
def _fields(layout):
    return tuple((name, field.offset, field.width) for name, field in data.Layout.cast(layout))


def pack_layout(layout, **values):
    """Return the little-endian bytes of ``layout`` with ``values`` (missing fields are 0).

    Raises
    ------
    ValueError
        If a value does not fit its field, or a name is not a field.
    """
    fields = _fields(layout)
    unknown = set(values) - {name for name, _, _ in fields}
    if unknown:
        raise ValueError(f"{layout.__name__} has no field(s) {', '.join(sorted(unknown))}")
    word = 0
    for name, offset, width in fields:
        value = values.get(name, 0)
        value = value.value if isinstance(value, py_enum.Enum) else int(value)
        if not 0 <= value < 1 << width:
            raise ValueError(f"{layout.__name__}.{name}={value} does not fit {width} bits")
        word |= value << offset
    return word.to_bytes(layout_bytes(layout), "little")


def unpack_layout(layout, raw):
    """Return ``{field: int}`` from the little-endian bytes of ``layout``.

    Raises
    ------
    ValueError
        If ``raw`` is not exactly the size of ``layout``.
    """
    if len(raw) != layout_bytes(layout):
        raise ValueError(f"{layout.__name__} takes {layout_bytes(layout)} bytes, not {len(raw)}")
    word = int.from_bytes(raw, "little")
    return {name: (word >> offset) & ((1 << width) - 1) for name, offset, width in _fields(layout)}


def _enum_or_int(enum_cls, value):
    try:
        return enum_cls(value)
    except ValueError:
        return value


# -- frames ------------------------------------------------------------------------------------

def crc16(data_bytes):
    """Return the CRC-16/XMODEM of ``data_bytes`` (the protocol's CRC)."""
    return binascii.crc_hqx(data_bytes, 0)


def encode_frame(sync, opcode, seq, status, payload=b""):
    """Return one frame as bytes.

    ``opcode`` and ``status`` may be members or plain integers (tests send unknown opcodes).

    Raises
    ------
    ValueError
        If a field does not fit (``seq`` 0..255, payload longer than 65535 bytes).
    """
    payload = bytes(payload)
    header = pack_layout(FrameHeader, sync=sync, opcode=opcode, seq=seq, status=status,
                         length=len(payload))
    return (header + crc16(header).to_bytes(CRC_BYTES, "big")
            + payload + crc16(payload).to_bytes(CRC_BYTES, "big"))


def encode_request(opcode, seq, payload=b""):
    """Return a request frame (see :func:`encode_frame`)."""
    return encode_frame(SYNC_REQUEST, opcode, seq, Status.OK, payload)


def encode_response(opcode, seq, status, payload=b""):
    """Return a response frame (see :func:`encode_frame`)."""
    return encode_frame(SYNC_RESPONSE, opcode, seq, status, payload)


# -- words -------------------------------------------------------------------------------------

def pack_words(geometry, words):
    """Return ``words`` of ``geometry`` as wire bytes (little-endian, ``word_bytes`` each).

    Parameters
    ----------
    geometry : RegionGeometry
    words : iterable of int
        Python ints or a NumPy integer array; each must be in ``0 .. 2**word_bits - 1``.

    Raises
    ------
    ValueError
        Naming the first word out of range.
    """
    nbytes, bits = geometry.word_bytes, geometry.word_bits
    out = bytearray()
    for i, value in enumerate(words):
        try:
            word = operator.index(value)  # ints and NumPy integers; refuses floats
        except TypeError:
            raise ValueError(f"word {i} = {value!r} is not an integer") from None
        if word < 0 or word >> bits:
            raise ValueError(f"word {i} = {word} does not fit {geometry.region.name} words of "
                             f"{bits} bits (0 .. 2**{bits} - 1)")
        out += word.to_bytes(nbytes, "little")
    return bytes(out)


def unpack_words(geometry, raw):
    """Return the list of ints in ``raw`` (the inverse of :func:`pack_words`).

    Raises
    ------
    ValueError
        If ``len(raw)`` is not a multiple of ``word_bytes``, or a word has bits set above
        ``word_bits``.
    """
    nbytes, bits = geometry.word_bytes, geometry.word_bits
    if len(raw) % nbytes:
        raise ValueError(f"{len(raw)} bytes are not a whole number of {geometry.region.name} "
                         f"words of {nbytes} bytes")
    words = [int.from_bytes(raw[i:i + nbytes], "little") for i in range(0, len(raw), nbytes)]
    for i, word in enumerate(words):
        if word >> bits:
            raise ValueError(f"word {i} = {word:#x} has bits set above bit {bits - 1}")
    return words


def write_chunk_words(geometry, max_payload):
    """Return the most words of ``geometry`` that one WRITE can carry."""
    return (max_payload - layout_bytes(AccessArgs)) // geometry.word_bytes


def write_ahead_words(geometry, max_payload, rx_fifo):
    """Return the most words of ``geometry`` that one WRITE may carry when it goes out ahead of
    an answer not yet read (a device without LOAD, whose host sends the next input's WRITEs
    while the last output's READs are answered): a frame that the device's receive FIFO of
    ``rx_fifo`` bytes holds. 0 when that is less than half a payload: the host then sends each
    WRITE after the last answer, in frames of ``max_payload``."""
    fit = min(max_payload, rx_fifo - FRAME_OVERHEAD)
    if fit < max_payload // 2:
        return 0
    return write_chunk_words(geometry, fit)


def read_chunk_words(geometry, max_payload):
    """Return the most words of ``geometry`` that one READ can return."""
    return max_payload // geometry.word_bytes


# -- payloads ----------------------------------------------------------------------------------

def pack_access(region, addr, count):
    """Return an :class:`AccessArgs` payload; no check beyond field widths (tests use bad ones)."""
    return pack_layout(AccessArgs, region=region, addr=addr, count=count)


def unpack_access(payload):
    """Return ``(region, addr, count, words_bytes)`` of a WRITE or READ payload."""
    n = layout_bytes(AccessArgs)
    args = unpack_layout(AccessArgs, payload[:n])
    return _enum_or_int(Region, args["region"]), args["addr"], args["count"], payload[n:]


def pack_write(geometry, addr, words):
    """Return the payload of a WRITE of ``words`` at ``addr`` of ``geometry.region``."""
    raw = pack_words(geometry, words)
    return pack_access(geometry.region, addr, len(raw) // geometry.word_bytes) + raw


def pack_read(geometry, addr, count):
    """Return the payload of a READ of ``count`` words at ``addr`` of ``geometry.region``."""
    return pack_access(geometry.region, addr, count)


def pack_run(batch):
    """Return the payload of a RUN of ``batch`` rows."""
    return pack_layout(RunArgs, batch=batch)


def unpack_run(payload):
    """Return the batch of a RUN payload."""
    return unpack_layout(RunArgs, payload)["batch"]


@dataclasses.dataclass(frozen=True)
class CounterValues:
    """Decoded COUNTERS payload (see :class:`CountersPayload`): the values of the device's
    counters at one moment (the gateware's counter block is :mod:`hwgen.device.counters`)."""

    busy: bool
    program_loaded: bool
    runs: int
    cycles: int
    busy_cycles: int
    macs: int


def pack_counters(counters):
    """Return the COUNTERS payload of a :class:`CounterValues`."""
    return pack_layout(CountersPayload, **dataclasses.asdict(counters))


def unpack_counters(payload):
    """Return the :class:`CounterValues` of a COUNTERS payload.

    Raises
    ------
    ValueError
        If the payload is not exactly the size of :class:`CountersPayload`.
    """
    fields = unpack_layout(CountersPayload, payload)
    del fields["reserved"]
    return CounterValues(**{k: bool(v) if k in ("busy", "program_loaded") else v
                            for k, v in fields.items()})


def info_bytes(config, max_payload=MAX_PAYLOAD, baud=0, rx_fifo=RX_FIFO, features=Features.ALL):
    """Return the INFO payload of a device built from ``config`` with a payload buffer of
    ``max_payload`` bytes, a UART at ``baud`` (0: none), a receive FIFO of ``rx_fifo`` bytes
    and the optional commands ``features`` (the gateware's ROM): an
    :class:`InfoHeader`, then a
    :class:`RegionInfo` per region in value order. (The host reads it with
    :func:`host.info.unpack_info`.)"""
    geometries = sorted(regions(config).values(), key=lambda g: g.region.value)
    head = pack_layout(
        InfoHeader, version=PROTOCOL_VERSION, config_hash=config.hash_int, rows=config.rows,
        cols=config.cols, dataflow=DATAFLOWS.index(config.dataflow), in_bits=config.in_bits,
        w_bits=config.w_bits, acc_bits=config.acc_bits, mult_bits=config.mult_bits,
        max_payload=max_payload, acc_depth=config.acc_depth, baud=baud, rx_fifo=rx_fifo,
        features=int(features), n_regions=len(geometries))
    return head + b"".join(pack_layout(RegionInfo, word_bits=g.word_bits, depth=g.depth)
                           for g in geometries)


# -- element streams (LOAD, FETCH, CLASSES) ----------------------------------------------------

#: The widest element :func:`pack_elements` takes (a lane is at most this wide).
MAX_ELEMENT_BITS = 64


def _check_bits(bits):
    if isinstance(bits, bool) or not isinstance(bits, int) \
            or not 1 <= bits <= MAX_ELEMENT_BITS:
        raise ValueError(f"bits={bits!r}; allowed: an int in 1..{MAX_ELEMENT_BITS}")


def packed_bytes(count, bits):
    """Return the bytes ``count`` elements of ``bits`` bits take packed: ``ceil(count*bits/8)``."""
    return (count * bits + 7) // 8


def pack_elements(values, bits):
    """Return ``values`` packed at ``bits`` bits each, LSB first.

    Element ``i`` takes bits ``i*bits .. i*bits + bits - 1`` of the little-endian bit string, in
    two's complement; the last byte's unused high bits are 0.

    Parameters
    ----------
    values : array_like of int
        Signed integers, each in ``-2**(bits-1) .. 2**(bits-1) - 1``.
    bits : int
        ``1 .. 64``.

    Raises
    ------
    ValueError
        If ``bits`` is out of range, a value is not an integer, or one does not fit ``bits``
        signed bits (naming the first and the range).
    """
    _check_bits(bits)
    array = np.asarray(values)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"elements must be integers, not {array.dtype}")
    array = array.astype(np.int64).ravel()
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    bad = np.flatnonzero((array < lo) | (array > hi))
    if bad.size:
        raise ValueError(f"element {bad[0]} = {array[bad[0]]} does not fit {bits} signed bits "
                         f"({lo} .. {hi})")
    return _pack_low_bits(array, bits)


def _pack_low_bits(array, bits):
    """Pack the low ``bits`` bits of each of the int64 ``array`` (no range check)."""
    unsigned = array.view(np.uint64)
    shifts = np.arange(bits, dtype=np.uint64)
    bitmap = ((unsigned[:, None] >> shifts) & np.uint64(1)).astype(np.uint8)
    return np.packbits(bitmap.ravel(), bitorder="little").tobytes()


def unpack_elements(data_bytes, bits, count):
    """Return ``count`` signed elements of ``bits`` bits from packed bytes (the inverse of
    :func:`pack_elements`), as a NumPy ``int64`` array.

    Raises
    ------
    ValueError
        If ``bits`` is out of range, or ``data_bytes`` is not exactly
        :func:`packed_bytes` ``(count, bits)`` bytes long.
    """
    _check_bits(bits)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count={count!r}; allowed: an int >= 0")
    need = packed_bytes(count, bits)
    if len(data_bytes) != need:
        raise ValueError(f"{count} elements of {bits} bits take {need} bytes, not "
                         f"{len(data_bytes)}")
    raw = np.frombuffer(bytes(data_bytes), dtype=np.uint8)
    bitmap = np.unpackbits(raw, bitorder="little")[:count * bits].reshape(count, bits)
    weights = np.uint64(1) << np.arange(bits, dtype=np.uint64)
    unsigned = (bitmap.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)
    signed = unsigned.view(np.int64)
    if bits < 64:
        sign = np.int64(1) << np.int64(bits - 1)
        signed = (signed ^ sign) - sign
    return signed.astype(np.int64)


def index_bytes(n):
    """Return the bytes a class index among ``n`` scores takes in CLASSES' answer: 1 for
    ``n <= 256``, else 2."""
    return 1 if n <= 256 else 2


def stream_lanes(config, region):
    """Return ``(lanes, lane_bits)`` of ``region``'s words as an element stream sees them (ACT:
    ``act_lanes`` of ``in_bits``; OUTPUT: ``cols`` of ``acc_bits``), or None for a region
    without lanes."""
    if region == Region.ACT:
        return config.act_lanes, config.in_bits
    if region == Region.OUTPUT:
        return config.cols, config.acc_bits
    return None


def stream_words(runs, pitch, lanes):
    """Return the words a stream of ``runs`` runs ``pitch`` elements apart takes:
    ``ceil(runs * pitch / lanes)``."""
    return math.ceil(runs * pitch / lanes)


def pack_load(region, addr, values, *, runs, run, bits, lead=0, pitch=None):
    """Return the payload of a LOAD: the :class:`StreamArgs` (``pitch`` ``None``: ``lead +
    run``), then ``values`` (``runs * run`` elements, run by run) packed at ``bits``
    (:func:`pack_elements`). No check beyond field widths and element range (tests send bad
    shapes)."""
    pitch = lead + run if pitch is None else pitch
    return (pack_layout(StreamArgs, region=region, addr=addr, runs=runs, run=run, lead=lead,
                        pitch=pitch, bits=bits) + pack_elements(values, bits))


def pack_fetch(region, addr, *, runs, run, bits, lead=0, pitch=None):
    """Return the payload of a FETCH (a :class:`StreamArgs`; ``pitch`` ``None``: ``lead +
    run``); its answer is :func:`packed_bytes` ``(runs * run, bits)`` bytes, read with
    :func:`unpack_elements`."""
    pitch = lead + run if pitch is None else pitch
    return pack_layout(StreamArgs, region=region, addr=addr, runs=runs, run=run, lead=lead,
                       pitch=pitch, bits=bits)


def unpack_stream(payload):
    """Return ``(args, rest)`` of a LOAD or FETCH payload: ``args`` a dict of the
    :class:`StreamArgs` fields (``region`` a :class:`~hwgen.memmap.Region` where it names one),
    ``rest`` the bytes after them."""
    n = layout_bytes(StreamArgs)
    args = unpack_layout(StreamArgs, payload[:n])
    args["region"] = _enum_or_int(Region, args["region"])
    return args, payload[n:]


def pack_classes(addr, samples, pitch, n, k):
    """Return the payload of CLASSES (a :class:`ClassArgs`); its answer is read with
    :func:`unpack_indices`."""
    return pack_layout(ClassArgs, addr=addr, samples=samples, pitch=pitch, n=n, k=k)


def unpack_classes(payload):
    """Return the dict of :class:`ClassArgs` fields of a CLASSES payload."""
    return unpack_layout(ClassArgs, payload)


def unpack_indices(data_bytes, samples, k, n):
    """Return CLASSES' answer as a ``(samples, k)`` NumPy ``int64`` array of indices.

    Raises
    ------
    ValueError
        If ``data_bytes`` is not ``samples * k * index_bytes(n)`` bytes long.
    """
    width = index_bytes(n)
    if len(data_bytes) != samples * k * width:
        raise ValueError(f"{samples} samples of {k} indices of {width} byte(s) take "
                         f"{samples * k * width} bytes, not {len(data_bytes)}")
    dtype = np.uint8 if width == 1 else np.dtype("<u2")
    return np.frombuffer(bytes(data_bytes), dtype=dtype).astype(np.int64).reshape(samples, k)
