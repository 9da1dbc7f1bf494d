"""The simulated board's clock gating (hwgen.device.clock_gate, ``Device(gate_idle=True)``):
a gated domain ticks exactly as a clock enable would, and a device whose idle parts stop their
clocks answers a session of requests (a program written, LOADed, run, polled and FETCHed, with
a truncated request and garbage between) on exactly the same cycles as the ungated device,
both fed the same bytes with the same gaps and stalls, and as the program interpreter does."""

import random
import warnings

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, Signal, UnusedElaboratable
from amaranth.lib import wiring
from amaranth.sim import Simulator
from support import TINY, LinkDriver, small_dense_network
from support.frame_bench import ByteLink

import hwgen
from host.frames import ResponseDecoder
from hwgen.device.clock_gate import gate_clock
from hwgen.device.top import Device, Link
from hwgen.generate import build_top
from hwgen.memmap import regions
from hwgen.protocol import (
    Opcode,
    Status,
    encode_request,
    pack_fetch,
    pack_load,
    pack_run,
    pack_write,
    unpack_counters,
)
from hwgen.streams import fetch_chunks, load_chunks
from sim.inprocess import InProcessDevice


@pytest.mark.parametrize("linger", [0, 3])
def test_gated_domain_ticks_as_a_clock_enable(linger):
    m = Module()
    active = Signal()
    enable = gate_clock(m, "gated", active=active, linger=linger)
    ticks = Signal(16)
    m.d.gated += ticks.eq(ticks + 1)
    sim = Simulator(m)
    sim.add_clock(1e-6)
    pattern = random.Random(linger).choices([0, 1], weights=[3, 1], k=200)

    async def bench(ctx):
        expect, since = 1, 0   # the enable starts high; a first cycle of activity
        ctx.set(active, 1)
        await ctx.tick()
        assert ctx.get(ticks) == expect
        for bit in pattern:
            ctx.set(active, bit)
            await ctx.delay(0.5e-6)   # past the falling edge: the enable is taken
            since = 0 if bit else since + 1
            assert ctx.get(enable) == (since <= linger)
            await ctx.tick()
            expect += since <= linger
            assert ctx.get(ticks) == expect

    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("linger", [-1, 1.5, True, None])
def test_linger_is_checked(linger):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match=rf"^linger must be an int >= 0 \(cycles\), not "
                                             rf"{linger!r}$"):
            gate_clock(Module(), "gated", active=Signal(), linger=linger)


def test_gate_idle_needs_one_clock_and_a_device_top():
    warnings.simplefilter("ignore", UnusedElaboratable)  # (pytest restores the filters)
    with pytest.raises(ValueError, match=r"gate_idle=True needs the link and the accelerator "
                                         r"on one clock \(link_clock_hz=None\)"):
        Device(TINY, link=Link.STREAM, link_clock_hz=25_000_000, gate_idle=True)
    with pytest.raises(ValueError, match=r"^gate_idle=True is for the tops device, "
                                         r"device-stream, not top='accelerator'$"):
        build_top(TINY, "accelerator", gate_idle=True)
    gated = build_top(TINY, "device-stream", gate_idle=True)
    assert "rest" in gated.signature.members
    text = rtlil.convert(gated, name="top", emit_src=False)
    assert "wire width 1 output" in text and "\\rest" in text


