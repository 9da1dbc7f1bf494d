"""host.frames: the host's stream decoder against frames built by hwgen.protocol's encoder,
with garbage between them and the stream cut anywhere."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from protocol_helpers import decode_request, decode_response

from host.frames import FrameDecoder, RequestDecoder, ResponseDecoder
from hwgen.protocol import (
    SYNC_REQUEST,
    SYNC_RESPONSE,
    Opcode,
    Status,
    encode_request,
    encode_response,
)

opcodes = st.sampled_from(list(Opcode))
statuses = st.sampled_from(list(Status))
seqs = st.integers(0, 255)
payloads = st.binary(max_size=300)


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
