"""Post-training quantization of MLPs and CNNs: the scales of docs/arithmetic.md, accuracy."""

import numpy as np
import pytest

from hwgen.nn import (
    CNN,
    MLP,
    Conv2D,
    Dense,
    Flatten,
    FloatConv2D,
    FloatDense,
    MaxPool2D,
    QuantizedNetwork,
    load_digits_split,
    quantize,
)


@pytest.fixture(scope="module")
def digits_model():
    x_train, y_train, x_test, y_test = load_digits_split()
    model = MLP([64, 32, 10], seed=0).fit(x_train, y_train)
    return model, x_train, x_test, y_test


def test_int8_accuracy_close_to_float(digits_model):
    model, x_train, x_test, y_test = digits_model
    net = quantize(model, x_train)
    assert isinstance(net, QuantizedNetwork)
    float_acc = model.accuracy(x_test, y_test)
    int_acc = float(np.mean(net.predict(x_test) == y_test))
    assert float_acc >= 0.90
    assert int_acc >= float_acc - 0.02
    # Integer and float models mostly agree sample by sample, not only on average.
    assert np.mean(net.predict(x_test) == model.predict(x_test)) >= 0.97


def test_scales_follow_the_contract(digits_model):
    model, x_train, _, _ = digits_model
    net = quantize(model, x_train)
    (w0, b0), (w1, _) = model.layers
    assert (net.in_bits, net.w_bits, net.acc_bits, net.mult_bits) == (8, 8, 32, 16)
    assert net.input_scale == pytest.approx(np.abs(x_train).max() / 127)
    hidden, last = net.layers
    assert (hidden.activation, hidden.output) == ("relu", "requant")
    assert last.output == "raw"
    # Per-channel weight scales: every column reaches +-127 and reconstructs W to half a step.
    s_w = np.abs(w0).max(axis=0) / 127
    assert np.all(np.abs(hidden.weight).max(axis=0) == 127)
    assert np.all(np.abs(hidden.weight * s_w - w0) <= s_w / 2 + 1e-12)
    # Bias at the accumulator's scale.
    s_x = net.input_scale
    assert np.all(np.abs(hidden.bias - b0 / (s_x * s_w)) <= 0.5)
    # mult / 2**shift matches s_x * s_w / s_y with a full-width multiplier.
    s_y = model.forward_trace(x_train)[0].max() / 127
    ratio = hidden.mult / 2.0 ** hidden.shift
    np.testing.assert_allclose(ratio, s_x * s_w / s_y, rtol=2.0 ** -15)
    assert np.all((hidden.mult >= 2 ** 15) & (hidden.mult < 2 ** 16))
    # The raw layer shares one weight scale so that its accumulators compare across channels.
    assert np.abs(last.weight).max() == 127
    np.testing.assert_allclose(net.output_scale, s_y * np.abs(w1).max() / 127)
    logits = net.forward(net.quantize_input(x_train)) * net.output_scale
    float_logits = model.forward(x_train)
    assert np.abs(logits - float_logits).max() < 0.05 * np.abs(float_logits).max()


def test_identity_layers_and_requant_output():
    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(6, 5)), rng.normal(size=5)),
              (rng.normal(size=(5, 4)), rng.normal(size=4)),
              (rng.normal(size=(4, 3)), rng.normal(size=3))]
    model = MLP.from_layers(layers, relu=[False, True, False])
    x = rng.normal(size=(200, 6))
    net = quantize(model, x, output="requant")
    assert [layer.activation for layer in net.layers] == ["identity", "relu", "identity"]
    assert [layer.output for layer in net.layers] == ["requant"] * 3
    got = net.forward(net.quantize_input(x)) * net.output_scale
    expected = model.forward(x)
    # Three requantized layers at 8 bits: a few output steps of error at most.
    assert np.abs(got - expected).max() <= 6 * net.output_scale[0]


