"""Graphs through both importers: hand-written torch modules with skip connections.

Every module is imported from torch (``from_torch``, traced with torch.fx) and from both of
torch's ONNX exports (the default dynamo one and ``dynamo=False``), and each import computes
torch's function in float (NCHW to torch, NHWC to ours). The folds a graph allows (BatchNorm
and activations into the layer before, a ReLU after an add into the add) and the ones it must
refuse (the folded-into tensor has another reader), and the offenders, are checked by name.
Each test skips with the reason when torch, onnx or onnxscript is absent.
"""

import io
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import CNN, INPUT, UnsupportedModelError, from_onnx, from_torch, quantize
from hwgen.nn.output_function import apply_output_function

EXPORTERS = pytest.mark.parametrize("dynamo", [True, False], ids=["dynamo", "legacy"])
SHAPE = (6, 6, 3)  # one NHWC image of the small modules


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed")


@pytest.fixture(scope="module")
def onnx():
    return pytest.importorskip("onnx", reason="onnx is not installed")


def export(torch, onnx, model, shape, *, dynamo):
    """The model's ONNX graph from torch's default (dynamo) or legacy (TorchScript) exporter."""
    if dynamo:
        pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    h, w, c = shape
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation and torchvision warnings
        program = torch.onnx.export(model, (torch.zeros(1, c, h, w),),
                                    None if dynamo else buffer, dynamo=dynamo,
                                    input_names=["x"], output_names=["y"])
    return program.model_proto if dynamo else onnx.load_from_string(buffer.getvalue())


def run_torch(torch, model, x_nhwc):
    """The torch model's output for NHWC images (NCHW to torch), back in NHWC."""
    with torch.no_grad():
        out = model(torch.tensor(np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2)),
                                 dtype=torch.float32)).double().numpy()
    return out.transpose(0, 2, 3, 1) if out.ndim == 4 else out


def run_ours(cnn, x):
    """The imported model's output, after its output function (Softmax) if it has one."""
    return apply_output_function(cnn.output_function, cnn.forward(x))


def images(shape=SHAPE, count=8, seed=0):
    return np.random.default_rng(seed).normal(size=(count, *shape))


def settle(torch, model, seed):
    """BatchNorms with statistics and affine maps that are not the identity; eval mode."""
    gen = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            n = module.num_features
            with torch.no_grad():
                module.running_mean.copy_(torch.randn(n, generator=gen) * 0.3)
                module.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                module.weight.copy_(torch.randn(n, generator=gen))
                module.bias.copy_(torch.randn(n, generator=gen) * 0.3)
    return model.eval()


# -- the modules ---------------------------------------------------------------------------------

