"""The ONNX importer, on graphs exported by torch itself (both exporters) and on hand-made ones.

Each test skips with the reason when its library is absent.
"""

import io
import sys
import warnings
from collections import OrderedDict

import numpy as np
import pytest

from hwgen.nn import CNN, MLP, FloatConv2D, UnsupportedModelError, from_onnx, from_torch, quantize


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed")


@pytest.fixture
def onnx():
    return pytest.importorskip("onnx", reason="onnx is not installed")


def export(torch, onnx, model, example, *, dynamo, dynamic_batch=False):
    """Export with torch's default (dynamo) or legacy (TorchScript) exporter."""
    kwargs = {}
    if dynamic_batch and dynamo:
        kwargs["dynamic_shapes"] = ({0: torch.export.Dim("batch")},)
    elif dynamic_batch:
        kwargs["dynamic_axes"] = {"x": {0: "batch"}}
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # The TorchScript exporter is deprecated; the dynamo one warns about torchvision.
        warnings.simplefilter("ignore")
        program = torch.onnx.export(model, (example,), None if dynamo else buffer,
                                    dynamo=dynamo, input_names=["x"], output_names=["y"],
                                    **kwargs)
    return program.model_proto if dynamo else onnx.load_from_string(buffer.getvalue())


def run_torch(torch, model, x_nhwc):
    """The torch model's output for NHWC images (given to torch as NCHW)."""
    with torch.no_grad():
        x = np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))
        return model(torch.tensor(x, dtype=torch.float32)).numpy()


def images(shape, count=20, seed=0):
    return np.random.default_rng(seed).normal(size=(count, *shape))


def sequential_cnn(torch):
    nn = torch.nn
    torch.manual_seed(2)
    return nn.Sequential(
        nn.Conv2d(2, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 8, 3, stride=2, padding=1), nn.MaxPool2d(2, stride=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(8 * 2 * 2, 10), nn.ReLU(), nn.Linear(10, 4)).eval()


def view_cnn(torch):
    """A module whose forward flattens with x.view(x.size(0), -1), as much torch code does."""
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, stride=2, padding=1)
            self.fc = nn.Linear(4 * 5 * 5, 3, bias=False)

        def forward(self, x):
            x = torch.relu(self.conv(x))
            return self.fc(x.view(x.size(0), -1))

    torch.manual_seed(3)
    return Net().eval()


# -- graphs exported by torch -------------------------------------------------------------------

@pytest.mark.parametrize("exporter", [(True, False), (True, True), (False, False), (False, True)],
                         ids=["dynamo-static", "dynamo-dynamic", "legacy-static",
                              "legacy-dynamic"])
@pytest.mark.parametrize(("make", "shape"), [(sequential_cnn, (12, 12, 2)), (view_cnn, (9, 9, 2))],
                         ids=["sequential", "view"])
def test_exported_cnn_matches_torch(torch, onnx, make, shape, exporter):
    dynamo, dynamic_batch = exporter
    model = make(torch)
    h, w, c = shape
    graph = export(torch, onnx, model, torch.zeros(2, c, h, w), dynamo=dynamo,
                   dynamic_batch=dynamic_batch)
    cnn = from_onnx(graph)
    assert isinstance(cnn, CNN) and cnn.input_shape == shape
    x = images(shape)
    np.testing.assert_allclose(cnn.forward(x), run_torch(torch, model, x), rtol=1e-5, atol=1e-5)
    if make is sequential_cnn:  # the same weights as the direct import, exactly
        direct = from_torch(model, input_shape=shape)
        for a, b in zip(direct.params, cnn.params, strict=True):
            np.testing.assert_array_equal(a, b)
        assert [getattr(layer, "relu", None) for layer in direct.layers] == [
            getattr(layer, "relu", None) for layer in cnn.layers]


