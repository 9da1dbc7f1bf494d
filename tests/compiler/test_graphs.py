"""Graphs through the compiler: every tensor stays in ACT, untouched, until its last consumer
(checked word range against word range from the network's own consumers), programs of ADD
passes saved and loaded, read-out of every node, and whole runs through the host driver on an
in-process device, bit-exact against hwgen.nn."""

import dataclasses

import numpy as np
import pytest
from support import COMPILER_CONFIGS as CONFIGS

from host import Accelerator
from hwgen.compiler import Program, compile_network
from hwgen.cycles import program_cycles
from hwgen.memmap import PassKind
from hwgen.nn import (
    CNN,
    INPUT,
    Flatten,
    FloatAdd,
    FloatConv2D,
    FloatDense,
    Node,
    load_digits_images,
    quantize,
)
from sim.inprocess import InProcessDevice
from sim.interpreter import run_on_interpreter
from sim.netgen import GRAPH_BLOCKS, random_graph, random_image

CONFIG = dataclasses.replace(CONFIGS["3x2"], prog_depth=128)
OS = dataclasses.replace(CONFIGS["os5x7"], prog_depth=128)


def _graph(seed, config=CONFIG, **kwargs):
    rng = np.random.default_rng(seed)
    kinds = [GRAPH_BLOCKS[(seed + i) % len(GRAPH_BLOCKS)] for i in range(3)]
    kwargs = {"images": seed % 3 != 2, "blocks": 3, "kinds": kinds, "max_channels": 6,
              **kwargs}
    return random_graph(rng, config, **kwargs), rng


def _stored(net):
    """Each network tensor's stored tensor: itself, or a Flatten's input's."""
    stored = {INPUT: INPUT}
    for node in net.nodes:
        stored[node.name] = (stored[node.inputs[0]] if isinstance(node.layer, Flatten)
                             else node.name)
    return stored


def _word_ranges(program, net):
    """Each stored tensor's ACT words ``[low, high)`` at the program's batch, from the
    descriptors (its writer's ``dst_base``, ``dst_stride`` and output pixels)."""
    batch = program.batch
    ranges = {INPUT: (program.input.base,
                      program.input.base + batch * program.input.pixels * program.input.stride)}
    for spec, d in zip(program.layers, program.descriptors, strict=True):
        if d["raw"]:
            continue
        g = d.get("geometry", {"oh": 1, "ow": 1})
        words = batch * g["oh"] * g["ow"] * d["dst_stride"]
        ranges[net.nodes[spec.source].name] = (d["dst_base"], d["dst_base"] + words)
    return ranges


@pytest.mark.parametrize("seed", range(10))
def test_every_tensor_stays_until_its_last_consumer(seed):
    net, rng = _graph(seed)
    program = compile_network(net, CONFIG)
    stored = _stored(net)
    ranges = _word_ranges(program, net)
    # The pass of each node, and each stored tensor's first and last pass (from the network).
    order = {net.nodes[spec.source].name: i for i, spec in enumerate(program.layers)}
    first = {INPUT: -1, **order}
    last = dict(first)
    for node in net.nodes:
        if node.name in order:
            for name in node.inputs:
                last[stored[name]] = max(last[stored[name]], order[node.name])
    last[stored[net.nodes[-1].name]] = len(program.layers)   # the output: read after the run
    for name, i in order.items():
        if name not in ranges:
            continue   # a raw last pass writes OUTPUT
        low, high = ranges[name]
        assert high <= CONFIG.act_depth
        for other, (o_low, o_high) in ranges.items():
            if other != name and first[other] < i <= last[other]:
                assert high <= o_low or o_high <= low, (name, other)
    x = random_image(rng, CONFIG, 2, net.input_shape)
    got, _ = run_on_interpreter(program, x, out_shape=net.output_shape,
                                channels=net.output_shape[-1])
    np.testing.assert_array_equal(got, net.forward(x))


@pytest.mark.parametrize("seed", range(6))
def test_programs_of_add_passes_save_load_and_run(tmp_path, seed):
    net, rng = _graph(seed)
    program = compile_network(net, CONFIG)
    assert PassKind.ADD in {spec.kind for spec in program.layers}
    path = tmp_path / "graph.npz"
    program.save(path)
    loaded = Program.load(path)
    assert loaded == program
    x = random_image(rng, CONFIG, 2, net.input_shape)
    got, unpacked = run_on_interpreter(loaded, x, out_shape=net.output_shape,
                                       channels=net.output_shape[-1])
    np.testing.assert_array_equal(got, net.forward(x))
    np.testing.assert_array_equal(unpacked, net.forward(x))
    readout = compile_network(net, CONFIG, readout=True)
    readout.save(path)
    assert Program.load(path) == readout


@pytest.mark.parametrize(("seed", "config"), [(0, CONFIG), (1, CONFIG), (2, CONFIG), (3, OS),
                                              (4, OS)])
