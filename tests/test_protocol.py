"""hwgen.protocol: the wire schema (framing, CRC, payloads, word packing), checked against plain
Python."""

import binascii
import struct

import numpy as np
import pytest
from amaranth.hdl import Shape
from hypothesis import given
from hypothesis import strategies as st
from support import TINY

from hwgen.memmap import Region, RegionGeometry, regions
from hwgen.protocol import (
    CRC_PARAMETERS,
    FRAME_OVERHEAD,
    HEADER_BYTES,
    MAX_PAYLOAD,
    STATUS_TEXT,
    SYNC_REQUEST,
    SYNC_RESPONSE,
    AccessArgs,
    CounterValues,
    Opcode,
    Status,
    crc16,
    encode_request,
    encode_response,
    index_bytes,
    pack_access,
    pack_classes,
    pack_counters,
    pack_elements,
    pack_fetch,
    pack_layout,
    pack_load,
    pack_read,
    pack_run,
    pack_words,
    pack_write,
    packed_bytes,
    read_chunk_words,
    stream_lanes,
    stream_words,
    unpack_access,
    unpack_classes,
    unpack_counters,
    unpack_elements,
    unpack_indices,
    unpack_run,
    unpack_stream,
    unpack_words,
    write_chunk_words,
)

opcodes = st.sampled_from(list(Opcode))
statuses = st.sampled_from(list(Status))
seqs = st.integers(0, 255)
payloads = st.binary(max_size=300)


