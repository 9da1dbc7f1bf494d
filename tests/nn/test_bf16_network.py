"""to_bf16 and Bf16Network: float models rounded to bf16 and run bit-exactly, against a
layer-by-layer scalar model (exact-fraction rounding, a direct convolution loop in the tile
order), the digits MLP's accuracy, and the refusals."""

import ml_dtypes
import numpy as np
import pytest
from support import bf16_reference as ref

from hwgen.nn import (
    CNN,
    INPUT,
    MLP,
    Bf16Network,
    Flatten,
    FloatAdd,
    FloatAvgPool2D,
    FloatConv2D,
    FloatDense,
    FloatGlobalAvgPool2D,
    MaxPool2D,
    Node,
    UnsupportedModelError,
    from_torch,
    load_digits_split,
    to_bf16,
)


def _bf16_weights(weight):
    return np.vectorize(ref.bf16, otypes=[np.float32])(weight)


def _fp32(value):
    return None if value is None else float(ref.fp32(value))


def _accumulate(layer, a, rows):
    """The fp32 accumulators of a dense, convolution or average-pooling layer."""
    if isinstance(layer, FloatDense | FloatConv2D):
        weight = _bf16_weights(layer.weight)
        bias = np.array([ref.fp32(b) for b in layer.bias], dtype=np.float32)
        if isinstance(layer, FloatDense):
            return ref.matmul(a, weight, bias, rows)
        return ref.conv(a, weight, bias, rows, stride=layer.strides, pads=layer.pads,
                        groups=layer.groups)
    if isinstance(layer, FloatAvgPool2D):
        return ref.avg_pool(a, layer.kernel_size, layer.strides, rows)
    return ref.avg_pool(a, a.shape[1:3], (1, 1), rows)


def reference(model, x, rows, output="raw"):
    """Every tensor of ``model`` (a CNN) by name for float32 bf16 inputs, one layer at a time
    from the float layers' own parameters."""
    values = {INPUT: x}
    last = model.nodes[-1].name
    with np.errstate(over="ignore", invalid="ignore"):
        for node in model.nodes:
            layer, a = node.layer, values[node.inputs[0]]
            if isinstance(layer, MaxPool2D):
                values[node.name] = ref.max_pool(a, layer.size, layer.stride)
                continue
            if isinstance(layer, Flatten):
                values[node.name] = a.reshape(len(a), -1)
                continue
            if isinstance(layer, FloatAdd):
                total = a + values[node.inputs[1]]
                acc = np.vectorize(ref.zero_rule, otypes=[np.float32])(total)
            else:
                acc = _accumulate(layer, a, rows)
            if node.name == last and output == "raw":
                values[node.name] = acc
            else:
                values[node.name] = ref.finish(acc, layer.activation, _fp32(layer.act_min),
                                               _fp32(layer.act_max))
    return values


def _random_biases(model, rng):
    for layer in model.layers:
        if hasattr(layer, "bias"):
            layer.bias[:] = rng.normal(0.0, 0.5, size=layer.bias.shape)
    return model


def _check_against_reference(model, x, rows, output="raw"):
    net = to_bf16(model, rows=rows, output=output)
    xq = net.quantize_input(x)
    assert xq.dtype == ml_dtypes.bfloat16
    expected_x = np.vectorize(ref.bf16, otypes=[np.float32])(x)
    np.testing.assert_array_equal(ref.bits(xq.astype(np.float32)), ref.bits(expected_x))
    got = net.forward_tensors(xq)
    expected = reference(model, expected_x, rows, output)
    for node in model.nodes:
        value = got[node.name]
        raw = node is model.nodes[-1] and output == "raw"
        assert value.dtype == (np.float32 if raw else ml_dtypes.bfloat16), node.name
        np.testing.assert_array_equal(ref.bits(value.astype(np.float32)),
                                      ref.bits(expected[node.name]), err_msg=node.name)
    return net, got


