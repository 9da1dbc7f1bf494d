"""The host's access to the memories: the decoding of its requests (only while idle), the read
latency of the host port, and the multiplexers that share each memory port between a block
(while busy) and the host (while idle), against naive models, with random requests."""

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator
from support import SMALL

from hwgen.config import AcceleratorConfig
from hwgen.device.host_access import HostAccess, host_write, share_read, share_write
from hwgen.memmap import HostPortSignature, Region, regions

CONFIG = AcceleratorConfig(rows=2, cols=3, **SMALL)
REGIONS = list(Region)


def _simulate(m, bench):
    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _fixture(registered):
    m = Module()
    host = HostPortSignature(CONFIG).create()
    busy = Signal()
    access = HostAccess(m, host, busy, registered=registered)
    toggle = Signal()                   # a clock domain even where everything else is comb
    m.d.sync += toggle.eq(~toggle)
    return m, host, busy, access


def _random_request(ctx, rng, host, busy, *, p_busy=0.5):
    """Set a random host request and ``busy``; return them."""
    req = SimpleNamespace(busy=int(rng.random() < p_busy), we=int(rng.integers(2)),
                          re=int(rng.integers(2)), region=REGIONS[rng.integers(len(REGIONS))],
                          addr=int(rng.integers(1 << len(host.addr))),
                          wdata=int(rng.integers(1 << 62)))
    ctx.set(busy, req.busy)
    for name in ("we", "re", "region", "addr", "wdata"):
        ctx.set(getattr(host, name), getattr(req, name))
    return req


@pytest.mark.parametrize("registered", [False, True])
def test_requests_are_decoded_only_while_idle(registered):
    """A region's write enable is high exactly while idle and the host writes that region;
    ``rd`` while idle and the host reads; ``rd_q`` is ``rd`` a cycle late (registered reads)
    or never high."""
    m, host, busy, access = _fixture(registered)
    combos = list(itertools.product((0, 1), (0, 1), (0, 1), REGIONS))

    async def bench(ctx):
        prev_rd = 0
        for b, we, re, region in combos * 2:
            ctx.set(busy, b)
            ctx.set(host.we, we)
            ctx.set(host.re, re)
            ctx.set(host.region, region)
            for r in REGIONS:
                assert ctx.get(access.we[r]) == (not b and we and r == region), (b, we, r)
            assert ctx.get(access.rd) == (not b and re)
            assert ctx.get(access.rd_q) == (prev_rd if registered else 0)
            prev_rd = int(not b and re)
            await ctx.tick()

    _simulate(m, bench)


@pytest.mark.parametrize("registered", [False, True])
def test_host_reads_answer_a_fixed_latency_later(registered):
    """``rvalid`` follows an idle ``re`` by one cycle (two with registered reads), and
    ``rdata`` is then the word of the region asked (``words``, as the memories' users fill it
    in, in the cycle of ``rvalid``), zero above that region's word."""
    m, host, busy, access = _fixture(registered)
    geo = regions(CONFIG)
    words = {r: Signal(geo[r].word_bits, name=f"word_{r.name.lower()}") for r in REGIONS}
    access.words.update(words)
    access.drive_read_data(m)
    latency = 2 if registered else 1
    rng = np.random.default_rng(7)

    async def bench(ctx):
        asked = []
        answered = 0
        for _ in range(400):
            req = _random_request(ctx, rng, host, busy, p_busy=0.3)
            values = {r: int(rng.integers(1 << min(62, geo[r].word_bits))) for r in REGIONS}
            values[REGIONS[rng.integers(len(REGIONS))]] = -1        # all ones: the top bits
            for r, v in values.items():
                ctx.set(words[r], v & ((1 << geo[r].word_bits) - 1))
            ask = asked[-latency] if len(asked) >= latency else None
            assert ctx.get(host.rvalid) == (ask is not None)
            if ask is not None:
                assert ctx.get(host.rdata) == values[ask] & ((1 << geo[ask].word_bits) - 1)
                answered += 1
            asked.append(req.region if req.re and not req.busy else None)
            await ctx.tick()
        assert answered > 100

    _simulate(m, bench)


READ_VARIANTS = [
    # (registered, exclusive, always_take, host_addr, port_en)
    (False, False, False, False, False),
    (False, True, False, False, False),
    (False, False, False, True, False),
    (True, False, False, False, False),
    (True, False, False, False, True),
    (True, False, True, True, False),
    (True, True, False, False, True),
]


