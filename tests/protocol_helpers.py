"""Helpers of the protocol's tests that no device or host needs: strict one-frame decoding, an
INFO payload built from any :class:`host.info.DeviceInfo` (a device that lies about itself),
and the malformed requests every device must refuse (the simulated board's tests and the
in-process device's share them, so both are held to one table).

(On the path through ``pythonpath = ["tests"]``, as ``support`` is.)
"""

from host.frames import RequestDecoder, ResponseDecoder
from hwgen.config import DATAFLOWS
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    MAX_PAYLOAD,
    InfoHeader,
    Opcode,
    RegionInfo,
    Status,
    encode_request,
    pack_access,
    pack_layout,
    pack_read,
    pack_run,
    pack_words,
    pack_write,
    read_chunk_words,
)

__all__ = ["decode_request", "decode_response", "error_cases", "pack_info"]


def _decode_one(decoder, raw):
    frames = decoder.feed(raw)
    if len(frames) != 1 or decoder.skipped or decoder.pending:
        raise ValueError(f"expected exactly one frame, got {len(frames)} frame(s) and "
                         f"{decoder.skipped} skipped byte(s) in {len(raw)} bytes")
    return frames[0]


def decode_response(raw):
    """Decode ``raw``, which must be exactly one response frame; raise ValueError otherwise."""
    return _decode_one(ResponseDecoder(), bytes(raw))


def decode_request(raw):
    """Decode ``raw``, which must be exactly one request frame; raise ValueError otherwise."""
    return _decode_one(RequestDecoder(), bytes(raw))


def pack_info(info):
    """Return the INFO payload of a :class:`host.info.DeviceInfo` (its fields as given)."""
    head = pack_layout(
        InfoHeader, version=info.version, config_hash=info.config_hash, rows=info.rows,
        cols=info.cols, dataflow=DATAFLOWS.index(info.dataflow), in_bits=info.in_bits,
        w_bits=info.w_bits, acc_bits=info.acc_bits, mult_bits=info.mult_bits,
        max_payload=info.max_payload, acc_depth=info.acc_depth, n_regions=len(info.regions))
    return head + b"".join(
        pack_layout(RegionInfo, word_bits=g.word_bits, depth=g.depth)
        for _, g in sorted(info.regions.items(), key=lambda item: item[0].value))


def error_cases(config):
    """Return ``(name, request, status)`` of malformed requests to a device of ``config`` (with
    the default payload buffer, nothing run, no program written since the last reset) and the
    status the frame engine answers each with; none may change any state."""
    geo = regions(config)
    act, prog = geo[Region.ACT], geo[Region.PROGRAM]
    good = encode_request(Opcode.WRITE, 100, pack_write(act, 10, [1, 2, 3]))
    flipped = bytearray(good)
    flipped[16] ^= 0x04  # a bit of the first word: the payload CRC no longer matches
    return [
        ("bad-crc", bytes(flipped), Status.BAD_CRC),
        ("bad-crc-trailer", good[:-1] + bytes([good[-1] ^ 1]), Status.BAD_CRC),
        ("unknown-opcode", encode_request(0x7F, 101), Status.BAD_OPCODE),
        ("info-with-payload", encode_request(Opcode.INFO, 102, b"\x00"), Status.BAD_LENGTH),
        ("run-short", encode_request(Opcode.RUN, 103, b"\x01"), Status.BAD_LENGTH),
        ("write-count-vs-length", encode_request(
            Opcode.WRITE, 104, pack_access(Region.ACT, 0, 2) + pack_words(act, [5])),
         Status.BAD_LENGTH),
        ("read-count-zero", encode_request(Opcode.READ, 105, pack_access(Region.ACT, 0, 0)),
         Status.BAD_LENGTH),
        ("read-more-than-payload", encode_request(
            Opcode.READ, 106, pack_access(Region.ACT, 0, read_chunk_words(act, MAX_PAYLOAD) + 1)),
         Status.BAD_LENGTH),
        ("region-5", encode_request(Opcode.WRITE, 107, pack_access(5, 0, 1) + bytes(3)),
         Status.BAD_REGION),
        ("write-past-end", encode_request(
            Opcode.WRITE, 108, pack_write(act, act.depth - 2, [7, 8, 9])), Status.BAD_ADDRESS),
        ("read-past-end", encode_request(Opcode.READ, 109, pack_read(prog, 1, prog.depth)),
         Status.BAD_ADDRESS),
        ("addr-huge", encode_request(Opcode.WRITE, 110, pack_write(act, 0xFFFF_FFFF, [1])),
         Status.BAD_ADDRESS),
        ("run-batch-zero", encode_request(Opcode.RUN, 111, pack_run(0)), Status.BAD_BATCH),
        ("run-oversize-batch", encode_request(Opcode.RUN, 112, pack_run(config.acc_depth + 1)),
         Status.BAD_BATCH),
        ("run-before-program", encode_request(Opcode.RUN, 113, pack_run(1)), Status.NO_PROGRAM),
    ]