@pytest.mark.parametrize("rows", [1, 3, 8])
def test_mlp_matches_the_scalar_model(rows):
    rng = np.random.default_rng(rows)
    mlp = MLP([7, 5, 3], seed=rows)
    for _, bias in mlp.layers:
        bias[:] = rng.normal(0.0, 0.5, size=bias.shape)
    net, _ = _check_against_reference(CNN([FloatDense(w, b, relu=r) for (w, b), r
                                           in zip(mlp.layers, mlp.relu, strict=True)]),
                                      rng.normal(size=(4, 7)), rows)
    assert net.rows == rows
    assert net.dtype == "bf16"
    # The MLP itself converts to the same network.
    x = net.quantize_input(rng.normal(size=(3, 7)))
    np.testing.assert_array_equal(ref.bits(to_bf16(mlp, rows=rows).forward(x)),
                                  ref.bits(net.forward(x)))


def _cnn_chain(rng):
    conv1 = FloatConv2D.random(3, 2, 4, padding=1, rng=rng)
    conv1.act_max = 6.0  # ReLU6
    conv2 = FloatConv2D.random((2, 3), 4, 4, padding=(1, 0, 1, 1), groups=2, relu=False,
                               rng=rng)
    conv2.act_min, conv2.act_max = -1.0, 1.0  # Hardtanh
    depthwise = FloatConv2D.random(2, 4, 4, stride=(1, 2), groups=4, rng=rng)
    return _random_biases(CNN([
        conv1, MaxPool2D(2, 1), conv2, depthwise,
        FloatAvgPool2D(2, stride=1, activation="relu"), Flatten(),
        FloatDense.random(8, 3, relu=False, rng=rng),
    ], input_shape=(5, 5, 2)), rng)


@pytest.mark.parametrize("rows", [2, 8])
def test_cnn_chain_matches_the_scalar_model(rows):
    rng = np.random.default_rng(11)
    model = _cnn_chain(rng)
    assert model.output_shape == (3,)
    _check_against_reference(model, rng.normal(size=(2, 5, 5, 2)), rows)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_convolution_sums_follow_the_tile_order(groups):
    # Products of widely spread magnitudes make fp32 sums inexact, so that the order of the
    # sums shows in the bits of a raw convolution: the rows give different accumulators,
    # each the scalar model's (whose products go in (ky, kx, c) order).
    rng = np.random.default_rng(groups)
    conv = FloatConv2D.random(3, 4, 4, padding=(1, 0, 1, 1), stride=(1, 2), groups=groups,
                              rng=rng)
    conv.weight *= 2.0 ** rng.integers(-9, 10, size=conv.weight.shape)
    model = _random_biases(CNN([conv], input_shape=(4, 5, 4)), rng)
    x = rng.normal(size=(2, 4, 5, 4)) * 2.0 ** rng.integers(-9, 10, size=(2, 4, 5, 4))
    accs = [_check_against_reference(model, x, rows)[1]["layer0"] for rows in (2, 3)]
    assert (ref.bits(accs[0]) != ref.bits(accs[1])).any()


def _residual_graph(rng):
    return _random_biases(CNN([
        Node("c1", FloatConv2D.random(3, 2, 3, padding=1, rng=rng), INPUT),
        Node("c2", FloatConv2D.random(3, 3, 3, padding=1, relu=False, rng=rng), "c1"),
        Node("add", FloatAdd(activation="relu", act_max=6.0), ("c1", "c2")),
        Node("gap", FloatGlobalAvgPool2D(), "add"),
        Node("flat", Flatten(), "gap"),
        Node("fc", FloatDense.random(3, 4, rng=rng), "flat"),
    ], input_shape=(4, 4, 2)), rng)


@pytest.mark.parametrize("output", ["raw", "bf16"])
def test_graph_with_an_add_matches_the_scalar_model(output):
    rng = np.random.default_rng(5)
    net, got = _check_against_reference(_residual_graph(rng), rng.normal(size=(2, 4, 4, 2)),
                                         3, output)
    assert [node.name for node in net.nodes] == ["c1", "c2", "add", "gap", "flat", "fc"]
    assert net.raw == (output == "raw")
    assert got["fc"].shape == (2, 4)


