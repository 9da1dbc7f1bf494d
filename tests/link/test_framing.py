"""FrameCodec alone: the request frames it finds against host.frames.RequestDecoder, the
response frames it sends against encode_response.

One testbench (``_run``) plays every neighbour of the codec in Python, once per cycle: the byte
source (random idle cycles before bytes, pauses), the command layer (it answers each request
after a random delay with a random status and payload, offered either from a model of a
synchronous ROM addressed by ``next_index`` or with random gaps, as READ fetches do) and the
byte sink (random backpressure). The requests the codec hands over must be those the host's
decoder finds in the same bytes, and the bytes it sends those ``encode_response`` builds.

The decoder rescans the bytes after a sync byte whose header fails its CRC; the codec, which
keeps no bytes, goes on hunting after that false header. The streams here keep seven non-sync
bytes before every frame that follows junk, where the two agree (``test_frame.py`` covers a
frame lost to a false sync just before it).
"""

import random
from dataclasses import dataclass, field

import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator

from host.frames import RequestDecoder
from hwgen.link.framing import FrameCodec
from hwgen.protocol import (
    HEADER_BYTES,
    SYNC_REQUEST,
    FrameHeader,
    Opcode,
    Status,
    encode_request,
    encode_response,
    unpack_layout,
)

TIMEOUT = 40
_NOT_SYNC = [b for b in range(256) if b != SYNC_REQUEST]


@dataclass
class _Answer:
    """How the testbench's command layer answers one request."""

    delay: int           # more cycles before `response.valid` (it is 2 cycles after `done`)
    status: Status
    payload: bytes
    rom: bool            # offered as a ROM read one cycle after `next_index` (else with gaps)


@dataclass
class _Seen:
    """What the testbench saw of the codec."""

    requests: list = field(default_factory=list)   # (opcode, seq, status, payload, crc_ok)
    out: bytearray = field(default_factory=bytearray)


