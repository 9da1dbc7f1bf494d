"""The bf16 accelerator core (issue 52) in the Amaranth simulator: compiled bf16 MLPs and CNNs
loaded and run through the host port give Bf16Network.forward's bits; what it refuses.

Every run starts from NaN in every ACT lane (sim.bf16_runs.nan_act), so a pass that left a
lane past ``n`` stale would turn the next pass's padding products into NaN."""

import warnings

import numpy as np
import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator
from support import each_once
from support.accelerator_sim import (
    ECP5,
    ECP5_85F,
    ICE40,
    SMALL,
    AmaranthHostPort,
    without_dsp,
)

import hwgen
from hwgen.config import AcceleratorConfig
from hwgen.cycles import program_cycles
from hwgen.device.accelerator import AcceleratorCore
from hwgen.device.bf16_core import BF16AcceleratorCore
from hwgen.device.cores import accelerator_core
from hwgen.implementation import Implementation, Registers
from hwgen.memmap import PassKind, Region
from hwgen.nn import INPUT, Node, to_bf16
from hwgen.nn.bf16 import round_to_bf16, round_to_fp32
from hwgen.nn.bf16_layers import Bf16Dense
from hwgen.nn.bf16_network import Bf16Network
from hwgen.nn.digits import digits_cnn
from sim.bf16_runs import bf16_cnn, bf16_mlp, bf16_rows, differing_bits, run_bf16
from sim.interpreter import ProgramInterpreter


def _config(rows, cols, **kwargs):
    return AcceleratorConfig(dtype="bf16", rows=rows, cols=cols,
                             **{**SMALL, "spatial": False, "residual": False, **kwargs})


def _run(config, program, xs, implementation=None, *, reads=(), gate_idle=False):
    """Load ``program``, run it on each batch of ``xs`` in turn; return the outputs, then the
    words of each ``(region, base, count)`` of ``reads`` after the last run, and the device's
    ``cycles`` counter after the runs (it adds up: the port never clears it)."""
    dut = BF16AcceleratorCore(config, implementation, gate_idle=gate_idle)
    outs = []

    async def bench(ctx):
        port = AmaranthHostPort(ctx, dut.host, dut.host_read_latency)
        for i, x in enumerate(xs):
            outs.append(await run_bf16(port, program, x, load=i == 0))
        for read in reads:
            outs.append(await port.read(*read))
        outs.append(ctx.get(dut.host.cycles))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return outs


def _check(net, config, xs, *, batch=None, implementation=None, gate_idle=False):
    """Run ``net`` compiled for ``config`` on each batch of ``xs``: Bf16Network.forward's bits,
    and the cycles the model counts for the runs."""
    program = hwgen.compile(net, config, batch=batch)
    *outs, cycles = _run(config, program, xs, implementation, gate_idle=gate_idle)
    for x, got in zip(xs, outs, strict=True):
        assert differing_bits(got, net.forward(x)) is None, differing_bits(got, net.forward(x))
    model = sum(program_cycles(program, len(x), implementation) for x in xs)
    assert cycles == model, f"{cycles} device cycles, the model's {model}"
    return program


@pytest.mark.parametrize(("rows", "cols", "sizes", "output"), [
    (4, 4, [7, 9, 5], "raw"), (4, 4, [7, 9, 5], "bf16"), (2, 4, [9, 13, 6, 3], "raw"),
    (8, 2, [17, 9, 5], "bf16"), (1, 1, [3, 2, 2], "raw"), (3, 3, [5, 4, 7], "bf16"),
    (2, 5, [4, 11, 3], "raw"),
])
def test_mlps_run_bit_for_bit(rows, cols, sizes, output):
    net = bf16_mlp(sizes, seed=rows * 10 + cols, rows=rows, output=output)
    # A partial batch, then the compiled batch in a second run of the same program.
    program = _check(net, _config(rows, cols), [bf16_rows(net, 3, seed=1),
                                                 bf16_rows(net, 6, seed=2)], batch=6)
    assert program.output.kind == ("raw" if output == "raw" else "requant")


def test_more_rows_than_the_row_rule_spaces():
    # A batch as deep as the accumulators: the datapath's row rule needs no bubbles there.
    net = bf16_mlp([10, 12, 4], seed=5, rows=4)
    _check(net, _config(4, 4), [bf16_rows(net, 16, seed=3)], batch=16)


@pytest.mark.parametrize("m", [1, 2, 5, 7, 16])
def test_cycles_over_the_rows_of_a_chunk(m):
    # Fewer rows than the row rule's interval (bubbles between reduction tiles), about the
    # engine's rewrite wait, and as many as the accumulators hold: a run's batch is at most
    # acc_depth, so a dense layer is one chunk. Three reduction and three output tiles.
    net = bf16_mlp([5, 6, 3], seed=m, rows=2, output=("raw", "bf16")[m % 2])
    _check(net, _config(2, 2), [bf16_rows(net, m, seed=m)], batch=16)


