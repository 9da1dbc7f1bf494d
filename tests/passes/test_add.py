"""The residual add pass (hwgen.passes.add): its lowering and descriptor, its PARAM image as
SPEC32 lays it out (decoded lane by lane), random graphs compiled and run on the program
interpreter bit-exact against hwgen.nn, and the refusals of what the device cannot do."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import COMPILER_CONFIGS as CONFIGS
from support import assert_interpreted
from support import compile_refused as refused

from hwgen import AcceleratorConfig
from hwgen.compiler import compile_network
from hwgen.compiler.fileformat import legacy_descriptor_layout
from hwgen.cycles import layer_busy_rows, layer_cycles, program_cycles
from hwgen.memmap import PassKind, Region, descriptor_layout
from hwgen.nn import INPUT, Add, Conv2D, Dense, Flatten, MaxPool2D, Node, QuantizedNetwork
from sim.interpreter import ProgramInterpreter
from sim.netgen import GRAPH_BLOCKS, random_add, random_graph, random_image

ADD = PassKind.ADD.value


def _conv(rng, c_in, n, **kwargs):
    return Conv2D(rng.integers(-128, 128, (3, 3, c_in, n)), rng.integers(-500, 500, n),
                  rng.integers(1, 1 << 12, n), rng.integers(10, 14, n), padding=1, **kwargs)


def _dense(rng, k, n, mult_bits=12, **kwargs):
    return Dense(rng.integers(-128, 128, (k, n)), rng.integers(-500, 500, n),
                 rng.integers(1, 1 << mult_bits, n), rng.integers(10, 14, n), **kwargs)


def _block(rng, shape, add=None):
    """A residual block over ``shape`` images: a convolution, then the add of its output and
    the block's input (``conv`` first)."""
    c = shape[-1]
    add = add or Add(mult_a=rng.integers(1, 1 << 15, c), mult_b=rng.integers(1, 1 << 15, c),
                     shift=rng.integers(14, 18, c), activation="relu")
    return QuantizedNetwork([Node("conv", _conv(rng, c, c), INPUT),
                             Node("sum", add, ("conv", INPUT))], input_shape=shape)


def _exact(net, config, rng, m=3, **kwargs):
    """Compile ``net``, run it on the interpreter, compare with hwgen.nn; return the
    program."""
    program = compile_network(net, config, **kwargs)
    x = random_image(rng, config, m, net.input_shape)
    return assert_interpreted(program, net, x)


# -- lowering and descriptor ---------------------------------------------------------------

def test_an_add_of_images_is_a_spatial_pass_reading_both_tensors():
    rng = np.random.default_rng(0)
    config = CONFIGS["3x2"]   # 3 banks: 7 channels take 3 words per pixel
    net = _block(rng, (4, 5, 7))
    program = _exact(net, config, rng)
    conv, add = program.descriptors
    assert add["kind"] == ADD and add["spatial"] == 1 and add["last"] == 1
    # conv's output, then the input (the add's two inputs in order), both 3 words a pixel.
    assert add["src_base"] == conv["dst_base"] and add["src2_base"] == program.input.base
    assert add["src_stride"] == add["dst_stride"] == math.ceil(7 / config.act_lanes) == 3
    assert (add["n"], add["k_tiles"], add["n_tiles"], add["w_base"]) == (7, 0, 0, 0)
    assert (add["leaky"], add["act_min"], add["act_max"]) == (0, 0, 127)
    assert conv["src2_base"] == 0   # a pass of one input
    g = add["geometry"]
    assert (g["h"], g["w"], g["oh"], g["ow"], g["kh"], g["kw"]) == (4, 5, 4, 5, 1, 1)
    assert (g["sy"], g["sx"], g["pad_top"], g["pad_left"], g["cgs"]) == (1, 1, 0, 0, 3)
    assert (g["col_step"], g["row_step"], g["img_step"]) == (3, 3, 3)
    # Its parameters follow the convolution's: 2P words per channel word.
    assert add["p_base"] == conv["p_base"] + conv["n_tiles"]
    assert [s.kind for s in program.layers] == [PassKind.MATRIX, PassKind.ADD]
    assert program.layers[1].p_words == 2 * math.ceil(config.act_lanes / config.cols) * 3