def test_wider_and_narrower_widths():
    x_train, y_train, x_test, _ = load_digits_split()
    model = MLP([64, 16, 10], seed=1).fit(x_train, y_train, epochs=10)
    wide = quantize(model, x_train, in_bits=12, w_bits=12, acc_bits=40, mult_bits=24)
    assert np.abs(wide.layers[0].weight).max() == 2 ** 11 - 1
    assert np.all(wide.layers[0].mult >= 2 ** 23)
    assert np.mean(wide.predict(x_test) == model.predict(x_test)) >= 0.99
    narrow = quantize(model, x_train, in_bits=4, w_bits=4, acc_bits=16, mult_bits=8)
    assert np.abs(narrow.layers[0].weight).max() == 7
    assert np.all(np.abs(narrow.forward(narrow.quantize_input(x_test))) < 2 ** 15)


def test_zero_column_and_dead_layer():
    w = np.array([[1.0, 0.0], [-2.0, 0.0]])
    model = MLP.from_layers([(w, [0.0, 0.0]), (np.ones((2, 1)), [0.0])])
    net = quantize(model, np.array([[1.0, 1.0], [0.5, -1.0]]))
    assert net.layers[0].weight[:, 1].tolist() == [0, 0]
    assert net.layers[0].weight[:, 0].tolist() == [64, -127]
    # All-zero calibration activations must not divide by zero either.
    silent = quantize(model, np.zeros((3, 2)))
    assert silent.forward(np.zeros((1, 2), dtype=int)).tolist() == [[0]]


def test_quantize_errors():
    model = MLP([3, 2], seed=0)
    with pytest.raises(ValueError, match=r"calib_x has shape \(4, 2\); allowed: \(M, 3\)"):
        quantize(model, np.zeros((4, 2)))
    with pytest.raises(ValueError, match="calib_x has shape"):
        quantize(model, np.zeros((0, 3)))
    with pytest.raises(ValueError, match="NaN"):
        quantize(model, np.full((1, 3), np.nan))
    with pytest.raises(ValueError, match="output='logits'"):
        quantize(model, np.ones((1, 3)), output="logits")
    huge_bias = MLP.from_layers([(np.full((3, 2), 1e-9), [1e6, 0.0])])
    with pytest.raises(ValueError, match=r"layer 0: quantized bias .* acc_bits=32"):
        quantize(huge_bias, np.ones((1, 3)))


# -- CNNs ---------------------------------------------------------------------------------------

def small_cnn(seed=0, last_relu=False):
    rng = np.random.default_rng(seed)
    return CNN([
        FloatConv2D(rng.normal(size=(3, 3, 2, 4)), rng.normal(0, 0.3, 4), padding=1),
        MaxPool2D(2),
        FloatConv2D(rng.normal(size=(2, 2, 4, 3)), rng.normal(0, 0.3, 3), stride=1),
        Flatten(),
        FloatDense(rng.normal(size=(3, 5)), rng.normal(0, 0.3, 5), relu=last_relu),
    ], input_shape=(4, 4, 2))


