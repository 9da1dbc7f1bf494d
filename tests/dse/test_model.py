"""hwgen.dse.model: the model a sweep compiles, at each point's widths.

A saved program's network is recovered from its images and compared with the network it was
compiled from; float models are compared with :func:`hwgen.nn.quantize` called directly.
"""

import itertools
import pickle

import numpy as np
import pytest

import hwgen
from hwgen.config import AcceleratorConfig
from hwgen.dse.model import (
    DEMO_MODEL,
    FloatModel,
    IntegerModel,
    ModelError,
    load_model,
    network_from_program,
)
from hwgen.nn import MLP, QuantizedNetwork, quantize
from sim.netgen import random_network

_FIELDS = ("weight", "bias", "mult", "shift", "activation", "output", "mult_neg")


def _bounds(layer, in_bits):
    return None if layer.output == "raw" else layer.bounds(in_bits)


def _same_network(a, b):
    assert len(a.layers) == len(b.layers)
    for x, y in zip(a.layers, b.layers, strict=True):
        for field in _FIELDS:
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field), err_msg=field)


@pytest.mark.parametrize("seed", range(12))
def test_network_from_program_recovers_the_compiled_network(seed):
    rng = np.random.default_rng(seed)
    config = AcceleratorConfig(
        rows=int(rng.integers(1, 7)), cols=int(rng.integers(1, 7)),
        dataflow=str(rng.choice(["ws", "os"])), in_bits=int(rng.integers(4, 9)),
        w_bits=int(rng.integers(3, 9)), acc_bits=int(rng.integers(28, 40)),
        mult_bits=int(rng.integers(4, 20)))
    net = random_network(rng, config, max_width=40)
    back = network_from_program(hwgen.compile(net, config))
    _same_network(net, back)
    assert [_bounds(x, config.in_bits) for x in back.layers] == [
        _bounds(x, config.in_bits) for x in net.layers]
    assert (back.in_bits, back.w_bits, back.acc_bits, back.mult_bits) == (
        config.in_bits, config.w_bits, config.acc_bits, config.mult_bits)


def _saved(tmp_path, config, seed=1):
    net = random_network(np.random.default_rng(seed), config, widths=[20, 7, 5])
    program = hwgen.compile(net, config)
    path = tmp_path / "model.npz"
    program.save(path)
    return net, program, path


def test_a_saved_program_is_an_integer_model(tmp_path):
    config = AcceleratorConfig(rows=3, cols=2, acc_bits=32, mult_bits=16)
    net, program, path = _saved(tmp_path, config)
    model = load_model(path)
    assert isinstance(model, IntegerModel) and model.label == "model.npz"
    same = model.network(8, 8, 32, 16)
    _same_network(net, same)
    assert hwgen.compile(same, config).images == program.images
    # The network's values do not depend on its declared accumulator width: a wider one is
    # the same network, which compiles onto a wider design.
    wide = model.network(8, 8, 40, 20)
    _same_network(net, wide)
    assert wide.acc_bits == 40 and wide.mult_bits == 20
    # The digest is the file's: another file, another key.
    _, _, other = _saved(tmp_path / "..", config, seed=2)
    assert load_model(other).digest != model.digest


def test_an_integer_model_refuses_other_operand_widths(tmp_path):
    config = AcceleratorConfig(rows=2, cols=2)
    _, _, path = _saved(tmp_path, config)
    model = load_model(path)
    with pytest.raises(ModelError, match=r"model\.npz is an integer network of in_bits=8, "
                                         r"w_bits=8; this point has in_bits=4, w_bits=8"):
        model.network(4, 8, 32, 16)
    # Values that do not fit a narrower multiplier: refused with the field and the width.
    with pytest.raises(ModelError, match=r"model\.npz at in_bits=8, w_bits=8, acc_bits=32, "
                                         r"mult_bits=2: layer 0: .*mult"):
        model.network(8, 8, 32, 2)


