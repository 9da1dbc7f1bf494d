"""The values each tensor can hold (hwgen.compiler.ranges), and the accumulator proof that
starts from them: a layer after a ReLU is proved with inputs in [0, act_max], which the
reference and the device keep to."""

import numpy as np
import pytest
from support import assert_interpreted, compile_refused

from hwgen import AcceleratorConfig
from hwgen.compiler import compile_network
from hwgen.compiler.ranges import value_ranges
from hwgen.nn import INPUT, Add, Conv2D, Dense, Flatten, MaxPool2D, Node, QuantizedNetwork
from sim.netgen import GRAPH_BLOCKS, random_cnn, random_graph, random_image, random_input


def _dense(k, n, **kwargs):
    return Dense(np.ones((k, n), int), np.zeros(n, int), np.ones(n, int), np.zeros(n, int),
                 **kwargs)


def test_ranges_follow_the_bounds_through_pools_and_flattens():
    conv = Conv2D(np.ones((1, 1, 2, 2), int), np.zeros(2, int), np.ones(2, int),
                  np.zeros(2, int), activation="relu", act_max=90)
    nodes = [Node("conv", conv, INPUT), Node("pool", MaxPool2D(2), "conv"),
             Node("flat", Flatten(), "pool"), Node("fc", _dense(2, 2, activation="identity",
                                                                act_min=-7, act_max=5), "flat"),
             Node("skip", _dense(2, 2, activation="identity"), "flat"),
             Node("sum", Add(mult_a=1, mult_b=1, shift=0, activation="relu"), ("fc", "skip")),
             Node("out", _dense(2, 3, output="raw"), "sum")]
    net = QuantizedNetwork(nodes, input_shape=(2, 2, 2))
    assert value_ranges(net, 8) == {
        INPUT: (-128, 127), "conv": (0, 90), "pool": (0, 90), "flat": (0, 90),
        "fc": (-7, 5), "skip": (-128, 127), "sum": (0, 127), "out": (-128, 127)}


@pytest.mark.parametrize("seed", range(6))
def test_every_tensor_keeps_to_its_range(seed):
    # Soundness against the reference: random CNNs and residual graphs, inputs at both ends.
    config = AcceleratorConfig(rows=4, cols=4)
    rng = np.random.default_rng(seed)
    if seed % 2:
        net = random_graph(rng, config, blocks=2, kinds=GRAPH_BLOCKS[seed % 5:][:2])
    else:
        net = random_cnn(rng, config)
    x = random_image(rng, config, 5, net.shapes[0][0])
    ranges = value_ranges(net, config.in_bits)
    raw = {node.name for node in net.nodes if getattr(node.layer, "output", "") == "raw"}
    for name, values in net.forward_tensors(x).items():
        if name not in raw:
            lo, hi = ranges[name]
            assert lo <= values.min() and values.max() <= hi, name


def _edge_network(acc_bits, first=True):
    """A raw Dense of 32 inputs whose weights are half 127, half -128: over any signed input
    its partial sums reach 127 * 2032 + 128 * 2048 = 520,208 (20 bits), over a ReLU's
    outputs in [0, 127] only 127 * 2032 = 258,064 and -127 * 2048 = -260,096 (19 bits).
    ``first``: behind a ReLU layer (the identity, clamped at 0)."""
    weight = np.tile([127, -128], 16)[:, None] * np.ones((1, 2), int)
    weight[:, 1] = -weight[:, 1] - 1    # channel 1: the same extremes mirrored
    last = Dense(weight, np.zeros(2, int), np.ones(2, int), np.zeros(2, int), output="raw")
    relu = Dense(np.eye(32, dtype=int), np.zeros(32, int), np.ones(32, int),
                 np.zeros(32, int), activation="relu")
    return QuantizedNetwork([relu, last] if first else [last], acc_bits=acc_bits)


def test_a_layer_after_a_relu_is_proved_from_its_inputs_range():
    config = AcceleratorConfig(rows=4, cols=4, acc_bits=19)
    # Straight on the signed input it is refused, naming the channel, its sum and the limit.
    compile_refused(_edge_network(19, first=False), config, "output channel 0 (and 1 more",
                    "partial sum of 520208", "inputs in [-128, 127]", "-262144..262143",
                    "acc_bits >= 20")
    # Behind the ReLU it is proved, and the device reaches both extremes exactly.
    net = _edge_network(19)
    x = random_input(np.random.default_rng(0), config, 4, 32)
    x[0] = np.where(net.layers[1].weight[:, 0] > 0, 127, -128)   # channel 0 at its top
    x[1] = np.where(net.layers[1].weight[:, 0] < 0, 127, -128)   # and at its bottom
    program = assert_interpreted(compile_network(net, config, batch=4), net, x)
    out = net.forward(x)
    assert (out[0, 0], out[1, 0]) == (258_064, -260_096)
    assert program.output.wire_bits == 19
    # One bit less and the proof says which channel and by how much.
    compile_refused(_edge_network(18), AcceleratorConfig(rows=4, cols=4, acc_bits=18),
                    "output channel 0 (and 1 more of the 2 channels) has a partial sum of "
                    "258064", "inputs in [0, 127]", "-131072..131071", "acc_bits >= 19")
    assert compile_network(net, config).output.wire_bits == 19