def _run(items, answers, *, gap=0.3, stall=0.3, payload_gap=0.3, seed=0, limit=100_000):
    """Simulate a codec fed ``items`` (``("bytes", b)`` or ``("pause", cycles)``) whose
    requests get ``answers`` in order; return what was seen."""
    rng = random.Random(seed)
    dut = FrameCodec(timeout_cycles=TIMEOUT)
    i, o, rq, rs = dut.i_stream, dut.o_stream, dut.request, dut.response
    seen = _Seen()
    answers = iter(answers)

    def offers():
        """Yield what the source offers in each cycle until a byte is taken: a byte, or None
        for an idle cycle; then ``"end"``."""
        for kind, value in items:
            if kind == "pause":
                yield from [None] * value
            else:
                for byte in value:
                    while rng.random() < gap:
                        yield None
                    yield byte
        yield "end"

    async def bench(ctx):
        source = offers()
        byte = next(source)
        payload = bytearray()          # bytes since the last payload index 0
        request = None                 # header fields and payload of the last request
        answer = None                  # its answer
        wait = None                    # cycles left before `response.valid`
        taken = 0                      # payload bytes of the answer taken
        in_payload = False             # the codec asks for the answer's payload
        rom_addr = 0                   # the ROM model's registered address
        offered = False                # a payload byte was offered and not taken last cycle
        answering = False              # from `done` to the response's last byte
        sent_before = 0                # response bytes before this response
        for cycle in range(limit):
            # -- the byte source: a byte, once offered, stays until it is taken
            ctx.set(i.valid, byte not in (None, "end"))
            ctx.set(i.payload, byte if byte not in (None, "end") else 0)
            # -- the command layer
            valid = answer is not None and wait == 0
            ctx.set(rs.valid, valid)
            p_valid = False
            if answer is not None:
                data = answer.payload + b"\0"
                ctx.set(rs.status, answer.status)
                ctx.set(rs.length, len(answer.payload))
                if answer.rom:
                    p_valid, p_byte = True, data[min(rom_addr, len(data) - 1)]
                else:
                    p_valid, p_byte = offered or rng.random() >= payload_gap, data[taken]
                ctx.set(rs.payload.payload, p_byte)
            ctx.set(rs.payload.valid, p_valid)
            ctx.set(o.ready, rng.random() >= stall)
            # -- what the codec does in this cycle
            assert not (answering and ctx.get(i.ready)), f"cycle {cycle}: a byte taken early"
            took_byte = byte not in (None, "end") and ctx.get(i.ready)
            if ctx.get(rq.payload.valid):
                if ctx.get(rq.index) == 0:  # a new payload (a dropped frame's bytes go)
                    payload.clear()
                assert ctx.get(rq.index) == len(payload)
                payload.append(ctx.get(rq.payload.payload))
            if ctx.get(o.valid) and ctx.get(o.ready):
                seen.out.append(ctx.get(o.payload))
            begin = ctx.get(rs.begin)
            if begin:
                assert valid and len(answer.payload) > 0 and not in_payload
                assert len(seen.out) - sent_before == HEADER_BYTES + 2
            p_taken = p_valid and ctx.get(rs.payload.ready)
            assert not (p_taken and not in_payload), f"cycle {cycle}: payload taken early"
            if p_taken:
                assert ctx.get(rs.last) == (taken == len(answer.payload) - 1)
                taken += 1
            next_index = ctx.get(rs.next_index)
            assert next_index == (taken if in_payload else 0), f"cycle {cycle}: next_index"
            if ctx.get(rq.done):
                raw = ctx.get(Value.cast(rq.header)).to_bytes(HEADER_BYTES, "little")
                hdr = unpack_layout(FrameHeader, raw)
                length = hdr["length"]
                assert length == 0 or len(payload) == length
                request = (hdr["opcode"], hdr["seq"], hdr["status"], bytes(payload[:length]))
                payload.clear()
                answer, wait, taken, offered = next(answers), None, 0, False
                answering, sent_before = True, len(seen.out)
            elif answer is not None and wait is None:
                # the cycle after `done`: the CRC verdict is valid until the response starts
                seen.requests.append((*request, bool(ctx.get(rq.crc_ok))))
                wait = answer.delay
            elif answer is not None and wait > 0:
                wait -= 1
            if answering and len(seen.out) - sent_before == len(
                    encode_response(0, 0, answer.status, answer.payload)):
                answering = False
            in_payload = (in_payload or begin) and not (p_taken and taken == len(answer.payload))
            offered = p_valid and not p_taken
            rom_addr = next_index
            if byte is None or took_byte:
                byte = next(source)
            await ctx.tick()
            if byte == "end" and not answering and (answer is None or wait is not None):
                break
        else:
            raise AssertionError(f"the codec did not finish within {limit} cycles")
        # Nothing more may happen: a partial frame left over times out silently.
        for _ in range(2 * TIMEOUT):
            assert not ctx.get(o.valid) and not ctx.get(rq.done)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


def _expected_requests(items):
    """The requests the host's decoder finds in ``items``; a long pause drops a partial one."""
    decoder = RequestDecoder()
    found = []
    for kind, value in items:
        if kind == "pause":
            if value >= TIMEOUT:
                decoder.reset()
        else:
            found += decoder.feed(value)
    return [(_int(f.opcode), f.seq, _int(f.status), f.payload, f.crc_ok) for f in found]


def _int(code):
    """The number of an Opcode or Status, or of a code that names neither."""
    return getattr(code, "value", code)


def _random_frame(rng, *, max_length=40):
    # (some longer than 255 bytes, so that both length bytes matter)
    opcode = rng.choice([*Opcode, 0x00, 0x7F, 0xFF])
    payload = rng.randbytes(rng.choice([0, 0, 1, 2, 7, rng.randint(0, max_length),
                                        rng.randint(0, max_length), rng.randint(250, 270)]))
    return bytearray(encode_request(opcode, rng.getrandbits(8), payload))