def _modules(torch):
    nn, F = torch.nn, torch.nn.functional

    def conv_bn(c_in, c_out, stride=1):
        return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False),
                             nn.BatchNorm2d(c_out))

    class Identity(nn.Module):
        """A residual block with an identity shortcut: relu(x + bn(conv(relu(bn(conv(x))))))."""

        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(conv_bn(3, 4), nn.ReLU())
            self.first, self.second = conv_bn(4, 4), conv_bn(4, 4)

        def forward(self, x):
            x = self.stem(x)
            y = self.second(F.relu(self.first(x)))
            return torch.relu(x + y)

    class Projection(nn.Module):
        """Stride 2 on both paths, a 1x1 stride-2 projection with BN; torch.add; a head that
        flattens with x.view(x.size(0), -1)."""

        def __init__(self):
            super().__init__()
            self.main = nn.Sequential(conv_bn(3, 6, 2), nn.ReLU(), conv_bn(6, 6))
            self.shortcut = nn.Sequential(nn.Conv2d(3, 6, 1, 2, bias=False), nn.BatchNorm2d(6))
            self.fc = nn.Linear(6 * 3 * 3, 5)

        def forward(self, x):
            y = torch.add(self.shortcut(x), self.main(x)).relu()
            return self.fc(y.view(y.size(0), -1))

    class Depths(nn.Module):
        """Branches of different depths (1 and 3 convolutions), an add feeding an add, and a
        tensor read by three consumers (two convolutions and the last add)."""

        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 4, 3, padding=1)
            self.short = nn.Conv2d(4, 4, 1)
            self.deep = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU6(),
                                      nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(),
                                      nn.Conv2d(4, 4, 1))
            self.pool = nn.AvgPool2d(2)
            self.fc = nn.Linear(4 * 3 * 3, 5)

        def forward(self, x):
            t = F.relu(self.stem(x))
            y = self.short(t) + self.deep(t)
            y = F.relu(y + t)
            return self.fc(torch.flatten(self.pool(y), 1))

    class Head(nn.Module):
        """x.flatten(1) and F.adaptive_avg_pool2d after a residual pair; a final Softmax."""

        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            a = F.relu(self.a(x))
            y = F.adaptive_avg_pool2d(a + self.b(a), 1).flatten(1)
            return F.softmax(self.fc(y), dim=1)

    class Double(nn.Module):
        """A tensor added to itself (x + x: both inputs of the add are one tensor), which the
        dynamo exporter also makes of pool(y) + y when the pool is the identity."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.fc = nn.Linear(4 * 6 * 6, 3)

        def forward(self, x):
            y = torch.relu(self.conv(x))
            return self.fc(torch.flatten(y + y, 1))

    return {"identity": Identity, "projection": Projection, "depths": Depths, "head": Head,
            "double": Double}


def module(torch, kind, seed=0):
    torch.manual_seed(seed)
    return settle(torch, _modules(torch)[kind](), seed)


KINDS = pytest.mark.parametrize("kind", ["identity", "projection", "depths", "head",
                                           "double"])


@KINDS
def test_from_torch_equals_torch(torch, kind):
    model = module(torch, kind)
    cnn = from_torch(model, input_shape=SHAPE)
    assert isinstance(cnn, CNN)
    x = images()
    np.testing.assert_allclose(run_ours(cnn, x), run_torch(torch, model, x), rtol=1e-5,
                               atol=1e-5)


@KINDS
@EXPORTERS
def test_from_onnx_equals_torch(torch, onnx, kind, dynamo):
    model = module(torch, kind)
    cnn = from_onnx(export(torch, onnx, model, SHAPE, dynamo=dynamo))
    x = images(seed=1)
    np.testing.assert_allclose(run_ours(cnn, x), run_torch(torch, model, x), rtol=1e-4,
                               atol=1e-4)


def test_imported_graph_quantizes(torch):
    model = module(torch, "projection")
    cnn = from_torch(model, input_shape=SHAPE)
    net = quantize(cnn, images(count=64, seed=3))
    assert [n.name for n in net.nodes] == [n.name for n in cnn.nodes]
    x = images(seed=4)
    expected = run_torch(torch, model, x)
    got = net.forward(net.quantize_input(x)) * net.output_scale
    assert np.abs(got - expected).max() < 0.05 * np.abs(expected).max()


def test_nodes_names_and_folds(torch):
    cnn = from_torch(module(torch, "identity"), input_shape=SHAPE)
    # Node names are the modules' paths and, for functions, the fx names in their module.
    assert [(n.name, type(n.layer).__name__, n.inputs) for n in cnn.nodes] == [
        ("stem.0.0", "FloatConv2D", (INPUT,)), ("first.0", "FloatConv2D", ("stem.0.0",)),
        ("second.0", "FloatConv2D", ("first.0",)), ("add", "FloatAdd", ("stem.0.0", "second.0"))]
    stem, first, second, add = (n.layer for n in cnn.nodes)
    # Each BatchNorm folded into its convolution; the ReLUs into the layers before them.
    assert (stem.relu, first.relu, second.relu, add.activation) == (True, True, False, "relu")
    depths = from_torch(module(torch, "depths"), input_shape=SHAPE)
    by_name = {n.name: n for n in depths.nodes}
    assert by_name["add_1"].inputs == ("add", "stem") and by_name["add_1"].layer.relu
    assert by_name["deep.0"].layer.act_max == 6.0
    # The tensor read three times: by the two branches and the second add.
    assert sum("stem" in n.inputs for n in depths.nodes) == 3


def test_zoo_resnet8_from_torch(torch):
    from hwgen.models import get

    zoo = get("resnet8")
    model = zoo.model(0)
    cnn = from_torch(model, input_shape=zoo.input_shape)
    adds = {n.name: n.inputs for n in cnn.nodes if type(n.layer).__name__ == "FloatAdd"}
    assert adds == {"stacks.0.add": ("stem.0.1", "stacks.0.second.1"),
                    "stacks.1.add": ("stacks.1.shortcut", "stacks.1.second.1"),
                    "stacks.2.add": ("stacks.2.shortcut", "stacks.2.second.1")}
    assert cnn.output_function == "softmax"
    x = zoo.calibration(4, seed=1)
    np.testing.assert_allclose(cnn.forward(x), _logits(torch, model, x), rtol=1e-4, atol=1e-4)


def _logits(torch, model, x):
    """ResNet-8's scores before its final Softmax (which the import records apart)."""
    head = model.head
    with torch.no_grad():
        features = model.stacks(model.stem(torch.tensor(np.ascontiguousarray(
            x.transpose(0, 3, 1, 2)), dtype=torch.float32)))
        return head[2](head[1](head[0](features))).double().numpy()


