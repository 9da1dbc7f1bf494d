"""The float side of graphs: FloatAdd (its activation folding and refusals) and the CNN of
Nodes against NumPy computations written here."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import (
    CNN,
    INPUT,
    Flatten,
    FloatAdd,
    FloatConv2D,
    FloatDense,
    MaxPool2D,
    Node,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

bound = st.one_of(st.none(), st.floats(-3, 3))
op = st.one_of(
    st.tuples(st.just("relu"), st.none(), st.none()),
    st.tuples(st.just("leaky_relu"), st.just(0.0), st.none()),
    st.tuples(st.just("clamp"), bound, bound).filter(
        lambda t: None in t[1:] or t[1] <= t[2]))


@FAST
@given(st.lists(op, min_size=1, max_size=4), st.integers(0, 2**16))
def test_folded_activations_compute_the_chain(ops, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(scale=3, size=(2, 3, 40))
    add = FloatAdd()
    expected = a + b
    for name, first, second in ops:
        reason = add.then(name, alpha=first, low=first, high=second)
        if reason is not None:  # only clamps that leave a constant are refused
            assert "constant" in reason
            return
        if name == "clamp":
            expected = np.clip(expected, -np.inf if first is None else first,
                               np.inf if second is None else second)
        else:  # a ReLU, or a leaky ReLU of slope 0
            expected = np.maximum(expected, 0)
    np.testing.assert_allclose(add.forward(a, b), expected, atol=1e-12)
    assert add.activation in ("identity", "relu")


def test_float_add_fields_and_refusals():
    add = FloatAdd(activation="relu", act_max=6.0)
    assert (add.activation, add.act_min, add.act_max, add.relu) == ("relu", None, 6.0, True)
    assert repr(add) == "FloatAdd(activation='relu', act_min=None, act_max=6.0)"
    assert repr(FloatAdd()) == "FloatAdd(relu=False)"
    assert FloatAdd().output_shape((4, 4, 2), (4, 4, 2)) == (4, 4, 2)
    # A leaky ReLU after a plain add has no integer form; after a ReLU it changes nothing.
    plain = FloatAdd()
    assert "a leaky ReLU after an add cannot be mapped" in plain.then("leaky_relu", alpha=0.1)
    assert plain.activation == "identity"
    assert FloatAdd(activation="relu").then("leaky_relu", alpha=0.1) is None
    with pytest.raises(ValueError, match=r"FloatAdd: field 'activation' is 'leaky_relu'; "
                                         r"allowed: 'identity', 'relu'"):
        FloatAdd(activation="leaky_relu")
    with pytest.raises(ValueError, match=r"FloatAdd: act_min=2.0 > act_max=1.0"):
        FloatAdd(act_min=2.0, act_max=1.0)
    with pytest.raises(ValueError, match=r"FloatAdd: a FloatAdd needs two inputs of one shape "
                                         r"but input a gives \(2, 3\) and input b gives "
                                         r"\(2, 4\)"):
        FloatAdd().forward(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(TypeError):
        FloatAdd("relu")


def residual_cnn(rng, projection=True):
    """stem conv -> [conv relu, conv] + identity -> add relu -> [conv s2 relu, conv] + 1x1 s2
    projection -> add relu -> flatten -> dense (logits)."""
    def conv(k, c_in, c_out, stride=1, relu=True):
        return FloatConv2D(rng.normal(0, np.sqrt(2 / (k * k * c_in)), (k, k, c_in, c_out)),
                           rng.normal(0, 0.1, c_out), stride=stride, padding=k // 2,
                           relu=relu)

    nodes = [Node("stem", conv(3, 1, 4), INPUT),
             Node("b1.conv1", conv(3, 4, 4), "stem"),
             Node("b1.conv2", conv(3, 4, 4, relu=False), "b1.conv1"),
             Node("b1.add", FloatAdd(activation="relu"), ["b1.conv2", "stem"]),
             Node("b2.conv1", conv(3, 4, 8, stride=2), "b1.add"),
             Node("b2.conv2", conv(3, 8, 8, relu=False), "b2.conv1")]
    if projection:
        nodes += [Node("b2.proj", conv(1, 4, 8, stride=2, relu=False), "b1.add"),
                  Node("b2.add", FloatAdd(activation="relu"), ["b2.conv2", "b2.proj"])]
        last = "b2.add"
    else:
        last = "b2.conv2"
    nodes += [Node("flat", Flatten(), last),
              Node("fc", FloatDense(rng.normal(0, 0.2, (128, 10)), rng.normal(0, 0.1, 10),
                                    relu=False), "flat")]
    return CNN(nodes, input_shape=(8, 8, 1))


def numpy_conv(x, layer):
    """NHWC convolution by explicit sums over the kernel (no im2col), then the ReLU."""
    kh, kw, _, c_out = layer.weight.shape
    sy, sx = layer.strides
    p = kh // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    oh, ow = (x.shape[1] + 2 * p - kh) // sy + 1, (x.shape[2] + 2 * p - kw) // sx + 1
    out = np.zeros((x.shape[0], oh, ow, c_out))
    for ky in range(kh):
        for kx in range(kw):
            window = xp[:, ky:ky + (oh - 1) * sy + 1:sy, kx:kx + (ow - 1) * sx + 1:sx, :]
            out += np.einsum("mhwc,cn->mhwn", window, layer.weight[ky, kx])
    out += layer.bias
    return np.maximum(out, 0) if layer.relu else out


def test_graph_forward_matches_numpy():
    rng = np.random.default_rng(0)
    model = residual_cnn(rng)
    layers = {node.name: node.layer for node in model.nodes}
    x = rng.normal(size=(5, 8, 8, 1))
    stem = numpy_conv(x, layers["stem"])
    b1 = np.maximum(numpy_conv(numpy_conv(stem, layers["b1.conv1"]), layers["b1.conv2"])
                    + stem, 0)
    b2 = np.maximum(numpy_conv(numpy_conv(b1, layers["b2.conv1"]), layers["b2.conv2"])
                    + numpy_conv(b1, layers["b2.proj"]), 0)
    logits = b2.reshape(5, -1) @ layers["fc"].weight + layers["fc"].bias
    tensors = model.forward_tensors(x)
    assert list(tensors) == [INPUT, *layers]
    np.testing.assert_allclose(tensors["b1.add"], b1, atol=1e-9)
    np.testing.assert_allclose(model.forward(x), logits, atol=1e-9)
    assert [t.shape[1:] for t in model.forward_trace(x)] == [s for _, s in model.shapes]
    assert model.tensor_shapes["b2.add"] == (4, 4, 8) and model.output_shape == (10,)
    assert model.predict(x).tolist() == np.argmax(logits, axis=1).tolist()
    assert not model.is_chain and "b1.add=FloatAdd(relu=True) <- b1.conv2, stem" in repr(model)


def test_a_graph_does_not_train_but_a_chain_of_nodes_does():
    rng = np.random.default_rng(1)
    model = residual_cnn(rng)
    x, y = rng.normal(size=(4, 8, 8, 1)), rng.integers(0, 10, 4)
    with pytest.raises(ValueError, match=r"CNN.fit: the network is a graph of nodes .*; "
                                         r"allowed: a chain of layers"):
        model.fit(x, y, epochs=1)
    chain = [FloatConv2D.random(3, 1, 2, padding=1, rng=rng), MaxPool2D(2), Flatten(),
             FloatDense.random(32, 10, relu=False, rng=rng)]
    names = ["conv", "pool", "flat", "fc"]
    nodes = CNN([Node(n, layer, names[i - 1] if i else INPUT)
                 for i, (n, layer) in enumerate(zip(names, chain, strict=True))],
                input_shape=(8, 8, 1))
    assert nodes.is_chain and [n.name for n in nodes.nodes] == names
    before = nodes.forward(x)
    nodes.fit(x, y, epochs=2, batch_size=2)
    assert len(nodes.history) == 2 and not np.allclose(nodes.forward(x), before)


def conv1():
    return FloatConv2D(np.ones((1, 1, 2, 2)), relu=False)


@pytest.mark.parametrize(("make", "error", "pattern"), [
    (lambda: CNN([Node("a", conv1(), INPUT), Node("s", FloatAdd(), ["a", INPUT]),
                  Node("t", FloatConv2D(np.ones((1, 1, 2, 3))), "s"),
                  Node("u", FloatAdd(), ["t", "s"])], input_shape=(3, 3, 2)),
     ValueError, r"layer 3 \('u'\): a FloatAdd needs two inputs of one shape but input 't' "
                 r"gives \(3, 3, 3\) and input 's' gives \(3, 3, 2\); allowed: equal shapes"),
    (lambda: CNN([Node("s", FloatAdd(), INPUT)], input_shape=(3, 3, 2)),
     ValueError, r"layer 0 \('s'\): a FloatAdd takes 2 input\(s\) but the node names 1"),
    (lambda: CNN([Node("a", conv1(), INPUT), Node("b", conv1(), INPUT)],
                 input_shape=(3, 3, 2)),
     ValueError, r"layer 0 \('a'\): nothing reads its output and it is not the last node"),
    (lambda: CNN([Node("input", conv1(), INPUT)], input_shape=(3, 3, 2)),
     ValueError, r"CNN: node 0 is named 'input', the name of the network input"),
    (lambda: CNN([conv1(), Node("b", conv1(), "layer0")], input_shape=(3, 3, 2)),
     TypeError, r"CNN: item 1 is a Node but item 0 is a FloatConv2D"),
    (lambda: CNN([Node("s", FloatAdd(), [INPUT, INPUT])]),
     ValueError, r"CNN: field 'input_shape' is None but layer 0 \('s'\) is a FloatAdd"),
    (lambda: CNN([]), ValueError, r"CNN: field 'layers' is empty; allowed: at least one layer"),
    (lambda: CNN([Node("a", "relu", INPUT)]), TypeError,
     r"layer 0 \('a'\): str is not a FloatConv2D, .* or FloatAdd layer"),
])
def test_graph_errors(make, error, pattern):
    with pytest.raises(error, match=pattern):
        make()