def test_torch_and_its_onnx_export_agree_on_an_mlp(torch, onnx, tmp_path):
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict([
        ("flat", nn.Flatten()), ("fc1", nn.Linear(64, 32)), ("act1", nn.ReLU()),
        ("drop", nn.Dropout(0.5)),
        ("block", nn.Sequential(nn.Linear(32, 16, bias=False), nn.Identity())),
        ("fc3", nn.Linear(16, 10)),
    ])).eval()
    path = tmp_path / "model.onnx"
    path.write_bytes(export(torch, onnx, model, torch.zeros(1, 64),
                            dynamo=False).SerializeToString())
    from_t = from_torch(model)
    for source in (path, str(path), onnx.load(str(path))):
        from_o = from_onnx(source)
        assert isinstance(from_o, MLP) and from_o.relu == from_t.relu
        for (wt, bt), (wo, bo) in zip(from_t.layers, from_o.layers, strict=True):
            np.testing.assert_array_equal(wt, wo)
            np.testing.assert_array_equal(bt, bo)
    x = np.random.default_rng(0).uniform(0.0, 1.0, size=(50, 64))
    np.testing.assert_allclose(from_o.forward(x), from_t.forward(x), rtol=1e-12, atol=1e-12)
    calib = np.random.default_rng(1).uniform(0.0, 1.0, size=(200, 64))
    q_torch, q_onnx = quantize(from_t, calib), quantize(from_o, calib)
    xq = q_torch.quantize_input(x)
    np.testing.assert_array_equal(q_torch.forward(xq), q_onnx.forward(xq))


# -- hand-made graphs ---------------------------------------------------------------------------

def make_graph(onnx, nodes, initializers, in_dims, out_dims):
    helper = onnx.helper
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, in_dims)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, out_dims)],
        initializer=[onnx.numpy_helper.from_array(np.asarray(v), k)
                     for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def reference_run(onnx, model, x):
    """ONNX's own reference evaluator: the independent expectation."""
    reference = pytest.importorskip("onnx.reference", reason="onnx has no reference evaluator")
    (out,) = reference.ReferenceEvaluator(model).run(None, {"x": x.astype(np.float32)})
    return out


def test_gemm_matmul_add(onnx):
    helper = onnx.helper
    rng = np.random.default_rng(0)
    f32 = np.float32
    weights = {
        "w0": rng.normal(size=(6, 5)).astype(f32), "c0": rng.normal(size=5).astype(f32),
        "w1": rng.normal(size=(4, 5)).astype(f32), "c1": rng.normal(size=(1, 4)).astype(f32),
        "w2": rng.normal(size=(4, 3)).astype(f32), "c2": rng.normal(size=3).astype(f32),
        "w3": rng.normal(size=(3, 2)).astype(f32), "c3": rng.normal(size=2).astype(f32),
    }
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"], axis=1, name="flat"),
        helper.make_node("Gemm", ["f", "w0", "c0"], ["g0"], alpha=0.5, beta=2.0, name="gemm0"),
        helper.make_node("Relu", ["g0"], ["r0"], name="relu0"),
        helper.make_node("Gemm", ["r0", "w1", "c1"], ["g1"], transB=1, name="gemm1"),
        helper.make_node("Identity", ["g1"], ["i1"], name="ident"),
        helper.make_node("MatMul", ["i1", "w2"], ["m2"], name="mm2"),
        helper.make_node("Add", ["m2", "c2"], ["a2"], name="add2"),
        helper.make_node("Relu", ["a2"], ["r2"], name="relu2"),
        helper.make_node("MatMul", ["r2", "w3"], ["m3"], name="mm3"),
        helper.make_node("Add", ["c3", "m3"], ["y"], name="add3"),
    ]
    model = make_graph(onnx, nodes, weights, [None, 6], [None, 2])
    onnx.checker.check_model(model)
    mlp = from_onnx(model)
    assert mlp.sizes == [6, 5, 4, 3, 2] and mlp.relu == [True, False, True, False]
    x = rng.normal(size=(20, 6))
    np.testing.assert_allclose(mlp.forward(x), reference_run(onnx, model, x), rtol=1e-4,
                               atol=1e-4)