@EXPORTERS
def test_zoo_resnet8_from_onnx(torch, onnx, dynamo):
    from hwgen.models import get

    zoo = get("resnet8")
    model = zoo.model(0)
    cnn = from_onnx(export(torch, onnx, model, zoo.input_shape, dynamo=dynamo))
    assert cnn.output_function == "softmax"
    x = zoo.calibration(4, seed=2)
    np.testing.assert_allclose(cnn.forward(x), _logits(torch, model, x), rtol=1e-4, atol=1e-4)


# -- what is refused -----------------------------------------------------------------------------

def _refused(torch):
    nn = torch.nn

    class Shared(nn.Module):
        """A ReLU and a BatchNorm on tensors that the add reads too: folding would change
        what the add sees."""

        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 1)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x):
            a, b = self.a(x), self.b(x)
            return torch.relu(a) + self.bn(b) + a + b

    class Ops(nn.Module):
        """A concatenation, a product and a difference of two tensors, and a constant added."""

        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 1)

        def forward(self, x):
            a, b = self.a(x), self.b(x)
            c = torch.cat([a, b], 1)
            return (a * b) - c[:, :4] + (a + 1.0)

    return Shared().eval(), Ops().eval()


def test_folding_into_a_shared_tensor_is_refused(torch):
    shared, _ = _refused(torch)
    with pytest.raises(UnsupportedModelError) as info:
        from_torch(shared, input_shape=SHAPE)
    assert [(name, kind) for name, kind, _ in info.value.offenders] == [
        ("relu", "torch.relu"), ("bn", "BatchNorm2d")]
    message = str(info.value)
    assert "relu (torch.relu): a ReLU on 'a' cannot be folded into 'a', whose output another " \
           "node also reads" in message
    assert "bn (BatchNorm2d): a BatchNorm on 'b' cannot be folded into 'b'" in message


def test_unsupported_operations_are_named(torch):
    _, ops = _refused(torch)
    with pytest.raises(UnsupportedModelError) as info:
        from_torch(ops, input_shape=SHAPE)
    offenders = {name: (kind, reason) for name, kind, reason in info.value.offenders}
    assert offenders["cat"][0] == "torch.cat" and "not a supported operation" in \
        offenders["cat"][1]
    assert offenders["mul"][0] == "operator.mul"
    assert offenders["sub"][0] == "operator.sub"
    assert offenders["add"] == ("operator.add", "adds (a, 1.0): 1 computed tensor(s); "
                                                "supported: the plain sum (alpha=1) of two "
                                                "computed tensors (a constant belongs in a "
                                                "layer's bias)")


@EXPORTERS
def test_onnx_offenders_are_named(torch, onnx, dynamo):
    _, ops = _refused(torch)
    model = export(torch, onnx, ops, SHAPE, dynamo=dynamo)
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(model)
    kinds = [kind for _, kind, _ in info.value.offenders]
    assert "Concat" in kinds and "Mul" in kinds and "Sub" in kinds
    names = {node.name for node in model.graph.node}
    assert all(name in names for name, _, _ in info.value.offenders)


def test_a_traced_forward_must_not_branch_on_data(torch):
    nn = torch.nn

    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 2, 1)

        def forward(self, x):
            return self.conv(x) if x.sum() > 0 else x

    with pytest.raises(UnsupportedModelError, match=r"<forward> \(Branchy\): torch.fx cannot "
                                                    r"trace it \(TraceError"):
        from_torch(Branchy(), input_shape=SHAPE)