def test_imported_model_with_batchnorm_and_relu6():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    nn = torch.nn
    torch.manual_seed(0)
    batchnorm = nn.BatchNorm2d(3)
    with torch.no_grad():
        batchnorm.running_mean.uniform_(-0.5, 0.5)
        batchnorm.running_var.uniform_(0.5, 2.0)
        batchnorm.weight.uniform_(0.5, 1.5)
        batchnorm.bias.uniform_(-0.5, 0.5)
    module = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), batchnorm, nn.ReLU6(),
                           nn.MaxPool2d(2), nn.Flatten(), nn.Linear(12, 4),
                           nn.LeakyReLU(0.1), nn.Linear(4, 3)).eval()
    with pytest.raises(UnsupportedModelError, match=r"layer 3 \(FloatDense\): a leaky ReLU"):
        to_bf16(from_torch(module, input_shape=(4, 4, 2)))
    del module[6]  # the LeakyReLU
    model = from_torch(module, input_shape=(4, 4, 2))
    # The BatchNorm folded into the convolution, the ReLU6 its bound.
    assert [type(layer).__name__ for layer in model.layers] == [
        "FloatConv2D", "MaxPool2D", "Flatten", "FloatDense", "FloatDense"]
    assert model.layers[0].act_max == 6.0
    x = np.random.default_rng(0).normal(size=(3, 4, 4, 2))
    _, got = _check_against_reference(model, x, 4)
    with torch.no_grad():
        expected = module(torch.tensor(x.transpose(0, 3, 1, 2), dtype=torch.float32)).numpy()
    # bf16 keeps about 3 significant digits.
    np.testing.assert_allclose(got["layer4"], expected, rtol=0.05, atol=0.05)


def test_overflow_and_nan_propagate_as_the_scalar_model_says():
    rng = np.random.default_rng(3)
    mlp = MLP([4, 6, 3], seed=3)
    mlp.layers[0][0][:] *= 2.0 ** 120  # hidden values overflow to Inf, then Inf - Inf
    model = CNN([FloatDense(w, b, relu=r)
                 for (w, b), r in zip(mlp.layers, mlp.relu, strict=True)])
    _, got = _check_against_reference(model, rng.normal(size=(3, 4)) * 2.0 ** 10, 2)
    hidden = np.asarray(got["layer0"], np.float32)
    assert np.isinf(hidden).any()
    assert np.isnan(got["layer1"]).any()
    assert set(ref.bits(got["layer1"][np.isnan(got["layer1"])])) == {0x7FC00000}


def test_max_pool_of_a_nan_window_is_nan():
    # A 1x1 convolution of two channels: 2**100 * 2**100 - 2**100 * 2**100 is Inf - Inf.
    conv = FloatConv2D(np.full((1, 1, 2, 1), 2.0 ** 100), relu=False)
    net = to_bf16(CNN([conv, MaxPool2D(2, 1)], input_shape=(2, 3, 2)), output="bf16")
    x = np.zeros((1, 2, 3, 2))
    x[0, :, :, 0] = [[1.0, -3.0, 2.0], [0.5, 1.5, -1.0]]
    x[0, 0, 0] = [2.0 ** 100, -(2.0 ** 100)]
    out = np.asarray(net.forward(net.quantize_input(x))).view(np.uint16).ravel()
    # The window with the NaN gives the canonical NaN; the other, 2 * 2**100.
    assert list(out) == [0x7FC0, ref.bf16_bits_of(2.0 ** 101)]


def test_digits_mlp_accuracy_close_to_float():
    x_train, y_train, x_test, y_test = load_digits_split()
    model = MLP([64, 32, 10], seed=0).fit(x_train, y_train, epochs=20, seed=0)
    float_acc = model.accuracy(x_test, y_test)
    bf16_acc = float(np.mean(to_bf16(model).predict(x_test) == y_test))
    assert float_acc >= 0.9
    assert abs(bf16_acc - float_acc) <= 0.005


