"""A network of named tensors (hwgen.nn.graph): a chain given as nodes is the chain given as a
list, every tensor by name, and the refusals of graphs that are not well formed."""

import itertools

import numpy as np
import pytest

from hwgen.nn import (
    CNN,
    INPUT,
    Conv2D,
    Dense,
    Flatten,
    FloatConv2D,
    FloatDense,
    MaxPool2D,
    Node,
    QuantizedNetwork,
    quantize,
)


def params(rng, n):
    return rng.integers(-300, 300, n), rng.integers(0, 1 << 12, n), rng.integers(8, 16, n)


def dense(rng, k, n, **kw):
    return Dense(rng.integers(-128, 128, (k, n)), *params(rng, n), **kw)


def conv(rng, c_in, c_out, k=2, **kw):
    return Conv2D(rng.integers(-128, 128, (k, k, c_in, c_out)), *params(rng, c_out), **kw)


def random_chain(seed):
    """Return ``(layers, input_shape, x)``: a random chain of every layer kind and its input."""
    rng = np.random.default_rng(seed)
    if seed % 3 == 0:  # rows only
        sizes = rng.integers(1, 8, int(rng.integers(2, 5)))
        layers = [dense(rng, int(k), int(n), activation=str(rng.choice(["relu", "identity"])))
                  for k, n in itertools.pairwise(sizes)]
        return layers, None, rng.integers(-128, 128, (3, int(sizes[0])))
    shape = (int(rng.integers(3, 7)), int(rng.integers(3, 7)), int(rng.integers(1, 4)))
    layers, (h, w, c) = [], shape
    for _ in range(int(rng.integers(1, 4))):
        if rng.random() < 0.4 and min(h, w) >= 2:
            layers.append(MaxPool2D(2, 1))
            h, w = h - 1, w - 1
        else:
            n = int(rng.integers(1, 4))
            layers.append(conv(rng, c, n, padding=int(rng.integers(0, 2))))
            h, w, c = layers[-1].output_shape((h, w, c))
    if rng.random() < 0.6:
        layers += [Flatten(), dense(rng, h * w * c, 3)]
    if isinstance(layers[-1], Dense | Conv2D) and rng.random() < 0.5:
        layers[-1].output = "raw"
    return layers, shape, rng.integers(-128, 128, (2, *shape))


def as_named_nodes(layers):
    """The chain of ``layers`` as nodes of names a chain would not give them."""
    names = [f"{type(layer).__name__.lower()}_{i}" for i, layer in enumerate(layers)]
    return [Node(name, layer, INPUT if i == 0 else [names[i - 1]])
            for i, (name, layer) in enumerate(zip(names, layers, strict=True))]


