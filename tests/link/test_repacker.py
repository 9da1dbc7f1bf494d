"""hwgen.link.repacker.Repacker alone, bit-serial and wide: random element streams converted
both ways in Amaranth simulation, with random stalls on both streams, against sim.wire_streams
(the InProcessDevice's LOAD and FETCH, on a dictionary memory); the wide one also with its
``serial`` input set, and at a byte a cycle where elements and lanes are whole bytes."""

import random

import pytest
from amaranth.sim import Simulator
from support import TINY

from hwgen.config import AcceleratorConfig
from hwgen.link.repacker import Repacker
from hwgen.memmap import Region, regions
from hwgen.protocol import pack_fetch, pack_load, stream_lanes, stream_words
from sim import wire_streams

# Lanes whose words have pad bits (3 x 5 = 15 bits in 2 bytes; 3 x 13 = 39 bits in 5 bytes).
ODD = AcceleratorConfig(rows=3, cols=3, in_bits=5, w_bits=4, acc_bits=13, mult_bits=8,
                        max_k=16, act_depth=64, weight_depth=16, param_depth=2, acc_depth=4,
                        out_depth=64, prog_depth=2)


class _Memory:
    """The interpreter's read and write, on a dictionary."""

    def __init__(self, words=None):
        self.words = dict(words or {})

    def read(self, region, addr):
        return self.words[addr]

    def write(self, region, addr, word):
        self.words[addr] = word


def _shape(rng, lanes, lane_bits):
    run = rng.randint(1, 12)
    lead = rng.choice([0, 0, rng.randint(1, 5)])
    pitch = lead + run + rng.choice([0, rng.randint(1, 2 * lanes + 1)])
    runs = rng.randint(1, max(1, 60 // pitch))
    return {"runs": runs, "run": run, "lead": lead, "pitch": pitch,
            "bits": rng.randint(1, lane_bits)}


def _simulate(config, shape, region, load, data, *, rng, wide=False, serial=False, flow=0.7):
    """Run the repacker on ``data`` (bytes), each stream moving in a cycle with probability
    ``flow``; return the bytes it sends and the cycles it took."""
    dut = Repacker(config, wide=wide)
    got = bytearray()
    cycles = []

    async def bench(ctx):
        if wide:
            ctx.set(dut.serial, serial)
        ctx.set(dut.load, load)
        ctx.set(dut.output, region == Region.OUTPUT)
        for name, value in shape.items():
            ctx.set(getattr(dut, name), value)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        pos = 0
        for cycle in range(200_000):
            offer = pos < len(data) and rng.random() < flow
            ctx.set(dut.i.valid, offer)
            ctx.set(dut.i.payload, data[pos] if offer else 0)
            take = rng.random() < flow
            ctx.set(dut.o.ready, take)
            done, in_ok, out_ok, byte = ctx.get(dut.done), ctx.get(dut.i.ready), \
                ctx.get(dut.o.valid), ctx.get(dut.o.payload)
            await ctx.tick()
            if offer and in_ok:
                pos += 1
            if take and out_ok:
                got.append(byte)
            if done:
                cycles.append(cycle)
                return
        raise AssertionError("the repacker did not finish")

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return bytes(got), cycles[0]


# The bit-serial repacker, the wide one, and the wide one held to a bit a cycle.
KINDS = pytest.mark.parametrize("kind", [{}, {"wide": True}, {"wide": True, "serial": True}],
                                ids=["serial", "wide", "wide-serial"])


@KINDS
@pytest.mark.parametrize("config", [TINY, ODD], ids=["tiny", "odd"])
@pytest.mark.parametrize("seed", range(6))
def test_load_gives_the_models_words(config, seed, kind):
    rng = random.Random(seed)
    lanes, lane_bits = stream_lanes(config, Region.ACT)
    shape = _shape(rng, lanes, lane_bits)
    bits = shape["bits"]
    values = [rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
              for _ in range(shape["runs"] * shape["run"])]
    payload = pack_load(Region.ACT, 0, values, **shape)
    memory = _Memory()
    wire_streams.load(memory, config, payload)
    act = regions(config)[Region.ACT]
    words = stream_words(shape["runs"], shape["pitch"], lanes)
    expect = b"".join(memory.words[a].to_bytes(act.word_bytes, "little") for a in range(words))
    assert _simulate(config, shape, Region.ACT, 1, payload[14:], rng=rng, **kind)[0] == expect


@KINDS
@pytest.mark.parametrize("config", [TINY, ODD], ids=["tiny", "odd"])
@pytest.mark.parametrize("region", [Region.ACT, Region.OUTPUT])
@pytest.mark.parametrize("seed", range(4))
def test_fetch_gives_the_models_bytes(config, region, seed, kind):
    rng = random.Random(seed)
    lanes, lane_bits = stream_lanes(config, region)
    shape = _shape(rng, lanes, lane_bits)
    geometry = regions(config)[region]
    words = stream_words(shape["runs"], shape["pitch"], lanes)
    memory = _Memory({a: rng.getrandbits(geometry.word_bits) for a in range(words)})
    expect = wire_streams.fetch(memory, config, pack_fetch(region, 0, **shape))
    data = b"".join(memory.words[a].to_bytes(geometry.word_bytes, "little")
                    for a in range(words))
    got, _ = _simulate(config, shape, region, 0, data, rng=rng, **kind)
    assert got == expect


def test_wide_repacker_moves_a_byte_a_cycle():
    """Byte elements in byte lanes, both streams always ready: the wide repacker takes and
    gives a byte a cycle (the bit-serial one eight cycles a byte); 18-bit scores of 32-bit
    lanes take at most two cycles a word byte (a step stops at a segment's end and where the
    output register fills)."""
    rng = random.Random(0)
    shape = {"runs": 32, "run": 8, "lead": 0, "pitch": 8, "bits": 8}   # 32 words of TINY's 8
    config = AcceleratorConfig(rows=8, cols=8, act_depth=64, out_depth=64)
    values = [rng.randint(-128, 127) for _ in range(256)]
    payload = pack_load(Region.ACT, 0, values, **shape)[14:]
    words, cycles = _simulate(config, shape, Region.ACT, 1, payload, rng=rng, wide=True,
                              flow=1)
    assert len(words) == 256 and cycles <= 256 + 4
    _, serial_cycles = _simulate(config, shape, Region.ACT, 1, payload, rng=rng, flow=1)
    assert serial_cycles >= 8 * 256
    scores = dict(shape, runs=8, bits=18)             # 8 words of 32 bytes, 144 bytes out
    data = bytes(rng.getrandbits(8) for _ in range(8 * 32))
    packed, cycles = _simulate(config, scores, Region.OUTPUT, 0, data, rng=rng, wide=True,
                               flow=1)
    assert len(packed) == 144 and cycles <= 2 * 8 * 32
