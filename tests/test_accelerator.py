"""Amaranth-simulator tests of the whole-network accelerator on small configurations.

The cocotb regression (tests/test_network.py) runs many more networks on the emitted Verilog;
these check the Amaranth design itself, including the lane rotation of rows != cols, against
hwgen.nn and the cycle model.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

import hwgen
from hwgen.device.accelerator import Accelerator, collision_free_memories
from hwgen.config import AcceleratorConfig
from hwgen.cycles import program_cycles
from hwgen.memmap import Region
from hwgen.nn import requantize
from sim.netgen import random_input, random_network

SMALL = {"act_depth": 100, "weight_depth": 256, "param_depth": 32, "acc_depth": 16,
         "out_depth": 64, "prog_depth": 8}


def _run(cfg, prog, x, *more):
    """Load ``prog`` and ``x`` through the host port, run, read back; return output, counters.

    Each of ``more`` is a further batch written, run and read back after that, as a host does
    (``result["more"]``: their outputs); the counters are those after the last run.
    """
    dut = Accelerator(cfg)
    h = dut.host
    read_latency = 2 if dut.registered_reads else 1
    result = {}

    async def bench(ctx):
        async def write(region, base, words):
            ctx.set(h.region, region)
            ctx.set(h.we, 1)
            for i, w in enumerate(words):
                ctx.set(h.addr, base + i)
                ctx.set(h.wdata, int(w))
                await ctx.tick()
            ctx.set(h.we, 0)

        async def run(x):
            await write(Region.ACT, prog.input.base, prog.pack_input(x))
            ctx.set(h.batch, len(x))
            ctx.set(h.start, 1)
            await ctx.tick()
            ctx.set(h.start, 0)
            for _ in range(100_000):
                await ctx.tick()
                if not ctx.get(h.busy):
                    break
            region, base, count = prog.output_words(len(x))
            ctx.set(h.region, region)
            words = []
            for i in range(count):
                ctx.set(h.addr, base + i)
                ctx.set(h.re, 1)
                await ctx.tick()
                ctx.set(h.re, 0)
                for _ in range(read_latency - 1):   # the port's fixed latency
                    assert not ctx.get(h.rvalid)
                    await ctx.tick()
                assert ctx.get(h.rvalid)
                words.append(ctx.get(h.rdata))
            return prog.unpack_output(words, len(x))

        for region, (base, words) in prog.images.items():
            await write(region, base, words)
        result["out"] = await run(x)
        result["more"] = [await run(x_) for x_ in more]
        result["cycles"] = ctx.get(h.cycles)
        result["macs"] = ctx.get(h.macs)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    collisions = []
    sim.add_process(_collision_watch(dut, collisions))
    sim.run()
    # The build tells Yosys these memories never read a word as it is written.
    assert not collisions, f"read/write collisions (memory, address, cycle): {collisions[:5]}"
    return result


def _collision_watch(dut, found):
    """Return a process that appends ``(memory, address, cycle)`` to ``found`` whenever a read
    port of a collision-free memory is enabled on the address a write port writes."""
    apart = collision_free_memories(dut.config, spram=dut.spram,
                                    registered_reads=dut.registered_reads)
    pairs = [(name, rd, wr) for name, mem in dut.memories.items() if name in apart
             for rd in mem.read_ports for wr in mem.write_ports]
    sigs = [s for _, rd, wr in pairs for s in (rd.en, rd.addr, wr.en, wr.addr)]

    async def watch(ctx):
        cycle = 0
        async for _, _, *values in ctx.tick().sample(*sigs):
            for i, (name, _, _) in enumerate(pairs):
                ren, raddr, wen, waddr = values[4 * i:4 * i + 4]
                if ren and wen and raddr == waddr:
                    found.append((name, raddr, cycle))
            cycle += 1
    return watch


def run_random_network(cfg, seed, *, layers, max_width, rows=5):
    """Run a random network of ``layers`` on up to ``rows`` rows, check the outputs against the
    reference and return ``(result, program, rows run, network)``."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, cfg, layers=layers, max_width=max_width)
    prog = hwgen.compile(net, cfg)
    m = min(prog.batch, rows)
    x = random_input(rng, cfg, m, net.layers[0].in_features)
    result = _run(cfg, prog, x)
    np.testing.assert_array_equal(result["out"], net.forward(x))
    return result, prog, m, net