def _random_stream(rng, n_frames):
    """Return ``(items, n_answered)``: frames, some with bad CRCs, truncated or behind
    garbage, and pauses shorter and longer than the timeout."""
    items, junk_before = [], False
    for _ in range(n_frames):
        kind = rng.choice(["good", "good", "good", "bad-payload-crc", "bad-header-crc",
                           "truncated", "garbage"])
        frame = _random_frame(rng)
        if kind == "garbage":
            items.append(("bytes", bytes(rng.choice([SYNC_REQUEST, rng.getrandbits(8)])
                                         for _ in range(rng.randint(1, 30)))))
            junk_before = True
            continue
        if junk_before:
            items.append(("bytes", bytes(rng.choice(_NOT_SYNC) for _ in range(7))))
        if kind == "bad-payload-crc":
            frame[rng.randrange(HEADER_BYTES + 2, len(frame))] ^= 1 << rng.randrange(8)
        elif kind == "bad-header-crc":
            frame[rng.randrange(1, HEADER_BYTES + 2)] ^= 1 << rng.randrange(8)
        elif kind == "truncated":
            frame = frame[:rng.randrange(1, len(frame))]
        items.append(("bytes", bytes(frame)))
        junk_before = kind in ("bad-header-crc", "truncated")
        if kind == "truncated":
            # (one more than the timeout: after a header the count starts a cycle late)
            items.append(("pause", rng.choice([TIMEOUT + 1, TIMEOUT + 2, 3 * TIMEOUT])))
        elif rng.random() < 0.2:
            # shorter than the timeout, whatever the random idle cycles add
            items.append(("pause", rng.randint(0, TIMEOUT // 4)))
    return items


def _random_answers(rng, n):
    return [_Answer(delay=rng.choice([0, 1, 3, rng.randint(0, 20)]),
                    status=rng.choice(list(Status)),
                    payload=rng.randbytes(rng.choice([0, 0, 1, 2, rng.randint(0, 60)])),
                    rom=rng.random() < 0.5)
            for _ in range(n)]


def _check(items, answers, **kwargs):
    seen = _run(items, answers, **kwargs)
    expected = _expected_requests(items)
    assert seen.requests == expected
    assert bytes(seen.out) == b"".join(
        encode_response(opcode, seq, a.status, a.payload)
        for (opcode, seq, *_), a in zip(expected, answers, strict=False))


@pytest.mark.parametrize(("gap", "stall", "payload_gap"), [
    (0.0, 0.0, 0.0), (0.3, 0.3, 0.3), (0.6, 0.7, 0.6)], ids=["streaming", "gaps", "slow"])
@pytest.mark.parametrize("seed", [1, 2])
def test_random_streams(seed, gap, stall, payload_gap):
    rng = random.Random(seed)
    items = _random_stream(rng, 40)
    _check(items, _random_answers(rng, 40), gap=gap, stall=stall, payload_gap=payload_gap,
           seed=seed)


def test_back_to_back_frames_wait_for_their_answers():
    # Three frames sent at once: each is held (ready low) until the previous answer is out.
    rng = random.Random(3)
    frames = b"".join(bytes(_random_frame(rng)) for _ in range(3))
    answers = [_Answer(delay=d, status=Status.OK, payload=rng.randbytes(9), rom=r)
               for d, r in [(0, True), (15, False), (2, True)]]
    _check([("bytes", frames)], answers, gap=0.0, stall=0.5)


@pytest.mark.parametrize(("pause", "kept"), [(TIMEOUT - 1, True), (TIMEOUT, False)])
def test_timeout_within_a_payload(pause, kept):
    # `pause` idle cycles after a payload byte: TIMEOUT - 1 keep the frame, TIMEOUT drop it.
    frame = encode_request(Opcode.WRITE, 5, bytes(range(12)))
    items = [("bytes", frame[:11]), ("pause", pause), ("bytes", frame[11:])]
    seen = _run(items, [_Answer(0, Status.OK, b"", False)], gap=0.0, stall=0.0)
    assert len(seen.requests) == (1 if kept else 0)


def test_refuses_a_bad_timeout(refused):
    for bad in (0, -1, True, 1.5, None):
        refused("timeout_cycles must be an int >= 1", lambda b=bad: FrameCodec(timeout_cycles=b))
