"""The whole-network accelerator in the Amaranth simulator, on every implementation a board
builds: outputs against hwgen.nn, cycles against hwgen.cycles, to the cycle; also devices
without spatial layers (``spatial=False``: no image walk, no pooler), as the iCEBreaker builds.

The cocotb regression (tests/sim/test_network.py) runs many more networks on the emitted
Verilog; these check the Amaranth design itself, with a watch on every memory that must never
see a read meet a write.
"""

import dataclasses

import numpy as np
import pytest
from amaranth.hdl import Fragment
from amaranth.sim import Simulator
from support import ECP5, ECP5_85F, ICE40, SMALL, run_program, run_random_network, without_dsp
from support.accelerator_sim import AmaranthHostPort

import hwgen
from hwgen.boards.catalog import ICEBREAKER_PRESET
from hwgen.config import AcceleratorConfig
from hwgen.cycles import program_cycles
from hwgen.device import memories
from hwgen.device.accelerator import AcceleratorCore
from hwgen.device.memories import WEIGHT_BANK_DEPTH, weight_banks, weight_groups
from hwgen.device.requantizer import Requantizer
from hwgen.implementation import Implementation, Registers
from hwgen.memmap import PassKind, Region, reduction_limits
from hwgen.nn import (
    AvgPool2D,
    Conv2D,
    Dense,
    Flatten,
    GlobalAvgPool2D,
    MaxPool2D,
    QuantizedNetwork,
)
from hwgen.timing import unit_latencies
from sim.netgen import (
    GRAPH_BLOCKS,
    pooled_cnn,
    random_cnn,
    random_graph,
    random_image,
    random_input,
    random_network,
    taps_cnn,
)

PLAIN = Implementation()
PIPELINED = Implementation(post_pipeline=True)
REGISTERED = Implementation(registers=Registers.READS)
#: Every variant the boards build (their DSP blocks aside), and their parts one at a time:
#: each register level alone.
VARIANTS = {"plain": PLAIN, "pipelined": PIPELINED, "registered-reads": REGISTERED,
            "split-multiplier": Implementation(post_pipeline=True, split_multiplier=3),
            "split-operand": Implementation(post_pipeline=True, split_operand=7),
            "registered-host": Implementation(registers=Registers.HOST),
            "spram": Implementation(spram=True), "ice40": without_dsp(ICE40),
            "out-param-shared": Implementation(out_param_shared=True),
            "registered-array": Implementation(registers=Registers.ARRAY),
            "weight-pairs": Implementation(registers=Registers.ARRAY, weight_pairs=True),
            "ecp5": without_dsp(ECP5), "ecp5-85f": without_dsp(ECP5_85F)}


def _config(shape, **kw):
    return AcceleratorConfig(rows=shape[0], cols=shape[1], **{**SMALL, **kw})


def _check_runs(cfg, prog, net, xs, implementation, *, cycles=True):
    """Run the batches ``xs`` one after another: each output equals the reference, and (with
    ``cycles``) the counters equal the cycle model's sum."""
    result = run_program(cfg, prog, *xs, implementation=implementation)
    for x, out in zip(xs, [result["out"], *result["more"]], strict=True):
        np.testing.assert_array_equal(out, net.forward(x))
    if cycles:
        assert result["cycles"] == sum(program_cycles(prog, len(x), implementation)
                                       for x in xs)