def test_overflow_inf_and_nan_inside_the_sums():
    # Products beyond fp32 give Inf, Inf - Inf NaN; the hidden layer carries them on.
    net = bf16_mlp([6, 5, 4], seed=3, rows=2, scale=1e30)
    x = bf16_rows(net, 4, seed=3, scale=1e10)
    want = net.forward(x)
    assert np.isinf(want).any() and np.isnan(want).any()
    _check(net, _config(2, 2), [x])


def _dense(k, n, seed, **finish):
    rng = np.random.default_rng(seed)
    return Bf16Dense(weight=round_to_bf16(rng.normal(size=(k, n))),
                     bias=round_to_fp32(rng.normal(size=n)), **finish)


def _net(layers, k, rows):
    nodes = [Node(f"fc{i}", layer, INPUT if i == 0 else f"fc{i - 1}")
             for i, layer in enumerate(layers)]
    shapes = {INPUT: (k,), **{f"fc{i}": (layer.weight.shape[1],)
                              for i, layer in enumerate(layers)}}
    return Bf16Network(nodes, rows=rows, tensor_shapes=shapes)


@pytest.mark.parametrize("finish", [
    {"activation": "identity", "act_min": -0.3, "act_max": 0.7},
    {"activation": "relu", "act_max": 0.45},
    {"activation": "identity", "act_max": -0.2},
])
def test_clamp_bounds(finish):
    layers = [_dense(9, 6, 1, **finish), _dense(6, 5, 2, activation="relu"),
              _dense(5, 3, 3, raw=True)]
    net = _net(layers, 9, rows=4)
    _check(net, _config(4, 2), [bf16_rows(net, 5, seed=1)])


def test_hidden_words_hold_the_interpreters_lanes_and_zero_past_n():
    # A ReLU with a positive lower bound gives the padding channels (zero weights and bias)
    # that bound: only the write-back's +0.0 past n leaves the interpreter's words.
    layers = [_dense(5, 7, 1, activation="relu", act_min=0.25), _dense(7, 6, 2),
              _dense(6, 3, 3, raw=True)]
    net = _net(layers, 5, rows=2)
    config = _config(2, 4)
    program = hwgen.compile(net, config)
    x = bf16_rows(net, 3, seed=2)
    hidden = [(Region.ACT, d["dst_base"], len(x) * d["dst_stride"])
              for d in program.descriptors if not d["raw"]]
    got = _run(config, program, [x], reads=hidden)[1:-1]
    reference = ProgramInterpreter(config)
    reference.load(program, x)
    reference.run(len(x))
    for (region, base, count), words in zip(hidden, got, strict=True):
        assert words == [reference.read(region, base + i) for i in range(count)]


@pytest.mark.parametrize(("implementation", "gate_idle"), [
    # The iCE40's: the weights in a single-port SPRAM, OUTPUT and PARAM in one memory.
    (without_dsp(ICE40), False),
    # The ECP5's: registered reads (the bias addressed a cycle ahead), a staged host port.
    (without_dsp(ECP5), False),
    (without_dsp(ECP5_85F), False),
    (Implementation(registers=Registers.READS), False),
    (Implementation(out_param_shared=True), False),
    # The simulated board's: the run's blocks clocked only while a program runs.
    (Implementation(), True),
])
def test_implementations_and_a_gated_clock(implementation, gate_idle):
    net = bf16_mlp([5, 7, 3], seed=8, rows=2)
    _check(net, _config(2, 2), [bf16_rows(net, 4, seed=4), bf16_rows(net, 2, seed=5)],
           implementation=implementation, gate_idle=gate_idle)


def test_the_core_is_chosen_by_dtype(refused):
    assert isinstance(accelerator_core(_config(2, 2)), BF16AcceleratorCore)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        assert isinstance(accelerator_core(AcceleratorConfig(rows=2, cols=2, **SMALL)),
                          AcceleratorCore)
    refused(r"dtype='bf16'.*BF16AcceleratorCore", lambda: AcceleratorCore(_config(2, 2)))
    refused(r"dtype='int8'.*AcceleratorCore",
            lambda: BF16AcceleratorCore(AcceleratorConfig(rows=2, cols=2)))


def _spatial(rows, cols, **kwargs):
    return _config(rows, cols, **{"spatial": True, "act_depth": 512, "prog_depth": 16,
                                  "out_depth": 128, **kwargs})