def conv_graph(onnx, *, shape=(6, 5, 2), conv_attrs=None, pool_attrs=None, reshape=None,
               flatten=True):
    """x (NCHW) -> Conv -> Relu -> MaxPool -> Flatten or Reshape -> Gemm, with given attrs."""
    helper = onnx.helper
    h, w, c = shape
    rng = np.random.default_rng(5)
    conv_attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]} | (conv_attrs or {})
    pool_attrs = {"kernel_shape": [2, 2], "strides": [2, 2]} | (pool_attrs or {})
    pool_attrs = {k: v for k, v in pool_attrs.items() if v is not None}
    weights = {"k": rng.normal(size=(3, c, *conv_attrs["kernel_shape"])).astype(np.float32),
               "kb": rng.normal(size=3).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "k", "kb"], ["c"], name="conv", **conv_attrs),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", **pool_attrs)]
    if not flatten:
        nodes[-1].output[0] = "y"
        return make_graph(onnx, nodes, weights, [None, c, h, w], None), weights
    if reshape is None:
        nodes.append(helper.make_node("Flatten", ["p"], ["f"], axis=1, name="flat"))
    else:
        weights["target"] = np.array(reshape, dtype=np.int64)
        nodes.append(helper.make_node("Reshape", ["p", "target"], ["f"], name="reshape"))
    return weights, nodes, (h, w, c)


def finish_graph(onnx, weights, nodes, shape, features, *, batch=None):
    helper = onnx.helper
    h, w, c = shape
    weights["fc"] = np.random.default_rng(6).normal(size=(4, features)).astype(np.float32)
    nodes.append(helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1, name="fc"))
    return make_graph(onnx, nodes, weights, [batch, c, h, w], [batch, 4])


@pytest.mark.parametrize(("conv_attrs", "pool_attrs", "features"), [
    ({}, {}, 3 * 3 * 2),
    ({"auto_pad": "SAME_UPPER", "pads": [0, 0, 0, 0]}, {}, 3 * 3 * 2),  # pads 1 on every side
    ({"auto_pad": "VALID", "pads": [0, 0, 0, 0]}, {"kernel_shape": [2, 2], "strides": [1, 1]},
     3 * 3 * 2),
    ({"strides": [2, 2], "kernel_shape": [2, 2], "pads": [0, 0, 0, 0]},
     {"kernel_shape": [1, 1], "strides": [1, 1]}, 3 * 2 * 3),
    # MaxPool's default stride is 1, not the window's size.
    ({}, {"kernel_shape": [3, 3], "strides": None}, 4 * 3 * 3),
])
def test_conv_and_pool_attributes(onnx, conv_attrs, pool_attrs, features):
    weights, nodes, shape = conv_graph(onnx, conv_attrs=conv_attrs, pool_attrs=pool_attrs)
    model = finish_graph(onnx, weights, nodes, shape, features)
    cnn = from_onnx(model)
    x = images((6, 5, 2))
    np.testing.assert_allclose(cnn.forward(x), reference_run(onnx, model,
                                                             x.transpose(0, 3, 1, 2)),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("target", "batch"), [([0, -1], None), ([-1, 18], None),
                                               ([5, -1], 5), ([5, 18], 5)])
def test_reshape_to_rows(onnx, target, batch):
    weights, nodes, shape = conv_graph(onnx, reshape=target)
    model = finish_graph(onnx, weights, nodes, shape, 18, batch=batch)
    cnn = from_onnx(model)
    x = images((6, 5, 2), count=5)
    np.testing.assert_allclose(cnn.forward(x), reference_run(onnx, model,
                                                             x.transpose(0, 3, 1, 2)),
                               rtol=1e-4, atol=1e-4)


def test_spatial_output(onnx):
    model, _ = conv_graph(onnx, flatten=False)
    cnn = from_onnx(model)
    x = images((6, 5, 2))
    np.testing.assert_allclose(cnn.forward(x), reference_run(onnx, model, x.transpose(
        0, 3, 1, 2)).transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)


