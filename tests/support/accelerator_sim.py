"""The accelerator driven through its host port in the Amaranth simulator, with a watch on
every memory that must never see a read meet a write; the implementations the boards build."""

import dataclasses

import numpy as np
from amaranth.sim import Simulator

import hwgen
from host.plan import execute_load_async, execute_run_async, run_plans
from hwgen.device.accelerator import AcceleratorCore
from hwgen.device.memories import collision_free_memories
from hwgen.implementation import Implementation, Registers
from sim.netgen import random_input, random_network

#: Small buffers, so that Amaranth simulations of whole accelerators stay quick.
SMALL = {"act_depth": 100, "weight_depth": 256, "param_depth": 32, "acc_depth": 16,
         "out_depth": 64, "prog_depth": 8}

#: The implementations the boards build (hwgen.boards' catalog has the same).
ICE40 = Implementation(dsp_packing="sb_mac16", post_pipeline=True, split_multiplier=4,
                       spram=True, link_on_oscillator=True, out_param_shared=True)
ECP5 = Implementation(dsp_packing="mult18x18d", post_pipeline=True, split_operand=17,
                      registers=Registers.HOST, link_on_oscillator=True)
#: The 85F's: the ECP5 boards' with the array's inputs registered.
ECP5_85F = dataclasses.replace(ECP5, registers=Registers.ARRAY)


def without_dsp(implementation):
    """Return ``implementation`` with inferred multipliers: the Amaranth simulator cannot run
    the DSP primitives' instances (their Verilog models run under cocotb and the gate-level
    board instead), and the cycles are the same."""
    return dataclasses.replace(implementation, dsp_packing=None)


class AmaranthHostPort:
    """The accelerator's host port driven from an Amaranth testbench, one word per cycle: the
    ``write``/``run``/``read`` that :mod:`host.plan` 's async executors drive."""

    def __init__(self, ctx, port, read_latency):
        self.ctx, self.h, self.read_latency = ctx, port, read_latency

    async def write(self, region, base, words):
        ctx, h = self.ctx, self.h
        ctx.set(h.region, region)
        ctx.set(h.we, 1)
        for i, w in enumerate(words):
            ctx.set(h.addr, base + i)
            ctx.set(h.wdata, int(w))
            await ctx.tick()
        ctx.set(h.we, 0)

    async def run(self, batch):
        ctx, h = self.ctx, self.h
        ctx.set(h.batch, batch)
        ctx.set(h.start, 1)
        await ctx.tick()
        ctx.set(h.start, 0)
        for _ in range(100_000):
            await ctx.tick()
            if not ctx.get(h.busy):
                break

    async def read(self, region, base, count):
        ctx, h = self.ctx, self.h
        ctx.set(h.region, region)
        words = []
        for i in range(count):
            ctx.set(h.addr, base + i)
            ctx.set(h.re, 1)
            await ctx.tick()
            ctx.set(h.re, 0)
            for _ in range(self.read_latency - 1):   # the port's fixed latency
                assert not ctx.get(h.rvalid)
                await ctx.tick()
            assert ctx.get(h.rvalid)
            words.append(ctx.get(h.rdata))
        return words

    async def infer(self, program, x):
        """Run ``program`` on ``x`` (at most ``program.batch`` samples); return its output."""
        (plan,) = run_plans(program, np.asarray(x))
        return (await execute_run_async(self, plan))[0]


def run_program(cfg, prog, x, *more, implementation=None):
    """Load ``prog`` and ``x`` through the host port of an :class:`AcceleratorCore`, run, read
    back (the plans of :mod:`host.plan`); return ``{"out", "more", "cycles", "macs"}``.

    Each of ``more`` is a further batch written, run and read back after that, as a host does
    (``result["more"]``: their outputs); the counters are those after the last run. Fails if a
    memory that the build declares collision-free sees a read meet a write.
    """
    dut = AcceleratorCore(cfg, implementation)
    h = dut.host
    read_latency = dut.host_read_latency
    result = {}

    async def bench(ctx):
        port = AmaranthHostPort(ctx, h, read_latency)
        await execute_load_async(port, prog)
        result["out"] = await port.infer(prog, x)
        result["more"] = [await port.infer(prog, x_) for x_ in more]
        result["cycles"] = ctx.get(h.cycles)
        result["macs"] = ctx.get(h.macs)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    collisions = []
    sim.add_process(collision_watch(dut, collisions))
    sim.run()
    # The build tells Yosys these memories never read a word as it is written.
    assert not collisions, f"read/write collisions (memory, address, cycle): {collisions[:5]}"
    return result


def collision_watch(dut, found):
    """Return a process that appends ``(memory, address, cycle)`` to ``found`` whenever a read
    port of a collision-free memory of accelerator ``dut`` is enabled on the address a write
    port writes."""
    apart = collision_free_memories(dut.config, dut.implementation)
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


def run_random_network(cfg, seed, *, layers, max_width, rows=5, implementation=None):
    """Run a random network of ``layers`` on up to ``rows`` rows, check the outputs against the
    reference and return ``(result, program, rows run, network)``."""
    rng = np.random.default_rng(seed)
    net = random_network(rng, cfg, layers=layers, max_width=max_width)
    prog = hwgen.compile(net, cfg)
    m = min(prog.batch, rows)
    x = random_input(rng, cfg, m, net.layers[0].in_features)
    result = run_program(cfg, prog, x, implementation=implementation)
    np.testing.assert_array_equal(result["out"], net.forward(x))
    return result, prog, m, net