def _functional(torch):
    """Functional forms of the layers, a zero pad before a convolution, two spatial means."""
    nn, F = torch.nn, torch.nn.functional

    class Functional(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(4, 4, 1)
            self.c = nn.Conv2d(4, 4, 3)
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            y = F.leaky_relu(self.a(x), 0.2).contiguous()
            y = F.max_pool2d(torch.clamp(y, -1.0, 2.0), 2)  # 6x6 -> 3x3
            y = F.hardtanh(F.dropout(self.b(y), 0.5, self.training), -0.5, 1.5)
            y = self.c(F.pad(y, (1, 1, 1, 1)))
            y = F.relu6(F.avg_pool2d(y, (2, 2), stride=1) + F.max_pool2d(y, 2, stride=1))
            z = torch.mean(y, dim=(-2, -1), keepdim=True).reshape(-1, 4) + y.mean((2, 3))
            return self.fc(z + F.adaptive_avg_pool2d(y, 1).flatten(1))

    torch.manual_seed(5)
    return Functional().eval()


def test_functional_forms(torch):
    model = _functional(torch)
    x = images()
    np.testing.assert_allclose(run_ours(from_torch(model, input_shape=SHAPE), x),
                               run_torch(torch, model, x), rtol=1e-5, atol=1e-5)


@EXPORTERS
def test_functional_forms_from_onnx(torch, onnx, dynamo):
    model = _functional(torch)
    x = images()
    np.testing.assert_allclose(run_ours(from_onnx(export(torch, onnx, model, SHAPE,
                                                         dynamo=dynamo)), x),
                               run_torch(torch, model, x), rtol=1e-4, atol=1e-4)


def test_functional_arguments_are_checked(torch):
    F = torch.nn.functional

    class Odd(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(3, 4, 3)

        def forward(self, x):
            y = self.a(F.pad(x, (1, 1, 1, 1), mode="reflect"))
            return torch.add(y.mean(1, keepdim=True), y, alpha=2)

    with pytest.raises(UnsupportedModelError) as info:
        from_torch(Odd(), input_shape=SHAPE)
    assert info.value.offenders == [
        ("pad", "torch.nn.functional.pad", "arguments [\"pad=(1, 1, 1, 1), mode='reflect', "
                                           "value=None\"]; supported: a zero padding of the two "
                                           "spatial axes"),
        ("mean", "Tensor.mean", "arguments ['dim=1']; supported: the mean over the spatial "
                                "axes (2, 3) of an image"),
        ("add", "torch.add", "adds (mean, a, alpha=2): 2 computed tensor(s); supported: the "
                             "plain sum (alpha=1) of two computed tensors (a constant belongs "
                             "in a layer's bias)")]


def test_functional_offenders(torch):
    nn, F = torch.nn, torch.nn.functional

    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x, y):
            z = F.max_pool2d(self.a(x), 2, padding=1)
            w = z.relu() + z  # the ReLU would change what the add reads
            return torch.flatten(w) + self.a.bias[0], w

    with pytest.raises(UnsupportedModelError) as info:
        from_torch(Odd(), input_shape=SHAPE)
    assert [(name, kind) for name, kind, _ in info.value.offenders] == [
        ("y", "input"), ("max_pool2d", "torch.nn.functional.max_pool2d"),
        ("relu", "Tensor.relu"), ("flatten", "torch.flatten"), ("a.bias", "get_attr"),
        ("getitem", "operator.getitem"), ("<output>", "output")]
    message = str(info.value)
    for text in ("max_pool2d (torch.nn.functional.max_pool2d): padding=1; supported: 0",
                 "relu (Tensor.relu): a ReLU on 'a' cannot be folded into 'a'",
                 "flatten (torch.flatten): start_dim=0, end_dim=-1; supported: 1, -1",
                 "a.bias (get_attr): reads the parameter or buffer 'a.bias' in forward",
                 "<output> (output): returns (add_1, add); supported: one tensor"):
        assert text in message


# -- random residual graphs ----------------------------------------------------------------------

def _random_module(torch, plan):
    """A module whose forward follows ``plan``: each step reads earlier tensors (0 is the
    stem's output) and is ``("conv", j, bn, relu)`` or ``("add", j, k, relu)``."""
    nn = torch.nn

    class Random(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 4, 3, padding=1)
            self.convs = nn.ModuleList(
                nn.Sequential(nn.Conv2d(4, 4, 3 if i % 2 else 1, padding=i % 2),
                              nn.BatchNorm2d(4) if step[2] else nn.Identity())
                for i, step in enumerate(plan) if step[0] == "conv")
            self.fc = nn.Linear(4 * 6 * 6, 3)

        def forward(self, x):
            tensors, convs = [self.stem(x)], iter(self.convs)
            for op, j, arg, relu in plan:
                y = next(convs)(tensors[j]) if op == "conv" else tensors[j] + tensors[arg]
                tensors.append(torch.relu(y) if relu else y)
            return self.fc(tensors[-1].flatten(1))

    torch.manual_seed(len(plan))
    return settle(torch, Random(), len(plan))


@st.composite
def plans(draw):
    steps = []
    for i in range(draw(st.integers(1, 6))):
        j = draw(st.integers(0, i))
        if draw(st.booleans()) and i > 0:
            k = draw(st.integers(0, i).filter(lambda k, j=j: k != j))
            steps.append(("add", j, k, draw(st.booleans())))
        else:
            steps.append(("conv", j, draw(st.booleans()), draw(st.booleans())))
    return steps


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans())
def test_random_graphs_equal_torch(torch, onnx, plan):
    """Random residual graphs (unused branches included, which the imports drop), from torch
    and from the legacy ONNX export (the fast one; the dynamo export is tested above)."""
    model = _random_module(torch, plan)
    x = images(count=3)
    expected = run_torch(torch, model, x)
    for cnn in (from_torch(model, input_shape=SHAPE),
                from_onnx(export(torch, onnx, model, SHAPE, dynamo=False))):
        np.testing.assert_allclose(run_ours(cnn, x), expected, rtol=1e-5, atol=1e-5)
