"""Issue 31's layers through both importers, on models torch builds and exports itself.

Every model is imported from the module (``from_torch``) and from both of torch's ONNX exports
(the default dynamo one and ``dynamo=False``); each import computes torch's function in float
(tight tolerance), and the imports quantize to the same integers (bit-exact forward passes).
Each test skips with the reason when torch, onnx or onnxscript is absent.
"""

import io
import warnings
from collections import OrderedDict

import numpy as np
import pytest

from hwgen.nn import CNN, MLP, UnsupportedModelError, from_onnx, from_torch, quantize
from hwgen.nn.output_function import apply_output_function

EXPORTERS = pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "legacy"])


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed")


@pytest.fixture
def onnx():
    return pytest.importorskip("onnx", reason="onnx is not installed")


def export(torch, onnx, model, example, *, dynamo):
    """The model's ONNX graph from torch's default (dynamo) or legacy (TorchScript) exporter."""
    if dynamo:
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation and torchvision warnings
        program = torch.onnx.export(model, (example,), None if dynamo else buffer,
                                    dynamo=dynamo, input_names=["x"], output_names=["y"])
    return program.model_proto if dynamo else onnx.load_from_string(buffer.getvalue())


def run_torch(torch, model, x_nhwc):
    """The torch model's output for NHWC images (NCHW to torch) or rows."""
    x = x_nhwc.transpose(0, 3, 1, 2) if x_nhwc.ndim == 4 else x_nhwc
    with torch.no_grad():
        return model(torch.tensor(np.ascontiguousarray(x), dtype=torch.float32)).double().numpy()


def randomize_batchnorm(torch, model, seed):
    """Give every BatchNorm running statistics and an affine map that are not the identity."""
    gen = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm1d | torch.nn.BatchNorm2d):
            n = module.num_features
            with torch.no_grad():
                module.running_mean.copy_(torch.randn(n, generator=gen) * 0.5)
                module.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                module.weight.copy_(torch.randn(n, generator=gen))
                module.bias.copy_(torch.randn(n, generator=gen) * 0.3)
    return model.eval()


def everyday_cnn(torch):
    """Conv-BN-ReLU6, a depthwise strided conv with BN and LeakyReLU, a pointwise conv with a
    Hardtanh, an oblong average pool, an even 'same' kernel, global pooling, Softmax."""
    nn = torch.nn
    torch.manual_seed(3)
    return randomize_batchnorm(torch, nn.Sequential(OrderedDict([
        ("conv", nn.Conv2d(2, 6, 3, padding=1, bias=False)), ("bn", nn.BatchNorm2d(6)),
        ("relu6", nn.ReLU6()),
        ("dw", nn.Conv2d(6, 6, 3, groups=6, stride=(2, 1), padding=(1, 0))),
        ("dw_bn", nn.BatchNorm2d(6)), ("leaky", nn.LeakyReLU(0.1)),
        ("pw", nn.Conv2d(6, 8, 1)), ("tanh", nn.Hardtanh(-1.0, 2.0)),
        ("avg", nn.AvgPool2d((2, 1))),
        ("grouped", nn.Conv2d(8, 4, (2, 3), groups=2, padding="same")),
        ("relu", nn.ReLU()), ("drop", nn.Dropout(0.3)),
        ("gap", nn.AdaptiveAvgPool2d(1)), ("flat", nn.Flatten()),
        ("fc", nn.Linear(4, 5)), ("softmax", nn.Softmax(dim=1)),
    ])), 3)