def test_bad_inputs_weights_and_biases_named():
    model = _cnn_chain(np.random.default_rng(1))
    net = to_bf16(model)
    x = np.zeros((2, 5, 5, 2))
    x[1, 3, 0, 1] = np.nan
    with pytest.raises(ValueError, match=r"quantize_input: field 'x' is nan at index "
                                         r"\(1, 3, 0, 1\)"):
        net.quantize_input(x)
    x[1, 3, 0, 1] = 1e39  # finite, but beyond bf16
    with pytest.raises(ValueError, match=r"inf once rounded to bf16 at index \(1, 3, 0, 1\)"):
        net.quantize_input(x)
    xq = np.zeros((1, 5, 5, 2), dtype=ml_dtypes.bfloat16)
    xq[0, 2, 2, 0] = -np.inf
    with pytest.raises(ValueError, match=r"input: field 'x' is -inf at index \(0, 2, 2, 0\)"):
        net.forward(xq)
    with pytest.raises(ValueError, match=r"index \(0, 0, 0, 0\), not a bf16 value"):
        net.forward(np.full((1, 5, 5, 2), 0.1, dtype=np.float32))
    with pytest.raises(ValueError, match="allowed: \\(M, 5, 5, 2\\)"):
        net.forward(np.zeros((1, 5, 5, 3), dtype=ml_dtypes.bfloat16))
    model.layers[2].weight[1, 0, 1, 3] = np.inf
    with pytest.raises(ValueError, match=r"layer 2: field 'weight' is inf at index "
                                         r"\(1, 0, 1, 3\)"):
        to_bf16(model)
    model.layers[2].weight[1, 0, 1, 3] = 1.0
    model.layers[6].bias[2] = np.nan
    with pytest.raises(ValueError, match=r"layer 6: field 'bias' is nan at index \(2,\)"):
        to_bf16(model)
    model.layers[6].bias[2] = 1e39
    with pytest.raises(ValueError, match=r"layer 6: field 'bias' is inf once rounded to fp32"):
        to_bf16(model)


def test_every_unsupported_layer_listed_at_once():
    rng = np.random.default_rng(2)
    first = FloatConv2D.random(3, 1, 2, padding=1, rng=rng)
    first.activation = "leaky_relu"
    dense = FloatDense.random(18, 4, rng=rng)
    dense.activation = "leaky_relu"
    model = CNN([first, MaxPool2D(2), Flatten(), dense,
                 FloatDense.random(4, 2, relu=False, rng=rng)], input_shape=(6, 6, 1))
    with pytest.raises(UnsupportedModelError) as info:
        to_bf16(model)
    assert [(name, kind) for name, kind, _ in info.value.offenders] == [
        ("layer 0", "FloatConv2D"), ("layer 3", "FloatDense")]
    assert "leaky ReLU" in str(info.value)
    # A raw last layer returns its accumulators, so its activation does not matter.
    model.layers[0].activation = model.layers[3].activation = "relu"
    model.layers[4].activation = "leaky_relu"
    assert isinstance(to_bf16(model), Bf16Network)


def test_rows_output_and_model_refused():
    mlp = MLP([3, 2], seed=0)
    for rows in (0, 2.0, True):
        with pytest.raises(ValueError, match="rows="):
            to_bf16(mlp, rows=rows)
    with pytest.raises(ValueError, match="output='int8'"):
        to_bf16(mlp, output="int8")
    with pytest.raises(ValueError, match="output='raw' but layer 0 is a MaxPool2D"):
        to_bf16(CNN([MaxPool2D(2)], input_shape=(2, 2, 1)))
    with pytest.raises(TypeError, match="allowed: MLP or CNN"):
        to_bf16([FloatDense.random(3, 2)])
