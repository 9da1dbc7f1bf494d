"""Importers from PyTorch and ONNX; each test skips with the reason when its library is absent."""

import io
import sys
import warnings
from collections import OrderedDict

import numpy as np
import pytest

from hwgen.nn import MLP, UnsupportedModelError, from_onnx, from_torch, quantize


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed")


@pytest.fixture
def onnx():
    return pytest.importorskip("onnx", reason="onnx is not installed")


def torch_model(torch):
    nn = torch.nn
    torch.manual_seed(0)
    return nn.Sequential(OrderedDict([
        ("flat", nn.Flatten()),
        ("fc1", nn.Linear(64, 32)),
        ("act1", nn.ReLU()),
        ("drop", nn.Dropout(0.5)),
        ("block", nn.Sequential(nn.Linear(32, 16, bias=False), nn.Identity())),
        ("fc3", nn.Linear(16, 10)),
    ])).eval()


def export(torch, model, width):
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # The TorchScript exporter is deprecated but needs no extra package (onnxscript).
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, width),), buffer, dynamo=False,
                          input_names=["x"], output_names=["logits"])
    return buffer.getvalue()


def inputs(count=50, width=64, seed=0):
    return np.random.default_rng(seed).uniform(0.0, 1.0, size=(count, width))


# -- PyTorch ------------------------------------------------------------------------------------

def test_torch_outputs_match(torch):
    model = torch_model(torch)
    mlp = from_torch(model)
    assert isinstance(mlp, MLP)
    assert mlp.sizes == [64, 32, 16, 10] and mlp.relu == [True, False, False]
    assert np.all(mlp.layers[1][1] == 0)  # Linear(bias=False) imports a zero bias
    x = inputs()
    expected = model(torch.tensor(x, dtype=torch.float32)).detach().numpy()
    np.testing.assert_allclose(mlp.forward(x), expected, rtol=1e-4, atol=1e-5)


def test_torch_single_linear(torch):
    linear = torch.nn.Linear(3, 2)
    mlp = from_torch(linear)
    np.testing.assert_array_equal(mlp.layers[0][0], linear.weight.detach().double().numpy().T)
    assert mlp.relu == [False]


def test_torch_unsupported_lists_every_offender(torch):
    nn = torch.nn
    model = nn.Sequential(OrderedDict([
        ("conv", nn.Conv2d(1, 4, 3)),
        ("flat", nn.Flatten()),
        ("fc", nn.Linear(4, 3)),
        ("squash", nn.Sigmoid()),
        ("inner", nn.Sequential(nn.Linear(5, 2), nn.Flatten(start_dim=0))),
    ]))
    with pytest.raises(UnsupportedModelError) as info:
        from_torch(model)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert [(name, kind) for name, kind, _ in info.value.offenders] == [
        ("conv", "Conv2d"), ("squash", "Sigmoid"), ("inner.0", "Linear"), ("inner.1", "Flatten")]
    for text in ("conv (Conv2d)", "squash (Sigmoid)", "inner.0 (Linear): takes 5 inputs",
                 "inner.1 (Flatten): start_dim=0", "4 unsupported"):
        assert text in message


def test_torch_empty_and_leading_relu(torch):
    with pytest.raises(UnsupportedModelError, match="no dense layer"):
        from_torch(torch.nn.Sequential())
    with pytest.raises(UnsupportedModelError, match=r"0 \(ReLU\): a ReLU before the first"):
        from_torch(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(2, 2)))


# -- ONNX ---------------------------------------------------------------------------------------

def test_torch_and_its_onnx_export_agree(torch, onnx, tmp_path):
    model = torch_model(torch)
    path = tmp_path / "model.onnx"
    path.write_bytes(export(torch, model, 64))
    from_t = from_torch(model)
    for source in (path, str(path), onnx.load(str(path))):
        from_o = from_onnx(source)
        assert from_o.relu == from_t.relu
        for (wt, bt), (wo, bo) in zip(from_t.layers, from_o.layers, strict=True):
            np.testing.assert_array_equal(wt, wo)
            np.testing.assert_array_equal(bt, bo)
    x = inputs()
    np.testing.assert_allclose(from_o.forward(x), from_t.forward(x), rtol=1e-12, atol=1e-12)
    calib = inputs(200, seed=1)
    q_torch, q_onnx = quantize(from_t, calib), quantize(from_o, calib)
    xq = q_torch.quantize_input(x)
    np.testing.assert_array_equal(q_torch.forward(xq), q_onnx.forward(xq))
    np.testing.assert_array_equal(q_torch.predict(x), q_onnx.predict(x))