def everyday_mlp(torch):
    """Linear-BN-LeakyReLU, Linear-ReLU6, Identity, LogSoftmax: an hls4ml-style MLP."""
    nn = torch.nn
    torch.manual_seed(4)
    return randomize_batchnorm(torch, nn.Sequential(
        nn.Linear(12, 16), nn.BatchNorm1d(16), nn.LeakyReLU(0.2), nn.Dropout(0.1),
        nn.Linear(16, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU6(), nn.Identity(),
        nn.Linear(8, 3), nn.LogSoftmax(dim=1)), 4)


def lenet_like(torch):
    """An uneven zero padding before a convolution (as Keras's "same" needs), average pooling
    with an overlapping stride, a Sigmoid at the end."""
    nn = torch.nn
    torch.manual_seed(5)
    return nn.Sequential(
        nn.ZeroPad2d((1, 2, 0, 1)), nn.Conv2d(1, 4, 5, padding=2), nn.ReLU(),   # 8x11
        nn.AvgPool2d(3, stride=2),                                              # 3x5
        nn.Conv2d(4, 6, (3, 2), stride=(1, 2)), nn.LeakyReLU(0.05), nn.Flatten(),
        nn.Linear(12, 4), nn.Sigmoid()).eval()


def separable(torch):
    """MobileNet's depthwise-separable blocks with fresh BatchNorms: their folded biases are
    equal, and the legacy exporter shares them through Identity nodes."""
    nn = torch.nn
    torch.manual_seed(7)

    def block(c_in, c_out, stride):
        return [nn.Conv2d(c_in, c_in, 3, stride, 1, groups=c_in, bias=False),
                nn.BatchNorm2d(c_in), nn.ReLU(),
                nn.Conv2d(c_in, c_out, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]

    return nn.Sequential(nn.Conv2d(2, 4, 3, 2, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                         *block(4, 4, 1), *block(4, 8, 2), nn.AvgPool2d(2), nn.Flatten(),
                         nn.Linear(8, 2)).eval()


MODELS = {
    "cnn": (everyday_cnn, (8, 6, 2)),
    "mlp": (everyday_mlp, (12,)),
    "lenet": (lenet_like, (7, 8, 1)),
    "separable": (separable, (8, 8, 2)),
}
FUNCTIONS = {"cnn": "softmax", "mlp": "log_softmax", "lenet": "sigmoid", "separable": None}


def data(shape, count, seed):
    return np.random.default_rng(seed).normal(size=(count, *shape))


_IMPORTS = {}  # name -> imports(): each model is exported once per session (the exports are slow)


def imports(torch, onnx, name):
    """The torch model and its three imports: from_torch, dynamo ONNX, legacy ONNX."""
    if name not in _IMPORTS:
        _IMPORTS[name] = _import(torch, onnx, name)
    return _IMPORTS[name]


def _import(torch, onnx, name):
    make, shape = MODELS[name]
    model = make(torch)
    nchw = (1, shape[2], shape[0], shape[1]) if len(shape) == 3 else (1, *shape)
    example = torch.zeros(nchw)
    return model, shape, {
        "torch": from_torch(model, input_shape=shape),
        "dynamo": from_onnx(export(torch, onnx, model, example, dynamo=True)),
        "legacy": from_onnx(export(torch, onnx, model, example, dynamo=False)),
    }


@pytest.mark.parametrize("name", list(MODELS))
def test_every_import_computes_torchs_function(torch, onnx, name):
    model, shape, models = imports(torch, onnx, name)
    x = data(shape, 40, seed=1)
    expected = run_torch(torch, model, x)
    for source, imported in models.items():
        assert imported.output_function == FUNCTIONS[name], source
        got = apply_output_function(imported.output_function, imported.forward(x))
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=source)
        np.testing.assert_allclose(imported.probabilities(x), got, err_msg=source)


@pytest.mark.parametrize("name", list(MODELS))
def test_every_import_quantizes_to_the_same_integers(torch, onnx, name):
    _, shape, models = imports(torch, onnx, name)
    calib, x = data(shape, 200, seed=2), data(shape, 50, seed=3)
    nets = {source: quantize(model, calib) for source, model in models.items()}
    reference = nets.pop("torch")
    assert reference.output_function == models["torch"].output_function
    want = reference.forward(reference.quantize_input(x))
    for source, net in nets.items():
        assert [type(a).__name__ for a in net.layers] == \
            [type(a).__name__ for a in reference.layers], source
        np.testing.assert_array_equal(net.forward(net.quantize_input(x)), want, err_msg=source)


def test_batchnorm_folds_into_the_layer_before(torch):
    nn = torch.nn
    model = randomize_batchnorm(torch, nn.Sequential(nn.Conv2d(2, 3, 1), nn.BatchNorm2d(3)), 0)
    conv, bn = model
    cnn = from_torch(model, input_shape=(1, 1, 2))
    gamma, var = (t.detach().double().numpy() for t in (bn.weight, bn.running_var))
    scale = gamma / np.sqrt(var + bn.eps)
    weight = conv.weight.detach().double().numpy()[:, :, 0, 0].T  # (C_in, C_out)
    bias = conv.bias.detach().double().numpy()
    mean = bn.running_mean.double().numpy()
    # W' = W * gamma / sqrt(var + eps), b' = (b - mean) * gamma / sqrt(var + eps) + beta
    np.testing.assert_allclose(cnn.layers[0].weight[0, 0], weight * scale)
    np.testing.assert_allclose(cnn.layers[0].bias, (bias - mean) * scale
                               + bn.bias.detach().double().numpy())
    assert len(cnn.layers) == 1


class _Functional:
    """Modules whose forward uses tensor methods: clamp and mean over H and W (ONNX only)."""

    @staticmethod
    def make(torch, keepdim):
        nn = torch.nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(6)
                self.conv = nn.Conv2d(3, 5, 3, groups=1, padding=1)
                self.fc = nn.Linear(5, 2)

            def forward(self, x):
                y = self.conv(x).clamp(-0.5, 1.0).mean((2, 3), keepdim=keepdim)
                return self.fc(y.flatten(1))

        return Net().eval()


@EXPORTERS
@pytest.mark.parametrize("keepdim", [True, False])
def test_clamp_and_mean_from_onnx(torch, onnx, dynamo, keepdim):
    model = _Functional.make(torch, keepdim)
    cnn = from_onnx(export(torch, onnx, model, torch.zeros(1, 3, 5, 4), dynamo=dynamo))
    conv = cnn.layers[0]
    assert (conv.activation, conv.act_min, conv.act_max) == ("identity", -0.5, 1.0)
    x = data((5, 4, 3), 30, seed=4)
    np.testing.assert_allclose(cnn.forward(x), run_torch(torch, model, x), rtol=1e-4,
                               atol=1e-5)


def test_torch_offenders(torch):
    nn = torch.nn
    model = nn.Sequential(OrderedDict([
        ("bn_first", nn.BatchNorm2d(1)),
        ("conv", nn.Conv2d(1, 4, 3)),
        ("relu", nn.ReLU()),
        ("bn_late", nn.BatchNorm2d(4)),            # after the ReLU: not foldable
        ("pool", nn.AvgPool2d(2)),
        ("leaky", nn.LeakyReLU(0.1)),               # after an average pool: no mult_neg there
        ("adaptive", nn.AdaptiveAvgPool2d(3)),      # 1x1 here: 3 does not divide it
        ("flat", nn.Flatten()),
        ("soft", nn.Softmax(dim=1)),
        ("fc", nn.Linear(4, 2)),                    # after the Softmax
        ("soft0", nn.LogSoftmax(dim=0)),
        ("negative", nn.LeakyReLU(-0.5)),
        ("pad", nn.ZeroPad2d(1)),                   # before a Linear, not a Conv2d
        ("fc2", nn.Linear(2, 2)),
        ("crop", nn.ZeroPad2d(-1)),
    ]))
    with pytest.raises(UnsupportedModelError) as info:
        from_torch(model, input_shape=(4, 4, 1))
    message = str(info.value)
    for text in ("bn_first (BatchNorm2d): follows no Linear/Gemm/MatMul or Conv directly",
                 "bn_late (BatchNorm2d): follows no Linear/Gemm/MatMul or Conv directly",
                 "leaky (LeakyReLU): a leaky ReLU after average pooling cannot be mapped",
                 "adaptive (AdaptiveAvgPool2d): output_size=3 on an input (1, 1, 4)",
                 "soft (Softmax): supported only as the model's last layer, but fc (Linear) "
                 "follows it", "soft0 (LogSoftmax): dim=0; supported: 1 or -1",
                 "negative (LeakyReLU): negative_slope=-0.5; supported: >= 0",
                 "pad (ZeroPad2d): supported only right before a convolution, but fc2 "
                 "(Linear) follows it",
                 "crop (ZeroPad2d): padding=(-1, -1, -1, -1), value=0.0; supported: zeros, "
                 "no cropping"):
        assert text in message
    assert [name for name, _, _ in info.value.offenders] == [
        "bn_first", "bn_late", "leaky", "adaptive", "soft", "soft0", "negative", "pad", "crop"]


def test_a_padding_that_no_convolution_takes(torch):
    nn = torch.nn
    model = nn.Sequential(OrderedDict([("conv", nn.Conv2d(1, 2, 1)), ("pad", nn.ZeroPad2d(1)),
                                       ("pool", nn.MaxPool2d(2)), ("end", nn.ZeroPad2d(1))]))
    with pytest.raises(UnsupportedModelError) as info:
        from_torch(model, input_shape=(4, 4, 1))
    assert str(info.value).endswith(
        "  - pad (ZeroPad2d): supported only right before a convolution, but pool (MaxPool2d) "
        "follows it\n  - end (ZeroPad2d): supported only right before a convolution, but the "
        "model ends there")


def test_softmax_on_a_spatial_output(torch):
    nn = torch.nn
    with pytest.raises(UnsupportedModelError, match=r"1 \(Softmax\): applies to a spatial "
                                                    r"output \(2, 2, 3\)"):
        from_torch(nn.Sequential(nn.Conv2d(1, 3, 1), nn.Softmax(dim=1)), input_shape=(2, 2, 1))


def _graph(onnx, nodes, weights, in_dims, opset=17):
    helper = onnx.helper
    inits = [onnx.numpy_helper.from_array(np.asarray(v, dtype=np.float32), k)
             for k, v in weights.items()]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, in_dims)],
                              [helper.make_tensor_value_info(nodes[-1].output[0], 1, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_onnx_offenders(onnx):
    helper = onnx.helper
    rng = np.random.default_rng(0)
    bn = {f"{p}": rng.random(3) + 0.5 for p in ("s", "b", "m", "v")}
    weights = {"k": rng.normal(size=(3, 2, 1, 1)), **bn}
    nodes = [
        helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n0"], name="bn0"),
        helper.make_node("Conv", ["n0", "k"], ["c0"], name="conv"),
        helper.make_node("Relu", ["c0"], ["r0"], name="relu"),
        helper.make_node("BatchNormalization", ["r0", "s", "b", "m", "v"], ["n1"], name="bn1"),
        helper.make_node("AveragePool", ["n1"], ["p0"], kernel_shape=[2, 2], pads=[1, 1, 1, 1],
                         name="padded"),
        helper.make_node("ReduceMean", ["p0"], ["p1"], axes=[1, 2], name="mean"),
        helper.make_node("Clip", ["p1", "r0"], ["p2"], name="clip"),
        helper.make_node("Softmax", ["p2"], ["p3"], axis=1, name="soft"),
        helper.make_node("Erf", ["p3"], ["y"], name="erf"),
    ]
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(_graph(onnx, nodes, weights, [1, 2, 4, 4]))
    message = str(info.value)
    for text in ("bn0 (BatchNormalization): follows no Linear/Gemm/MatMul or Conv directly",
                 "bn1 (BatchNormalization): follows no",
                 "padded (AveragePool): pads=[1, 1, 1, 1] or auto_pad; supported: none",
                 "mean (ReduceMean): axes=[1, 2]; supported: the spatial axes [2, 3]",
                 "clip (Clip): does not take exactly the running activation",
                 "erf (Erf): not a supported op type"):
        assert text in message


def test_onnx_reducemean_axes_input_and_clip_attributes(onnx):
    # ReduceMean's axes are an input from opset 18; Clip's bounds were attributes before 11.
    helper = onnx.helper
    weights = {"k": np.ones((2, 1, 1, 1)), "axes": np.array([-2, -1])}
    inits = {"k": weights["k"]}
    nodes = [helper.make_node("Conv", ["x", "k"], ["c"], name="conv"),
             helper.make_node("Clip", ["c"], ["r"], min=0.0, max=2.0, name="clip"),
             helper.make_node("ReduceMean", ["r", "axes"], ["y"], keepdims=0, name="mean")]
    model = _graph(onnx, nodes, inits, [1, 1, 3, 3], opset=18)
    model.graph.initializer.append(onnx.numpy_helper.from_array(
        weights["axes"].astype(np.int64), "axes"))
    cnn = from_onnx(model)
    assert isinstance(cnn, CNN) and cnn.output_shape == (2,)
    assert (cnn.layers[0].act_min, cnn.layers[0].act_max) == (0.0, 2.0)
    x = np.arange(9.0).reshape(1, 3, 3, 1) - 2
    np.testing.assert_allclose(cnn.forward(x), [[np.clip(x, 0, 2).mean()] * 2])


def test_a_plain_mlp_keeps_its_output_function(torch):
    nn = torch.nn
    torch.manual_seed(8)
    model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 3), nn.Softmax(1)).eval()
    mlp = from_torch(model)
    assert isinstance(mlp, MLP) and mlp.output_function == "softmax"
    x = data((5,), 30, seed=5)
    np.testing.assert_allclose(mlp.probabilities(x), run_torch(torch, model, x), rtol=1e-4,
                               atol=1e-6)
    net = quantize(mlp, x)
    assert net.output_function == "softmax"
    probs = net.probabilities(net.forward(net.quantize_input(x)))
    assert np.abs(probs - run_torch(torch, model, x)).max() < 0.05


@pytest.mark.parametrize(("attrs", "pads", "value"), [
    ({"mode": "reflect"}, [0, 0, 1, 1, 0, 0, 1, 1], 0.0),
    ({}, [0, 0, 1, 1, 0, 0, 1, 1], 0.5),
    ({}, [0, 1, 0, 0, 0, 0, 0, 0], 0.0),
], ids=["reflect", "nonzero", "channels"])
def test_onnx_pad_offenders(onnx, attrs, pads, value):
    helper = onnx.helper
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["p"], name="pad", **attrs),
             helper.make_node("Conv", ["p", "k"], ["y"], name="conv")]
    model = _graph(onnx, nodes, {"k": np.ones((1, 1, 1, 1)), "value": np.array(value)},
                   [1, 1, 3, 3])
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(pads, np.int64),
                                                                "pads"))
    with pytest.raises(UnsupportedModelError, match=r"pad \(Pad\): mode=.*, pads=.*; supported: "
                                                    r"zeros on the two spatial axes"):
        from_onnx(model)
