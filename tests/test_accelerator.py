"""Amaranth-simulator tests of the whole-network accelerator on small configurations.

The cocotb regression (tests/test_network.py) runs many more networks on the emitted Verilog;
these check the Amaranth design itself, including the lane rotation of rows != cols, against
hwgen.nn and the cycle model.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

import hwgen
from hwgen.accelerator import Accelerator
from hwgen.config import AcceleratorConfig
from hwgen.cycles import program_cycles
from hwgen.memmap import Region
from sim.netgen import random_input, random_network

SMALL = {"act_depth": 100, "weight_depth": 256, "param_depth": 32, "acc_depth": 16,
         "out_depth": 64, "prog_depth": 8}


def _run(cfg, prog, x):
    """Load ``prog`` and ``x`` through the host port, run, read back; return output, counters."""
    dut = Accelerator(cfg)
    h = dut.host
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

        for region, (base, words) in prog.images.items():
            await write(region, base, words)
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
            assert ctx.get(h.rvalid)
            words.append(ctx.get(h.rdata))
        result["out"] = prog.unpack_output(words, len(x))
        result["cycles"] = ctx.get(h.cycles)
        result["macs"] = ctx.get(h.macs)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return result


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


def test_shift_right_in_stages_is_an_arithmetic_shift():
    from amaranth.hdl import Module, Signal, signed, unsigned

    from hwgen.accelerator import _shift_right

    m = Module()
    value, amount = Signal(signed(12)), Signal(unsigned(4))
    out = Signal(signed(12))
    m.d.comb += out.eq(_shift_right(value, amount))
    sim = Simulator(m)
    seen = []

    async def bench(ctx):
        for v in (-2048, -1234, -1, 0, 1, 5, 1023, 2047):
            for a in range(16):                  # past the width too: all sign bits
                ctx.set(value, v)
                ctx.set(amount, a)
                seen.append((v, a, ctx.get(out)))

    sim.add_testbench(bench)
    sim.run()
    assert len(seen) == 8 * 16 and all(got == v >> a for v, a, got in seen), seen


def test_times_constant_without_a_multiplier():
    from amaranth.hdl import Module, Signal

    from hwgen.accelerator import _times_constant

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