def test_cnn_scales_follow_the_contract():
    model = small_cnn()
    x = np.random.default_rng(1).normal(size=(300, 4, 4, 2))
    net = quantize(model, x)
    assert net.input_shape == (4, 4, 2)
    assert [type(layer) for layer in net.layers] == [Conv2D, MaxPool2D, Conv2D, Flatten, Dense]
    conv1, pool, conv2, _, last = net.layers
    assert (conv1.stride, conv1.padding, conv2.stride, conv2.padding) == (1, 1, 1, 0)
    assert (pool.size, pool.stride) == (2, 2)
    assert [(layer.activation, layer.output) for layer in (conv1, conv2, last)] == [
        ("relu", "requant"), ("relu", "requant"), ("identity", "raw")]
    trace = model.forward_trace(x)
    s_x = np.abs(x).max() / 127
    assert net.input_scale == pytest.approx(s_x)
    # One weight scale per output channel: the max over that channel's (KH, KW, C_in) kernel.
    w1 = model.layers[0].weight
    s_w1 = np.abs(w1).max(axis=(0, 1, 2)) / 127
    assert np.all(np.abs(conv1.weight).max(axis=(0, 1, 2)) == 127)
    assert np.all(np.abs(conv1.weight * s_w1 - w1) <= s_w1 / 2 + 1e-12)
    assert np.all(np.abs(conv1.bias - model.layers[0].bias / (s_x * s_w1)) <= 0.5)
    s_y1 = trace[0].max() / 127
    np.testing.assert_allclose(conv1.mult / 2.0 ** conv1.shift, s_x * s_w1 / s_y1,
                               rtol=2.0 ** -15)
    # The pool keeps conv1's scale: conv2's input scale is s_y1, not a scale of its own.
    s_w2 = np.abs(model.layers[2].weight).max(axis=(0, 1, 2)) / 127
    s_y2 = trace[2].max() / 127
    np.testing.assert_allclose(conv2.mult / 2.0 ** conv2.shift, s_y1 * s_w2 / s_y2,
                               rtol=2.0 ** -15)
    # The raw dense layer after the (free) flatten: one shared weight scale.
    s_w3 = np.abs(model.layers[4].weight).max() / 127
    np.testing.assert_allclose(net.output_scale, np.full(5, s_y2 * s_w3))
    logits = net.forward(net.quantize_input(x)) * net.output_scale
    float_logits = model.forward(x)
    assert np.abs(logits - float_logits).max() < 0.05 * np.abs(float_logits).max()
    # Every intermediate tensor dequantizes close to the float model's.
    int_trace = net.forward_trace(net.quantize_input(x))
    for got, want, scale in zip(int_trace[:3], trace[:3], (s_y1, s_y1, s_y2), strict=True):
        assert np.abs(got * scale - want).max() < 0.05 * np.abs(want).max()


def test_cnn_ending_spatially_and_requant_outputs():
    model = small_cnn()
    x = np.random.default_rng(2).normal(size=(100, 4, 4, 2))
    # Ends in a raw convolution: channels share one weight scale.
    head = CNN(model.layers[:3], input_shape=(4, 4, 2))
    net = quantize(head, x)
    assert net.output_shape == (1, 1, 3) and net.layers[-1].output == "raw"
    s_in = head.forward_trace(x)[0].max() / 127
    np.testing.assert_allclose(net.output_scale,
                               np.full(3, s_in * np.abs(model.layers[2].weight).max() / 127))
    # Ends in a flatten, requantized: the output scale repeats over the flattened pixels.
    flat = CNN(model.layers[:4], input_shape=(4, 4, 2))
    net = quantize(flat, x, output="requant")
    np.testing.assert_allclose(net.output_scale,
                               np.full(3, np.abs(flat.forward(x)).max() / 127))
    with pytest.raises(ValueError, match=r"quantize: output='raw' but layer 3 is a Flatten; "
                                         r"allowed: output='requant'"):
        quantize(flat, x)
    pooled = CNN(model.layers[:2], input_shape=(4, 4, 2))
    assert quantize(pooled, x, output="requant").output_scale.shape == (4,)


def test_an_mlp_and_its_cnn_twin_quantize_alike():
    mlp = MLP([6, 5, 3], seed=3)
    twin = CNN([FloatDense(w, b, relu=r) for (w, b), r in zip(mlp.layers, mlp.relu, strict=True)])
    x = np.random.default_rng(3).normal(size=(50, 6))
    a, b = quantize(mlp, x), quantize(twin, x)
    assert a.input_shape is None and b.input_shape is None
    assert a.input_scale == b.input_scale
    np.testing.assert_array_equal(a.output_scale, b.output_scale)
    for la, lb in zip(a.layers, b.layers, strict=True):
        for field in ("weight", "bias", "mult", "shift"):
            np.testing.assert_array_equal(getattr(la, field), getattr(lb, field))


def test_cnn_quantize_errors():
    model = small_cnn()
    with pytest.raises(ValueError, match=r"calib_x has shape \(3, 32\); allowed: "
                                         r"\(M, 4, 4, 2\) with M >= 1"):
        quantize(model, np.zeros((3, 32)))
    with pytest.raises(ValueError, match=r"calib_x has shape \(0, 4, 4, 2\)"):
        quantize(model, np.zeros((0, 4, 4, 2)))
    with pytest.raises(TypeError, match="quantize: model is a list; allowed: MLP or CNN"):
        quantize([], np.zeros((1, 2)))
