"""hwgen.protocol: framing, CRC, payloads and word packing, checked against plain Python."""

import binascii
import struct

import numpy as np
import pytest
from amaranth.hdl import Shape
from hypothesis import given
from hypothesis import strategies as st
from support import TINY

from hwgen.config import AcceleratorConfig
from hwgen.memmap import Region, RegionGeometry, regions
from hwgen.protocol import (
    CRC_PARAMETERS,
    FRAME_OVERHEAD,
    HEADER_BYTES,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    STATUS_TEXT,
    SYNC_REQUEST,
    SYNC_RESPONSE,
    AccessArgs,
    Counters,
    DeviceInfo,
    FrameDecoder,
    Opcode,
    RequestDecoder,
    ResponseDecoder,
    Status,
    crc16,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    info_bytes,
    pack_access,
    pack_counters,
    pack_layout,
    pack_read,
    pack_run,
    pack_words,
    pack_write,
    read_chunk_words,
    unpack_access,
    unpack_counters,
    unpack_info,
    unpack_run,
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


@given(opcodes, seqs, payloads)
def test_request_round_trip(opcode, seq, payload):
    frame = decode_request(encode_request(opcode, seq, payload))
    assert (frame.sync, frame.opcode, frame.seq, frame.status, frame.payload, frame.crc_ok) == \
        (SYNC_REQUEST, opcode, seq, Status.OK, payload, True)


@given(opcodes, seqs, statuses, payloads)
def test_response_round_trip(opcode, seq, status, payload):
    frame = decode_response(encode_response(opcode, seq, status, payload))
    assert (frame.opcode, frame.seq, frame.status, frame.payload, frame.crc_ok) == \
        (opcode, seq, status, payload, True)


def test_unknown_codes_decode_as_ints():
    frame = decode_response(encode_response(0x7E, 1, 0x99))
    assert (frame.opcode, frame.status) == (0x7E, 0x99)


def test_decode_response_wants_exactly_one_frame():
    frame = encode_response(Opcode.INFO, 1, Status.OK, b"ab")
    for bad in (frame + b"\x00", b"\x00" + frame, frame[:-1], frame + frame,
                encode_request(Opcode.INFO, 1)):
        with pytest.raises(ValueError, match="exactly one frame"):
            decode_response(bad)


@given(st.lists(st.tuples(opcodes, seqs, statuses, payloads, st.binary(max_size=20)),
                max_size=6),
       st.lists(st.integers(1, 50), min_size=1, max_size=20))
def test_streaming_decoder_with_garbage_and_any_chunking(frames, cuts):
    # Garbage (sync bytes included) between frames, the stream cut at arbitrary places.
    stream = b""
    for opcode, seq, status, payload, garbage in frames:
        stream += garbage + encode_response(opcode, seq, status, payload)
    decoder = ResponseDecoder()
    got = []
    pos = 0
    k = 0
    while pos < len(stream):
        step = cuts[k % len(cuts)]
        got += decoder.feed(stream[pos:pos + step])
        pos += step
        k += 1
    assert [(f.opcode, f.seq, f.status, f.payload) for f in got] == \
        [(o, s, st_, p) for o, s, st_, p, _ in frames]
    assert all(f.crc_ok for f in got)
    assert decoder.skipped == sum(len(g) for *_, g in frames)
    assert decoder.pending == 0


def test_decoder_skips_false_sync_and_bad_header():
    good = encode_response(Opcode.COUNTERS, 3, Status.OK, b"xyz")
    damaged = bytearray(good)
    damaged[2] ^= 0x01  # seq: the header CRC fails, the frame is garbage
    decoder = ResponseDecoder()
    frames = decoder.feed(bytes([SYNC_RESPONSE]) + bytes(damaged) + good)
    assert [(f.seq, f.payload) for f in frames] == [(3, b"xyz")]
    assert decoder.skipped == 1 + len(damaged)


def test_decoder_reports_bad_payload_crc():
    frame = bytearray(encode_response(Opcode.READ, 9, Status.OK, b"\x01\x02\x03"))
    frame[9] ^= 0x10
    (got,) = ResponseDecoder().feed(bytes(frame))
    assert (got.opcode, got.seq, got.crc_ok) == (Opcode.READ, 9, False)


def test_decoder_ignores_other_direction_and_long_frames():
    assert ResponseDecoder().feed(encode_request(Opcode.INFO, 1)) == []
    assert RequestDecoder().feed(encode_response(Opcode.INFO, 1, Status.OK)) == []
    decoder = FrameDecoder(SYNC_RESPONSE, max_length=4)
    assert decoder.feed(encode_response(Opcode.READ, 1, Status.OK, bytes(5))) == []
    assert len(decoder.feed(encode_response(Opcode.READ, 2, Status.OK, bytes(4)))) == 1


def test_decoder_wanted():
    frame = encode_response(Opcode.READ, 1, Status.OK, bytes(20))
    decoder = ResponseDecoder()
    assert decoder.wanted == 8
    decoder.feed(frame[:3])
    assert decoder.wanted == 5
    decoder.feed(frame[3:10])
    assert decoder.wanted == len(frame) - 10
    decoder.reset()
    assert (decoder.pending, decoder.wanted) == (0, 8)


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


@given(st.builds(Counters, st.booleans(), st.booleans(), st.integers(0, 2**32 - 1),
                *(st.integers(0, 2**64 - 1) for _ in range(3))))
def test_counters_round_trip(counters):
    raw = pack_counters(counters)
    c = counters
    assert raw == struct.pack("<BIQQQ", c.busy | c.program_loaded << 1, c.runs, c.cycles,
                              c.busy_cycles, c.macs)
    assert unpack_counters(raw) == counters


@pytest.mark.parametrize("config", [
    TINY,
    AcceleratorConfig(),
    AcceleratorConfig(rows=64, cols=64, dataflow="os", in_bits=16, w_bits=16, acc_bits=64,
                      mult_bits=32, act_depth=1 << 20, acc_depth=(1 << 16) - 1),
], ids=["tiny", "default", "largest"])
def test_info_round_trip(config):
    raw = info_bytes(config, max_payload=2048)
    info = unpack_info(raw)
    assert info == DeviceInfo.from_config(config, 2048)
    assert info.version == PROTOCOL_VERSION and info.config_hash == config.hash_int
    assert info.regions == regions(config)
    assert info.mismatches(config) == []
    other = AcceleratorConfig(rows=config.rows, cols=config.cols, clock_hz=12_000_000)
    assert any(m.startswith("config_hash") for m in info.mismatches(other))


def test_info_rejects_garbage():
    raw = info_bytes(TINY)
    with pytest.raises(ValueError, match="does not hold"):
        unpack_info(raw[:-1])
    bad = bytearray(raw)
    bad[11] = 7  # dataflow
    with pytest.raises(ValueError, match="dataflow"):
        unpack_info(bytes(bad))


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
