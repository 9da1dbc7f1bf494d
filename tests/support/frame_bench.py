"""For the frame engine and the host client (``tests/link``, ``tests/host``): the frame engine
between a byte link and a behavioural accelerator, in the Amaranth simulator."""

from amaranth.hdl import Cat, ClockDomain, DomainRenamer, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from hwgen import AcceleratorConfig
from hwgen.link.bridge import HostPortBridge
from hwgen.link.frame import FrameEngine
from hwgen.memmap import HostPortSignature, Region, max_word_bits, regions
from hwgen.protocol import MAX_PAYLOAD

#: A small design whose every region fits a few frames (also the protocol tests' design).
TINY = AcceleratorConfig(rows=2, cols=3, act_depth=32, weight_depth=32, param_depth=4,
                         acc_depth=8, out_depth=16, prog_depth=4)


#: Cycles a FakeAccelerator run keeps it busy.
BUSY_CYCLES = 60


class FakeAccelerator(wiring.Component):
    """Accelerator side of :class:`HostPortSignature`: memory, a timed busy flag, counters.

    The regions live in one ``amaranth.lib.memory`` memory, one after the other, so that an
    address past a region's end lands in the next region and shows in the memory check (and
    because each write port costs the Python simulator dearly). Reads take one cycle; the bits
    of ``rdata`` above a region's word are zero, as the port promises. Accesses and starts while
    busy are ignored and recorded in ``violations`` (bit 0 write, bit 1 read, bit 2 start).

    Members
    -------
    host : Out(HostPortSignature(config))
    starts : Out(16)
        Programs started.
    last_batch : Out(16)
        ``batch`` of the last start.
    violations : Out(3)
    """

    def __init__(self, config, busy_cycles=BUSY_CYCLES):
        self.config = config
        self.busy_cycles = busy_cycles
        self.geometry = regions(config)
        self.base = {}
        total = 0
        for region, g in self.geometry.items():
            self.base[region] = total
            total += g.depth
        self.memory = Memory(shape=max_word_bits(config), depth=total, init=[])
        super().__init__({
            "host": Out(HostPortSignature(config)),
            "starts": Out(16),
            "last_batch": Out(16),
            "violations": Out(3),
        })

    def elaborate(self, platform):
        m = Module()
        host = self.host
        remaining = Signal(range(self.busy_cycles + 1))
        busy = remaining != 0
        m.d.comb += host.busy.eq(busy)

        m.submodules.memory = memory = self.memory
        wr = memory.write_port()
        rd = memory.read_port()
        known = Signal()
        with m.Switch(host.region):
            for region, base in self.base.items():
                with m.Case(region):
                    m.d.comb += [known.eq(1), wr.addr.eq(base + host.addr)]
        m.d.comb += [
            rd.addr.eq(wr.addr), rd.en.eq(host.re),
            wr.data.eq(host.wdata), wr.en.eq(host.we & known & ~busy),
        ]
        read_region = Signal(Region)
        m.d.sync += [host.rvalid.eq(host.re & ~busy), read_region.eq(host.region)]
        with m.Switch(read_region):
            for region, g in self.geometry.items():
                with m.Case(region):
                    m.d.comb += host.rdata.eq(rd.data[:g.word_bits])

        with m.If(host.start & ~busy):
            m.d.sync += [remaining.eq(self.busy_cycles), self.starts.eq(self.starts + 1),
                         self.last_batch.eq(host.batch)]
        with m.Elif(busy):
            m.d.sync += remaining.eq(remaining - 1)
        m.d.sync += self.violations.eq(
            self.violations | (Cat(host.we, host.re, host.start) & busy.replicate(3)))

        # A row enters the array in every other busy cycle (see rows_per_run).
        row_in = busy & remaining[0]
        with m.If(host.clear):
            m.d.sync += [host.cycles.eq(0), host.busy_cycles.eq(0), host.macs.eq(0)]
        with m.Else():
            m.d.sync += [
                host.cycles.eq(host.cycles + busy),
                host.busy_cycles.eq(host.busy_cycles + row_in),
                host.macs.eq(host.macs + row_in * (self.config.rows * self.config.cols)),
            ]
        return m

    def dump(self, ctx):
        """Return the memory as ``{Region: [word, ...]}`` (whole stored words)."""
        return {r: [ctx.get(self.memory.data[self.base[r] + a]) for a in range(g.depth)]
                for r, g in self.geometry.items()}


