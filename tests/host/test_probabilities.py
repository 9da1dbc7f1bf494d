"""A final Softmax/LogSoftmax/Sigmoid: recorded by the importer, kept by the program and its
file, applied on the host by ``Accelerator.infer(..., probabilities=True)``."""

import numpy as np
import pytest

import hwgen
from host import Accelerator
from hwgen.compiler import Program
from hwgen.nn import from_torch, quantize
from sim.inprocess import InProcessDevice

torch = pytest.importorskip("torch")

CONFIG = hwgen.AcceleratorConfig(rows=4, cols=4, act_depth=256, weight_depth=256,
                                 out_depth=64)


def _program(function):
    torch.manual_seed(0)
    final = {"softmax": torch.nn.Softmax(dim=1), "log_softmax": torch.nn.LogSoftmax(dim=1),
             "sigmoid": torch.nn.Sigmoid()}[function]
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 5), final).eval()
    x = np.random.default_rng(1).normal(size=(40, 12))
    net = quantize(from_torch(model), x)
    return model, net, x, hwgen.compile(net, CONFIG)


def _reference(function, logits):
    """The function in float, written out here (not the library's)."""
    if function == "sigmoid":
        return 1 / (1 + np.exp(-logits))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    return np.log(p) if function == "log_softmax" else p


@pytest.mark.parametrize("function", ["softmax", "log_softmax", "sigmoid"])
def test_infer_probabilities(function, tmp_path):
    model, net, x, program = _program(function)
    assert program.output_function == function
    path = tmp_path / "p.npz"
    program.save(path)
    loaded = Program.load(path)
    assert loaded == program
    x_q = net.quantize_input(x)
    with Accelerator(InProcessDevice(CONFIG), config=CONFIG) as acc:
        acc.load(loaded)
        scores = acc.infer(x_q)
        probs = acc.infer(x_q, probabilities=True)
    assert (scores == net.forward(x_q)).all()
    expected = _reference(function, scores * net.output_scale)
    np.testing.assert_allclose(probs, expected, rtol=1e-12, atol=1e-12)
    # And close to torch's own output: only the quantization separates them.
    with torch.no_grad():
        torch_out = model(torch.tensor(x, dtype=torch.float32)).numpy()
    if function != "log_softmax":
        assert np.abs(probs - torch_out).max() < 0.1
    assert (probs.argmax(axis=1) == scores.argmax(axis=1)).all()


def test_probabilities_refused_without_output_scale():
    _, net, x, _ = _program("softmax")
    net.output_scale = None
    program = hwgen.compile(net, CONFIG)
    with Accelerator(InProcessDevice(CONFIG), config=CONFIG) as acc:
        acc.load(program)
        with pytest.raises(ValueError, match="output_scale"):
            acc.infer(net.quantize_input(x), probabilities=True)
        with pytest.raises(ValueError, match="outputs='last'"):
            acc.infer(net.quantize_input(x), outputs="all", probabilities=True)


def test_files_from_before_have_no_function():
    """Programs saved before the function was kept (format 4) load with None."""
    old = Program.load("tests/data/program_v4_cnn.npz")
    assert old.output_function is None and old.output_scale is None
    with pytest.raises(ValueError, match="output_scale"):
        old.probabilities(np.zeros((1, 10)))
