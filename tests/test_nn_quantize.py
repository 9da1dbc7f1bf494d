"""Post-training quantization: the scales of section 3 of the brief, and int8 accuracy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwgen.nn import MLP, QuantizedNetwork, load_digits_split, quantize, requant_params


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


@settings(max_examples=200, deadline=None)
@given(ratio=st.floats(1e-12, 1e6), mult_bits=st.integers(2, 32), acc_bits=st.integers(8, 64))
def test_requant_params(ratio, mult_bits, acc_bits):
    max_shift = acc_bits + mult_bits - 1
    mult, shift = (int(v[0]) for v in requant_params([ratio], mult_bits, max_shift))
    assert 0 <= mult < 2 ** mult_bits and 0 <= shift <= max_shift
    approx = mult / 2.0 ** shift
    if 0 < shift < max_shift:
        # The common case: a full-width multiplier, so relative error below 2**-mult_bits.
        assert mult >= 2 ** (mult_bits - 1)
        assert abs(approx - ratio) <= ratio * 2.0 ** -(mult_bits - 1)
    elif shift == max_shift:
        # Ratio too small for a full-width multiplier: the nearest value at the largest shift.
        assert abs(approx - ratio) <= 2.0 ** -(shift + 1)
    else:
        # Ratio too large for any shift: the nearest multiplier, saturated to mult_bits.
        assert mult == min(round(ratio), 2 ** mult_bits - 1)


def test_requant_params_table():
    mult, shift = requant_params([0.5, 0.75, 1.0, 0.0, 3.0], 16, 47)
    assert mult.tolist() == [32768, 49152, 32768, 0, 49152]
    assert shift.tolist() == [16, 16, 15, 0, 14]
    # Rounding up to 2**mult_bits drops one bit of shift instead of overflowing the multiplier.
    mult, shift = requant_params([1 - 2.0 ** -20], 16, 47)
    assert (mult[0], shift[0]) == (32768, 15)
    with pytest.raises(ValueError, match="finite and >= 0"):
        requant_params([-1.0], 16, 47)