def _chunks(program, m, config):
    """The most chunks any layer of ``program`` runs on ``m`` samples."""
    return max(-(-m * d["geometry"]["oh"] * d["geometry"]["ow"] // config.acc_depth)
               for d in program.descriptors if d.get("geometry"))


# A first convolution of fewer channels than rows (the taps layout), padded, then a strided
# one, a dense layer after the Flatten; 1x1 and 2x2 kernels, n past the tiles (+0.0 lanes);
# max pools (windows of 2 and 3, strides of 1 and 2, rows and columns left over) of negative
# values too (no ReLU before them: bf16 patterns do not order as signed integers).
_CNNS = {
    "conv_pool_conv": ((4, 4), ([((3, 2, 4), {"padding": 1, "relu": False}), (2,),
                                 ((3, 4, 4), {"padding": 1}), (3, 1)], 5, (8, 7, 2))),
    "taps_stride_dense": ((4, 4), ([((3, 2, 4), {"padding": 1}),
                                    ((3, 4, 4), {"stride": 2, "padding": 1})], 5, (5, 5, 2))),
    "two_chunks_1x1": ((2, 2), ([((2, 2, 3), {}), ((1, 3, 3), {"relu": False})], 0,
                                (4, 6, 2))),
    "wide_cols": ((2, 4), ([((3, 2, 6), {"stride": (1, 2), "padding": 1, "relu": False}),
                            (2, 1),
                            ((1, 6, 4), {})], 3, (6, 5, 2))),
}


# The output's format is the finish stage's, whatever the geometry: each geometry runs once by
# default, the formats alternating, and with the other with ``-m slow``.
@pytest.mark.parametrize(("name", "output"), each_once(_CNNS, ["bf16", "raw"]))
def test_convolutions_run_bit_for_bit_over_chunks(name, output):
    # The walker's output pixels, chunk after chunk (more pixels than acc_depth), each
    # written pixel after pixel where the next pass reads it; the cycles are the model's. One
    # run: a second one of the same program is the boards' implementations' test below.
    (rows, cols), (convs, dense, in_shape) = _CNNS[name]
    net = bf16_cnn(convs, dense, in_shape, seed=rows + len(name), rows=rows, output=output)
    config = _spatial(rows, cols)
    x = bf16_rows(net, 3, seed=7)
    program = _check(net, config, [x], batch=3)
    assert _chunks(program, len(x), config) > 1


@pytest.mark.parametrize(("implementation", "gate_idle"), [
    (without_dsp(ICE40), False), (without_dsp(ECP5), False),
    (Implementation(registers=Registers.READS), False), (Implementation(), True),
])
def test_convolutions_on_the_boards_implementations(implementation, gate_idle):
    # Registered reads stage the walker's rows and the pooler's words; the gated clock
    # stops the pooler between runs too.
    (rows, cols), (convs, dense, in_shape) = _CNNS["conv_pool_conv"]
    net = bf16_cnn(convs, dense, in_shape, seed=2, rows=rows, output="raw")
    _check(net, _spatial(rows, cols), [bf16_rows(net, 2, seed=9), bf16_rows(net, 1, seed=10)],
           implementation=implementation, gate_idle=gate_idle)


def test_dense_networks_on_a_spatial_design():
    # Rows through the walker's plain geometry: one chunk per layer, as without it.
    net = bf16_mlp([9, 13, 6, 3], seed=4, rows=2, output="bf16")
    _check(net, _spatial(2, 4), [bf16_rows(net, 5, seed=1), bf16_rows(net, 16, seed=2)],
           batch=16)


def test_pools_of_inf_and_nan():
    # Sums past fp32 give Inf and NaN: the pool's maximum takes the contract's NaN rule.
    (rows, cols), (convs, _, in_shape) = _CNNS["conv_pool_conv"]
    net = bf16_cnn(convs[:2], 0, in_shape, seed=4, rows=rows, output="bf16", scale=1e24)
    x = bf16_rows(net, 2, seed=5, scale=1e12)
    want = net.forward(x)
    assert np.isinf(want).any() and np.isnan(want).any() and np.isfinite(want).any()
    _check(net, _spatial(rows, cols), [x])


def test_the_demo_cnn_runs_bit_for_bit():
    # hwgen demo --model cnn's network (untrained): conv, pool, conv, pool, dense.
    net = to_bf16(digits_cnn(seed=3), rows=4)
    config = _spatial(4, 4, act_depth=1024, prog_depth=32, weight_depth=512)
    program = _check(net, config, [bf16_rows(net, 2, seed=6)])
    kinds = [PassKind(d["kind"]) for d in program.descriptors]
    assert kinds == [PassKind.MATRIX, PassKind.MAXPOOL] * 2 + [PassKind.MATRIX]


@pytest.mark.parametrize(("options", "implementation", "message"), [
    ({"rows": 3, "cols": 2}, None, r"rows=3, cols=2: .*a multiple of cols"),
])
def test_what_the_core_refuses(options, implementation, message, refused):
    config = _config(**{"rows": 2, "cols": 2, **options})
    refused(message, lambda: BF16AcceleratorCore(config, implementation))