def test_an_add_of_rows_is_a_pass_over_rows():
    rng = np.random.default_rng(1)
    config = CONFIGS["3x2"]
    add = random_add(rng, config, 5)
    net = QuantizedNetwork([Node("a", _dense(rng, 9, 5, activation="identity"), INPUT),
                            Node("b", _dense(rng, 9, 5), INPUT), Node("s", add, ("a", "b"))],
                           input_shape=(9,))
    program = _exact(net, config, rng, m=4)
    d = program.descriptors[2]
    assert d["kind"] == ADD and d["spatial"] == 0 and "geometry" not in d
    assert (d["src_base"], d["src2_base"]) == (program.descriptors[0]["dst_base"],
                                               program.descriptors[1]["dst_base"])
    assert d["src_stride"] == d["dst_stride"] == 2 and d["n"] == 5


def test_an_add_reading_one_tensor_twice_and_an_add_of_adds():
    rng = np.random.default_rng(2)
    config = CONFIGS["8x8"]
    c = 9
    twice = random_add(rng, config, c)
    net = QuantizedNetwork([
        Node("c", _conv(rng, c, c, activation="identity"), INPUT),
        Node("double", twice, ("c", "c")),
        Node("more", random_add(rng, config, c), ("double", INPUT)),
        Node("most", random_add(rng, config, c), ("more", "c"))], input_shape=(3, 4, c))
    program = _exact(net, config, rng)
    d = program.descriptors
    assert d[1]["src_base"] == d[1]["src2_base"] == d[0]["dst_base"]
    assert d[2]["src_base"] == d[1]["dst_base"] and d[2]["src2_base"] == program.input.base
    assert d[3]["src_base"] == d[2]["dst_base"] and d[3]["src2_base"] == d[0]["dst_base"]


