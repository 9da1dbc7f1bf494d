"""quantize() on float graphs: a residual CNN with identity and projection shortcuts against
its float model on the digits, every tensor's scale, the adds' multipliers from the scales, and
the quantized graph against an independent integer computation (the naive loops of
``conftest.py`` for the convolutions and the dense layer, NumPy for the adds)."""

import numpy as np
import pytest

from hwgen.nn import (
    CNN,
    INPUT,
    Add,
    Conv2D,
    Flatten,
    FloatAdd,
    FloatConv2D,
    FloatDense,
    Node,
    load_digits_images,
    quantize,
)


def residual_cnn(seed=0, *, add_bounds=None):
    """stem conv -> [conv relu, conv] + identity -> add relu -> [conv s2 relu, conv] + 1x1 s2
    projection -> add relu -> flatten -> dense (logits), random He-normal weights."""
    rng = np.random.default_rng(seed)

    def conv(k, c_in, c_out, stride=1, relu=True):
        return FloatConv2D(rng.normal(0, np.sqrt(2 / (k * k * c_in)), (k, k, c_in, c_out)),
                           rng.normal(0, 0.1, c_out), stride=stride, padding=k // 2,
                           relu=relu)

    return CNN([
        Node("stem", conv(3, 1, 4), INPUT),
        Node("b1.conv1", conv(3, 4, 4), "stem"),
        Node("b1.conv2", conv(3, 4, 4, relu=False), "b1.conv1"),
        Node("b1.add", FloatAdd(activation="relu", **(add_bounds or {})),
             ["b1.conv2", "stem"]),
        Node("b2.conv1", conv(3, 4, 8, stride=2), "b1.add"),
        Node("b2.conv2", conv(3, 8, 8, relu=False), "b2.conv1"),
        Node("b2.proj", conv(1, 4, 8, stride=2, relu=False), "b1.add"),
        Node("b2.add", FloatAdd(activation="relu"), ["b2.conv2", "b2.proj"]),
        Node("flat", Flatten(), "b2.add"),
        Node("fc", FloatDense(rng.normal(0, 0.2, (128, 10)), rng.normal(0, 0.1, 10),
                              relu=False), "flat"),
    ], input_shape=(8, 8, 1))


@pytest.fixture(scope="module")
def digits():
    x_train, _, x_test, _ = load_digits_images()
    return x_train[:300], x_test


def test_quantized_residual_cnn_agrees_with_the_float_model(digits):
    calib, x_test = digits
    model = residual_cnn()
    net = quantize(model, calib)
    assert [node.name for node in net.nodes] == [node.name for node in model.nodes]
    assert [node.inputs for node in net.nodes] == [node.inputs for node in model.nodes]
    assert [type(node.layer).__name__ for node in net.nodes] == \
        ["Conv2D", "Conv2D", "Conv2D", "Add", "Conv2D", "Conv2D", "Conv2D", "Add", "Flatten",
         "Dense"]
    assert net.layers[3].activation == "relu" and net.layers[-1].output == "raw"
    float_logits = model.forward(x_test)
    int_logits = net.forward(net.quantize_input(x_test))
    agreement = np.mean(np.argmax(int_logits, axis=1) == np.argmax(float_logits, axis=1))
    assert agreement >= 0.95, agreement
    dequantized = int_logits * net.output_scale
    assert np.abs(dequantized - float_logits).max() <= 0.05 * np.abs(float_logits).max()
    assert (net.predict(x_test) == np.argmax(int_logits, axis=1)).all()


