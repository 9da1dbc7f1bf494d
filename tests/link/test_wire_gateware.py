"""LOAD, FETCH and CLASSES on the frame engine (Amaranth simulation, a behavioural accelerator
behind it), answered byte for byte as sim.inprocess.InProcessDevice answers the same requests;
CLASSES also against NumPy's stable argsort of the scores, and the malformed requests of
protocol_helpers.stream_error_cases with their statuses and no change to memory.

(The simulated board, Verilator, is held to the same: tests/sim/board/test_wire_board.py.)
"""

import random

import numpy as np
import pytest
from protocol_helpers import stream_error_cases
from support import TINY, LinkDriver, run_bench
from support import build_frame_bench as build

from host.frames import ResponseDecoder
from hwgen.config import AcceleratorConfig
from hwgen.device.top import Device
from hwgen.implementation import Implementation
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    Features,
    Opcode,
    Status,
    encode_request,
    info_bytes,
    pack_classes,
    pack_fetch,
    pack_load,
    pack_write,
    stream_lanes,
    stream_words,
    unpack_indices,
)
from sim.inprocess import InProcessDevice

# Lanes whose words have pad bits, 13-bit scores, one region word of 39 bits in 5 bytes.
ODD = AcceleratorConfig(rows=3, cols=3, in_bits=5, w_bits=4, acc_bits=13, mult_bits=8,
                        max_k=16, act_depth=64, weight_depth=16, param_depth=2, acc_depth=4,
                        out_depth=64, prog_depth=2)


