"""The integer Conv2D against a per-element model (loops over m, oy, ox, n, ky, kx, c).

Every case runs the layer through :class:`QuantizedNetwork` (which computes the patches, then
the same exact matrix product as a Dense layer) and compares every element with the naive
model of ``conftest.py``, which pads by bounds checks instead of building patches.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import Conv2D, Dense, QuantizedNetwork, accumulator_bound

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def signed(bits):
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


@st.composite
def conv_cases(draw):
    """Draw ``(widths, layer dict, input_shape, x)``; kernels up to the padded input's size."""
    in_bits = draw(st.integers(2, 10))
    w_bits = draw(st.integers(2, 10))
    mult_bits = draw(st.integers(1, 24))
    h, w, c_in, c_out = (draw(st.integers(1, 6)), draw(st.integers(1, 6)),
                         draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = draw(st.integers(0, 2))
    # 1x1, kernels as large as the padded input, and everything between, on purpose.
    kh = draw(st.sampled_from([1, h + 2 * padding]) | st.integers(1, h + 2 * padding))
    kw = draw(st.sampled_from([1, w + 2 * padding]) | st.integers(1, w + 2 * padding))
    stride = draw(st.sampled_from([1, 2, max(kh, kw) + 1]) | st.integers(1, 4))
    bias_bits = draw(st.integers(1, 24))
    need = 2 ** (in_bits + w_bits - 2) * kh * kw * c_in + 2 ** bias_bits
    acc_bits = draw(st.integers(need.bit_length() + 1, 64))
    max_shift = acc_bits + mult_bits - 1
    layer = {
        "kind": "conv", "stride": stride, "padding": padding,
        "weight": [[[[draw(signed(w_bits)) for _ in range(c_out)] for _ in range(c_in)]
                    for _ in range(kw)] for _ in range(kh)],
        "bias": [draw(signed(bias_bits)) for _ in range(c_out)],
        "mult": [draw(st.integers(0, 2 ** mult_bits - 1)) for _ in range(c_out)],
        "shift": [draw(st.sampled_from([0, 1, max_shift]) | st.integers(0, max_shift))
                  for _ in range(c_out)],
        "activation": draw(st.sampled_from(["relu", "identity"])),
        "output": draw(st.sampled_from(["requant", "raw"])),
    }
    m = draw(st.integers(1, 3))
    x = [[[[draw(signed(in_bits)) for _ in range(c_in)] for _ in range(w)] for _ in range(h)]
         for _ in range(m)]
    widths = {"in_bits": in_bits, "w_bits": w_bits, "acc_bits": acc_bits, "mult_bits": mult_bits}
    return widths, layer, (h, w, c_in), x


def make(layer):
    return Conv2D(np.array(layer["weight"]), np.array(layer["bias"]), np.array(layer["mult"]),
                  np.array(layer["shift"]), stride=layer["stride"], padding=layer["padding"],
                  activation=layer["activation"], output=layer["output"])


@FAST
@given(conv_cases())
def test_conv_matches_per_element_model(naive, case):
    widths, layer, input_shape, x = case
    net = QuantizedNetwork([make(layer)], input_shape=input_shape, **widths)
    got = net.forward(np.array(x, dtype=np.int64))
    expected = naive.conv(x, layer, widths["in_bits"])
    assert got.dtype == np.int64
    assert got.shape == (len(x), *net.shapes[0][1])
    assert got.tolist() == expected


@pytest.mark.parametrize(("w_bits", "path"), [(8, "float64"), (42, "int64"), (61, "object")])
def test_every_exact_path(naive, w_bits, path):
    # The accumulator bound picks the path: < 2**53 float64 BLAS, <= int64 integer, else
    # Python integers. Inputs stay small enough for the actual sums to fit acc_bits=64.
    rng = np.random.default_rng(w_bits)
    top = 2 ** (w_bits - 1)
    weight = rng.integers(-top, top, size=(2, 2, 2, 3), dtype=np.int64)
    weight[0, 0, 0, :] = [top - 1, -top, top - 1]
    layer = {"kind": "conv", "stride": 1, "padding": 1, "weight": weight.tolist(),
             "bias": [5, -5, 0], "mult": [1, 3, 2 ** 20], "shift": [0, 2, 80],
             "activation": "identity", "output": "requant"}
    conv = make(layer)
    bound = accumulator_bound(conv, 12)
    assert {"float64": bound < 2 ** 53, "int64": 2 ** 53 <= bound < 2 ** 63,
            "object": bound >= 2 ** 63}[path]
    net = QuantizedNetwork([conv], in_bits=12, w_bits=w_bits, acc_bits=64, mult_bits=32,
                           input_shape=(3, 3, 2))
    x = rng.integers(-1, 1, size=(4, 3, 3, 2)) * (rng.random((4, 3, 3, 2)) < 0.2)
    assert net.forward(x).tolist() == naive.conv(x.tolist(), layer, 12)


def test_conv_is_a_dense_layer_per_patch():
    # Section 3.1: output pixel (oy, ox) is Dense(W_dense) on its patch in (ky, kx, c) order.
    rng = np.random.default_rng(3)
    weight = rng.integers(-128, 128, size=(3, 2, 4, 5))
    args = (rng.integers(-999, 999, 5), rng.integers(2 ** 15, 2 ** 16, 5),
            rng.integers(10, 20, 5))
    conv = Conv2D(weight, *args, stride=2, padding=1)
    x = rng.integers(-128, 128, size=(2, 5, 6, 4))
    out = QuantizedNetwork([conv], input_shape=(5, 6, 4)).forward(x)
    w_dense = np.zeros((3 * 2 * 4, 5), dtype=np.int64)
    for ky, kx, c in np.ndindex(3, 2, 4):
        w_dense[(ky * 2 + kx) * 4 + c] = weight[ky, kx, c]
    np.testing.assert_array_equal(conv.matrix, w_dense)
    dense = QuantizedNetwork([Dense(w_dense, *args)])
    xpad = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    for oy, ox in np.ndindex(out.shape[1:3]):
        patch = xpad[:, 2 * oy:2 * oy + 3, 2 * ox:2 * ox + 2, :].reshape(2, -1)
        np.testing.assert_array_equal(out[:, oy, ox], dense.forward(patch))
        np.testing.assert_array_equal(conv.patches(x)[:, oy, ox], patch)


def test_attributes_and_output_shape():
    weight = np.ones((3, 5, 2, 4), dtype=np.int16)
    conv = Conv2D(weight, np.zeros(4, int), np.ones(4, int), np.zeros(4, int), stride=2,
                  padding=1)
    weight[0, 0, 0, 0] = 7  # the layer keeps its own copy
    assert conv.weight.dtype == np.int64 and conv.weight[0, 0, 0, 0] == 1
    assert conv.kernel_size == (3, 5) and (conv.in_channels, conv.out_channels) == (2, 4)
    assert conv.patch_size == 30 and conv.matrix.shape == (30, 4)
    assert (conv.stride, conv.padding, conv.activation, conv.output) == (2, 1, "relu", "requant")
    # OH = (7 + 2 - 3) // 2 + 1 = 4, OW = (3 + 2 - 5) // 2 + 1 = 1.
    assert conv.output_shape((7, 3, 2)) == (4, 1, 4)
    assert "Conv2D(3x5, 2 -> 4, stride=2, padding=1" in repr(conv)


def test_accumulator_bound_uses_the_whole_patch():
    # K = KH*KW*C_in: every weight of a channel's kernel counts once.
    weight = np.zeros((2, 3, 2, 2), dtype=np.int64)
    weight[..., 0] = -3
    weight[..., 1] = np.arange(12).reshape(2, 3, 2)
    conv = Conv2D(weight, [10, -20], [1, 1], [0, 0])
    assert accumulator_bound(conv, 8) == max(128 * 3 * 12 + 10, 128 * sum(range(12)) + 20)


def conv_args(**kw):
    args = {"weight": np.ones((2, 2, 3, 4), dtype=int), "bias": np.zeros(4, int),
            "mult": np.ones(4, int), "shift": np.zeros(4, int)}
    args.update(kw)
    return args


@pytest.mark.parametrize(("args", "pattern"), [
    (conv_args(weight=np.ones((2, 2, 3, 4))), r"Conv2D: field 'weight' has dtype float64"),
    (conv_args(weight=np.ones((2, 2, 4), int)),
     r"'weight' has shape \(2, 2, 4\); allowed: \(KH, KW, C_in // groups, C_out\)"),
    (conv_args(weight=np.ones((2, 0, 3, 4), int)), r"'weight' has shape \(2, 0, 3, 4\)"),
    (conv_args(bias=np.zeros(3, int)), r"'bias' has shape \(3,\); allowed: \(4,\)"),
    (conv_args(shift=np.zeros((4, 1), int)), r"'shift' has shape \(4, 1\); allowed: \(4,\)"),
    (conv_args(stride=0), r"Conv2D: field 'stride' is 0; allowed: an integer >= 1"),
    (conv_args(stride=(1, 2, 1)),
     r"'stride' is \(1, 2, 1\); allowed: an integer >= 1, or a pair of them \(sy, sx\)"),
    (conv_args(stride=1.0), r"'stride' is 1.0"),
    (conv_args(stride=True), r"'stride' is True"),
    (conv_args(padding=-1), r"'padding' is -1; allowed: an integer >= 0"),
    (conv_args(activation="tanh"), r"'activation' is 'tanh'; allowed: 'relu', 'identity'"),
    (conv_args(output="logits"), r"'output' is 'logits'"),
])
def test_conv_errors(args, pattern):
    positional = [args.pop(f) for f in ("weight", "bias", "mult", "shift")]
    with pytest.raises(ValueError, match=pattern):
        Conv2D(*positional, **args)


@pytest.mark.parametrize(("shape", "pattern"), [
    ((12,), r"Conv2D needs a spatial input \(H, W, C\) but the input gives \(12,\)"),
    ((4, 4, 2), r"field 'weight' has C_in=3 but the input gives 2 channels \(4, 4, 2\); "
                r"allowed: weight of shape \(KH, KW, 2, C_out\)"),
    ((1, 4, 3), r"field 'weight' has KH=3 but the input gives \(1, 4, 3\), 1 wide on that axis "
                r"with padding=0; allowed: KH <= 1"),
    ((4, 2, 3), r"'weight' has KW=3 .* 2 wide on that axis"),
])
def test_output_shape_errors(shape, pattern):
    conv = Conv2D(np.ones((3, 3, 3, 1), int), [0], [1], [0])
    with pytest.raises(ValueError, match=pattern):
        conv.output_shape(shape)
    assert Conv2D(np.ones((3, 3, 3, 1), int), [0], [1], [0], padding=1).output_shape(
        (1, 1, 3)) == (1, 1, 1)
