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
    StreamArgs,
    encode_request,
    pack_access,
    pack_classes,
    pack_layout,
    pack_read,
    pack_run,
    pack_words,
    pack_write,
    packed_bytes,
    read_chunk_words,
    unpack_counters,
    unpack_words,
    write_chunk_words,
)

__all__ = ["RequestLink", "check_memories", "decode_request", "decode_response", "error_cases",
           "fill_regions", "pack_info", "random_words", "stream_error_cases"]


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
        *stream_error_cases(config),
    ]


def _stream(region, *, addr=0, runs=1, run=1, lead=0, pitch=None, bits=1, data=None):
    """A LOAD or FETCH payload of any fields; LOAD's data bytes default to the right count."""
    pitch = lead + run if pitch is None else pitch
    args = pack_layout(StreamArgs, region=region, addr=addr, runs=runs, run=run, lead=lead,
                       pitch=pitch, bits=bits)
    return args + (bytes(packed_bytes(runs * run, bits)) if data is None else data)


def stream_error_cases(config):
    """Return the malformed LOAD, FETCH and CLASSES requests of :func:`error_cases`."""
    geo = regions(config)
    act, out = geo[Region.ACT], geo[Region.OUTPUT]
    lanes, in_bits, acc_bits = config.act_lanes, config.in_bits, config.acc_bits
    big = MAX_PAYLOAD * 8 // (lanes * in_bits) + 1  # runs of a FETCH longer than the buffer

    def load(seq, **fields):
        return encode_request(Opcode.LOAD, seq, _stream(**fields))

    def fetch(seq, **fields):
        return encode_request(Opcode.FETCH, seq, _stream(**fields, data=b""))

    def classes(seq, *, addr=0, samples=1, pitch=4, n=4, k=1):
        return encode_request(Opcode.CLASSES, seq, pack_classes(addr, samples, pitch, n, k))

    bad_length, bad_region, bad_address = Status.BAD_LENGTH, Status.BAD_REGION, Status.BAD_ADDRESS
    return [
        ("load-args-short", encode_request(Opcode.LOAD, 120, bytes(13)), bad_length),
        ("load-output", load(121, region=Region.OUTPUT, bits=4), bad_region),
        ("load-program", load(122, region=Region.PROGRAM, bits=4), bad_region),
        ("load-region-7", load(123, region=7, bits=4), bad_region),
        ("load-bits-zero", load(124, region=Region.ACT, run=3, bits=0, data=b"\x01"),
         bad_length),
        ("load-bits-wider", load(125, region=Region.ACT, run=3, bits=in_bits + 1), bad_length),
        ("load-runs-zero", load(126, region=Region.ACT, runs=0, run=3, bits=4, data=b"\x01"),
         bad_length),
        ("load-run-zero", load(127, region=Region.ACT, run=0, pitch=3, bits=4, data=b"\x01"),
         bad_length),
        ("load-lead-past-pitch", load(128, region=Region.ACT, run=3, lead=2, pitch=4, bits=4),
         bad_length),
        ("load-data-short", load(129, region=Region.ACT, runs=2, run=3, bits=4, data=bytes(2)),
         bad_length),
        ("load-data-long", load(130, region=Region.ACT, runs=2, run=3, bits=4, data=bytes(4)),
         bad_length),
        ("load-past-end", load(131, region=Region.ACT, addr=act.depth - 1, run=lanes + 1,
                               bits=in_bits), bad_address),
        ("load-addr-huge", load(132, region=Region.ACT, addr=0xFFFF_FFFF, bits=2), bad_address),
        ("fetch-with-data", encode_request(Opcode.FETCH, 133, _stream(Region.ACT, bits=2)
                                           + b"\x00"), bad_length),
        ("fetch-weight", fetch(134, region=Region.WEIGHT, bits=2), bad_region),
        ("fetch-output-bits-wider", fetch(135, region=Region.OUTPUT, bits=acc_bits + 1),
         bad_length),
        ("fetch-more-than-payload", fetch(136, region=Region.ACT, runs=big, run=lanes,
                                          bits=in_bits), bad_length),
        ("fetch-output-past-end", fetch(137, region=Region.OUTPUT, addr=out.depth - 1, runs=2,
                                        run=1, pitch=config.cols, bits=acc_bits), bad_address),
        ("fetch-pitch-past-end", fetch(138, region=Region.ACT, addr=act.depth - 2, run=1,
                                       pitch=2 * lanes + 1, bits=in_bits), bad_address),
        ("classes-short", encode_request(Opcode.CLASSES, 139, bytes(11)), bad_length),
        ("classes-samples-zero", classes(140, samples=0), bad_length),
        ("classes-n-zero", classes(141, n=0), bad_length),
        ("classes-k-zero", classes(142, k=0), bad_length),
        ("classes-k-past-n", classes(143, k=5), bad_length),
        ("classes-n-past-pitch", classes(144, n=5, pitch=4), bad_length),
        ("classes-more-than-payload", classes(145, samples=MAX_PAYLOAD // 2 + 1, k=2),
         bad_length),
        ("classes-past-end", classes(146, addr=out.depth - 1, samples=2, pitch=config.cols,
                                     n=1), bad_address),
        ("classes-addr-huge", classes(147, addr=0xFFFF_FFF0), bad_address),
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