def make_graph(onnx, nodes, initializers, width, out_width):
    helper = onnx.helper
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, width])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, out_width])],
        initializer=[onnx.numpy_helper.from_array(v.astype(np.float32), k)
                     for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_onnx_gemm_matmul_add(onnx):
    helper = onnx.helper
    rng = np.random.default_rng(0)
    weights = {
        "w0": rng.normal(size=(6, 5)), "c0": rng.normal(size=5),    # Gemm, transB=0
        "w1": rng.normal(size=(4, 5)), "c1": rng.normal(size=(1, 4)),  # Gemm, transB=1
        "w2": rng.normal(size=(4, 3)), "c2": rng.normal(size=3),    # MatMul + Add
        "w3": rng.normal(size=(3, 2)), "c3": rng.normal(size=2),    # MatMul, Add(bias, act)
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
    model = make_graph(onnx, nodes, weights, 6, 2)
    onnx.checker.check_model(model)
    mlp = from_onnx(model)
    assert mlp.sizes == [6, 5, 4, 3, 2] and mlp.relu == [True, False, True, False]
    x = rng.normal(size=(20, 6)).astype(np.float32)
    # ONNX's own reference evaluator is the independent expectation.
    reference = pytest.importorskip("onnx.reference", reason="onnx has no reference evaluator")
    (expected,) = reference.ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(mlp.forward(x), expected, rtol=1e-4, atol=1e-4)


def test_onnx_unsupported_lists_every_offender(onnx):
    helper = onnx.helper
    rng = np.random.default_rng(0)
    weights = {"w0": rng.normal(size=(4, 3)), "w1": rng.normal(size=(3, 3)),
               "k": rng.normal(size=(1, 1, 3, 3))}
    nodes = [
        helper.make_node("Gemm", ["x", "w0"], ["g0"], name="gemm0"),
        helper.make_node("Sigmoid", ["g0"], ["s0"], name="squash"),
        helper.make_node("Gemm", ["s0", "w1"], ["g1"], transA=1, name="gemmT"),
        helper.make_node("Conv", ["g1", "k"], ["c"], name="conv"),
        helper.make_node("Flatten", ["c"], ["f"], axis=0),
        helper.make_node("Mul", ["f", "f"], ["y"], name="square"),
    ]
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(make_graph(onnx, nodes, weights, 4, 3))
    assert [(name, kind) for name, kind, _ in info.value.offenders] == [
        ("squash", "Sigmoid"), ("gemmT", "Gemm"), ("conv", "Conv"), ("node 4", "Flatten"),
        ("square", "Mul")]
    message = str(info.value)
    for text in ("squash (Sigmoid)", "gemmT (Gemm): transA=1", "conv (Conv)",
                 "node 4 (Flatten): axis=0", "square (Mul)", "5 unsupported"):
        assert text in message


def test_onnx_graph_shape_errors(onnx):
    helper = onnx.helper
    weights = {"w0": np.ones((4, 3)), "w1": np.ones((2, 2)), "c": np.ones(3)}
    # An Add whose operand is the activation itself, a second branch, and a mismatched layer.
    nodes = [
        helper.make_node("Gemm", ["x", "w0"], ["g0"], name="gemm0"),
        helper.make_node("Add", ["g0", "g0"], ["a"], name="double"),
        helper.make_node("Relu", ["a"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "c"], ["b"], name="late_bias"),
        helper.make_node("MatMul", ["b", "w1"], ["y"], name="mm"),
    ]
    with pytest.raises(UnsupportedModelError) as info:
        from_onnx(make_graph(onnx, nodes, weights, 4, 2))
    assert [name for name, _, _ in info.value.offenders] == ["double", "late_bias", "mm"]
    assert "takes 2 inputs but the previous layer gives 3" in str(info.value)


def test_onnx_bias_must_be_per_channel(onnx):
    helper = onnx.helper
    weights = {"w": np.ones((4, 3)), "per_row": np.ones((2, 3)), "column": np.ones((3, 1))}
    for bias, node_name in (("per_row", "gemm"), ("column", "add")):
        nodes = ([helper.make_node("Gemm", ["x", "w", bias], ["y"], name="gemm")]
                 if node_name == "gemm" else
                 [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                  helper.make_node("Add", ["m", bias], ["y"], name="add")])
        with pytest.raises(UnsupportedModelError, match=rf"{node_name} \((Gemm|Add)\)"):
            from_onnx(make_graph(onnx, nodes, weights, 4, 3))


# -- optional dependencies ----------------------------------------------------------------------

@pytest.mark.parametrize(("module", "importer"), [("torch", from_torch), ("onnx", from_onnx)])
def test_missing_dependency_is_explained(monkeypatch, module, importer):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    with pytest.raises(ImportError, match=f"{module} is needed.*pip install {module}"):
        importer(object())