def naive_crc16_xmodem(data):
    """Bit by bit, from the definition: polynomial 0x1021, initial 0, no reflection."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


# -- CRC -----------------------------------------------------------------------------------------

def test_crc_check_value():
    # The catalogue's check value of CRC-16/XMODEM.
    assert crc16(b"123456789") == 0x31C3
    assert CRC_PARAMETERS.compute(b"123456789") == 0x31C3


@given(st.binary(max_size=200))
def test_host_crc_matches_amaranth_and_definition(data):
    assert crc16(data) == CRC_PARAMETERS.compute(data) == naive_crc16_xmodem(data)


@given(st.binary(max_size=200))
def test_crc_appended_big_endian_leaves_residue(data):
    # The gateware checks frames with match_detected, i.e. this residue.
    codeword = data + crc16(data).to_bytes(2, "big")
    assert binascii.crc_hqx(codeword, 0) == CRC_PARAMETERS.residue() == 0


# -- frames --------------------------------------------------------------------------------------

def test_request_layout():
    payload = bytes([1, 2, 3])
    frame = encode_request(Opcode.READ, 0x42, payload)
    header = struct.pack("<BBBBH", SYNC_REQUEST, Opcode.READ.value, 0x42, 0, 3)
    assert frame == (header + struct.pack(">H", naive_crc16_xmodem(header)) + payload
                     + struct.pack(">H", naive_crc16_xmodem(payload)))
    assert len(frame) == FRAME_OVERHEAD + 3 and HEADER_BYTES == 6


def test_response_layout():
    frame = encode_response(Opcode.RUN, 7, Status.BUSY)
    header = struct.pack("<BBBBH", SYNC_RESPONSE, Opcode.RUN.value, 7, Status.BUSY.value, 0)
    assert frame == header + struct.pack(">H", naive_crc16_xmodem(header)) + b"\x00\x00"


def test_encode_checks_fields():
    with pytest.raises(ValueError, match="seq=256"):
        encode_request(Opcode.INFO, 256)
    with pytest.raises(ValueError, match="length=65536"):
        encode_request(Opcode.WRITE, 0, bytes(65536))
    with pytest.raises(ValueError, match="no field"):
        pack_layout(AccessArgs, bank=1)


# -- codes ---------------------------------------------------------------------------------------

def test_codes():
    assert Shape.cast(Opcode) == Shape.cast(Status) == Shape(8)
    assert set(STATUS_TEXT) == set(Status)
    assert Status.OK.value == 0
    assert len({o.value for o in Opcode}) == len(Opcode)
    assert SYNC_REQUEST != SYNC_RESPONSE


# -- payloads ------------------------------------------------------------------------------------

def test_access_layout():
    assert pack_access(Region.OUTPUT, 0x12345678, 0xABCD) == struct.pack("<BIH", 4, 0x12345678,
                                                                         0xABCD)
    geo = regions(TINY)[Region.WEIGHT]
    payload = pack_write(geo, 5, [0x010203, 0xFFFFFF])
    assert payload == struct.pack("<BIH", 1, 5, 2) + bytes([3, 2, 1, 0xFF, 0xFF, 0xFF])
    assert unpack_access(payload) == (Region.WEIGHT, 5, 2, payload[7:])
    assert pack_read(geo, 3, 4) == struct.pack("<BIH", 1, 3, 4)


def test_run_layout():
    assert pack_run(0x1234) == b"\x34\x12"
    assert unpack_run(b"\x34\x12") == 0x1234
    with pytest.raises(ValueError, match="batch"):
        pack_run(1 << 16)


@given(st.builds(CounterValues, st.booleans(), st.booleans(), st.integers(0, 2**32 - 1),
                *(st.integers(0, 2**64 - 1) for _ in range(3))))
def test_counters_round_trip(counters):
    raw = pack_counters(counters)
    c = counters
    assert raw == struct.pack("<BIQQQ", c.busy | c.program_loaded << 1, c.runs, c.cycles,
                              c.busy_cycles, c.macs)
    assert unpack_counters(raw) == counters


def test_chunk_sizes():
    geo = RegionGeometry(Region.ACT, 24, 100)
    assert write_chunk_words(geo, MAX_PAYLOAD) == (MAX_PAYLOAD - 7) // 3
    assert read_chunk_words(geo, MAX_PAYLOAD) == MAX_PAYLOAD // 3


# -- words ---------------------------------------------------------------------------------------

GEOMETRIES = [RegionGeometry(Region.PROGRAM, bits, 8) for bits in (1, 7, 8, 9, 24, 64, 65, 171)]


@pytest.mark.parametrize("geo", GEOMETRIES, ids=lambda g: f"{g.word_bits}b")
def test_word_edges(geo):
    top = (1 << geo.word_bits) - 1
    raw = pack_words(geo, [0, top, 1])
    assert len(raw) == 3 * geo.word_bytes
    assert raw[geo.word_bytes:2 * geo.word_bytes] == top.to_bytes(geo.word_bytes, "little")
    assert raw[2 * geo.word_bytes] == 1  # little-endian
    assert unpack_words(geo, raw) == [0, top, 1]
    with pytest.raises(ValueError, match=r"word 1 = .* does not fit"):
        pack_words(geo, [0, top + 1])
    with pytest.raises(ValueError, match="word 0 = -1"):
        pack_words(geo, [-1])
    if geo.word_bits % 8:
        with pytest.raises(ValueError, match="bits set above"):
            unpack_words(geo, bytes([0xFF]) * geo.word_bytes)
    if geo.word_bytes > 1:
        with pytest.raises(ValueError, match="whole number"):
            unpack_words(geo, bytes(geo.word_bytes + 1))


@given(st.data())
def test_words_round_trip(data):
    bits = data.draw(st.integers(1, 200))
    geo = RegionGeometry(Region.OUTPUT, bits, 64)
    words = data.draw(st.lists(st.integers(0, (1 << bits) - 1), max_size=20))
    raw = pack_words(geo, words)
    assert raw == b"".join(w.to_bytes((bits + 7) // 8, "little") for w in words)
    assert unpack_words(geo, raw) == words


def test_words_from_numpy():
    geo = RegionGeometry(Region.WEIGHT, 64, 8)
    array = np.array([0, 2**64 - 1, 5], dtype=np.uint64)
    assert unpack_words(geo, pack_words(geo, array)) == [0, 2**64 - 1, 5]
    assert pack_words(geo, np.array([3], dtype=np.int16)) == (3).to_bytes(8, "little")
    with pytest.raises(ValueError, match="not an integer"):
        pack_words(geo, [1.0])
    with pytest.raises(ValueError, match="word 0 = -2"):
        pack_words(geo, np.array([-2], dtype=np.int8))
    assert pack_words(geo, []) == b""


# -- element streams (LOAD, FETCH, CLASSES) -------------------------------------------------------

def reference_pack(values, bits):
    """Bit by bit, from the definition: element i's bit b is bit i*bits + b of the string."""
    out = bytearray((len(values) * bits + 7) // 8)
    for i, value in enumerate(values):
        for b in range(bits):
            if (value >> b) & 1:       # Python's >> of a negative int is two's complement
                pos = i * bits + b
                out[pos // 8] |= 1 << (pos % 8)
    return bytes(out)


@st.composite
def elements(draw):
    bits = draw(st.integers(1, 64))
    values = draw(st.lists(st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1),
                           max_size=40))
    return bits, values


@given(elements())
def test_pack_elements_matches_bitwise_reference(case):
    bits, values = case
    packed = pack_elements(values, bits)
    assert packed == reference_pack(values, bits)
    assert len(packed) == packed_bytes(len(values), bits)
    assert unpack_elements(packed, bits, len(values)).tolist() == values


@given(st.integers(1, 64), st.binary(max_size=40))
def test_unpack_elements_sign_extends_each_field(bits, data):
    count = len(data) * 8 // bits
    data = data[:packed_bytes(count, bits)]
    string = int.from_bytes(data, "little")
    expect = []
    for i in range(count):
        field = (string >> (i * bits)) & ((1 << bits) - 1)
        expect.append(field - (1 << bits) if field >> (bits - 1) else field)
    got = unpack_elements(data, bits, count)
    assert got.dtype == np.int64 and got.tolist() == expect


def test_pack_elements_examples():
    assert pack_elements([1, -1, 3], 4) == bytes([0xF1, 0x03])
    assert pack_elements([-1] * 3, 3) == bytes([0xFF, 0x01])   # the last byte's top bits 0
    assert pack_elements(np.array([[1, 2], [3, 4]], dtype=np.int8), 8) == bytes([1, 2, 3, 4])
    assert pack_elements([], 7) == b""


def test_pack_elements_refuses_bad_input():
    with pytest.raises(ValueError, match="element 1 = 8 does not fit 4 signed bits"):
        pack_elements([0, 8], 4)
    with pytest.raises(ValueError, match="bits=0"):
        pack_elements([0], 0)
    with pytest.raises(ValueError, match="bits=65"):
        pack_elements([0], 65)
    with pytest.raises(ValueError, match="integers"):
        pack_elements([0.5], 8)
    with pytest.raises(ValueError, match="take 2 bytes, not 3"):
        unpack_elements(b"abc", 4, 3)


def test_index_bytes():
    assert [index_bytes(n) for n in (1, 10, 256, 257, 65535)] == [1, 1, 1, 2, 2]
    data = bytes([3, 1, 0, 2, 5, 4])
    assert unpack_indices(data, 2, 3, 10).tolist() == [[3, 1, 0], [2, 5, 4]]
    assert unpack_indices(bytes([1, 1, 0, 2]), 1, 2, 300).tolist() == [[257, 512]]
    with pytest.raises(ValueError, match="take 4 bytes, not 3"):
        unpack_indices(bytes(3), 1, 2, 300)


def test_stream_layouts():
    # The documented byte offsets, decoded independently of hwgen.protocol.
    values = list(range(-8, 8)) + [1] * 14
    raw = pack_load(Region.ACT, 0x01020304, values, runs=5, run=6, lead=7, pitch=20, bits=4)
    assert struct.unpack_from("<BIHHHHB", raw) == (3, 0x01020304, 5, 6, 7, 20, 4)
    assert len(raw) == 14 + packed_bytes(30, 4)
    args, rest = unpack_stream(raw)
    assert args == {"region": Region.ACT, "addr": 0x01020304, "runs": 5, "run": 6, "lead": 7,
                    "pitch": 20, "bits": 4}
    assert unpack_elements(rest, 4, 30).tolist() == values
    assert pack_fetch(Region.OUTPUT, 1, runs=2, run=3, bits=9) == struct.pack(
        "<BIHHHHB", 4, 1, 2, 3, 0, 3, 9)
    raw = pack_classes(0x10, 3, 16, 10, 2)
    assert raw == struct.pack("<IHHHH", 0x10, 3, 16, 10, 2)
    assert unpack_classes(raw) == {"addr": 0x10, "samples": 3, "pitch": 16,
                                   "n": 10, "k": 2}
    assert stream_words(3, 10, 8) == 4 and stream_words(2, 8, 8) == 2
    assert stream_lanes(TINY, Region.ACT) == (TINY.act_lanes, TINY.in_bits)
    assert stream_lanes(TINY, Region.OUTPUT) == (TINY.cols, TINY.acc_bits)
    assert stream_lanes(TINY, Region.PROGRAM) is None
    assert [op.value for op in (Opcode.LOAD, Opcode.FETCH, Opcode.CLASSES)] == [7, 8, 9]