def test_conv_offenders_are_all_listed(onnx):
    helper = onnx.helper
    rng = np.random.default_rng(0)
    weights = {"k": rng.normal(size=(2, 2, 3, 3)).astype(np.float32),
               "g": rng.normal(size=(2, 1, 3, 3)).astype(np.float32),
               "k2": rng.normal(size=(2, 2, 2, 2)).astype(np.float32),
               "target": np.array([-1, 2, 8], dtype=np.int64)}
    nodes = [
        helper.make_node("Conv", ["x", "k"], ["c0"], pads=[1, 1, 0, 0], name="asym"),
        helper.make_node("Conv", ["c0", "g"], ["c1"], group=2, dilations=[2, 2], name="dilated"),
        helper.make_node("Conv", ["c1", "k2"], ["c2"], auto_pad="SAME_UPPER", name="same_even"),
        helper.make_node("Conv", ["c2", "k"], ["c3"], strides=[1, 2], name="oblique"),
        helper.make_node("MaxPool", ["c3"], ["p0"], kernel_shape=[2, 2], ceil_mode=1,
                         pads=[1, 1, 1, 1], name="ceil"),
        helper.make_node("MaxPool", ["p0"], ["p1", "idx"], kernel_shape=[2, 3], name="indices"),
        helper.make_node("Reshape", ["p1", "target"], ["y"], name="to3d"),
    ]
    model = make_graph(onnx, nodes, weights, [None, 2, 8, 8], None)
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(model)
    # asym, the grouped convolution and oblique's strides are fine; the rest are not.
    assert [(name, kind) for name, kind, _ in info.value.offenders] == [
        ("dilated", "Conv"), ("same_even", "Conv"), ("ceil", "MaxPool"),
        ("indices", "MaxPool"), ("to3d", "Reshape")]
    message = str(info.value)
    for text in ("dilated (Conv): dilations=[2, 2]; supported: [1, 1]",
                 "same_even (Conv): auto_pad=SAME_UPPER on an input of unknown size",
                 "ceil (MaxPool): ceil_mode=1", "pads=[1, 1, 1, 1] or auto_pad; supported: none",
                 "indices (MaxPool): kernel_shape=[2, 3]; supported: a square",
                 "the Indices output", "to3d (Reshape): target shape [-1, 2, 8]; supported: "
                 "2-D (batch, features)"):
        assert text in message


@pytest.mark.parametrize(("auto_pad", "pads"), [("SAME_LOWER", (1, 0, 1, 0)),
                                                ("SAME_UPPER", (0, 1, 0, 1))])
def test_same_padding_that_is_uneven(onnx, auto_pad, pads):
    # An even kernel pads one pixel in total per axis: before the image for SAME_LOWER.
    helper = onnx.helper
    weights = {"k": np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)}
    nodes = [helper.make_node("Conv", ["x", "k"], ["y"], auto_pad=auto_pad, name="c")]
    cnn = from_onnx(make_graph(onnx, nodes, weights, [None, 1, 4, 4], None))
    assert cnn.layers[0].pads == pads and cnn.output_shape == (4, 4, 1)
    x = np.random.default_rng(0).normal(size=(2, 4, 4, 1))
    xpad = np.pad(x, ((0, 0), pads[:2], pads[2:], (0, 0)))
    expected = sum(xpad[:, ky:ky + 4, kx:kx + 4] * (2 * ky + kx)
                   for ky in (0, 1) for kx in (0, 1))
    np.testing.assert_allclose(cnn.forward(x), expected, atol=1e-12)


@pytest.mark.parametrize(("target", "batch"), [([-1, 2, 9], None), ([3, -1], 5), ([-1, -1], None),
                                               ([0, 18], None)])
def test_reshape_offenders(onnx, target, batch):
    weights, nodes, shape = conv_graph(onnx, reshape=target)
    if target == [0, 18]:
        nodes[-1].attribute.append(onnx.helper.make_attribute("allowzero", 1))
    model = finish_graph(onnx, weights, nodes, shape, 18, batch=batch)
    with pytest.raises(UnsupportedModelError, match=r"reshape \(Reshape\): target shape .*; "
                                                    r"supported: 2-D \(batch, 18\), a flatten"):
        from_onnx(model)


def test_unsupported_lists_every_offender(onnx):
    helper = onnx.helper
    rng = np.random.default_rng(0)
    weights = {"w0": rng.normal(size=(4, 3)), "w1": rng.normal(size=(3, 3))}
    nodes = [
        helper.make_node("Gemm", ["x", "w0"], ["g0"], name="gemm0"),
        helper.make_node("Sigmoid", ["g0"], ["s0"], name="squash"),
        helper.make_node("Gemm", ["s0", "w1"], ["g1"], transA=1, name="gemmT"),
        helper.make_node("Flatten", ["g1"], ["f"], axis=0),
        helper.make_node("Mul", ["f", "f"], ["y"], name="square"),
    ]
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(make_graph(onnx, nodes, weights, [None, 4], [None, 3]))
    assert [(name, kind) for name, kind, _ in info.value.offenders] == [
        ("squash", "Sigmoid"), ("gemmT", "Gemm"), ("node 3", "Flatten"), ("square", "Mul")]
    message = str(info.value)
    for text in ("squash (Sigmoid): supported only as the model's last layer, but gemmT "
                 "(Gemm) follows it", "gemmT (Gemm): transA=1",
                 "node 3 (Flatten): axis=0", "square (Mul)", "4 unsupported"):
        assert text in message


