"""cocotb test bench of the whole-network accelerator
(``hwgen.device.accelerator.AcceleratorCore``).

Random networks are compiled with :func:`hwgen.compile`, loaded through the host port, run,
and read back; the output must equal :class:`hwgen.nn.QuantizedNetwork` ``.forward`` bit for bit
and the device counters must equal the cycle model.

Environment: ``HWGEN_CONFIG``, ``HWGEN_SEED``, ``HWGEN_NETWORKS`` (how many), ``HWGEN_MAX_WIDTH``,
``HWGEN_MAX_BATCH``, ``HWGEN_CNNS`` (how many random convolutional networks, 0 by default),
``HWGEN_MAX_CHANNELS``, ``HWGEN_TAPS`` (how many of :func:`sim.netgen.taps_cnn`'s CNNs,
whose first convolution takes the taps layout, 0 by default), ``HWGEN_GENERAL`` (how many of
:func:`sim.netgen.general_cnn`'s
networks, every spatial layer kind in one, 0 by default), ``HWGEN_GRAPHS`` (how many of
:func:`sim.netgen.random_graph`'s residual graphs, over images and rows by turns, 0 by
default), ``HWGEN_FUSED`` (how many of :func:`sim.netgen.pooled_cnn`'s CNNs, whose max
pools the compiler fuses into their convolutions' passes, 0 by default).
"""

import os

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

import hwgen
from host.plan import execute_load_async, execute_run_async, run_plans
from hwgen.compiler import CompileError
from hwgen.cycles import layer_busy_rows, program_cycles
from hwgen.memmap import PassKind
from sim.netgen import (
    general_cnn,
    pooled_cnn,
    random_cnn,
    random_graph,
    random_image,
    random_input,
    random_network,
    taps_cnn,
)
from sim.runner import read_config_env
from sim.streams import Clocked


class HostPort:
    """Drive the accelerator's plain host port, one word per cycle: the ``write``/``run``/``read``
    that :mod:`host.plan` 's async executors drive."""

    def __init__(self, clocked):
        self.c = clocked
        self.dut = clocked.dut
        self.counters = None
        for name in ("we", "re", "start", "clear"):
            getattr(self.dut, f"host__{name}").value = 0

    async def write(self, region, base, words):
        d = self.dut
        d.host__region.value = region.value
        d.host__we.value = 1
        for i, word in enumerate(words):
            d.host__addr.value = base + i
            d.host__wdata.value = int(word)
            await FallingEdge(self.c.clk)
        d.host__we.value = 0

    async def read(self, region, base, count):
        d = self.dut
        d.host__region.value = region.value
        out = []
        for i in range(count):
            d.host__addr.value = base + i
            d.host__re.value = 1
            await FallingEdge(self.c.clk)
            d.host__re.value = 0
            assert int(d.host__rvalid.value) == 1
            out.append(int(d.host__rdata.value))
        return out

    async def run(self, batch):
        """Clear the counters, run the program on ``batch`` rows; return the counters after it
        (also kept in :attr:`counters`)."""
        d = self.dut
        d.host__clear.value = 1
        await FallingEdge(self.c.clk)
        d.host__clear.value = 0
        d.host__batch.value = batch
        d.host__start.value = 1
        await FallingEdge(self.c.clk)
        d.host__start.value = 0
        assert int(d.host__busy.value) == 1, "busy did not rise after start"
        await FallingEdge(d.host__busy)
        await FallingEdge(self.c.clk)
        self.counters = {k: int(getattr(d, f"host__{k}").value)
                         for k in ("cycles", "busy_cycles", "macs")}
        return self.counters

    async def load_and_run(self, program, x):
        """Load ``program``, run it on ``x`` (at most ``program.batch`` samples) and return its
        output, through :mod:`host.plan` (the host driver's plans); the counters of the run
        are in :attr:`counters`."""
        await execute_load_async(self, program)
        (plan,) = run_plans(program, np.asarray(x))
        (out,) = await execute_run_async(self, plan)
        return out


def _busy_rows(prog, m):
    """Rows the array takes in a run on ``m`` samples, as each layer's kind counts them (a
    matrix layer's output pixels times its tiles)."""
    return sum(layer_busy_rows(d, m) for d in prog.descriptors)