@pytest.mark.parametrize("registered", [False, True], ids=["comb", "pipelined"])
def test_narrow_requantization_matches_the_reference(registered):
    """The requantization built from a narrow shifter and an overflow flag equals the
    reference's full-width one, for every shift (past the product's width too) and products
    at the rounding and saturation boundaries."""
    from amaranth.hdl import Module, Signal, signed, unsigned

    from hwgen.device.accelerator import (
        _round_saturate,
        _rounded,
        _scaled,
        _shift_end,
        _shift_stages,
        _shift_start,
    )

    out_bits, prod_bits = 8, 20
    m = Module()
    prod, shift = Signal(signed(prod_bits)), Signal(unsigned(5))
    out = Signal(signed(out_bits))
    if registered:
        # As the post-processing pipeline splits it: the shifter in two parts (the pipeline
        # registers between them), rounding apart from saturation.
        sign, split = prod[-1], 2
        value, over = _shift_start(prod, 5, out_bits)
        for name, stages in (("a", range(4, split - 1, -1)), ("b", range(split - 1, -1, -1))):
            value, over = _shift_stages(m, value, over, shift, sign=sign, stages=stages,
                                        out_bits=out_bits, name=name)
        over = _shift_end(value, over, sign)
        m.d.comb += out.eq(_round_saturate(None, over, sign, out_bits,
                                           rounded=_rounded(value.as_signed())))
    else:
        t, over = _scaled(m, prod, shift, out_bits)
        m.d.comb += out.eq(_round_saturate(t, over, prod[-1], out_bits))
    rng = np.random.default_rng(5)
    lim = 1 << (prod_bits - 1)
    cases = {(int(v), s) for s in range(32) for v in rng.integers(-lim, lim, 24)}
    for s in range(32):
        for edge in (127.5, 128, -128.5, -129, 255.5, -256.5, 0.5, -0.5):
            for d in (-1, 0, 1):
                v = int(edge * (1 << s)) + d
                if -lim <= v < lim:
                    cases.add((v, s))
    cases |= {(v, s) for v in (-lim, lim - 1, 0, 1, -1) for s in range(32)}
    sim = Simulator(m)
    seen = []

    async def bench(ctx):
        for v, s in sorted(cases):
            ctx.set(prod, v)
            ctx.set(shift, s)
            seen.append((v, s, ctx.get(out)))

    sim.add_testbench(bench)
    sim.run()
    vals = np.array([v for v, _, _ in seen], dtype=np.int64)
    shifts = np.array([s for _, s, _ in seen], dtype=np.int64)
    want = requantize(vals, 1, shifts, out_bits)
    got = np.array([g for _, _, g in seen], dtype=np.int64)
    assert len(seen) > 1000
    bad = [(v, s, g, w) for (v, s, g), w in zip(seen, want, strict=True) if g != w]
    assert not bad, bad[:10]
    np.testing.assert_array_equal(got, want)


def test_split_counter_is_exact_every_cycle():
    """The two-half counter of the run statistics equals a plain counter at every cycle: across
    the halves' boundary, at the wrap, with gaps and clears."""
    from amaranth.hdl import Module, Signal

    from hwgen.device.accelerator import _count

    m = Module()
    out, inc, clear = Signal(9), Signal(), Signal()
    _count(m, out, inc, clear, "n")
    sim = Simulator(m)
    sim.add_clock(1e-6)
    rng = np.random.default_rng(3)
    seen = []

    async def bench(ctx):
        model = 0
        for cycle in range(1500):
            i, c = int(rng.random() < 0.9), int(cycle in (700, 701, 1200))
            ctx.set(inc, i)
            ctx.set(clear, c)
            await ctx.tick()
            model = 0 if c else (model + i) % 512
            seen.append((ctx.get(out), model))

    sim.add_testbench(bench)
    sim.run()
    assert max(w for _, w in seen) == 511 and all(g == w for g, w in seen), seen[:20]