@pytest.mark.parametrize("seed", range(12))
def test_a_chain_as_nodes_computes_the_chain(seed):
    layers, shape, x = random_chain(seed)
    chain = QuantizedNetwork(layers, input_shape=shape, acc_bits=40)
    graph = QuantizedNetwork(as_named_nodes(layers), input_shape=shape, acc_bits=40)
    assert [node.name for node in chain.nodes] == [f"layer{i}" for i in range(len(layers))]
    assert chain.output == f"layer{len(layers) - 1}"
    assert graph.output == graph.nodes[-1].name != chain.output
    assert graph.shapes == chain.shapes and graph.layers == chain.layers
    for a, b in zip(chain.forward_trace(x), graph.forward_trace(x), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(chain.forward(x), graph.forward(x))


@pytest.mark.parametrize("seed", range(6))
def test_forward_tensors_names_every_output_of_forward_trace(seed):
    layers, shape, x = random_chain(seed)
    net = QuantizedNetwork(as_named_nodes(layers), input_shape=shape, acc_bits=40)
    tensors = net.forward_tensors(x)
    assert list(tensors) == [INPUT, *(node.name for node in net.nodes)] == list(net.tensors)
    np.testing.assert_array_equal(tensors[INPUT], x)
    for node, y, (_, out) in zip(net.nodes, net.forward_trace(x), net.shapes, strict=True):
        np.testing.assert_array_equal(tensors[node.name], y)
        assert net.tensors[node.name].shape == out == y.shape[1:]
    # Each tensor is read by the next node, the output by none.
    consumers = [net.tensors[name].consumers for name in tensors]
    assert consumers == [(node.name,) for node in net.nodes] + [()]


def test_chain_nodes_follow_the_layers_list():
    rng = np.random.default_rng(0)
    net = QuantizedNetwork([dense(rng, 3, 4), dense(rng, 4, 2)])
    net.layers.append(dense(rng, 2, 5))
    assert [n.name for n in net.nodes] == ["layer0", "layer1", "layer2"]
    assert net.forward(np.zeros((1, 3), dtype=int)).shape == (1, 5)
    graph = QuantizedNetwork([Node("a", dense(rng, 3, 4), "input"),
                              Node("b", dense(rng, 4, 2), ["a"])])
    replacement = dense(rng, 4, 6)
    graph.layers[1] = replacement
    assert graph.nodes[1] == Node("b", replacement, ("a",)) and graph.output_shape == (6,)
    graph.layers.append(dense(rng, 6, 1))
    with pytest.raises(ValueError, match="'layers' has 3 layers but the network has 2 nodes"):
        graph.forward(np.zeros((1, 3), dtype=int))


def test_layer_errors_name_the_node():
    rng = np.random.default_rng(0)
    nodes = [Node("c", conv(rng, 1, 2), INPUT), Node("d", dense(rng, 5, 2), "c")]
    with pytest.raises(ValueError, match=r"layer 1 \('d'\): Dense needs a flat input \(K,\) but "
                                         r"layer 0 \('c'\) gives \(3, 3, 2\)"):
        QuantizedNetwork(nodes, input_shape=(4, 4, 1))


def node(name, inputs, layer=None):
    return Node(name, layer or Dense(np.ones((2, 2), dtype=int), [0, 0], [1, 1], [0, 0]),
                inputs)


@pytest.mark.parametrize(("nodes", "pattern"), [
    ([node("a", INPUT), node("a", "a")],
     r"node 1 is named 'a', also the name of layer 0 \('a'\); allowed: a unique name other "
     r"than 'input'"),
    ([node("input", INPUT)], r"node 0 is named 'input', the name of the network input"),
    ([node("a", INPUT), node("b", "x")],
     r"layer 1 \('b'\): input 'x' is not a tensor of the network; allowed: one of "
     r"\['input', 'a'\]"),
    ([node("a", "b"), node("b", INPUT)],
     r"layer 0 \('a'\): input 'b' is computed by layer 1 \('b'\), not before it \(a cycle or "
     r"a forward reference\); allowed: one of \['input'\]"),
    ([node("a", "a")], r"layer 0 \('a'\): input 'a' is computed by layer 0 \('a'\), not before"),
    ([node("a", [INPUT, INPUT])],
     r"layer 0 \('a'\): a Dense takes 1 input\(s\) but the node names 2 \['input', 'input'\]; "
     r"allowed: 1"),
    ([node("a", [])], r"a Dense takes 1 input\(s\) but the node names 0"),
    ([node("a", INPUT), node("b", INPUT)],
     r"layer 0 \('a'\): nothing reads its output and it is not the last node \(the network's "
     r"output, 'b'\)"),
])
def test_graph_errors(nodes, pattern):
    with pytest.raises(ValueError, match=pattern):
        QuantizedNetwork(nodes)


def test_node_and_mixing_errors():
    with pytest.raises(TypeError, match=r"Node: field 'name' holds 3; allowed: a non-empty"):
        Node(3, None, INPUT)
    with pytest.raises(TypeError, match=r"Node: field 'inputs' holds ''"):
        Node("a", None, [""])
    with pytest.raises(TypeError, match=r"item 1 is a Node but item 0 is a Dense; allowed: all "
                                        r"layers \(a chain\) or all Node"):
        QuantizedNetwork([node("a", INPUT).layer, node("b", "a")])
    with pytest.raises(TypeError, match=r"layer 0 \('a'\): tuple is not a Dense"):
        QuantizedNetwork([Node("a", (1, 2), INPUT)])


def test_scales_per_tensor():
    chain = [node("a", INPUT).layer]
    net = QuantizedNetwork(chain, scales={"input": 0.5, "layer0": 2.0})
    assert net.input_scale == 0.5
    assert {t.name: t.scale for t in net.tensors.values()} == {"input": 0.5, "layer0": 2.0}
    assert QuantizedNetwork(chain, input_scale=0.25).tensors[INPUT].scale == 0.25
    with pytest.raises(ValueError, match=r"scales names 'x', not a tensor of the network; "
                                         r"allowed: \['input', 'layer0'\]"):
        QuantizedNetwork(chain, scales={"x": 1.0})
    with pytest.raises(ValueError, match=r"scales\['layer0'\]=0.0; allowed: a finite float > 0"):
        QuantizedNetwork(chain, scales={"layer0": 0})
    with pytest.raises(ValueError, match=r"scales\['input'\]=0.5 but input_scale=0.25"):
        QuantizedNetwork(chain, scales={"input": 0.5}, input_scale=0.25)


@pytest.mark.parametrize("output", ["raw", "requant"])
def test_quantize_keeps_a_scale_per_tensor(output):
    rng = np.random.default_rng(4)
    model = CNN([FloatConv2D.random(3, 1, 4, padding=1, rng=rng), MaxPool2D(2), Flatten(),
                 FloatDense.random(16, 3, relu=False, rng=rng)], input_shape=(4, 4, 1))
    x = rng.normal(size=(40, 4, 4, 1))
    net = quantize(model, x, output=output)
    scales = {name: t.scale for name, t in net.tensors.items()}
    outputs = model.forward_trace(x)
    # Measured on the calibration data: the input and every convolution or dense output.
    assert scales[INPUT] == net.input_scale == pytest.approx(np.abs(x).max() / 127)
    assert scales["layer0"] == pytest.approx(np.abs(outputs[0]).max() / 127)
    # Pooling and flattening keep their input's scale.
    assert scales["layer1"] == scales["layer2"] == scales["layer0"]
    last = net.layers[-1]
    if output == "requant":
        assert scales["layer3"] == pytest.approx(np.abs(outputs[3]).max() / 127)
    else:  # the accumulators' scale: input scale times the one weight scale
        s_w = np.abs(model.layers[-1].weight).max() / 127
        assert scales["layer3"] == pytest.approx(scales["layer2"] * s_w)
        assert np.abs(last.weight).max() == 127
    np.testing.assert_allclose(net.output_scale, np.full(3, scales["layer3"]))