@pytest.mark.parametrize("dataflow", ["ws", "os"])
@pytest.mark.parametrize("shape", [(2, 3), (3, 2), (1, 1)])
def test_random_network(shape, dataflow):
    cfg = _config(shape, dataflow=dataflow)
    result, prog, m, _ = run_random_network(cfg, shape[0] * 10 + shape[1], layers=3,
                                            max_width=9)
    assert result["cycles"] == program_cycles(prog, m)
    assert result["macs"] == m * prog.padded_macs_per_row


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("dataflow", ["ws", "os"])
def test_every_variant_is_exact_in_outputs_and_cycles(name, dataflow):
    """Each implementation (each register level among them) computes what the reference
    does, and hwgen.cycles counts its cycles exactly, which are the plain design's and the
    cycles the levels' documentation states: a requantized chunk's pipeline stages and
    write-back register (from ``Registers.HOST`` on), and from ``Registers.ARRAY`` on a cycle
    per chunk of a weight-stationary array with registered inputs, or on this small
    output-stationary array of the walker's staged rows (its first tile's weights do not hide
    the first row's cycle). With ``weight_pairs`` a weight-stationary array loads its tiles
    two rows a cycle, which saves cycles."""
    impl = VARIANTS[name]
    cfg = _config((2, 3), dataflow=dataflow)
    if impl.weight_pairs and dataflow == "os":
        with pytest.raises(ValueError, match="weight_pairs=True loads an int8 weight-stationary"):
            AcceleratorCore(cfg, implementation=impl)
        return
    result, prog, m, net = run_random_network(cfg, 23 + len(name), layers=3, max_width=9,
                                              implementation=impl)
    assert result["cycles"] == program_cycles(prog, m, impl)
    requantized = sum(layer.output != "raw" for layer in net.layers)
    chunks = len(net.layers) * -(-m // cfg.acc_depth)
    requant = Requantizer.stages_for(impl) + (impl.registers >= Registers.HOST)
    array = impl.registers >= Registers.ARRAY
    added = result["cycles"] - program_cycles(prog, m)
    if impl.weight_pairs and dataflow == "ws":
        # ... less what the tiles' loads save, two rows a cycle (on these 2-row tiles a cycle
        # a tile, but for the banks' rest and the tiles hidden behind longer batches).
        assert added < requant * requantized + array * chunks
    else:
        assert added == requant * requantized + array * chunks


@pytest.mark.parametrize(("shape", "name"), [((2, 2), "plain"), ((3, 1), "plain"),
                                             ((4, 3), "ice40"), ((4, 4), "ice40")])
def test_act_split_at_the_single_port_words(shape, name):
    """ACT split at ``act_spram_depth`` (the iCEBreaker's input area in SPRAM, two banks to a
    word): chains of four layers, whose second pass writes area 0 again and whose last output
    the host reads from it, give the reference's outputs, and the cycle model counts them."""
    impl = VARIANTS[name]
    cfg = _config(shape, act_depth=128, act_spram_depth=64, spatial=False, residual=False)
    for seed in range(2):
        result, prog, m, _ = run_random_network(cfg, 40 + seed + shape[1], layers=4,
                                                max_width=9, implementation=impl)
        assert result["cycles"] == program_cycles(prog, m, impl)


@pytest.mark.parametrize(("shape", "post_lanes"), [((2, 4), 1), ((2, 4), 2), ((4, 2), 1),
                                                   ((3, 6), 3)])
@pytest.mark.parametrize("name", ["plain", "ice40"])
def test_fewer_requant_lanes(shape, post_lanes, name):
    """A row requantized over several cycles gives the reference's outputs, and the cycle model
    counts the spaced rows (the iCEBreaker builds one lane)."""
    cfg = _config(shape, post_lanes=post_lanes)
    assert cfg.requant_steps == shape[1] // post_lanes
    impl = VARIANTS[name]
    result, prog, m, _ = run_random_network(cfg, shape[0] * 10 + shape[1] + post_lanes,
                                            layers=3, max_width=13, implementation=impl)
    assert result["cycles"] == program_cycles(prog, m, impl)


def _unsaturated_layer(cfg, seed, impl):
    """Run one requantized 9 -> 7 layer whose outputs spread over the int8 range (so that a
    wrong product shows); check the outputs against the reference and return its cycles and
    program."""
    rng = np.random.default_rng(seed)
    x = random_input(rng, cfg, 5, 9)
    w = rng.integers(-128, 128, size=(9, 7))
    b = rng.integers(-1000, 1001, size=7)
    mult = rng.integers(1 << (cfg.mult_bits - 1), 1 << cfg.mult_bits, size=7)  # top bit set
    # Shifts that put each channel's largest product just past the int8 range.
    peak = np.abs((x @ w + b) * mult).max(axis=0)
    shift = np.array([max(0, int(v).bit_length() - 8) for v in peak])
    net = QuantizedNetwork([Dense(w, b, mult, shift, activation="identity")], in_bits=8,
                           w_bits=8, acc_bits=cfg.acc_bits, mult_bits=cfg.mult_bits)
    prog = hwgen.compile(net, cfg)
    result = run_program(cfg, prog, x, implementation=impl)
    expected = net.forward(x)
    assert len(np.unique(expected)) > 5   # not saturated throughout
    np.testing.assert_array_equal(result["out"], expected)
    return result["cycles"], prog


@pytest.mark.parametrize(("shape", "post_lanes", "impl"), [
    ((2, 3), None, PIPELINED),
    ((3, 2), None, PIPELINED),
    ((2, 3), None, Implementation(post_pipeline=True, split_multiplier=2)),
    ((4, 4), 1, Implementation(post_pipeline=True, split_multiplier=4)),
    ((3, 4), 2, Implementation(post_pipeline=True, split_multiplier=3)),
    ((2, 3), None, Implementation(post_pipeline=True, split_operand=17,
                                  registers=Registers.READS)),
    ((3, 4), 2, Implementation(post_pipeline=True, split_operand=7,
                               registers=Registers.READS)),
], ids=["pipelined-2x3", "pipelined-3x2", "split2", "split4-lanes1", "split3-lanes2",
        "operand17", "operand7-lanes2"])
def test_products_of_the_pipelined_requantization(shape, post_lanes, impl):
    """Products whose rounded results spread over the int8 range, on each pipelined
    requantization; an odd mult_bits makes the split multiplier's pieces differ in width."""
    cfg = _config(shape, post_lanes=post_lanes, mult_bits=9)
    cycles, prog = _unsaturated_layer(cfg, shape[0] * 10 + shape[1] + 11, impl)
    assert cycles == program_cycles(prog, 5, impl)


@pytest.mark.parametrize("dataflow", ["ws", "os"])
@pytest.mark.parametrize("shape", [(1, 3), (2, 3), (3, 2)])
def test_registered_reads_forward_every_sum(shape, dataflow):
    """Batches of one to four rows come back to a row's accumulators one to four cycles after
    stage B summed it, before the memory holds the sum (the forwarded cases); the raw last
    layer shows every accumulator unsaturated."""
    cfg = _config(shape, dataflow=dataflow)
    rng = np.random.default_rng(shape[0] * 10 + shape[1])
    net = random_network(rng, cfg, widths=[2, 7, 8, 5], raw=True)   # one k-tile, then more
    prog = hwgen.compile(net, cfg, batch=5)
    xs = [random_input(rng, cfg, m, net.in_features) for m in (1, 2, 3, 4, 5, 1)]
    _check_runs(cfg, prog, net, xs, REGISTERED)


@pytest.mark.parametrize("post_pipeline", [False, True])
def test_accumulator_reads_skip_writes_between_spaced_rows(post_pipeline):
    """With one requantization lane the last tile's rows enter the engine two cycles apart, and
    the accumulators' look-ahead address holds between them: its read must still be skipped
    when the write of the same cycle is to that word (the collision watch fails otherwise; a
    random search found it)."""
    cfg = _config((3, 2), post_lanes=1)
    rng = np.random.default_rng(59)
    net = random_network(rng, cfg, layers=2, max_width=9)
    prog = hwgen.compile(net, cfg, batch=3)
    xs = [random_input(rng, cfg, m, net.in_features) for m in (2, 1, 3)]
    impl = Implementation(registers=Registers.READS, post_pipeline=post_pipeline)
    _check_runs(cfg, prog, net, xs, impl, cycles=False)


@pytest.mark.parametrize("name", ["plain", "pipelined", "ecp5", "ice40"])
def test_a_run_after_a_raw_layer_is_exact(name):
    """Runs follow one another as a host makes them: a run that ends on a raw layer leaves no
    state in the (gated) requantization pipeline for the next run's first layer to trip over.
    (The pipelined variants, which every board builds, once ended the next run's first layer
    early on the raw layer's end flag.)"""
    impl = VARIANTS[name]
    cfg = _config((2, 3), post_lanes=1 if name == "ice40" else None)
    rng = np.random.default_rng(41)
    net = random_network(rng, cfg, layers=2, max_width=7, raw=True)
    prog = hwgen.compile(net, cfg, batch=3)
    xs = [random_input(rng, cfg, m, net.in_features) for m in (3, 2, 3)]
    _check_runs(cfg, prog, net, xs, impl)


@pytest.mark.parametrize(("shape", "widths", "batch", "impl"), [
    ((2, 3), (5, 7, 7), 3, PLAIN),
    ((1, 3), (5, 10, 9), 1, Implementation(post_pipeline=True, registers=Registers.READS,
                                           split_operand=17)),
], ids=["plain", "ecp5"])
def test_activation_reads_skip_words_past_the_row(shape, widths, batch, impl):
    """A reduction tile may end inside a word: the banks past the row's end would read the
    next word, here the first word of the output area, while the layer writes it. The feeder
    does not read such words, so no activation read ever meets a write. Both cases collided
    before (found by a random search)."""
    cfg = _config(shape)
    rng = np.random.default_rng(3)
    net = random_network(rng, cfg, widths=list(widths), raw=True)
    prog = hwgen.compile(net, cfg, batch=batch)
    # The input's rows end inside a word, and the output area starts right after it.
    assert prog.descriptors[0]["dst_base"] == batch * prog.descriptors[0]["src_stride"]
    assert widths[0] % cfg.act_lanes
    xs = [random_input(rng, cfg, batch, widths[0]) for _ in range(2)]
    _check_runs(cfg, prog, net, xs, impl, cycles=False)


@pytest.mark.parametrize(("shape", "name"), [((4, 4), "plain"), ((4, 4), "registered-reads"),
                                             ((3, 5), "ecp5"), ((5, 3), "pipelined"),
                                             ((4, 4), "ecp5-85f")])
def test_first_convolution_in_the_taps_layout(shape, name):
    """A first convolution of fewer channels than rows takes its input in the taps layout
    (its taps packed into tiles, rows above and below the image read as zeros): outputs and
    cycles exact on a square array, whose feeder rotates lanes only for it, and on others;
    the next layers read pixel by pixel."""
    impl = VARIANTS[name]
    cfg = _config(shape, prog_depth=12)
    rng = np.random.default_rng(sum(shape))
    c, n = shape[0] - 1, 3
    conv = Conv2D(rng.integers(-128, 128, (3, 2, c, n)), rng.integers(-300, 300, n),
                  rng.integers(1, 1 << 10, n), rng.integers(8, 14, n), stride=(2, 1),
                  padding=(1, 2, 1, 0))
    pool = MaxPool2D(2)
    dense = Dense(rng.integers(-128, 128, (2 * n, 4)), rng.integers(-300, 300, 4),
                  np.ones(4, int), np.zeros(4, int), output="raw")
    net = QuantizedNetwork([conv, pool, Flatten(), dense], input_shape=(5, 4, c))
    prog = hwgen.compile(net, cfg, batch=2)
    assert prog.descriptors[0]["geometry"]["taps"] == 1
    assert prog.layers[0].k_tiles == -(-6 * c // shape[0])
    xs = [random_image(rng, cfg, m, net.input_shape) for m in (2, 1)]
    _check_runs(cfg, prog, net, xs, impl)


def test_weight_in_lane_groups():
    """On the 85F's register level a WEIGHT deep enough is one memory per two int8 lanes
    (:func:`~hwgen.device.memories.weight_groups`: as many DP16KDs as one), each addressed by a
    copy of the feeder's registers: outputs and cycles exact over batches, and the host reads
    back the words it wrote, whole."""
    cfg = _config((4, 4), weight_depth=1024)
    impl = VARIANTS["ecp5-85f"]
    assert weight_groups(cfg, impl) == [(0, 1), (2, 3)]
    dut = AcceleratorCore(cfg, impl)
    assert dut.weight_feeder.copies == 2
    result, prog, m, _ = run_random_network(cfg, 29, layers=3, max_width=9,
                                            implementation=impl)
    assert result["cycles"] == program_cycles(prog, m, impl)
    rng = np.random.default_rng(5)
    words = [int(w) for w in rng.integers(0, 1 << 32, 6, dtype=np.uint64)]
    seen = []

    async def bench(ctx):
        port = AmaranthHostPort(ctx, dut.host, dut.host_read_latency)
        await port.write(Region.WEIGHT, 1015, words)
        seen.extend(await port.read(Region.WEIGHT, 1015, len(words)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == words


@pytest.mark.parametrize(("shape", "name", "dataflow", "post_lanes"), [
    ((4, 4), "plain", "ws", None), ((4, 4), "registered-reads", "ws", None),
    ((3, 5), "ecp5", "ws", None), ((5, 3), "pipelined", "os", None),
    ((4, 4), "ice40", "ws", 2)])
def test_max_pools_fused_into_convolutions(shape, name, dataflow, post_lanes):
    """A taps convolution (right padding, strides) and a convolution over pixels, each with a
    max pool fused into its pass (2x2, then 3x3 over an odd side, windows across chunks of
    acc_depth rows): outputs and cycles exact, no pooling pass, and runs of other batches
    after them."""
    impl = VARIANTS[name]
    cfg = _config(shape, prog_depth=12, dataflow=dataflow, post_lanes=post_lanes,
                  acc_depth=36, act_depth=512)
    rng = np.random.default_rng(sum(shape) + 7)
    c, n = shape[0] - 1, 3
    conv = Conv2D(rng.integers(-128, 128, (3, 2, c, n)), rng.integers(-300, 300, n),
                  rng.integers(1, 1 << 10, n), rng.integers(8, 14, n), stride=(1, 2),
                  padding=(1, 1, 1, 2))
    conv2 = Conv2D(rng.integers(-128, 128, (2, 2, n, 4)), rng.integers(-300, 300, 4),
                   rng.integers(1, 1 << 10, 4), rng.integers(8, 14, 4), padding=1,
                   activation="identity")
    dense = Dense(rng.integers(-128, 128, (4, 3)), rng.integers(-300, 300, 3),
                  np.ones(3, int), np.zeros(3, int), output="raw")
    net = QuantizedNetwork([conv, MaxPool2D(2), conv2, MaxPool2D(3), Flatten(), dense],
                           input_shape=(9, 8, c))
    prog = hwgen.compile(net, cfg, batch=3)
    assert [d["kind"] for d in prog.descriptors] == [0, 0, 0]
    assert [d["geometry"]["pool"] for d in prog.descriptors] == [1, 2, 0]
    assert prog.descriptors[0]["geometry"]["taps"] == 1
    xs = [random_image(rng, cfg, m, net.input_shape) for m in (3, 1, 2)]
    _check_runs(cfg, prog, net, xs, impl)


@pytest.mark.parametrize("options", [
    {"split_multiplier": 1}, {"split_multiplier": 4},
    {"split_operand": 17, "registers": Registers.READS},     # the ECP5 boards'
    {"split_operand": 5},
], ids=["whole", "split-multiplier", "ecp5", "split-operand-5"])
def test_pipelined_requantization_saturates_on_any_bit_of_the_product(options):
    """Products that are one power of two, at every bit a product reaches: a positive one
    overflows through one term of the pipelined overflow flags only. Negative ones and
    products shifted back into range check the other direction. (The biases put a one on every
    bit of the operand, so every slice of a split operand, signed top one included, is
    exercised.)"""
    impl = Implementation(post_pipeline=True, **options)
    cfg = _config((2, 3))
    # (bias exponent, multiplier exponent, sign, shift): products +-2**(e + k).
    fit = 6                                     # shifted to about 2**6: in range
    channels = [(e, k, 1, 0) for k in (0, cfg.mult_bits - 1) for e in range(cfg.acc_bits - 1)]
    channels += [(e, cfg.mult_bits - 1, -1, e % 3) for e in range(0, cfg.acc_bits - 1, 4)]
    channels += [(e, cfg.mult_bits - 1, s, min(e + cfg.mult_bits - 1 - fit,
                                               (1 << cfg.shift_bits) - 1))
                 for e in range(0, cfg.acc_bits - 1, 5) for s in (1, -1)]
    e, k, sign, shift = (np.array(v) for v in zip(*channels, strict=True))
    x = np.zeros((2, 3), dtype=np.int64)
    w = np.zeros((3, len(channels)), dtype=np.int64)
    net = QuantizedNetwork([Dense(w, sign << e, 1 << k, shift, activation="identity")],
                           in_bits=8, w_bits=8, acc_bits=cfg.acc_bits, mult_bits=cfg.mult_bits)
    result = run_program(cfg, hwgen.compile(net, cfg), x, implementation=impl)
    expected = net.forward(x)
    assert {-128, 127} <= set(np.unique(expected))      # saturated both ways...
    assert len(np.unique(expected)) > 8                 # ...and not everywhere
    np.testing.assert_array_equal(result["out"], expected)


@pytest.mark.parametrize(("shape", "dataflow", "post_lanes", "name"), [
    ((2, 3), "ws", None, "plain"),
    ((3, 2), "os", None, "registered-reads"),
    ((2, 4), "ws", 1, "ice40"),
    ((4, 4), "ws", 1, "ice40"),          # the iCEBreaker's array
], ids=["2x3-plain", "3x2-os-registered", "2x4-ice40-lanes1", "4x4-ice40-lanes1"])
def test_dense_networks_without_spatial_layers(shape, dataflow, post_lanes, name):
    """A device without the patch walker's image walk and the pooler runs dense networks as
    one with them does: outputs of the reference and the cycle model's cycles, for runs of a
    full batch (``acc_depth`` rows: one chunk), one row and a few, one after the other."""
    impl = VARIANTS[name]
    cfg = _config(shape, dataflow=dataflow, post_lanes=post_lanes, spatial=False)
    rng = np.random.default_rng(shape[0] * 10 + shape[1] + 97)
    net = random_network(rng, cfg, layers=3, max_width=8)
    prog = hwgen.compile(net, cfg)
    assert prog.batch == cfg.acc_depth
    xs = [random_input(rng, cfg, m, net.in_features) for m in (cfg.acc_depth, 1, 3)]
    _check_runs(cfg, prog, net, xs, impl)


@pytest.mark.parametrize("extra", [0, 1], ids=["8-rows", "9-rows"])
def test_one_sample_dense_layers_with_weight_pairs(extra):
    """With ``weight_pairs`` an 8-row array loads its tiles two rows a cycle: one-sample runs
    through dense layers (a tile a row: the banks' rest and the last rows' later writes at
    their closest) give the reference's outputs in the model's cycles, fewer than a row a
    cycle would take; with the depthwise unit's ninth row too."""
    impl = dataclasses.replace(VARIANTS["ecp5-85f"], weight_pairs=True)
    depthwise = {"depthwise": True, "dw_extra_rows": 1} if extra else {}
    cfg = _config((8, 8 if extra else 2), weight_depth=1024, **depthwise)
    assert unit_latencies(cfg, impl).weight_rows == 2
    rng = np.random.default_rng(85 + extra)
    net = random_network(rng, cfg, widths=[40, 24, 17, 9])
    prog = hwgen.compile(net, cfg)
    xs = [random_input(rng, cfg, 1, 40) for _ in range(2)]
    _check_runs(cfg, prog, net, xs, impl)
    one_row = dataclasses.replace(impl, weight_pairs=False)
    assert program_cycles(prog, 1, impl) < program_cycles(prog, 1, one_row)


def test_weight_pairs_from_banks_of_depth(monkeypatch):
    """With weight pairs on 16-bit groups of lanes WEIGHT is split into banks one block RAM
    deep (:func:`~hwgen.device.memories.weight_banks`), read through a register per bank and
    port: a network whose weights span two banks (the second part full) gives the
    reference's outputs in the model's cycles. Banks of 1,024 words here, half the build's,
    for a short simulation, and three rows a tile: tiles straddle the banks' ends, a pair's
    rows in two banks among them (word 1,023 = 341 tiles of three)."""
    monkeypatch.setattr(memories, "WEIGHT_BANK_DEPTH", 1024)
    impl = dataclasses.replace(VARIANTS["ecp5-85f"], weight_pairs=True)
    cfg = _config((3, 4), weight_depth=1024 + 700)
    assert weight_banks(cfg, impl) == [1024, 700]
    rng = np.random.default_rng(1024)
    net = random_network(rng, cfg, widths=[60, 60, 9])
    prog = hwgen.compile(net, cfg)
    base, words = prog.images[Region.WEIGHT]
    assert base + len(words) > 1024
    _check_runs(cfg, prog, net, [random_input(rng, cfg, 1, 60) for _ in range(2)], impl)


def test_the_icebreaker_preset_runs_dense_networks():
    """The iCEBreaker's configuration (no spatial layers, one requantization lane, a 22-bit
    accumulator) and implementation: a full batch of 64 rows through three layers, then a run
    of two rows."""
    cfg = AcceleratorConfig(**ICEBREAKER_PRESET)
    assert not cfg.spatial
    impl = without_dsp(ICE40)
    rng = np.random.default_rng(64)
    net = random_network(rng, cfg, widths=[7, 8, 5, 6])    # rows of two words at most
    prog = hwgen.compile(net, cfg)
    assert prog.batch == cfg.acc_depth
    xs = [random_input(rng, cfg, m, 7) for m in (cfg.acc_depth, 2)]
    _check_runs(cfg, prog, net, xs, impl)


#: Room for a residual graph's live tensors and programs of a dozen passes.
GRAPH = {"act_depth": 600, "weight_depth": 1024, "param_depth": 64, "prog_depth": 64}


def _graph_inputs(rng, cfg, net, batches):
    """Random inputs of ``net`` (images or rows), one per batch size of ``batches``."""
    shape = net.input_shape
    return [random_image(rng, cfg, m, shape) if len(shape) == 3
            else random_input(rng, cfg, m, shape[0]) for m in batches]


@pytest.mark.parametrize(("images", "name", "options"), [
    (True, "plain", {}),
    (True, "registered-reads", {}),
    (True, "ecp5", {"bounds": False}),
    (False, "plain", {}),
    (False, "ice40", {"spatial": False}),
], ids=["images-plain", "images-registered", "images-ecp5-no-bounds", "rows-plain",
        "rows-ice40-no-spatial"])
def test_residual_graphs(images, name, options):
    """Random graphs of every block (identity and projection shortcuts, branches of different
    depths, an add feeding an add, a tensor with three consumers) over images or rows: the
    reference's outputs and the cycle model's cycles; the plain designs over two runs (the
    adder starts clean in each), the others over one."""
    impl = VARIANTS[name]
    cfg = _config((2, 3), **{**GRAPH, **options})
    rng = np.random.default_rng(len(name) * 7 + images)
    kinds = list(rng.permutation(GRAPH_BLOCKS))
    nets = [random_graph(rng, cfg, images=images, input_shape=(3, 4, 5) if images else (11,),
                         blocks=2, kinds=kinds[:2], max_channels=5, head=False),
            random_graph(rng, cfg, images=images, input_shape=(3, 3, 4) if images else (7,),
                         blocks=3, kinds=kinds[2:], max_channels=4)]
    for net in nets:
        assert any(type(layer).__name__ == "Add" for layer in net.layers)
        prog = hwgen.compile(net, cfg)
        runs = (min(prog.batch, 2), 1) if name == "plain" else (min(prog.batch, 2),)
        _check_runs(cfg, prog, net, _graph_inputs(rng, cfg, net, runs), impl)


def _widest(net):
    """The most output channels (features) of a Conv2D or Dense layer of ``net``."""
    return max(layer.weight.shape[-1] for layer in net.layers
               if type(layer).__name__ in ("Conv2D", "Dense"))


@pytest.mark.parametrize(("shape", "post_lanes", "name", "channels"), [
    ((2, 4), 1, "plain", 6), ((2, 4), 2, "ecp5-85f", 6),
    # The 85F's 8x16 (about 100 s in CI; the 2x4 with two lanes takes the same paths under its
    # implementation) and under another implementation, in the slow run.
    pytest.param((8, 16), 4, "ecp5-85f", 20, marks=pytest.mark.slow),
    pytest.param((8, 16), 8, "registered-host", 20, marks=pytest.mark.slow)],
    ids=["2x4-lanes1", "2x4-lanes2-85f", "8x16-lanes4-85f", "8x16-lanes8-host"])
def test_fewer_banks_than_columns(shape, post_lanes, name, channels):
    """A weight-stationary array of more columns than rows with fewer requantization lanes
    than columns has ``max(rows, post_lanes)`` activation banks, so that an output tile of
    ``cols`` channels spans several words: dense layers, convolutions (grouped ones among
    them), a first convolution in the taps layout, fused and unfused max pools and residual
    graphs over more channels than banks give the reference's outputs in the cycle model's
    cycles, over two runs."""
    impl = VARIANTS[name]
    cfg = _config(shape, post_lanes=post_lanes, **{**GRAPH, "acc_depth": 32,
                                                   "weight_depth": 2048, "out_depth": 1024})
    assert cfg.act_lanes == max(shape[0], post_lanes) < cfg.cols
    rng = np.random.default_rng(sum(shape) + post_lanes)
    nets = [random_network(rng, cfg, layers=3, max_width=3 * channels),
            taps_cnn(rng, cfg, max_channels=channels),
            pooled_cnn(rng, cfg, max_channels=channels),
            random_cnn(rng, cfg, max_channels=channels, blocks=2),
            random_graph(rng, cfg, images=True, max_channels=channels, blocks=2)]
    assert max(map(_widest, nets)) > cfg.act_lanes
    kinds = {type(layer).__name__ for net in nets for layer in net.layers}
    assert {"Dense", "Conv2D", "MaxPool2D", "Add"} <= kinds
    for i, net in enumerate(nets):
        prog = hwgen.compile(net, cfg)
        if i == 1:
            assert prog.descriptors[0]["geometry"]["taps"] == 1
        batches = (min(prog.batch, 2), 1)
        xs = (_graph_inputs(rng, cfg, net, batches) if net.input_shape
              else [random_input(rng, cfg, m, net.layers[0].in_features) for m in batches])
        _check_runs(cfg, prog, net, xs, impl)


def _depthwise_net(rng, cfg, shape, *, stride=1):
    """A depthwise block as MobileNets have it: a depthwise 3x3 (padded, ``stride``), a
    pointwise 1x1, an average pool and a dense head over the pooled image."""
    h, w, c = shape
    n = c + 2

    def conv(k, c_in, c_out, **kw):
        return Conv2D(rng.integers(-128, 128, (k, k, c_in, c_out)), rng.integers(-900, 900, c_out),
                      rng.integers(1, 1 << 14, c_out), rng.integers(13, 17, c_out), **kw)

    oh, ow = -(-h // stride), -(-w // stride)
    layers = [conv(3, 1, c, groups=c, stride=stride, padding=(1, 1, 1, 1) if stride == 1
                   else (0, 1, 0, 1), activation="relu"),
              conv(1, c, n, activation="relu"),
              AvgPool2D(2, mult=rng.integers(1, 1 << 14, n), shift=rng.integers(12, 15, n)),
              GlobalAvgPool2D(mult=rng.integers(1, 1 << 14, n), shift=rng.integers(8, 11, n)),
              Flatten(),
              Dense(rng.integers(-128, 128, (n, 3)), rng.integers(-99, 99, 3), np.ones(3, int),
                    np.zeros(3, int), output="raw")]
    assert oh >= 2 and ow >= 2
    return QuantizedNetwork(layers, in_bits=8, w_bits=8, acc_bits=cfg.acc_bits,
                            mult_bits=cfg.mult_bits, input_shape=shape)


@pytest.mark.parametrize(("shape", "name", "stride"), [
    ((2, 4), "plain", 1), ((3, 4), "registered-reads", 2), ((4, 4), "ecp5-85f", 1),
    ((2, 4), "pipelined", 2), ((3, 3), "registered-array", 1)])
def test_depthwise_passes_on_the_unit(shape, name, stride):
    """A MobileNet block whose depthwise convolution and average pools run on the depthwise
    unit (chunks of a few rows, several tiles and output tiles), between matrix passes: the
    reference's outputs and the cycle model's cycles, over two runs."""
    impl = VARIANTS[name]
    cfg = _config(shape, depthwise=True, act_depth=600, acc_depth=12, dw_depth=16,
                  prog_depth=24)
    rng = np.random.default_rng(shape[0] * 5 + stride)
    net = _depthwise_net(rng, cfg, (7, 6, 6), stride=stride)
    prog = hwgen.compile(net, cfg)
    kinds = [PassKind(d["kind"]) for d in prog.descriptors]
    assert kinds.count(PassKind.DEPTHWISE) == 3, kinds
    xs = [random_image(rng, cfg, min(prog.batch, 2), net.input_shape),
          random_image(rng, cfg, 1, net.input_shape)]
    _check_runs(cfg, prog, net, xs, impl)


@pytest.mark.parametrize(("shape", "name", "stride", "extra"), [
    ((2, 4), "plain", 1, 1), ((3, 4), "ecp5-85f", 2, 1), ((4, 4), "registered-array", 1, 5)])
def test_depthwise_passes_on_extra_rows(shape, name, stride, extra):
    """The block above on a unit with ``extra`` rows below the array (tiles of ``rows + extra``
    taps, the whole 3x3 kernel in one with five): the reference's outputs and the cycle
    model's cycles, the matrix passes through the same array exact too."""
    cfg = _config(shape, depthwise=True, act_depth=600, acc_depth=12, dw_depth=16,
                  prog_depth=24, dw_extra_rows=extra)
    rng = np.random.default_rng(shape[0] * 7 + extra)
    net = _depthwise_net(rng, cfg, (7, 6, 6), stride=stride)
    prog = hwgen.compile(net, cfg)
    dw = [d for d in prog.descriptors if PassKind(d["kind"]) is PassKind.DEPTHWISE]
    assert dw[0]["k_tiles"] == -(-9 // (shape[0] + extra))
    xs = [random_image(rng, cfg, min(prog.batch, 2), net.input_shape),
          random_image(rng, cfg, 1, net.input_shape)]
    _check_runs(cfg, prog, net, xs, VARIANTS[name])


@pytest.mark.parametrize("name", ["plain", "ecp5-85f"])
def test_a_pool_over_its_whole_input_on_the_unit(name):
    """A pool as large as its input whose stride (its size, 16 x 2) is past the geometry's,
    as KWS's: the unit walks it (16 tiles of taps, the stride never taken) to the reference's
    outputs in the cycle model's cycles."""
    cfg = _config((2, 4), depthwise=True, act_depth=600, acc_depth=12, dw_depth=16,
                  prog_depth=24)
    rng = np.random.default_rng(16)
    c = 4
    pool = AvgPool2D((16, 2), mult=rng.integers(1, 1 << 14, c), shift=rng.integers(12, 15, c))
    net = QuantizedNetwork([pool], in_bits=8, w_bits=8, acc_bits=cfg.acc_bits,
                           mult_bits=cfg.mult_bits, input_shape=(17, 2, c))
    prog = hwgen.compile(net, cfg)
    assert [PassKind(d["kind"]) for d in prog.descriptors] == [PassKind.DEPTHWISE]
    assert prog.descriptors[0]["k_tiles"] == 16
    _check_runs(cfg, prog, net, [random_image(rng, cfg, min(prog.batch, 2), net.input_shape)],
                VARIANTS[name])


def test_a_depthwise_unit_only_with_depthwise():
    for depthwise in (True, False):
        dut = AcceleratorCore(_config((2, 3), depthwise=depthwise), ICE40)
        names = [name for _, name, _ in Fragment.get(dut, None).subfragments]
        assert ("depthwise" in names) == depthwise
        assert ("depthwise" in dut.banks.kinds) == depthwise


@pytest.mark.parametrize("residual", [True, False])
def test_an_adder_only_with_residual_adds(residual):
    dut = AcceleratorCore(_config((2, 3), residual=residual), ICE40)
    names = [name for _, name, _ in Fragment.get(dut, None).subfragments]
    assert ("adder" in names) == residual
    assert "add" in dut.banks.kinds if residual else list(dut.banks.kinds) == ["matrix", "pool"]


@pytest.mark.parametrize("spatial", [True, False])
def test_a_pooler_only_with_spatial_layers(spatial):
    dut = AcceleratorCore(_config((2, 3), spatial=spatial), ICE40)
    names = [name for _, name, _ in Fragment.get(dut, None).subfragments]
    assert ("pooler" in names) == spatial
    assert {"controller", "activation_feeder", "engine"} <= set(names)


@pytest.mark.parametrize("stride", [1, 2])
def test_a_one_pixel_pooling_window(stride):
    """MaxPool2D(1, stride), a subsampling: the reference's outputs (its window's first
    position is its last, so a read of PRIME2 taken for the walk's would write early)."""
    cfg = _config((2, 3))
    rng = np.random.default_rng(stride)
    n = 3
    conv = Conv2D(rng.integers(-128, 128, (1, 1, 2, n)), np.zeros(n, int), np.ones(n, int),
                  np.full(n, 8), activation="identity")
    net = QuantizedNetwork([conv, MaxPool2D(1, stride)], in_bits=8, w_bits=8,
                           acc_bits=cfg.acc_bits, mult_bits=cfg.mult_bits,
                           input_shape=(4, 4, 2))
    prog = hwgen.compile(net, cfg, batch=1)
    x = random_image(rng, cfg, 1, (4, 4, 2))
    result = run_program(cfg, prog, x)
    np.testing.assert_array_equal(result["out"], net.forward(x))
    assert result["cycles"] == program_cycles(prog, 1)


@pytest.mark.parametrize(("shape", "name"), [((2, 2), "plain"), ((2, 3), "ecp5-85f"),
                                             ((3, 2), "pipelined")])
def test_reductions_fill_the_fields_that_count_them(shape, name):
    """A reduction runs up to what the descriptor's fields hold, past ``max_k``: max_k = 4
    sizes ``k_tiles`` for ``ceil(4 / rows)`` tiles, and the field holds all ones of that
    width (3 tiles: 6 inputs on 2 rows, 9 on 3). A Dense over rows and a Dense after a
    Flatten with that many tiles run exact, in outputs and cycles."""
    cfg = _config(shape, max_k=4)
    tiles, words = reduction_limits(cfg)
    k = min(tiles * cfg.rows, words * cfg.act_lanes)
    assert tiles == 3 and k == 3 * cfg.rows > cfg.max_k
    rng = np.random.default_rng(k)
    dense = Dense(rng.integers(-128, 128, (k, 3)), rng.integers(-999, 1000, 3),
                  np.ones(3, int), np.zeros(3, int), output="raw")
    image = (1, tiles, cfg.rows)     # a tile of rows channels at each of its positions
    for layers, x in (([dense], random_input(rng, cfg, 2, k)),
                      ([Flatten(), dense], random_image(rng, cfg, 2, image))):
        net = QuantizedNetwork(layers, input_shape=x.shape[1:])
        prog = hwgen.compile(net, cfg, batch=2)
        assert prog.descriptors[-1]["k_tiles"] == tiles
        _check_runs(cfg, prog, net, [x], VARIANTS[name])


@pytest.mark.parametrize(("level", "in_registers", "latency", "banked"), [
    (Registers.NONE, False, 1, False), (Registers.READS, False, 2, False),
    (Registers.HOST, False, 4, False), (Registers.HOST, True, 2, False),
    (Registers.ARRAY, False, 4, True)],
    ids=["plain", "registered-reads", "staged-host", "bus", "weight-banks"])
def test_host_port_reads_back_every_region(level, in_registers, latency, banked):
    """Words written through the host port read back from every region, each with ``rvalid``
    a fixed latency after ``re`` (one cycle, one more with registered reads, two more with a
    staged host port, which ``Registers.HOST`` brings but for a driver that registers its
    requests itself, a bus top) and zeros above the region's word; reads follow one another
    back to back. With WEIGHT in banks of depth (weight pairs on 16-bit groups:
    :func:`~hwgen.device.memories.weight_banks`), words at each bank's ends too."""
    from hwgen.memmap import regions

    cfg = _config((2, 4), weight_depth=3 * WEIGHT_BANK_DEPTH if banked else SMALL["weight_depth"])
    impl = Implementation(registers=level, weight_pairs=banked)
    assert len(weight_banks(cfg, impl)) == (3 if banked else 1)
    dut = AcceleratorCore(cfg, impl, host_in_registers=in_registers)
    h = dut.host
    rng = np.random.default_rng(5)
    ends = [k * WEIGHT_BANK_DEPTH + d for k in range(3) for d in (-1, 0, 1) if banked and k]
    addresses = {r: [*range(min(g.depth, 9)), *(ends if r is Region.WEIGHT else [])]
                 for r, g in regions(cfg).items()}
    images = {r: {a: int.from_bytes(rng.bytes(g.word_bits // 8 + 1), "little")
                  % (1 << g.word_bits) for a in addresses[r]}
              for r, g in regions(cfg).items()}
    assert dut.host_read_latency == latency
    seen = {}

    async def bench(ctx):
        ctx.set(h.we, 1)
        for region, words in images.items():
            ctx.set(h.region, region)
            for a, w in words.items():
                ctx.set(h.addr, a)
                ctx.set(h.wdata, w)
                await ctx.tick()
        ctx.set(h.we, 0)
        # Round robin over the regions, with an idle cycle now and then.
        most = max(len(a) for a in addresses.values())
        asks = [(r, a[i]) for i in range(most) for r, a in addresses.items() if i < len(a)]
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
                seen.setdefault(answered[0], {})[answered[1]] = ctx.get(h.rdata)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == images


def test_implementation_is_checked_against_the_config(refused):
    cfg = AcceleratorConfig(rows=2, cols=2, mult_bits=9)
    refused(r"split_multiplier=10 .* allowed: 1\.\.9",
            lambda: AcceleratorCore(cfg, Implementation(split_multiplier=10)))
    refused("implementation must be an Implementation",
            lambda: AcceleratorCore(cfg, {"post_pipeline": True}), errors=TypeError)