class ByteLink(wiring.Component):
    """Both ends of the byte link, in gateware, so that Python runs once per byte, not per cycle.

    Request bytes come from a ring buffer that Python fills (``ring`` and ``wr``); before a byte,
    ``valid`` stays low with probability ``gap_level / 256`` per cycle (a xorshift generator), and
    for ``fixed_gap`` cycles after each byte. ``o_stream.ready`` is low with probability
    ``stall_level / 256`` per cycle. Every response byte bumps ``rx_count`` and lands in
    ``rx_byte``; ``cycle`` counts clock cycles.

    Members
    -------
    o_stream : Out(stream.Signature(8))
        To the frame engine's ``i_stream``.
    i_stream : In(stream.Signature(8))
        From the frame engine's ``o_stream``.
    """

    DEPTH = 4096

    def __init__(self, seed=1):
        self.ring = Memory(shape=8, depth=self.DEPTH, init=[])
        self.wr = Signal(range(self.DEPTH))
        self.rd = Signal(range(self.DEPTH))
        self.gap_level = Signal(8)
        self.stall_level = Signal(8)
        self.fixed_gap = Signal(16)
        self.rx_count = Signal(32)
        self.rx_byte = Signal(8)
        self.cycle = Signal(64)
        self._seed = seed & 0xFFFF_FFFF or 1
        super().__init__({"o_stream": Out(stream.Signature(8)),
                          "i_stream": In(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.ring = self.ring
        port = self.ring.read_port(domain="comb")
        rnd = Signal(32, init=self._seed)
        x1 = rnd ^ (rnd << 13)[:32]
        x2 = x1 ^ (x1 >> 17)
        m.d.sync += [rnd.eq(x2 ^ (x2 << 5)[:32]), self.cycle.eq(self.cycle + 1)]

        o, i = self.o_stream, self.i_stream
        wait = Signal(16)
        # Once valid is up it stays up until the transfer, as streams require.
        held = Signal()
        valid = (self.rd != self.wr) & (wait == 0) & (held | (rnd[:8] >= self.gap_level))
        m.d.comb += [port.addr.eq(self.rd), o.payload.eq(port.data), o.valid.eq(valid)]
        m.d.sync += held.eq(valid & ~o.ready)
        with m.If(valid & o.ready):
            m.d.sync += [self.rd.eq(self.rd + 1), wait.eq(self.fixed_gap)]
        with m.Elif(wait != 0):
            m.d.sync += wait.eq(wait - 1)

        m.d.comb += i.ready.eq(rnd[8:16] >= self.stall_level)
        with m.If(i.valid & i.ready):
            m.d.sync += [self.rx_count.eq(self.rx_count + 1), self.rx_byte.eq(i.payload)]
        return m


def rows_per_run(busy_cycles):
    """Rows a :class:`FakeAccelerator` run feeds: busy counts down N .. 1, odd values feed."""
    return sum(1 for remaining in range(1, busy_cycles + 1) if remaining % 2)


def build_frame_bench(config=TINY, *, timeout_cycles=300, max_payload=MAX_PAYLOAD,
          busy_cycles=BUSY_CYCLES, seed=1, bridged=False, device=None, baud=0, wide=False):
    """Return ``(top, engine, target, link)``: the engine between the link and the target.

    ``bridged``: the link and the engine run in domain ``link``, the target in ``sync``, joined
    by a :class:`HostPortBridge` (the engine in handshake mode). ``device``: a
    :class:`hwgen.device.Device` with ``link="stream"`` and ``link_clock_hz`` replaces engine
    and target. ``wide``: the engine of a byte-stream device (prefetch and wide, see
    :class:`FrameEngine`).
    """
    link = ByteLink(seed)
    m = Module()
    if device is not None:
        # A whole Device: its streams are the link's, its domains `link` and `sync` (or
        # `sync` alone).
        m.submodules.device = device
        if device.link_clock_hz is None:
            m.submodules.link = link
        else:
            m.domains.link = ClockDomain("link")
            m.submodules.link = DomainRenamer("link")(link)
        wiring.connect(m, link.o_stream, device.i_stream)
        wiring.connect(m, device.o_stream, link.i_stream)
        return m, None, device, link
    engine = FrameEngine(config, timeout_cycles=timeout_cycles, max_payload=max_payload,
                         handshake=bridged, baud=baud, prefetch=wide, wide=wide)
    target = FakeAccelerator(config, busy_cycles)
    m.submodules.target = target
    if bridged:
        m.domains.link = ClockDomain("link")
        m.submodules.engine = DomainRenamer("link")(engine)
        m.submodules.link = DomainRenamer("link")(link)
        m.submodules.bridge = bridge = HostPortBridge(config)
        wiring.connect(m, engine.host, bridge.link)
        wiring.connect(m, bridge.core, target.host)
    else:
        m.submodules.engine = engine
        m.submodules.link = link
        wiring.connect(m, engine.host, target.host)
    wiring.connect(m, link.o_stream, engine.i_stream)
    wiring.connect(m, engine.o_stream, link.i_stream)
    return m, engine, target, link


class LinkDriver:
    """Python side of a :class:`ByteLink`: queue request bytes, collect response bytes."""

    def __init__(self, link, gap=0.3, stall=0.3):
        self.link = link
        self.gap = gap
        self.stall = stall
        self.wr = 0
        self.rx = bytearray()

    def setup(self, ctx):
        ctx.set(self.link.gap_level, round(self.gap * 256))
        ctx.set(self.link.stall_level, round(self.stall * 256))

    async def receiver(self, ctx):
        """Background testbench: wakes once per response byte."""
        seen = 0
        async for (count,) in ctx.changed(self.link.rx_count):
            # (the simulator also wakes us once at the start, with no byte)
            if count != seen:
                assert count == seen + 1, "the receiver missed a byte"
                seen = count
                self.rx.append(ctx.get(self.link.rx_byte))

    def push(self, ctx, data):
        """Queue ``data`` to be sent; returns at once."""
        depth = ByteLink.DEPTH
        free = depth - 1 - (self.wr - ctx.get(self.link.rd)) % depth
        assert len(data) <= free, f"link ring full ({len(data)} bytes, {free} free)"
        for byte in data:
            ctx.set(self.link.ring.data[self.wr], byte)
            self.wr = (self.wr + 1) % depth
        ctx.set(self.link.wr, self.wr)

    def sent(self, ctx):
        return ctx.get(self.link.rd) == self.wr


def run_bench(bench, script):
    """Simulate ``bench.top`` with ``bench.driver`` on its link and run ``async def
    script(bench, ctx)`` to its end; its assertions fail the test.

    ``bench.core_period`` ``None`` clocks everything in ``sync``; a number clocks the link at
    period 1 and the accelerator's ``sync`` at that many link periods.
    """
    sim = Simulator(bench.top)
    if bench.core_period is None:
        sim.add_clock(1e-6)
    else:
        sim.add_clock(1e-6, domain="link")
        sim.add_clock(bench.core_period * 1e-6, domain="sync")
    sim.add_testbench(bench.driver.receiver, background=True)

    async def main(ctx):
        bench.driver.setup(ctx)
        await script(bench, ctx)

    sim.add_testbench(main)
    sim.run()