async def _check_run(host, net, prog, x, what):
    """Load ``prog``, run it on ``x`` and check the output and the counters."""
    m = len(x)
    cfg, dut = prog.config, host.dut
    got = await host.load_and_run(prog, x)
    counters = host.counters
    want = net.forward(x)
    assert np.array_equal(got, want), (
        f"{what} batch {m}: device output differs from hwgen.nn\n"
        f"first difference at {np.argwhere(got != want)[0].tolist()}")
    model = program_cycles(prog, m)
    assert counters["cycles"] == model, f"{what}: {counters['cycles']} cycles, model {model}"
    assert counters["busy_cycles"] == _busy_rows(prog, m)
    assert counters["macs"] == m * prog.padded_macs_per_row
    dut._log.info("%s batch %d: exact, %d cycles (model agrees), utilization %.1f%%", what, m,
                  counters["cycles"],
                  100 * m * prog.macs_per_row / (cfg.rows * cfg.cols * counters["cycles"]))


def _fitting_network(rng, cfg, max_width, raw):
    """Draw random networks until one fits the configuration's buffers."""
    for _ in range(100):
        net = random_network(rng, cfg, max_width=max_width, raw=raw)
        try:
            return net, hwgen.compile(net, cfg)
        except CompileError:
            max_width = max(1, max_width * 3 // 4)
    raise AssertionError(f"no random network fits {cfg}")


@cocotb.test()
async def test_random_networks(dut):
    """Random networks, bit-exact against hwgen.nn, counters equal to the cycle model."""
    cfg = read_config_env()
    seed = int(os.environ.get("HWGEN_SEED", "0"))
    count = int(os.environ.get("HWGEN_NETWORKS", "5"))
    max_width = int(os.environ.get("HWGEN_MAX_WIDTH", "40"))
    max_batch = int(os.environ.get("HWGEN_MAX_BATCH", "16"))
    rng = np.random.default_rng(seed)
    clocked = Clocked(dut)
    await clocked.start()
    host = HostPort(clocked)
    for index in range(count):
        net, prog = _fitting_network(rng, cfg, max_width, raw=[None, True, False][index % 3])
        m = int(rng.integers(1, min(max_batch, prog.batch) + 1))
        x = random_input(rng, cfg, m, net.layers[0].in_features)
        shapes = [(layer.in_features, layer.out_features, layer.activation, layer.output)
                  for layer in net.layers]
        await _check_run(host, net, prog, x, f"network {index} {shapes}")


async def _fitting_runs(dut, count_env, seed_offset, draw, what, *, batch_cap=None):
    """Check ``$count_env`` networks that fit the design, each drawn by ``draw(rng, cfg,
    done, max_channels)`` as ``(net, make_input, label)`` (``make_input(rng, m)`` the
    batch; ``label(program)`` what a failure names), on a batch of 1..``HWGEN_MAX_BATCH``
    (and ``batch_cap``) samples; a network that does not fit is drawn again, 50 times per
    network at most."""
    cfg = read_config_env()
    count = int(os.environ.get(count_env, "0"))
    if not count:
        return
    rng = np.random.default_rng(int(os.environ.get("HWGEN_SEED", "0")) + seed_offset)
    max_channels = int(os.environ.get("HWGEN_MAX_CHANNELS", "20"))
    max_batch = int(os.environ.get("HWGEN_MAX_BATCH", "16"))
    clocked = Clocked(dut)
    await clocked.start()
    host = HostPort(clocked)
    done = 0
    for _ in range(50 * count):
        net, make_input, label = draw(rng, cfg, done, max_channels)
        try:
            prog = hwgen.compile(net, cfg)
        except CompileError:
            continue
        m = int(rng.integers(1, min(max_batch, prog.batch, batch_cap or prog.batch) + 1))
        await _check_run(host, net, prog, make_input(rng, m), f"{what} {done} {label(prog)}")
        done += 1
        if done == count:
            return
    raise AssertionError(f"only {done} of {count} {what}s fit {cfg}")


def _layer_names(net):
    return " ".join(type(layer).__name__ for layer in net.layers)


@cocotb.test()
async def test_random_cnns(dut):
    """Random convolutional networks (sim.netgen.random_cnn: rectangular kernels 1..5,
    strides 1..2 per axis, each padding side 0..2, grouped and depthwise convolutions,
    channels 1..max, max and average pooling windows 2..3, global average pooling, flatten +
    dense or spatial ends, raw and requantized), bit-exact against hwgen.nn, counters equal
    to the cycle model."""
    def draw(rng, cfg, done, max_channels):
        net = random_cnn(rng, cfg, max_channels=max_channels, raw=[None, True, False][done % 3])
        return (net, lambda rng, m: random_image(rng, cfg, m, net.input_shape),
                lambda prog: f"{net.input_shape} [{_layer_names(net)}]")

    await _fitting_runs(dut, "HWGEN_CNNS", 1, draw, "random CNN")


@cocotb.test()
async def test_taps_cnns(dut):
    """Random CNNs whose first convolution reads fewer channels than ``rows``
    (sim.netgen.taps_cnn): its input in the taps layout where the device walks it,
    bit-exact against hwgen.nn, counters equal to the cycle model."""
    def draw(rng, cfg, done, max_channels):
        net = taps_cnn(rng, cfg, max_channels=max_channels, raw=[None, True, False][done % 3])
        return (net, lambda rng, m: random_image(rng, cfg, m, net.input_shape),
                lambda prog: f"{net.input_shape} "
                             f"{'pixels' if prog.input.per_pixel else 'taps'} "
                             f"[{_layer_names(net)}]")

    await _fitting_runs(dut, "HWGEN_TAPS", 3, draw, "taps CNN", batch_cap=3)


@cocotb.test()
async def test_fused_pool_cnns(dut):
    """Random CNNs of convolutions each followed by a ``p x p``, stride ``p`` max pool
    (sim.netgen.pooled_cnn), which the compiler fuses into the convolution's pass (the walk
    window by window, the running maximum before the write-back): bit-exact against hwgen.nn,
    counters equal to the cycle model."""
    fused = []

    def draw(rng, cfg, done, max_channels):
        net = pooled_cnn(rng, cfg, max_channels=max_channels, raw=[None, True, False][done % 3])

        def label(prog):
            pools = [d["geometry"].get("pool", 0) + 1 for d in prog.descriptors
                     if d["spatial"] and d["kind"] == 0]
            fused.append(max(pools, default=1) > 1)
            return f"{net.input_shape} [{_layer_names(net)}] fused windows {pools}"
        return net, lambda rng, m: random_image(rng, cfg, m, net.input_shape), label

    await _fitting_runs(dut, "HWGEN_FUSED", 5, draw, "fused-pool CNN", batch_cap=4)
    assert not fused or any(fused), "no drawn CNN had a pool fused into its convolution"


@cocotb.test()
async def test_general_convolutions(dut):
    """Networks with a grouped and two depthwise convolutions (rectangular kernels, strides
    per axis, padding on each side; one with diagonal tiles, ``wdiag``), an average and a
    global average pooling, bit-exact against hwgen.nn, counters equal to the cycle model."""
    kinds = set()

    def draw(rng, cfg, done, max_channels):
        net = general_cnn(rng, cfg, raw=bool(done % 2))

        def label(prog):
            kinds.update(PassKind(d["kind"]).name for d in prog.descriptors)
            return ""
        return net, lambda rng, m: random_image(rng, cfg, m, net.input_shape), label

    await _fitting_runs(dut, "HWGEN_GENERAL", 2, draw, "general CNN", batch_cap=3)
    if read_config_env().depthwise and int(os.environ.get("HWGEN_GENERAL", "0")):
        assert "DEPTHWISE" in kinds, f"no pass ran on the depthwise unit: {sorted(kinds)}"


@cocotb.test()
async def test_random_graphs(dut):
    """Random residual graphs (sim.netgen.random_graph: identity and projection shortcuts,
    branches of different depths, an add feeding an add, a tensor with three consumers), over
    images and rows by turns (rows only on a device without spatial layers), with and without
    a head, bit-exact against hwgen.nn, counters equal to the cycle model."""
    def draw(rng, cfg, done, max_channels):
        images = cfg.spatial and done % 2 == 0
        net = random_graph(rng, cfg, images=images, max_channels=max_channels)
        shape = net.input_shape

        def make_input(rng, m):
            return (random_image(rng, cfg, m, shape) if images
                    else random_input(rng, cfg, m, shape[0]))
        return net, make_input, lambda prog: f"{shape} [{_layer_names(net)}]"

    await _fitting_runs(dut, "HWGEN_GRAPHS", 3, draw, "random graph", batch_cap=3)


@cocotb.test()
async def test_host_port_round_trip(dut):
    """Every region reads back what was written at the top of its address range."""
    cfg = read_config_env()
    rng = np.random.default_rng(int(os.environ.get("HWGEN_SEED", "0")))
    clocked = Clocked(dut)
    await clocked.start()
    host = HostPort(clocked)
    from hwgen.memmap import regions

    for region, geo in regions(cfg).items():
        n = min(geo.depth, 8)
        base = geo.depth - n
        words = [int.from_bytes(rng.bytes(geo.word_bytes), "little") & ((1 << geo.word_bits) - 1)
                 for _ in range(n)]
        await host.write(region, base, words)
        assert await host.read(region, base, n) == words, f"{region.name} round trip"