def test_graph_shape_errors(onnx):
    helper = onnx.helper
    weights = {"w0": np.ones((4, 3)), "w1": np.ones((2, 2)), "c": np.ones(3)}
    # A bias that is not right after its layer (an Add of a tensor to itself is a residual add).
    nodes = [
        helper.make_node("Gemm", ["x", "w0"], ["g0"], name="gemm0"),
        helper.make_node("Add", ["g0", "g0"], ["a"], name="double"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "c"], ["y"], name="late_bias"),
    ]
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(make_graph(onnx, nodes, weights, [None, 4], [None, 3]))
    assert [name for name, _, _ in info.value.offenders] == ["late_bias"]
    # A layer whose width does not match, from the graph input on.
    nodes = [helper.make_node("Gemm", ["x", "w0"], ["g0"], name="gemm0"),
             helper.make_node("MatMul", ["g0", "w1"], ["y"], name="mm")]
    with pytest.raises(UnsupportedModelError, match="mm \\(MatMul\\): takes 2 inputs but the "
                                                    "previous layer gives 3"):
        from_onnx(make_graph(onnx, nodes, weights, [None, 4], [None, 2]))
    with pytest.raises(UnsupportedModelError, match="gemm0 \\(Gemm\\): takes 4 inputs but the "
                                                    "input gives 5"):
        from_onnx(make_graph(onnx, nodes[:1], weights, [None, 5], [None, 3]))


def test_bias_must_be_per_channel(onnx):
    helper = onnx.helper
    weights = {"w": np.ones((4, 3)), "per_row": np.ones((2, 3)), "column": np.ones((3, 1))}
    for bias, node_name in (("per_row", "gemm"), ("column", "add")):
        nodes = ([helper.make_node("Gemm", ["x", "w", bias], ["y"], name="gemm")]
                 if node_name == "gemm" else
                 [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                  helper.make_node("Add", ["m", bias], ["y"], name="add")])
        with pytest.raises(UnsupportedModelError, match=rf"{node_name} \((Gemm|Add)\)"):
            from_onnx(make_graph(onnx, nodes, weights, [None, 4], [None, 3]))


def test_input_shape(onnx):
    weights, nodes, _ = conv_graph(onnx)
    symbolic = finish_graph(onnx, weights, nodes, ("H", "W", 2), 18)
    with pytest.raises(ValueError, match=r"from_onnx: the graph input 'x' has dims \[None, 2, "
                                         r"None, None\]; pass input_shape=\(H, W, C\)"):
        from_onnx(symbolic)
    cnn = from_onnx(symbolic, input_shape=(6, 5, 2))
    assert cnn.input_shape == (6, 5, 2)
    assert isinstance(cnn.layers[0], FloatConv2D)
    stated = finish_graph(onnx, *conv_graph(onnx)[:2], (6, 5, 2), 18)
    assert from_onnx(stated, input_shape=(6, 5, 2)).input_shape == (6, 5, 2)
    with pytest.raises(ValueError, match=r"input_shape=\(5, 6, 2\) but the graph input 'x' has "
                                         r"dims \[None, 2, 6, 5\]; allowed: \(6, 5, 2\)"):
        from_onnx(stated, input_shape=(5, 6, 2))
    with pytest.raises(ValueError, match=r"from_onnx: field 'input_shape' is \(6, 5\); allowed"):
        from_onnx(stated, input_shape=(6, 5))


def test_missing_dependency_is_explained(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # makes `import onnx` fail
    with pytest.raises(ImportError, match=r"onnx is needed.*pip install onnx"):
        from_onnx(object())