def test_times_constant_without_a_multiplier():
    from amaranth.hdl import Module, Signal

    from hwgen.memmap import _times_constant

    constants = [1, 2, 3, 5, 6, 7, 11, 48, 63, 64, 255, 12289, 4095 * 4095]
    m = Module()
    value = Signal(64)
    outs = {c: Signal(64, name=f"x{c}") for c in constants}
    m.d.comb += [o.eq(_times_constant(value, c)) for c, o in outs.items()]
    sim = Simulator(m)
    seen = []

    async def bench(ctx):
        for v in (0, 1, 0x1234_5678_9ABC, (1 << 64) - 1):
            ctx.set(value, v)
            for c, o in outs.items():
                seen.append((v, c, ctx.get(o)))

    sim.add_testbench(bench)
    sim.run()
    assert seen and all(got == (v * c) % (1 << 64) for v, c, got in seen), seen


@pytest.mark.parametrize("dataflow", ["ws", "os"])
@pytest.mark.parametrize("shape", [(2, 3), (3, 2), (1, 1)])
def test_random_network(shape, dataflow):
    cfg = AcceleratorConfig(rows=shape[0], cols=shape[1], dataflow=dataflow, **SMALL)
    result, prog, m, _ = run_random_network(cfg, shape[0] * 10 + shape[1], layers=3,
                                            max_width=9)
    assert result["cycles"] == program_cycles(prog, m)
    assert result["macs"] == m * prog.padded_macs_per_row


@pytest.mark.parametrize(("shape", "post_lanes"), [((2, 4), 1), ((2, 4), 2), ((4, 2), 1),
                                                   ((3, 6), 3)])
def test_fewer_requant_lanes(shape, post_lanes):
    """A row requantized over several cycles gives the reference's outputs, and the cycle model
    counts the spaced rows."""
    cfg = AcceleratorConfig(rows=shape[0], cols=shape[1], post_lanes=post_lanes, **SMALL)
    assert cfg.requant_steps == shape[1] // post_lanes
    result, prog, m, _ = run_random_network(cfg, shape[0] * 10 + shape[1] + post_lanes,
                                            layers=3, max_width=13)
    assert result["cycles"] == program_cycles(prog, m)


@pytest.mark.parametrize("registered", [False, True], ids=["plain", "registered-reads"])
def test_host_port_reads_back_every_region(registered):
    """Words written through the host port read back from every region, each with ``rvalid``
    a fixed latency after ``re`` (one cycle, two with registered reads) and zeros above the
    region's word; reads follow one another back to back."""
    from hwgen.memmap import regions

    cfg = AcceleratorConfig(rows=2, cols=3, **SMALL)
    dut = Accelerator(cfg, registered_reads=registered)
    h = dut.host
    rng = np.random.default_rng(5)
    images = {r: [int.from_bytes(rng.bytes(g.word_bits // 8 + 1), "little") % (1 << g.word_bits)
                  for _ in range(min(g.depth, 9))]
              for r, g in regions(cfg).items()}
    latency = 2 if registered else 1
    seen = {}

    async def bench(ctx):
        ctx.set(h.we, 1)
        for region, words in images.items():
            ctx.set(h.region, region)
            for i, w in enumerate(words):
                ctx.set(h.addr, i)
                ctx.set(h.wdata, w)
                await ctx.tick()
        ctx.set(h.we, 0)
        # Round robin over the regions, with an idle cycle now and then.
        asks = [(r, i) for i in range(9) for r in images if i < len(images[r])]
        asks = [a for k, ask in enumerate(asks) for a in ([ask, None] if k % 4 == 3 else [ask])]
        asks += [None] * latency
        for k, ask in enumerate(asks):
            ctx.set(h.re, ask is not None)
            if ask is not None:
                ctx.set(h.region, ask[0])
                ctx.set(h.addr, ask[1])
            await ctx.tick()
            answered = asks[k + 1 - latency] if k + 1 >= latency else None
            assert ctx.get(h.rvalid) == (answered is not None)
            if answered is not None:
                seen.setdefault(answered[0], []).append(ctx.get(h.rdata))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == images
