"""FrameEngine in the Amaranth simulator against a behavioural accelerator.

The accelerator here (:class:`support.FakeAccelerator`) keeps every region in a real
``amaranth.lib.memory`` memory and has a busy flag that stays high for a fixed number of cycles
after ``start``; a plain Python dict of lists (:class:`MemoryModel`) says what the memories must
hold. Requests are built with the host helpers of :mod:`hwgen.protocol`; the byte link
(:class:`support.ByteLink`) is gateware, with random idle gaps before request bytes and random
backpressure on responses, so that Python runs once per byte rather than once per cycle.
Responses are decoded with the host's decoder.
"""

import gc
import random
import struct
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable
from support import BUSY_CYCLES, TINY, LinkDriver, rows_per_run, run_bench
from support import build_frame_bench as build

from host.frames import ResponseDecoder
from host.info import unpack_info
from hwgen.config import AcceleratorConfig
from hwgen.link.frame import FrameEngine
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    FRAME_OVERHEAD,
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    RX_FIFO,
    SYNC_REQUEST,
    Features,
    Opcode,
    Status,
    encode_request,
    pack_access,
    pack_read,
    pack_run,
    pack_words,
    pack_write,
    unpack_counters,
    unpack_words,
)

# Other widths and depths: 4-bit operands, 16-bit accumulators, output-stationary.
NARROW = AcceleratorConfig(rows=4, cols=2, dataflow="os", in_bits=4, w_bits=4, acc_bits=16,
                           mult_bits=8, max_k=64, act_depth=16, weight_depth=16, param_depth=2,
                           acc_depth=4, out_depth=16, prog_depth=2)


class MemoryModel:
    """What the memories must hold: ``{Region: [word, ...]}``, all zero at first."""

    def __init__(self, config):
        self.words = {r: [0] * g.depth for r, g in regions(config).items()}

    def write(self, region, addr, words):
        self.words[region][addr:addr + len(words)] = list(words)


