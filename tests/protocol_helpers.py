"""Helpers of the protocol's tests that no device or host needs: strict one-frame decoding, an
INFO payload built from any :class:`host.info.DeviceInfo` (a device that lies about itself),
the malformed requests every device must refuse, and a link that sends raw requests and reads
their answers back (the simulated board's tests and the in-process device's share them, so both
are held to one table and one client).

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
    unpack_counters,
    unpack_words,
    write_chunk_words,
)

__all__ = ["RequestLink", "check_memories", "decode_request", "decode_response", "error_cases",
           "fill_regions", "pack_info", "random_words"]


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
        max_payload=info.max_payload, acc_depth=info.acc_depth, baud=info.baud,
        rx_fifo=info.rx_fifo, features=int(info.features), n_regions=len(info.regions))
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


class RequestLink:
    """Raw requests to a device, each answer decoded and checked to be its own (``seq``,
    opcode, CRC). A subclass says how bytes go out (:meth:`send`) and how the answer frames
    come back (:meth:`receive`)."""

    def __init__(self):
        self.decoder = ResponseDecoder()
        self.seq = 0

    def send(self, data):
        raise NotImplementedError

    def receive(self):
        """Return the answer frames that have come, decoded."""
        raise NotImplementedError

    def request(self, opcode, payload=b"", *, raw=None):
        """Send one request (or the bytes ``raw``); return its single answer."""
        self.seq = (self.seq + 1) & 0xFF
        data = raw if raw is not None else encode_request(opcode, self.seq, payload)
        self.send(data)
        frames = self.receive()
        assert len(frames) == 1, f"{len(frames)} answers to {data[:12].hex()}..."
        frame = frames[0]
        opcode = frame.opcode.value if isinstance(frame.opcode, Opcode) else frame.opcode
        assert frame.crc_ok and (frame.seq, opcode) == (data[2], data[1])
        return frame

    def ok(self, opcode, payload=b""):
        frame = self.request(opcode, payload)
        assert frame.status == Status.OK, (opcode, frame.status)
        return frame.payload

    def read_region(self, geometry):
        words = []
        chunk = read_chunk_words(geometry, MAX_PAYLOAD)
        for addr in range(0, geometry.depth, chunk):
            n = min(chunk, geometry.depth - addr)
            words += unpack_words(geometry, self.ok(Opcode.READ, pack_read(geometry, addr, n)))
        return words

    def write_region(self, geometry, addr, words):
        chunk = write_chunk_words(geometry, MAX_PAYLOAD)
        for start in range(0, len(words), chunk):
            self.ok(Opcode.WRITE, pack_write(geometry, addr + start, words[start:start + chunk]))

    def counters(self):
        return unpack_counters(self.ok(Opcode.COUNTERS))


def random_words(rng, geometry, n):
    """Return ``n`` random words of a region of ``geometry``."""
    return [int.from_bytes(rng.bytes(geometry.word_bytes), "little")
            & ((1 << geometry.word_bits) - 1) for _ in range(n)]


def fill_regions(link, config, rng):
    """Fill every region of the device behind ``link`` with random words, then RESET (which
    keeps the memories and forgets that PROGRAM was written); return ``{Region: words}``."""
    contents = {}
    for region, geometry in regions(config).items():
        contents[region] = random_words(rng, geometry, geometry.depth)
        link.write_region(geometry, 0, contents[region])
    link.ok(Opcode.RESET)
    return contents


def check_memories(link, config, contents):
    """Check that every region reads back as ``contents``."""
    for region, geometry in regions(config).items():
        assert link.read_region(geometry) == contents[region], region.name