def test_graphs_run_bit_exact_through_the_host_driver(seed, config):
    net, rng = _graph(seed, config)
    program = compile_network(net, config, batch=3)
    x = random_image(rng, config, 7, net.input_shape)   # runs of 3, 3 and 1
    with Accelerator(InProcessDevice(config), config=config) as acc:
        acc.load(program)
        np.testing.assert_array_equal(acc.infer(x), net.forward(x))
        counters = acc.counters()
    runs = -(-len(x) // program.batch)
    assert counters.runs == runs
    last = len(x) - (runs - 1) * program.batch
    assert counters.cycles == ((runs - 1) * program_cycles(program, program.batch)
                               + program_cycles(program, last))


@pytest.mark.parametrize("seed", range(3))
def test_every_node_of_a_graph_is_read_out(seed):
    net, rng = _graph(seed)
    program = compile_network(net, CONFIG, readout=True, batch=2)
    assert len(program.layer_outputs) == len(net.nodes)
    x = random_image(rng, CONFIG, 3, net.input_shape)
    with Accelerator(InProcessDevice(CONFIG), config=CONFIG) as acc:
        acc.load(program)
        outputs = acc.infer(x, outputs="all")
    for got, want in zip(outputs, net.forward_trace(x), strict=True):
        np.testing.assert_array_equal(got, want)


def _float_resnet(rng):
    """A float residual CNN on 8x8 digits: a stem, a block with an identity shortcut and one
    with a 1x1 stride-2 projection, a Flatten and a Dense (He-normal weights)."""
    def conv(k, c_in, c_out, stride=1, relu=True):
        return FloatConv2D(rng.normal(0, np.sqrt(2 / (k * k * c_in)), (k, k, c_in, c_out)),
                           rng.normal(0, 0.1, c_out), stride=stride, padding=k // 2,
                           relu=relu)

    return CNN([
        Node("stem", conv(3, 1, 5), INPUT),
        Node("a1", conv(3, 5, 5), "stem"),
        Node("a2", conv(3, 5, 5, relu=False), "a1"),
        Node("add1", FloatAdd(activation="relu"), ["a2", "stem"]),
        Node("b1", conv(3, 5, 9, stride=2), "add1"),
        Node("b2", conv(3, 9, 9, relu=False), "b1"),
        Node("proj", conv(1, 5, 9, stride=2, relu=False), "add1"),
        Node("add2", FloatAdd(activation="relu"), ["b2", "proj"]),
        Node("flat", Flatten(), "add2"),
        Node("fc", FloatDense(rng.normal(0, 0.2, (4 * 4 * 9, 10)), rng.normal(0, 0.1, 10),
                              relu=False), "flat"),
    ], input_shape=(8, 8, 1))


@pytest.mark.parametrize("config", [CONFIG, OS], ids=["3x2", "os5x7"])
def test_a_quantized_float_resnet_runs_bit_exact_through_the_host_driver(config):
    # From a float graph: quantize on the digits, compile, run on an in-process device.
    x_train, _, x_test, _ = load_digits_images()
    model = _float_resnet(np.random.default_rng(4))
    net = quantize(model, x_train[:200], in_bits=config.in_bits, w_bits=config.w_bits,
                   acc_bits=config.acc_bits, mult_bits=config.mult_bits)
    program = compile_network(net, config)
    assert [spec.kind for spec in program.layers].count(PassKind.ADD) == 2
    x = net.quantize_input(x_test[:40])
    with Accelerator(InProcessDevice(config), config=config) as acc:
        acc.load(program)
        got = acc.infer(x)
    np.testing.assert_array_equal(got, net.forward(x))
    if config.in_bits == config.w_bits == 8:   # (os5x7's 6-bit activations, 3-bit weights)
        agreement = np.mean(got.argmax(axis=1) == model.forward(x_test[:40]).argmax(axis=1))
        assert agreement >= 0.9, agreement


def test_a_tensor_added_to_itself_runs_bit_exact():
    """Both inputs of an Add may be one tensor (x + x): the pass reads it at src_base and
    src2_base alike."""
    from hwgen.nn import Add, Conv2D, Dense, QuantizedNetwork

    rng = np.random.default_rng(5)
    conv = Conv2D(rng.integers(-60, 60, (3, 3, 2, 4)), rng.integers(-500, 500, 4),
                  np.full(4, 300), np.full(4, 14), padding=1, activation="relu")
    add = Add(mult_a=np.array([3, 5, 7, 9]), mult_b=np.array([1, 2, 3, 4]), shift=3)
    dense = Dense(rng.integers(-60, 60, (4 * 4 * 4, 3)), np.zeros(3, int), np.ones(3, int),
                  np.zeros(3, int), output="raw")
    net = QuantizedNetwork([Node("conv", conv, INPUT), Node("double", add, ("conv", "conv")),
                            Node("flat", Flatten(), "double"), Node("fc", dense, "flat")],
                           input_shape=(4, 4, 2))
    program = compile_network(net, CONFIG, batch=2)
    src = [d for d in program.descriptors if PassKind(d["kind"]) is PassKind.ADD]
    assert len(src) == 1 and src[0]["src_base"] == src[0]["src2_base"]
    x = random_image(rng, CONFIG, 5, net.input_shape)
    with Accelerator(InProcessDevice(CONFIG), config=CONFIG) as acc:
        acc.load(program)
        np.testing.assert_array_equal(acc.infer(x), net.forward(x))