def test_float_models_quantize_per_width_tuple_and_cache():
    rng = np.random.default_rng(0)
    mlp = MLP([6, 5, 3], seed=1)
    calib = rng.normal(size=(40, 6))
    model = FloatModel(mlp, calib, label="tiny")
    for widths in [(8, 8, 32, 16), (4, 6, 24, 12), (8, 8, 32, 16)]:
        got = model.network(*widths)
        want = quantize(mlp, calib, in_bits=widths[0], w_bits=widths[1], acc_bits=widths[2],
                        mult_bits=widths[3])
        _same_network(want, got)
    assert model.network(8, 8, 32, 16) is model.network(8, 8, 32, 16)
    # Widths the quantizer refuses are a ModelError naming them, raised every time: a bias
    # far larger than the weights does not fit a narrow accumulator.
    biased = FloatModel(MLP.from_layers([(mlp.layers[0][0], np.full(5, 1e4)),
                                         mlp.layers[1]]), calib, label="biased")
    for _ in range(2):
        with pytest.raises(ModelError, match=r"biased at in_bits=8, w_bits=8, acc_bits=12, "
                                             r"mult_bits=16: layer 0: quantized bias"):
            biased.network(8, 8, 12, 16)
    # The cache stays behind when the model travels to a worker.
    clone = pickle.loads(pickle.dumps(model))
    assert "_cache" not in clone.__dict__ and clone.digest == model.digest
    _same_network(clone.network(8, 8, 32, 16), model.network(8, 8, 32, 16))


def test_the_default_model_is_the_demo_mlp():
    model = load_model()
    assert isinstance(model, FloatModel) and model.label == DEMO_MODEL
    assert model.mlp.sizes == [64, 32, 10] and model.calib_x.shape[1] == 64
    # Training is deterministic, so the results' keys are too.
    assert load_model().digest == model.digest
    assert isinstance(model.network(8, 8, 32, 16), QuantizedNetwork)


def _onnx_file(onnx, path, sizes, seed=0):
    helper = onnx.helper
    rng = np.random.default_rng(seed)
    nodes, inits, last = [], [], "x"
    for i, (k, n) in enumerate(itertools.pairwise(sizes)):
        inits += [onnx.numpy_helper.from_array(rng.normal(size=(k, n)).astype(np.float32),
                                               f"w{i}"),
                  onnx.numpy_helper.from_array(rng.normal(size=n).astype(np.float32), f"b{i}")]
        nodes.append(helper.make_node("Gemm", [last, f"w{i}", f"b{i}"], [f"g{i}"]))
        last = f"g{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [last], [f"r{i}"]))
            last = f"r{i}"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, sizes[0]])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, sizes[-1]])],
        initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_an_onnx_model_with_and_without_calibration_data(tmp_path):
    onnx = pytest.importorskip("onnx", reason="onnx is not installed")
    path = _onnx_file(onnx, tmp_path / "net.onnx", [12, 6, 4])
    model = load_model(path)
    assert isinstance(model, FloatModel) and model.mlp.sizes == [12, 6, 4]
    assert model.calib_x.shape == (256, 12)
    calib = np.random.default_rng(5).uniform(-1, 1, size=(30, 12))
    np.save(tmp_path / "calib.npy", calib)
    calibrated = load_model(path, calib=tmp_path / "calib.npy")
    np.testing.assert_array_equal(calibrated.calib_x, calib)
    assert calibrated.digest != model.digest
    _same_network(quantize(calibrated.mlp, calib), calibrated.network(8, 8, 32, 16))
    np.save(tmp_path / "bad.npy", calib[:, :5])
    with pytest.raises(ModelError, match=r"bad\.npy: calibration inputs of shape \(30, 5\); "
                                         r"allowed: a numeric array of shape \(M, 12\)"):
        load_model(path, calib=tmp_path / "bad.npy")


def test_load_model_refuses_what_it_cannot_read(tmp_path):
    (tmp_path / "model.txt").write_text("x")
    with pytest.raises(ModelError, match=r"unknown model file type '\.txt'; allowed: \.npz"):
        load_model(tmp_path / "model.txt")
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    with pytest.raises(ModelError, match=r"broken\.npz: not an hwgen program file"):
        load_model(tmp_path / "broken.npz")
    with pytest.raises(OSError):
        load_model(tmp_path / "missing.npz")
    _, _, path = _saved(tmp_path, AcceleratorConfig(rows=2, cols=2))
    with pytest.raises(ModelError, match=r"calibration data applies to an \.onnx model only"):
        load_model(path, calib=tmp_path / "c.npy")
    with pytest.raises(ModelError, match=r"calibration data applies to an \.onnx model only"):
        load_model(None, calib=tmp_path / "c.npy")