class WireBench:
    """The frame engine and an InProcessDevice given the same requests; see :meth:`run`."""

    def __init__(self, config, *, seed=0, core_period=None, features=Features.ALL, **kwargs):
        self.config = config
        self.geometry = regions(config)
        # With `core_period` (the link's clock period is 1): the accelerator in its own
        # domain behind the bridge, the engine in handshake mode.
        self.core_period = core_period
        self.top, self.engine, self.target, self.link = build(
            config, seed=seed + 1, bridged=core_period is not None and "device" not in kwargs,
            **kwargs)
        self.driver = LinkDriver(self.link, 0.2, 0.2)
        self.decoder = ResponseDecoder()
        self.model = InProcessDevice(config, features=features)
        self.model_decoder = ResponseDecoder()
        self.rng = random.Random(seed)
        self.seq = 0

    def run(self, script):
        run_bench(self, script)

    async def exchange(self, ctx, request, budget=400_000):
        """Send ``request`` (bytes of one frame) to both; check that the answers are the same
        bytes; return the decoded frame."""
        self.driver.push(ctx, request)
        self.model.write(request)
        (expect,) = self.model_decoder.feed(self.model.read(1 << 20))
        frames = []
        for _ in range(budget // 16):
            if self.driver.rx:
                frames += self.decoder.feed(bytes(self.driver.rx))
                self.driver.rx.clear()
            if frames:
                break
            await ctx.delay(16e-6)
        assert len(frames) == 1, f"{len(frames)} answers to {request[:16].hex()}"
        got = frames[0]
        assert (got.opcode, got.seq, got.status, got.payload) == (
            expect.opcode, expect.seq, expect.status, expect.payload), request[:24].hex()
        return got

    async def request(self, ctx, opcode, payload=b""):
        self.seq = (self.seq + 5) & 0xFF
        return await self.exchange(ctx, encode_request(opcode, self.seq, payload))

    async def fill(self, ctx, region, words=None):
        g = self.geometry[region]
        words = words or [self.rng.getrandbits(g.word_bits) for _ in range(g.depth)]
        chunk = 1000 // g.word_bytes
        for a in range(0, g.depth, chunk):
            frame = await self.request(ctx, Opcode.WRITE, pack_write(g, a, words[a:a + chunk]))
            assert frame.status == Status.OK

    def check_memory(self, ctx):
        """The engine's memories hold what the model's do (ACT and OUTPUT)."""
        dump = self.target.dump(ctx)
        for region in (Region.ACT, Region.OUTPUT):
            model = [self.model.interpreter.read(region, a)
                     for a in range(self.geometry[region].depth)]
            assert dump[region] == model, region.name


def _shape(rng, lanes, lane_bits, depth):
    run = rng.randint(1, 10)
    lead = rng.choice([0, rng.randint(1, 4)])
    pitch = lead + run + rng.choice([0, 0, rng.randint(1, 2 * lanes + 1)])
    runs = rng.randint(1, max(1, min(40, depth * lanes) // pitch))
    return {"runs": runs, "run": run, "lead": lead, "pitch": pitch,
            "bits": rng.randint(1, lane_bits)}


@pytest.mark.parametrize(("config", "core_period", "wide"), [
    (TINY, None, False), (ODD, None, False), (TINY, 0.7, False), (ODD, 2.3, False),
    (TINY, None, True), (ODD, 1.6, True)],
    ids=["tiny", "odd", "tiny-bridged-faster", "odd-bridged-slower", "tiny-wide",
         "odd-wide-bridged"])
def test_load_and_fetch_as_the_model(config, core_period, wide):
    bench = WireBench(config, seed=3, core_period=core_period, wide=wide)

    async def script(bench, ctx):
        rng = bench.rng
        await bench.fill(ctx, Region.ACT)
        await bench.fill(ctx, Region.OUTPUT)
        for _ in range(8):
            region = rng.choice([Region.ACT, Region.OUTPUT])
            lanes, lane_bits = stream_lanes(config, region)
            depth = bench.geometry[region].depth
            shape = _shape(rng, lanes, lane_bits, depth)
            addr = rng.randint(0, depth - stream_words(shape["runs"], shape["pitch"], lanes))
            if region == Region.ACT and rng.random() < 0.6:
                bits = shape["bits"]
                values = [rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
                          for _ in range(shape["runs"] * shape["run"])]
                frame = await bench.request(ctx, Opcode.LOAD,
                                            pack_load(region, addr, values, **shape))
            else:
                frame = await bench.request(ctx, Opcode.FETCH, pack_fetch(region, addr, **shape))
            assert frame.status == Status.OK
        bench.check_memory(ctx)

    bench.run(script)


@pytest.mark.parametrize(("config", "core_period", "wide"), [
    (TINY, None, False), (ODD, None, False), (ODD, 1.7, False), (ODD, None, True),
    (ODD, 1.7, True)],
    ids=["tiny", "odd", "odd-bridged", "odd-wide", "odd-wide-bridged"])
def test_classes_as_numpy(config, core_period, wide):
    bench = WireBench(config, seed=4, core_period=core_period, wide=wide)
    cols, acc_bits = config.cols, config.acc_bits
    out = regions(config)[Region.OUTPUT]

    async def script(bench, ctx):
        rng = np.random.default_rng(4)
        for n, spread in ((1, 3), (5, 2), (7, 1 << (acc_bits - 1)), (4, 1)):
            wps = -(-n // cols)
            pitch = wps * cols + (cols if n == 4 else 0)     # and a pitch past the scores
            samples = min(3, out.depth * cols // pitch)
            scores = rng.integers(-spread, spread, samples * pitch)
            words = [sum((int(v) & ((1 << acc_bits) - 1)) << (i * acc_bits)
                         for i, v in enumerate(scores[w * cols:(w + 1) * cols]))
                     for w in range(samples * pitch // cols)]
            await bench.fill(ctx, Region.OUTPUT, words + [0] * (out.depth - len(words)))
            for k in sorted({1, min(2, n), n}):
                frame = await bench.request(ctx, Opcode.CLASSES,
                                            pack_classes(0, samples, pitch, n, k))
                sample_scores = scores.reshape(samples, pitch)[:, :n]
                expect = np.argsort(-sample_scores, axis=1, kind="stable")[:, :k]
                assert (unpack_indices(frame.payload, samples, k, n) == expect).all()

    bench.run(script)


def test_classes_of_unaligned_samples_and_two_byte_indices():
    """Samples packed tight (``pitch == n``, so a sample starts at any lane) and ``n > 256``
    (two bytes an index)."""
    config = AcceleratorConfig(rows=2, cols=3, act_depth=32, weight_depth=32, param_depth=4,
                               acc_depth=8, out_depth=128, prog_depth=4)
    bench = WireBench(config, seed=6)
    acc_bits = config.acc_bits

    async def script(bench, ctx):
        rng = np.random.default_rng(6)
        for n, samples, ks in ((5, 7, (1, 3)), (300, 1, (1, 2))):
            scores = rng.integers(-3, 3, samples * n)
            scores = np.concatenate([scores, np.zeros(-len(scores) % 3, dtype=scores.dtype)])
            words = [sum((int(v) & ((1 << acc_bits) - 1)) << (i * acc_bits)
                         for i, v in enumerate(scores[w * 3:(w + 1) * 3]))
                     for w in range(len(scores) // 3)]
            await bench.fill(ctx, Region.OUTPUT, words + [0] * (128 - len(words)))
            for k in ks:
                frame = await bench.request(ctx, Opcode.CLASSES,
                                            pack_classes(0, samples, n, n, k))
                expect = np.argsort(-scores[:samples * n].reshape(samples, n), axis=1,
                                    kind="stable")[:, :k]
                assert (unpack_indices(frame.payload, samples, k, n) == expect).all()

    bench.run(script)


def test_classes_of_fp32_scores_rank_as_floats():
    """A bf16 design's scores are fp32 patterns: ranked as floats (negatives by magnitude,
    -Inf last, the canonical NaN above +Inf, ties to the lowest index), as the model ranks
    them."""
    config = AcceleratorConfig(dtype="bf16", rows=2, cols=2, act_depth=16, weight_depth=16,
                               param_depth=2, acc_depth=4, out_depth=16, prog_depth=2)
    bench = WireBench(config, seed=7)
    rng = np.random.default_rng(7)
    special = [np.inf, -np.inf, np.nan, 0.0, -1.5, -1.5, 2.0**-126, -3e38, 1.0]
    scores = np.concatenate([special, rng.normal(size=7) * 10.0 ** rng.integers(-3, 4, 7)])
    rng.shuffle(scores)
    n, samples = 8, 2
    patterns = scores.astype(np.float32).view(np.uint32).astype(int).tolist()
    words = [patterns[w] | patterns[w + 1] << 32 for w in range(0, len(patterns), 2)]

    def ranked(row, k):
        return sorted(range(n), key=lambda j: (not np.isnan(row[j]),
                                               0.0 if np.isnan(row[j]) else -row[j], j))[:k]

    async def script(bench, ctx):
        await bench.fill(ctx, Region.OUTPUT, words + [0] * (16 - len(words)))
        for k in (1, 3, n):
            frame = await bench.request(ctx, Opcode.CLASSES, pack_classes(0, samples, n, n, k))
            expect = [ranked(scores[s * n:(s + 1) * n].tolist(), k) for s in range(samples)]
            assert (unpack_indices(frame.payload, samples, k, n) == expect).all()

    bench.run(script)


def test_stream_errors_as_the_model():
    """Each malformed LOAD, FETCH and CLASSES gets its status and changes nothing."""
    bench = WireBench(TINY, seed=5)

    async def script(bench, ctx):
        await bench.fill(ctx, Region.ACT)
        await bench.fill(ctx, Region.OUTPUT)
        for name, request, status in stream_error_cases(TINY):
            frame = await bench.exchange(ctx, request)
            assert frame.status == status, name
        bench.check_memory(ctx)

    bench.run(script)


def test_info_reports_fifo_and_features():
    bench = WireBench(TINY)

    async def script(bench, ctx):
        frame = await bench.request(ctx, Opcode.INFO)
        assert frame.payload == info_bytes(TINY, features=Features.ALL)

    bench.run(script)


@pytest.mark.parametrize(("packed_wire", "class_output"), [(False, True), (True, False)])
def test_a_device_without_a_feature(packed_wire, class_output):
    """A Device built without LOAD and FETCH (or CLASSES) says so in INFO and answers their
    opcodes BAD_OPCODE, as the model with the same features."""
    implementation = Implementation(packed_wire=packed_wire, class_output=class_output)
    features = implementation.features
    assert features == ((Features.PACKED if packed_wire else Features.NONE)
                        | (Features.CLASSES if class_output else Features.NONE))
    device = Device(TINY, link="stream", implementation=implementation,
                    link_clock_hz=TINY.clock_hz)
    bench = WireBench(TINY, core_period=1.3, features=features, device=device)

    async def script(bench, ctx):
        frame = await bench.request(ctx, Opcode.INFO)
        assert frame.payload == info_bytes(TINY, features=features)
        await bench.fill(ctx, Region.OUTPUT)
        fetch = await bench.request(ctx, Opcode.FETCH, pack_fetch(Region.OUTPUT, 0, runs=2,
                                                                   run=3, bits=9))
        classes = await bench.request(ctx, Opcode.CLASSES, pack_classes(0, 4, 3, 3, 2))
        assert (fetch.status == Status.OK) == packed_wire
        assert (classes.status == Status.OK) == class_output
        assert Status.BAD_OPCODE in (fetch.status, classes.status)

    bench.run(script)