class Bench:
    """Drive a :func:`build` design from a script; see :meth:`run`.

    Parameters
    ----------
    gap, stall : float
        Probability of an idle cycle before a request byte, and of ``o_stream.ready`` low in a
        cycle.
    """

    POLL = 8  # cycles between looks at the received bytes

    def __init__(self, config=TINY, *, seed=0, gap=0.3, stall=0.3, core_period=None, **kwargs):
        self.config = config
        self.geometry = regions(config)
        # With `core_period` (the link's clock period is 1): the target in its own domain.
        self.core_period = core_period
        self.top, self.engine, self.target, self.link = build(
            config, seed=seed + 1, bridged=core_period is not None, **kwargs)
        self.driver = LinkDriver(self.link, gap, stall)
        self.rng = random.Random(seed)
        self.decoder = ResponseDecoder()
        self.frames = []
        self.seq = 0
        self.model = MemoryModel(config)

    def run(self, script):
        """Run ``async def script(bench, ctx)`` to its end; its assertions fail the test."""
        run_bench(self, script)

    async def cycles(self, ctx, n):
        await ctx.delay(n * 1e-6)

    async def send(self, ctx, data):
        """Send ``data`` and wait until its last byte was taken."""
        self.driver.push(ctx, data)
        while not self.driver.sent(ctx):
            await self.cycles(ctx, 2)

    async def receive(self, ctx, n=1, budget=20_000):
        """Return the next ``n`` response frames; fail if they take more than ``budget``."""
        rx = self.driver.rx
        for _ in range(budget // self.POLL):
            if rx:
                self.frames += self.decoder.feed(bytes(rx))
                rx.clear()
            if len(self.frames) >= n:
                frames, self.frames = self.frames[:n], self.frames[n:]
                return frames
            await self.cycles(ctx, self.POLL)
        raise AssertionError(f"no response within {budget} cycles ({len(self.frames)} of {n})")

    async def silence(self, ctx, cycles):
        """Wait ``cycles`` and check that no response byte came."""
        await self.cycles(ctx, cycles)
        rx = self.driver.rx
        assert not rx and not self.frames, f"unexpected response bytes {bytes(rx).hex()}"

    def cycle(self, ctx):
        return ctx.get(self.link.cycle)

    def next_seq(self):
        self.seq = (self.seq + 7) & 0xFF  # not +1, so that a stuck seq register shows
        return self.seq

    async def request(self, ctx, opcode, payload=b"", status=Status.OK):
        """Send one request; check the response's echo, CRC and ``status``; return its payload."""
        seq = self.next_seq()
        self.driver.push(ctx, encode_request(opcode, seq, payload))
        (frame,) = await self.receive(ctx)
        assert (frame.opcode, frame.seq, frame.crc_ok) == (opcode, seq, True)
        assert frame.status == status, f"{opcode!r}: {frame.status!r}, expected {status!r}"
        if status != Status.OK:
            assert frame.payload == b""
        return frame.payload

    async def write(self, ctx, region, addr, words):
        await self.request(ctx, Opcode.WRITE, pack_write(self.geometry[region], addr, words))
        self.model.write(region, addr, words)

    async def read(self, ctx, region, addr, count):
        geometry = self.geometry[region]
        raw = await self.request(ctx, Opcode.READ, pack_read(geometry, addr, count))
        assert len(raw) == count * geometry.word_bytes
        return unpack_words(geometry, raw)

    async def counters(self, ctx):
        return unpack_counters(await self.request(ctx, Opcode.COUNTERS))

    def check_memory(self, ctx):
        assert self.target.dump(ctx) == self.model.words
        assert ctx.get(self.target.violations) == 0

    def random_words(self, region, count):
        return [self.rng.getrandbits(self.geometry[region].word_bits) for _ in range(count)]

    async def fill(self, ctx):
        """Write random words to every region (so that a stray write shows)."""
        for region, g in self.geometry.items():
            count = min(g.depth, 20)
            await self.write(ctx, region, 0, self.random_words(region, count))


# -- INFO ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [TINY, NARROW], ids=["tiny", "narrow"])
def test_info(config):
    bench = Bench(config, max_payload=200, baud=3_000_000)

    async def script(bench, ctx):
        payload = await bench.request(ctx, Opcode.INFO)
        # The documented layout, decoded independently of hwgen.protocol.
        fixed = struct.unpack_from("<BQBBBBBBBHIIIBB", payload)
        assert fixed == (PROTOCOL_VERSION, config.hash_int, config.rows, config.cols,
                         ("ws", "os").index(config.dataflow), config.in_bits, config.w_bits,
                         config.acc_bits, config.mult_bits, 200, config.acc_depth, 3_000_000,
                         RX_FIFO, int(Features.ALL), len(Region))
        records = [struct.unpack_from("<HI", payload, 32 + 6 * k) for k in range(len(Region))]
        assert records == [(regions(config)[r].word_bits, regions(config)[r].depth)
                           for r in Region]
        assert len(payload) == 32 + 6 * len(Region)
        info = unpack_info(payload)
        assert info.mismatches(config) == []
        assert info.max_payload == 200 and info.baud == 3_000_000

    bench.run(script)


# -- WRITE / READ --------------------------------------------------------------------------------

# Across HostPortBridge: the accelerator's clock 3.5x the link's (a board's PLL), or slower.
BRIDGED = [0.29, 1.37]


@pytest.mark.parametrize(("config", "gap", "stall", "core_period", "wide"), [
    (TINY, 0.0, 0.0, None, False),
    (TINY, 0.4, 0.5, None, False),
    (NARROW, 0.3, 0.3, None, False),
    (TINY, 0.0, 0.0, BRIDGED[0], False),
    (NARROW, 0.3, 0.3, BRIDGED[1], False),
    (TINY, 0.0, 0.0, None, True),
    (NARROW, 0.3, 0.3, BRIDGED[1], True),
], ids=["tiny-streaming", "tiny-gaps-backpressure", "narrow", "tiny-bridged-core-faster",
        "narrow-bridged-core-slower", "tiny-wide-streaming", "narrow-wide-bridged"])
def test_write_read_every_region(config, gap, stall, core_period, wide):
    bench = Bench(config, gap=gap, stall=stall, seed=hash((gap, stall)) & 0xFFFF,
                  core_period=core_period, wide=wide)

    async def script(bench, ctx):
        rng = bench.rng
        for region, g in bench.geometry.items():
            for _ in range(2):
                count = rng.randint(1, min(g.depth, 8))
                addr = rng.randint(0, g.depth - count)
                words = bench.random_words(region, count)
                words[0] = (1 << g.word_bits) - 1  # every bit of the word set
                await bench.write(ctx, region, addr, words)
                assert await bench.read(ctx, region, addr, count) == words
            # the last word of the region, and a whole-region read against the model
            await bench.write(ctx, region, g.depth - 1, bench.random_words(region, 1))
            assert await bench.read(ctx, region, 0, g.depth) == bench.model.words[region]
        bench.check_memory(ctx)

    bench.run(script)


def test_back_to_back_requests():
    # Two requests sent without waiting: the engine must hold ready low while it answers the
    # first and must not lose a byte of the second.
    bench = Bench(stall=0.6)

    async def script(bench, ctx):
        g = bench.geometry[Region.WEIGHT]
        words = bench.random_words(Region.WEIGHT, 5)
        first = encode_request(Opcode.WRITE, 1, pack_write(g, 3, words))
        second = encode_request(Opcode.READ, 2, pack_read(g, 3, 5))
        await bench.send(ctx, first + second)
        a, b = await bench.receive(ctx, 2)
        assert (a.opcode, a.seq, a.status) == (Opcode.WRITE, 1, Status.OK)
        assert (b.opcode, b.seq, b.status) == (Opcode.READ, 2, Status.OK)
        assert unpack_words(g, b.payload) == words

    bench.run(script)


# -- errors --------------------------------------------------------------------------------------

def _corrupt_payload_crc(frame):
    return frame[:-1] + bytes([frame[-1] ^ 0x01])


def _error_cases(geo):
    """Yield ``(name, request bytes, expected status)``; none may change any state."""
    act, prog = geo[Region.ACT], geo[Region.PROGRAM]
    good_write = encode_request(Opcode.WRITE, 200, pack_write(act, 0, [1, 2, 3]))
    yield "bad-crc", _corrupt_payload_crc(good_write), Status.BAD_CRC
    flipped = bytearray(good_write)
    flipped[12] ^= 0x80  # a bit of the first word
    yield "bad-crc-in-payload", bytes(flipped), Status.BAD_CRC
    yield "unknown-opcode", encode_request(0x7F, 201, b""), Status.BAD_OPCODE
    yield "opcode-zero", encode_request(0x00, 202, b"\x01"), Status.BAD_OPCODE
    yield "info-with-payload", encode_request(Opcode.INFO, 203, b"\x00"), Status.BAD_LENGTH
    yield "run-short", encode_request(Opcode.RUN, 204, b"\x01"), Status.BAD_LENGTH
    yield "read-long", encode_request(Opcode.READ, 205, pack_read(act, 0, 1) + b"\x00"), \
        Status.BAD_LENGTH
    yield "write-short", encode_request(Opcode.WRITE, 206, pack_access(Region.ACT, 0, 1)[:5]), \
        Status.BAD_LENGTH
    yield "write-count-vs-length", encode_request(
        Opcode.WRITE, 207, pack_access(Region.ACT, 0, 2) + pack_words(act, [5])), \
        Status.BAD_LENGTH
    yield "write-extra-bytes", encode_request(
        Opcode.WRITE, 221, pack_access(Region.ACT, 0, 1) + pack_words(act, [5, 6])), \
        Status.BAD_LENGTH
    yield "write-count-zero", encode_request(Opcode.WRITE, 208, pack_access(Region.ACT, 0, 0)), \
        Status.BAD_LENGTH
    yield "read-count-zero", encode_request(Opcode.READ, 209, pack_access(Region.ACT, 0, 0)), \
        Status.BAD_LENGTH
    yield "read-too-much", encode_request(
        Opcode.READ, 210, pack_access(Region.ACT, 0, MAX_PAYLOAD // act.word_bytes + 1)), \
        Status.BAD_LENGTH
    yield "write-over-max-payload", encode_request(
        Opcode.WRITE, 211, pack_access(Region.ACT, 0, 342) + bytes(3 * 342)), Status.BAD_LENGTH
    yield "region-5", encode_request(Opcode.WRITE, 212, pack_access(5, 0, 1) + bytes(3)), \
        Status.BAD_REGION
    yield "region-255", encode_request(Opcode.READ, 213, pack_access(255, 0, 1)), \
        Status.BAD_REGION
    yield "write-past-end", encode_request(
        Opcode.WRITE, 214, pack_write(act, act.depth - 2, [7, 8, 9])), Status.BAD_ADDRESS
    yield "read-past-end", encode_request(Opcode.READ, 215, pack_read(prog, 1, prog.depth)), \
        Status.BAD_ADDRESS
    yield "addr-huge", encode_request(Opcode.READ, 216, pack_read(act, 0xFFFF_FFFF, 1)), \
        Status.BAD_ADDRESS
    yield "addr-bit-20", encode_request(Opcode.WRITE, 217, pack_write(act, 1 << 20, [1])), \
        Status.BAD_ADDRESS
    yield "run-batch-zero", encode_request(Opcode.RUN, 218, pack_run(0)), Status.BAD_BATCH
    yield "run-batch-too-big", encode_request(Opcode.RUN, 219, pack_run(TINY.acc_depth + 1)), \
        Status.BAD_BATCH
    yield "run-before-program", encode_request(Opcode.RUN, 220, pack_run(1)), Status.NO_PROGRAM


@pytest.mark.parametrize("core_period", [None, BRIDGED[0]], ids=["direct", "bridged"])
def test_errors_change_nothing(core_period):
    bench = Bench(core_period=core_period)

    async def script(bench, ctx):
        await bench.fill(ctx)
        await bench.request(ctx, Opcode.RESET)  # keeps the memories, forgets the program
        before = await bench.counters(ctx)
        for name, request, status in _error_cases(bench.geometry):
            await bench.send(ctx, request)
            (frame,) = await bench.receive(ctx)
            assert (frame.status, frame.seq, frame.crc_ok) == (status, request[2], True), name
            assert frame.payload == b"", name
            # the next good request is served
            await bench.request(ctx, Opcode.INFO)
        after = await bench.counters(ctx)
        assert (after.runs, after.program_loaded, after.busy) == (0, False, False)
        assert (before.runs, before.program_loaded) == (0, False)
        assert ctx.get(bench.target.starts) == 0
        bench.check_memory(ctx)

    bench.run(script)


@pytest.mark.parametrize("core_period", [None, *BRIDGED],
                         ids=["direct", "bridged-core-faster", "bridged-core-slower"])
def test_busy(core_period):
    bench = Bench(busy_cycles=3000, core_period=core_period)

    async def script(bench, ctx):
        await bench.fill(ctx)
        prog = bench.geometry[Region.PROGRAM]
        await bench.write(ctx, Region.PROGRAM, 0, bench.random_words(Region.PROGRAM, 1))
        assert (await bench.counters(ctx)).program_loaded
        await bench.request(ctx, Opcode.RUN, pack_run(TINY.acc_depth))
        assert ctx.get(bench.target.last_batch) == TINY.acc_depth
        counters = await bench.counters(ctx)
        assert counters.busy and counters.runs == 1
        # while busy: RUN, WRITE and READ are refused; INFO and COUNTERS are served
        await bench.request(ctx, Opcode.RUN, pack_run(1), status=Status.BUSY)
        await bench.request(ctx, Opcode.WRITE, pack_write(prog, 0, [5]), status=Status.BUSY)
        await bench.request(ctx, Opcode.READ, pack_read(prog, 0, 1), status=Status.BUSY)
        await bench.request(ctx, Opcode.INFO)
        # an argument error is still reported as such while busy
        await bench.request(ctx, Opcode.RUN, pack_run(0), status=Status.BAD_BATCH)
        assert (await bench.counters(ctx)).busy
        assert ctx.get(bench.target.starts) == 1
        while (await bench.counters(ctx)).busy:
            pass
        bench.check_memory(ctx)

    bench.run(script)


@pytest.mark.parametrize("core_period", [None, *BRIDGED],
                         ids=["direct", "bridged-core-faster", "bridged-core-slower"])
def test_counters_and_reset(core_period):
    bench = Bench(core_period=core_period)

    async def script(bench, ctx):
        await bench.write(ctx, Region.PROGRAM, 0, bench.random_words(Region.PROGRAM, 2))
        await bench.request(ctx, Opcode.RUN, pack_run(3))
        assert ctx.get(bench.target.last_batch) == 3
        while (counters := await bench.counters(ctx)).busy:
            pass
        assert counters.runs == 1 and counters.program_loaded
        rows = rows_per_run(BUSY_CYCLES)
        assert (counters.cycles, counters.busy_cycles) == (BUSY_CYCLES, rows)
        assert counters.macs == rows * TINY.rows * TINY.cols
        # a second run adds up
        await bench.request(ctx, Opcode.RUN, pack_run(1))
        while (counters := await bench.counters(ctx)).busy:
            pass
        assert (counters.runs, counters.cycles) == (2, 2 * BUSY_CYCLES)
        assert (counters.busy_cycles, counters.macs) == (2 * rows, 2 * rows * TINY.rows * TINY.cols)

        await bench.request(ctx, Opcode.RESET)
        counters = await bench.counters(ctx)
        assert (counters.runs, counters.program_loaded, counters.busy) == (0, False, False)
        assert (counters.cycles, counters.busy_cycles, counters.macs) == (0, 0, 0)
        # the program must be written again; memory stays
        await bench.request(ctx, Opcode.RUN, pack_run(1), status=Status.NO_PROGRAM)
        bench.check_memory(ctx)
        await bench.write(ctx, Region.PROGRAM, 3, bench.random_words(Region.PROGRAM, 1))
        await bench.request(ctx, Opcode.RUN, pack_run(2))
        assert ctx.get(bench.target.starts) == 3

    bench.run(script)


# -- framing -------------------------------------------------------------------------------------

def test_garbage_between_frames_is_skipped():
    bench = Bench()

    def garbage(rng, n):
        # False sync bytes included, but none in the last header's worth of bytes: a false sync
        # that close to a frame swallows the frame's start (covered by the next test).
        out = [rng.choice([SYNC_REQUEST, rng.getrandbits(8)]) for _ in range(n)]
        tail = [rng.choice([b for b in range(256) if b != SYNC_REQUEST]) for _ in range(8)]
        return bytes(out + tail)

    async def script(bench, ctx):
        rng = bench.rng
        for k in range(6):
            await bench.send(ctx, garbage(rng, rng.randint(0, 40)))
            words = bench.random_words(Region.ACT, k + 1)
            await bench.write(ctx, Region.ACT, k, words)
            await bench.send(ctx, garbage(rng, 5))
            assert await bench.read(ctx, Region.ACT, k, k + 1) == words
        await bench.send(ctx, garbage(rng, 30))
        await bench.silence(ctx, 400)  # a false header is dropped or times out: no answer
        assert unpack_info(await bench.request(ctx, Opcode.INFO)).rows == TINY.rows
        assert bench.decoder.skipped == 0
        bench.check_memory(ctx)

    bench.run(script)


def test_false_sync_right_before_a_frame():
    # The engine has no memory to rescan: the frame whose start was taken for the rest of a false
    # header is lost without an answer (the host retries), and the one after it is served.
    bench = Bench()

    async def script(bench, ctx):
        lost = encode_request(Opcode.INFO, 1)
        await bench.send(ctx, bytes([SYNC_REQUEST, 0x11]) + lost)
        await bench.silence(ctx, 400)
        await bench.request(ctx, Opcode.INFO)

    bench.run(script)


@pytest.mark.parametrize("cut", [1, 5, 8, 12, -3, -1])
def test_truncated_frame_times_out(cut):
    bench = Bench(timeout_cycles=100)

    async def script(bench, ctx):
        act = bench.geometry[Region.ACT]
        frame = encode_request(Opcode.WRITE, 9, pack_write(act, 4, [0xABCDEF, 0x123456]))
        await bench.send(ctx, frame[:cut])
        await bench.silence(ctx, 101)  # just past the timeout: parser back to hunting
        await bench.write(ctx, Region.ACT, 0, [1, 2])
        assert await bench.read(ctx, Region.ACT, 0, 6) == [1, 2, 0, 0, 0, 0]
        bench.check_memory(ctx)

    bench.run(script)


@pytest.mark.parametrize(("gap", "answered"), [(11, True), (12, False)])
def test_idle_gaps_up_to_the_timeout(gap, answered):
    # timeout_cycles=12: eleven idle cycles between bytes keep the frame, twelve drop it.
    bench = Bench(timeout_cycles=12, gap=0.0, stall=0.0)

    async def script(bench, ctx):
        ctx.set(bench.link.fixed_gap, gap)
        await bench.send(ctx, encode_request(Opcode.RUN, 3, pack_run(1)))
        if answered:
            (frame,) = await bench.receive(ctx)
            assert (frame.seq, frame.status) == (3, Status.NO_PROGRAM)
        else:
            await bench.silence(ctx, 200)
        ctx.set(bench.link.fixed_gap, 0)
        await bench.request(ctx, Opcode.INFO)

    bench.run(script)


def test_bad_header_crc_gets_no_answer():
    bench = Bench()

    async def script(bench, ctx):
        frame = bytearray(encode_request(Opcode.INFO, 5))
        frame[6] ^= 0x40  # header CRC
        await bench.send(ctx, bytes(frame))
        await bench.silence(ctx, 400)
        await bench.request(ctx, Opcode.INFO)

    bench.run(script)


def test_response_is_payload_plus_overhead():
    bench = Bench(stall=0.0)

    async def script(bench, ctx):
        bench.driver.push(ctx, encode_request(Opcode.RESET, 77))
        await bench.cycles(ctx, 300)
        assert len(bench.driver.rx) == FRAME_OVERHEAD
        bench.driver.push(ctx, encode_request(Opcode.COUNTERS, 78))
        await bench.cycles(ctx, 300)
        assert len(bench.driver.rx) == 2 * FRAME_OVERHEAD + 29

    bench.run(script)


# -- parameters ----------------------------------------------------------------------------------

def test_parameter_checks():
    # Refused engines still count as unused elaboratables; their warnings are not the point.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(TypeError, match="AcceleratorConfig"):
            FrameEngine({"rows": 2})
        with pytest.raises(ValueError, match="timeout_cycles"):
            FrameEngine(TINY, timeout_cycles=0)
        with pytest.raises(ValueError, match="timeout_cycles"):
            FrameEngine(TINY, timeout_cycles=True)
        widest = max(g.word_bytes for g in regions(TINY).values())
        with pytest.raises(ValueError, match=f"max_payload must be an int in {7 + widest}"):
            FrameEngine(TINY, max_payload=6 + widest)
        with pytest.raises(ValueError, match="max_payload"):
            FrameEngine(TINY, max_payload=1 << 16)
        engine = FrameEngine(TINY, max_payload=7 + widest)
        assert engine.max_payload == 7 + widest
        assert engine.timeout_cycles == TINY.clock_hz // 10
        del engine
        gc.collect()


# -- the whole device across the bridge ----------------------------------------------------------

@pytest.mark.parametrize("joined", ["bridged", "relayed"])
def test_device_computes_a_network_exactly(joined):
    """``Device(link_clock_hz=...)``: the real accelerator behind the bridge, its clock 3.5x
    the link's, loads a network over frames, runs it and answers with the reference's output;
    its counters (snapshots across the bridge) equal the cycle model. ``relayed``: a large
    ECP5's device (``Registers.ARRAY``), one clock, the engine's port relayed through
    registers (:func:`hwgen.device.host_access.relay_host`)."""
    import numpy as np

    import hwgen
    from hwgen.cycles import program_cycles
    from hwgen.device import Device
    from hwgen.implementation import Implementation, Registers
    from sim.netgen import random_input, random_network

    cfg = AcceleratorConfig(rows=2, cols=2, act_depth=64, weight_depth=64, param_depth=8,
                            acc_depth=8, out_depth=16, prog_depth=4, max_k=32)
    rng = np.random.default_rng(11)
    net = random_network(rng, cfg, layers=2, max_width=6, raw=False)
    prog = hwgen.compile(net, cfg)
    m = min(prog.batch, 3)
    x = random_input(rng, cfg, m, net.layers[0].in_features)
    if joined == "bridged":
        implementation = None
        device = Device(cfg, link="stream", link_clock_hz=cfg.clock_hz // 4)
    else:
        implementation = Implementation(registers=Registers.ARRAY)
        device = Device(cfg, link="stream", implementation=implementation)
    bench = Bench(cfg, gap=0.2, stall=0.2, core_period=0.29 if joined == "bridged" else None,
                  device=device)

    async def script(bench, ctx):
        for region, (base, words) in prog.images.items():
            await bench.write(ctx, region, base, [int(w) for w in words])
        await bench.write(ctx, Region.ACT, prog.input.base, [int(w) for w in prog.pack_input(x)])
        # RESET clears the counters across the bridge and forgets the program: load it again.
        await bench.request(ctx, Opcode.RESET)
        for region, (base, words) in prog.images.items():
            if region == Region.PROGRAM:
                await bench.write(ctx, region, base, [int(w) for w in words])
        await bench.request(ctx, Opcode.RUN, pack_run(m))
        while (counters := await bench.counters(ctx)).busy:
            pass
        region, base, n_words = prog.output_words(m)
        got = prog.unpack_output(await bench.read(ctx, region, base, n_words), m)
        np.testing.assert_array_equal(got, net.forward(x))
        assert counters.runs == 1
        assert counters.cycles == program_cycles(prog, m, implementation=implementation)
        tiles = sum(d["k_tiles"] * d["n_tiles"] for d in prog.descriptors)
        assert (counters.busy_cycles, counters.macs) == (m * tiles, m * prog.padded_macs_per_row)

    bench.run(script)


@pytest.mark.parametrize("bad", [0, -5, 1.5e6, True, "12e6"])
def test_device_refuses_a_bad_link_clock(refused, bad):
    from hwgen.device import Device

    refused(r"link_clock_hz must be a positive int or None",
            lambda: Device(TINY, link="stream", link_clock_hz=bad))