# -- the PARAM image ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 2, 7), (11,), (2, 2, 16)])
@pytest.mark.parametrize("name", ["3x2", "2x3", "1x1", "os5x7"])
def test_param_image_lays_out_each_channel_word_per_spec(name, shape):
    """Channel word ``cw``'s 2P words from ``p_base + 2 P cw``: word ``j < P`` lane ``l`` is
    channel ``cw * act_lanes + j * cols + l``'s (mult_a, shift), word ``P + j`` its (mult_b,
    shift); bias and mult_neg 0, lanes past the word's channels or past C zero."""
    config = CONFIGS[name]
    rng = np.random.default_rng(len(shape) + config.cols)
    c = shape[-1]
    top = (1 << config.mult_bits) - 1
    add = Add(mult_a=rng.integers(1, top + 1, c), mult_b=rng.integers(1, top + 1, c),
              shift=rng.integers(1, config.acc_bits + config.mult_bits, c))
    net = QuantizedNetwork([Node("s", add, (INPUT, INPUT))], input_shape=shape,
                           in_bits=config.in_bits, w_bits=config.w_bits,
                           acc_bits=config.acc_bits, mult_bits=config.mult_bits)
    program = compile_network(net, config)
    (d,) = program.descriptors
    lanes, cols = config.act_lanes, config.cols
    big_p = -(-lanes // cols)
    words = -(-c // lanes)
    base, image = program.images[Region.PARAM]
    assert len(image) == 2 * big_p * words == program.layers[0].p_words
    device = ProgramInterpreter(config)
    for i, word in enumerate(image):
        device.write(Region.PARAM, base + i, word)
    for cw in range(words):
        for j in range(big_p):
            for lane in range(cols):
                channel = cw * lanes + j * cols + lane
                real = j * cols + lane < lanes and channel < c
                first = device.params(d["p_base"] + 2 * big_p * cw + j, lane)
                second = device.params(d["p_base"] + 2 * big_p * cw + big_p + j, lane)
                want_a = (0, int(add.mult_a[channel]), int(add.shift[channel]), 0) if real \
                    else (0, 0, 0, 0)
                want_b = (0, int(add.mult_b[channel]), int(add.shift[channel]), 0) if real \
                    else (0, 0, 0, 0)
                assert (first, second) == (want_a, want_b), (cw, j, lane)


# -- random graphs on the interpreter ----------------------------------------------------

_GRAPH_CONFIGS = {
    **{name: dataclasses.replace(CONFIGS[name], prog_depth=128)
       for name in ("3x2", "2x3", "8x8", "os5x7")},
    "3x2 no bounds": dataclasses.replace(CONFIGS["3x2"], prog_depth=128, bounds=False),
    "5x2": AcceleratorConfig(rows=5, cols=2, act_depth=1 << 14, weight_depth=1 << 15,
                             param_depth=1024, prog_depth=128, acc_depth=16),
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(_GRAPH_CONFIGS)), images=st.booleans(),
       kinds=st.lists(st.sampled_from(GRAPH_BLOCKS), min_size=1, max_size=3),
       seed=st.integers(0, 2**16))
def test_random_graphs_run_bit_exact_on_the_interpreter(name, images, kinds, seed):
    config = _GRAPH_CONFIGS[name]
    rng = np.random.default_rng(seed)
    net = random_graph(rng, config, images=images, blocks=len(kinds), kinds=kinds,
                       max_channels=7)
    program = _exact(net, config, rng, m=int(rng.integers(1, 4)))
    adds = [d for d in program.descriptors if d["kind"] == ADD]
    assert len(adds) == sum(isinstance(layer, Add) for layer in net.layers) >= 1


def test_random_adds_spread_over_the_output_range():
    # The interpreter check means little if every add saturates or rounds to one value.
    config = _GRAPH_CONFIGS["3x2"]
    rng = np.random.default_rng(5)
    seen = []
    for _ in range(10):
        c = 6
        net = QuantizedNetwork([Node("s", random_add(rng, config, c), (INPUT, INPUT))],
                               input_shape=(c,))
        seen.append(net.forward(random_image(rng, config, 200, (c,))))
    values = np.concatenate([s.ravel() for s in seen])
    assert len(np.unique(values)) > 100
    assert (values == -128).mean() < 0.3 and (values == 127).mean() < 0.3


# -- cycles ------------------------------------------------------------------------------

def test_cycle_model_counts_add_passes():
    rng = np.random.default_rng(6)
    config = _GRAPH_CONFIGS["3x2"]
    net = _block(rng, (4, 5, 7))
    program = compile_network(net, config)
    add = program.descriptors[1]
    assert layer_busy_rows(add, 3) == 0 and program.layers[1].p_words > 0
    # The convolution's MACs alone (padded: 27 reduction tiles of 3, 4 output tiles of 2).
    assert (program.macs_per_row, program.padded_macs_per_row) == (4 * 5 * 9 * 7 * 7,
                                                                   4 * 5 * 27 * 3 * 4 * 2)
    # Two reads a word: the count grows by 2 * src_stride per pixel more, whatever the lead.
    one, two = (layer_cycles(config, add, m) for m in (1, 2))
    assert two - one == 2 * add["src_stride"] * 4 * 5
    assert program_cycles(program, 3) == sum(layer_cycles(config, d, 3)
                                             for d in program.descriptors)


# -- refusals ------------------------------------------------------------------------------

def test_an_add_on_a_design_without_the_adder_is_refused_naming_layer_and_option():
    rng = np.random.default_rng(7)
    config = dataclasses.replace(CONFIGS["3x2"], residual=False)
    net = _block(rng, (4, 5, 7))
    error = refused(net, config, "layer 1 ('sum')", "Add", "residual=False",
                    "allowed: networks without Add, or a configuration with residual=True",
                    "it would fit this design with residual=True")
    assert (error.layer, error.resource) == (1, "residual")
    # Its descriptor is as before the adder: no src2_base; a network without Add compiles.
    program = compile_network(QuantizedNetwork([net.layers[0]], input_shape=(4, 5, 7)),
                              config)
    assert "src2_base" not in program.descriptors[0]


def test_the_icebreaker_preset_has_no_adder():
    from hwgen.boards import BOARDS, board_config

    config = board_config(BOARDS["icebreaker"])
    assert config.residual is False and AcceleratorConfig().residual is True
    # Its descriptor is the one of before the adder (format 5's), bit for bit.
    assert descriptor_layout(config) == legacy_descriptor_layout(config, 5)
    assert "residual" in config.to_dict() and "residual" not in AcceleratorConfig().to_dict()
    rng = np.random.default_rng(8)
    net = QuantizedNetwork([Node("a", _dense(rng, 6, 4, mult_bits=8), INPUT),
                            Node("s", random_add(rng, config, 4), ("a", "a"))],
                           acc_bits=22, mult_bits=8, input_shape=(6,))
    refused(net, config, "residual=False")


def test_inputs_stored_differently_are_refused_naming_both():
    # A flattened image keeps its pixels' words (3 channels: one word a pixel on 8 banks);
    # rows of the same 12 features take two words: the adder reads both with one stride.
    rng = np.random.default_rng(9)
    config = CONFIGS["8x8"]
    net = QuantizedNetwork([
        Node("conv", _conv(rng, 3, 3), INPUT), Node("flat", Flatten(), "conv"),
        Node("dense", _dense(rng, 12, 12), "flat"),
        Node("s", random_add(rng, config, 12), ("flat", "dense"))], input_shape=(2, 2, 3))
    error = refused(net, config, "layer 3 ('s')", "'flat' stored as an image (2, 2, 3)",
                    "'dense' stored as rows (12,)", "allowed: inputs stored alike")
    assert error.resource == "layout"


def test_an_add_of_two_flattened_images_runs_as_images():
    rng = np.random.default_rng(10)
    config = _GRAPH_CONFIGS["3x2"]
    net = QuantizedNetwork([
        Node("p", MaxPool2D(2, 1), INPUT), Node("q", _conv(rng, 4, 4), "p"),
        Node("fp", Flatten(), "p"), Node("fq", Flatten(), "q"),
        # One multiplier and shift for the flat tensor's 24 features: an image's channels
        # would each have their own.
        Node("s", Add(mult_a=3000, mult_b=5000, shift=13, activation="relu"), ("fp", "fq")),
        Node("d", _dense(rng, 24, 5, output="raw"), "s")], input_shape=(4, 3, 4))
    program = _exact(net, config, rng)
    add = program.descriptors[2]
    assert add["kind"] == ADD and add["spatial"] == 1 and add["n"] == 4


def test_a_graph_that_does_not_fit_act_names_tensor_buffer_need_and_capacity():
    rng = np.random.default_rng(11)
    config = dataclasses.replace(CONFIGS["8x8"], act_depth=256)
    net = _block(rng, (8, 8, 4))   # 64 words a tensor, three live at the add
    program = compile_network(net, config)
    assert program.batch == 1
    error = refused(net, config, "need 384 ACT words", "tensor 'input'", "act_depth=256",
                    batch=2)
    assert (error.need, error.limit, error.resource) == (384, 256, "act_depth")


def test_a_design_without_spatial_refuses_an_add_of_images():
    rng = np.random.default_rng(12)
    config = dataclasses.replace(CONFIGS["3x2"], spatial=False)
    c = 3
    net = QuantizedNetwork([Node("s", random_add(rng, config, c), (INPUT, INPUT))],
                           input_shape=(2, 2, c))
    refused(net, config, "an Add walks images", "spatial=False")