def test_every_tensor_is_calibrated_and_the_adds_follow_the_scales(digits):
    calib, _ = digits
    model = residual_cnn(1)
    mult_bits = 12
    net = quantize(model, calib, mult_bits=mult_bits, output="requant")
    floats = model.forward_tensors(calib)
    scales = {name: tensor.scale for name, tensor in net.tensors.items()}
    for name, value in floats.items():
        if name != "flat":  # a flatten keeps its input's scale
            assert scales[name] == pytest.approx(np.abs(value).max() / 127), name
    assert scales["flat"] == scales["b2.add"]
    for node in net.nodes:
        if not isinstance(node.layer, Add):
            continue
        add = node.layer
        s_a, s_b = (scales[name] for name in node.inputs)
        s_y = scales[node.name]
        assert add.mult_a.shape == add.mult_b.shape == add.shift.shape == (net.tensors[
            node.name].shape[-1],)
        np.testing.assert_allclose(add.mult_a / 2.0 ** add.shift, s_a / s_y, rtol=2 ** -10)
        np.testing.assert_allclose(add.mult_b / 2.0 ** add.shift, s_b / s_y, rtol=2 ** -10)
        # One shift, chosen for the larger ratio, whose multiplier fills mult_bits.
        larger = np.maximum(add.mult_a, add.mult_b)
        assert ((larger >= 1 << (mult_bits - 1)) & (larger < 1 << mult_bits)).all()


def naive_graph(naive, net, x):
    """The quantized graph evaluated node by node: the naive loops for the convolutions and
    the dense layer, NumPy for the adds, written from the contract."""
    values = {INPUT: x.tolist()}
    for node in net.nodes:
        layer, args = node.layer, [values[name] for name in node.inputs]
        fields = {f: getattr(layer, f).tolist() for f in ("weight", "bias", "mult", "shift")
                  if hasattr(layer, "weight")}
        if isinstance(layer, Conv2D):
            fields |= {"activation": layer.activation, "output": layer.output,
                       "stride": layer.stride, "padding": layer.padding}
            values[node.name] = naive.conv(args[0], fields, net.in_bits)
        elif isinstance(layer, Add):
            a, b = np.array(args[0]), np.array(args[1])
            p = a * layer.mult_a + b * layer.mult_b
            r = (p + (1 << (layer.shift - 1))) >> layer.shift  # every shift here is > 0
            values[node.name] = np.clip(r, *layer.bounds(net.in_bits)).tolist()
        elif isinstance(layer, Flatten):
            values[node.name] = naive.flatten(args[0])
        else:
            fields |= {"activation": layer.activation, "output": layer.output}
            values[node.name] = naive.dense(args[0], fields, net.in_bits)
    return values


def test_the_quantized_graph_is_an_independent_computation(naive, digits):
    calib, x_test = digits
    net = quantize(residual_cnn(2), calib)
    x = net.quantize_input(x_test[:4])
    want = naive_graph(naive, net, x)
    got = net.forward_tensors(x)
    assert all(node.layer.shift.min() > 0 for node in net.nodes
               if isinstance(node.layer, Add))
    for name in got:
        assert got[name].tolist() == want[name], name
    assert net.forward(x).tolist() == want["fc"]


def test_a_relu6_after_an_add_becomes_its_bounds(digits):
    calib, _ = digits
    net = quantize(residual_cnn(3, add_bounds={"act_max": 1.0}), calib, output="requant")
    add = net.layers[3]
    s_y = net.tensors["b1.add"].scale
    assert (add.activation, add.act_min) == ("relu", None)
    assert add.act_max == min(round(1.0 / s_y), 127)
    assert net.forward_tensors(net.quantize_input(calib))["b1.add"].max() <= add.act_max


def test_an_add_last():
    rng = np.random.default_rng(5)
    conv = FloatConv2D(rng.normal(size=(3, 3, 2, 2)), padding=1, relu=False)
    model = CNN([Node("conv", conv, INPUT), Node("sum", FloatAdd(), ["conv", INPUT])],
                input_shape=(4, 4, 2))
    x = rng.normal(size=(20, 4, 4, 2))
    with pytest.raises(ValueError, match=r"quantize: output='raw' but layer 1 \('sum'\) is a "
                                         r"FloatAdd; allowed: output='requant'"):
        quantize(model, x)
    net = quantize(model, x, output="requant")
    assert net.output == "sum" and net.output_shape == (4, 4, 2)
    s_y = net.tensors["sum"].scale
    np.testing.assert_allclose(net.output_scale, np.full(2, s_y))
    got = net.forward(net.quantize_input(x)) * s_y
    # Two roundings of at most half a step, and the add's own: within two steps.
    assert np.abs(got - model.forward(x)).max() <= 2 * s_y
