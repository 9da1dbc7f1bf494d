"""A user's PyTorch CNN from import to the device (issue 24, "Done when"): a ``Sequential`` of
``Conv2d`` (with stride and padding), ``ReLU``, ``MaxPool2d``, ``Flatten`` and ``Linear``,
trained briefly on the bundled digits, imported three ways (ONNX from torch's default exporter,
ONNX from the TorchScript one, the module itself), quantized on calibration data, compiled and
run on a simulated board.

The device's outputs equal the int8 reference (:meth:`hwgen.nn.QuantizedNetwork.forward`)
exactly, and its predictions agree with torch's float predictions on most samples. The tests
skip with the reason when torch, onnx (or, for the default exporter, onnxscript) or the
simulated board's tools are missing.
"""

import io
import warnings

import numpy as np
import pytest
from support import BOARD_WS as CONFIG
from support import started_board

import hwgen
from host import Accelerator
from hwgen.nn import CNN, from_onnx, from_torch, load_digits_images, quantize

#: Calibration images and test images run on the board (of the digits' splits).
CALIBRATION, TESTED = 200, 120
#: Share of the test images whose int8 prediction must be torch's float prediction.
AGREEMENT = 0.9


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed")


@pytest.fixture(scope="module")
def onnx():
    return pytest.importorskip("onnx", reason="onnx is not installed")


@pytest.fixture(scope="module")
def digits():
    x_train, y_train, x_test, _ = load_digits_images()
    return x_train, y_train, x_test[:TESTED]


@pytest.fixture(scope="module")
def model(torch, digits):
    """The user's CNN, trained for a few epochs (deterministic: one thread, fixed seeds)."""
    nn = torch.nn
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        net = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),       # 8x8 -> 4x4
            nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),             # -> 2x2
            nn.Flatten(), nn.Linear(16 * 2 * 2, 10))
        x_train, y_train, _ = digits
        x = torch.tensor(nchw(x_train), dtype=torch.float32)
        y = torch.tensor(y_train)
        optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
        order = np.random.default_rng(0)
        for _ in range(4):
            for batch in np.array_split(order.permutation(len(x)), len(x) // 32):
                optimizer.zero_grad()
                nn.functional.cross_entropy(net(x[batch]), y[batch]).backward()
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return net.eval()


@pytest.fixture(scope="module")
def board():
    with started_board(CONFIG) as b:
        yield b


def nchw(x_nhwc):
    return np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))


def exported(torch, onnx, model, *, dynamo):
    """The model as ONNX from torch's default (dynamo) or TorchScript exporter."""
    if dynamo:
        pytest.importorskip("onnxscript", reason="torch's default ONNX exporter needs "
                                                 "onnxscript, which is not installed")
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter is deprecated
        program = torch.onnx.export(model, (torch.zeros(1, 1, 8, 8),),
                                    None if dynamo else buffer, dynamo=dynamo,
                                    input_names=["x"], output_names=["y"])
    return program.model_proto if dynamo else onnx.load_from_string(buffer.getvalue())


@pytest.fixture(params=["onnx-dynamo", "onnx-torchscript", "torch"])
def imported(request, torch, onnx, model):
    """``(how, CNN)``: the model through ONNX from either exporter, or directly."""
    how = request.param
    if how == "torch":
        return how, from_torch(model, input_shape=(8, 8, 1))
    return how, from_onnx(exported(torch, onnx, model, dynamo=how == "onnx-dynamo"))


def test_imported_cnn_runs_bit_exact_on_the_board(imported, torch, model, digits, board):
    how, cnn = imported
    x_train, _, x_test = digits
    assert isinstance(cnn, CNN) and cnn.input_shape == (8, 8, 1)
    assert [type(layer).__name__ for layer in cnn.layers] == [
        "FloatConv2D", "MaxPool2D", "FloatConv2D", "Flatten", "FloatDense"]
    net = quantize(cnn, x_train[:CALIBRATION])
    program = hwgen.compile(net, CONFIG)
    x_int = net.quantize_input(x_test)
    with Accelerator(board.url, config=CONFIG) as acc:
        acc.load(program)
        y = acc.infer(x_int)
    np.testing.assert_array_equal(y, net.forward(x_int))
    with torch.no_grad():
        expected = model(torch.tensor(nchw(x_test), dtype=torch.float32)).numpy()
    agree = np.mean(np.argmax(y, axis=1) == np.argmax(expected, axis=1))
    assert agree >= AGREEMENT, f"{how}: int8 and float predictions agree on {agree:.1%}"