@pytest.mark.parametrize(("registered", "exclusive", "always_take", "own_host_addr", "port_en"),
                         READ_VARIANTS)
def test_share_read(registered, exclusive, always_take, own_host_addr, port_en):
    """The port's address is the block's while busy, the host's (or ``host_addr``) while idle.
    Plain reads: the port reads when the block asks (busy) or the host reads (idle), not while
    the host writes this memory if ``exclusive``; the word is the port's data. Registered
    reads: the port reads but while the host writes this memory, and while busy only when
    ``port_en``; the word is a register that takes the port's data when the block says
    (``en``, busy), a cycle after the host's read (idle), or always (``always_take``)."""
    m, host, busy, access = _fixture(registered)
    region = Region.PARAM
    port = SimpleNamespace(addr=Signal(8), en=Signal(), data=Signal(16))
    addr, en, block_port_en = Signal(8), Signal(), Signal()
    other_addr = Signal(8)
    word = share_read(m, port, access, region, addr=addr, en=en,
                      port_en=block_port_en if port_en else 1, always_take=always_take,
                      exclusive=exclusive, host_addr=other_addr if own_host_addr else None,
                      name="x")
    assert access.words[region] is word
    rng = np.random.default_rng(11)

    async def bench(ctx):
        held = None           # the registered word (None: not yet taken)
        prev_rd = 0
        takes = 0
        for _ in range(500):
            req = _random_request(ctx, rng, host, busy)
            a, e, pe = int(rng.integers(256)), int(rng.integers(2)), int(rng.integers(2))
            oa, data = int(rng.integers(256)), int(rng.integers(1 << 16))
            for sig, v in ((addr, a), (en, e), (block_port_en, pe), (other_addr, oa),
                           (port.data, data)):
                ctx.set(sig, v)
            host_writes = not req.busy and req.we and req.region == region
            host_reads = not req.busy and req.re
            want_addr = a if req.busy else (oa if own_host_addr else req.addr % 256)
            assert ctx.get(port.addr) == want_addr
            if registered:
                want_en = not host_writes and (not req.busy or not port_en or pe)
                take = always_take or (e if req.busy else prev_rd)
                if held is not None:
                    assert ctx.get(word) == held
            else:
                want_en = (e if req.busy else host_reads) and not (exclusive and host_writes)
                take = False
                assert ctx.get(word) == data
            assert ctx.get(port.en) == want_en
            if take:
                held = data
                takes += 1
            prev_rd = int(host_reads)
            await ctx.tick()
        assert takes > 100 or not registered

    _simulate(m, bench)


@pytest.mark.parametrize("own_host_data", [False, True])
def test_share_write(own_host_data):
    """The block writes while busy; the host's writes of this region while idle (with its
    ``wdata`` or the word given)."""
    m, host, busy, access = _fixture(False)
    region = Region.ACT
    port = SimpleNamespace(addr=Signal(8), en=Signal(), data=Signal(8))
    addr, data, en, host_data = Signal(8), Signal(8), Signal(), Signal(8)
    share_write(m, port, access, region, addr=addr, data=data, en=en,
                host_data=host_data if own_host_data else None)
    rng = np.random.default_rng(13)

    async def bench(ctx):
        for _ in range(300):
            req = _random_request(ctx, rng, host, busy)
            a, d, e, hd = (int(rng.integers(256)), int(rng.integers(256)),
                           int(rng.integers(2)), int(rng.integers(256)))
            for sig, v in ((addr, a), (data, d), (en, e), (host_data, hd)):
                ctx.set(sig, v)
            if req.busy:
                want = (a, d, e)
            else:
                want = (req.addr % 256, hd if own_host_data else req.wdata % 256,
                        int(req.we and req.region == region))
            assert (ctx.get(port.addr), ctx.get(port.data), ctx.get(port.en)) == want
            await ctx.tick()

    _simulate(m, bench)


def test_host_write_only_while_idle():
    m, host, busy, access = _fixture(True)
    port = SimpleNamespace(addr=Signal(8), en=Signal(), data=Signal(8))
    host_write(m, port, access, Region.PROGRAM)
    rng = np.random.default_rng(17)

    async def bench(ctx):
        for _ in range(200):
            req = _random_request(ctx, rng, host, busy)
            want_en = int(not req.busy and req.we and req.region == Region.PROGRAM)
            assert ctx.get(port.en) == want_en
            assert (ctx.get(port.addr), ctx.get(port.data)) == (req.addr % 256,
                                                                req.wdata % 256)
            await ctx.tick()

    _simulate(m, bench)