class Lockstep(wiring.Component):
    """A gated and an ungated stream device on one :class:`ByteLink`: the gated one
    handshakes with the link, the other sees the same bytes and stalls; ``differ`` latches
    any cycle in which their ``ready``, ``valid``, bytes or ``busy`` are not the same, and
    ``rested`` counts the gated one's cycles at rest."""

    def __init__(self, config):
        self.link = ByteLink(seed=5)
        self.gated = Device(config, link=Link.STREAM, gate_idle=True)
        self.plain = Device(config, link=Link.STREAM)
        super().__init__({"differ": wiring.Out(1), "rested": wiring.Out(32)})

    def elaborate(self, platform):
        m = Module()
        link, a, b = self.link, self.gated, self.plain
        m.submodules.link, m.submodules.gated, m.submodules.plain = link, a, b
        wiring.connect(m, link.o_stream, a.i_stream)
        wiring.connect(m, a.o_stream, link.i_stream)
        m.d.comb += [b.i_stream.valid.eq(link.o_stream.valid),
                     b.i_stream.payload.eq(link.o_stream.payload),
                     b.o_stream.ready.eq(link.i_stream.ready)]
        differ = ((a.i_stream.ready != b.i_stream.ready) | (a.o_stream.valid != b.o_stream.valid)
                  | (a.o_stream.valid & (a.o_stream.payload != b.o_stream.payload))
                  | (a.busy != b.busy))
        with m.If(differ):
            m.d.sync += self.differ.eq(1)
        m.d.sync += self.rested.eq(self.rested + a.rest)
        return m


def test_gated_device_answers_on_the_same_cycles_as_the_ungated_one():
    config = TINY
    net = small_dense_network(config, (4, 3), last_raw=True)
    program = hwgen.compile(net, config)
    m = 5
    x = np.random.default_rng(1).integers(-128, 128, (m, 4))
    geometry = regions(config)
    top = Lockstep(config)
    driver = LinkDriver(top.link, gap=0.2, stall=0.2)
    model = InProcessDevice(config)
    requests = [(Opcode.WRITE, pack_write(geometry[region], base, words))
                for region, (base, words) in program.images.items()]
    runs, run = program.input.runs, program.input.run
    values = x.reshape(m * runs, run)
    requests += [(Opcode.LOAD, pack_load(**chunk.args(),
                                         values=values[chunk.first:chunk.first + chunk.runs]))
                 for chunk in load_chunks(program.input, m, 1024)]
    requests.append((Opcode.RUN, pack_run(m)))
    polls = [(Opcode.COUNTERS, b"")] * 3
    fetches = [(Opcode.FETCH, pack_fetch(**chunk.args()))
               for chunk in fetch_chunks(program.output, m, 1024)]
    decoder, model_decoder = ResponseDecoder(), ResponseDecoder()

    async def exchange(ctx, request, seq):
        request = encode_request(*request[:1], seq, request[1])
        driver.push(ctx, request)
        model.write(request)
        (expect,) = model_decoder.feed(model.read(1 << 20))
        frames = []
        for _ in range(200):
            # (Ticks, not delays: the bytes appear after a rising edge, as a synchronous
            # source's do; the gate takes its enable at the falling edge.)
            await ctx.tick().repeat(64)
            frames += decoder.feed(bytes(driver.rx))
            driver.rx.clear()
            if frames:
                break
        assert len(frames) == 1, f"{len(frames)} answers to {request[:12].hex()}"
        (got,) = frames
        assert (got.seq, got.status) == (seq, Status.OK)
        if got.opcode != Opcode.COUNTERS:
            assert got.payload == expect.payload, got.opcode
        return got

    async def session(ctx):
        driver.setup(ctx)
        seq = 0
        for request in requests:
            seq += 1
            await exchange(ctx, request, seq)
        for request in polls:   # the run takes a few dozen cycles: it ends among the polls
            seq += 1
            await exchange(ctx, request, seq)
        seq += 1
        assert not unpack_counters((await exchange(ctx, polls[0], seq)).payload).busy
        for request in fetches:
            seq += 1
            frame = await exchange(ctx, request, seq)
        assert frame.payload, "nothing FETCHed"
        # A request cut short (dropped at the timeout, 100 ms: skipped here by the byte
        # after it completing its header, which then fails its CRC) and garbage.
        driver.push(ctx, encode_request(Opcode.INFO, 99)[:5] + bytes(range(0, 40, 3)))
        await ctx.tick().repeat(200)
        await exchange(ctx, (Opcode.INFO, b""), seq + 1)
        assert not ctx.get(top.differ)
        assert ctx.get(top.rested) > 100, "the gated device never came to rest"

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(driver.receiver, background=True)
    sim.add_testbench(session)
    sim.run()
