"""``hwgen compile``: a model compiled for the design of a board, a build or the options,
checked against the same model quantized and compiled through the Python API."""

import json
import warnings

import numpy as np
import pytest

import hwgen
from hwgen.boards import BOARDS, board_config
from hwgen.cli import main
from hwgen.compiler import Program
from hwgen.cycles import program_cycles
from hwgen.nn import MLP, load_digits_split, quantize
from hwgen.throughput import wire_bytes_per_run

# The iCEBreaker with a 2x2 array and room for the demo's MLP (1,184 weight words, 21 params).
SMALL_ICE = ["--board", "icebreaker", "--rows", "2", "--cols", "2", "--weight-depth", "2048",
             "--param-depth", "32"]


@pytest.fixture(scope="module")
def demo_mlp():
    """The demo's MLP, trained as `hwgen demo` trains it, and the digits."""
    x_train, y_train, x_test, _ = load_digits_split()
    mlp = MLP([64, 32, 10], seed=0).fit(x_train, y_train, epochs=40, seed=0)
    return mlp, x_train, x_test


def _refused(capsys, argv):
    assert main(argv) == 2
    # At most a progress line ("hwgen compile: MODEL for DESIGN ..."), then the error.
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) <= 2 and lines[-1].startswith("hwgen compile: error: "), lines
    return lines[-1]


def test_demo_mlp_for_a_board_design(tmp_path, capsys, demo_mlp):
    mlp, x_train, x_test = demo_mlp
    out, xq = tmp_path / "mlp.npz", tmp_path / "xq.npy"
    assert main(["compile", "mlp", *SMALL_ICE, "--out", str(out), "--save-input", str(xq)]) == 0
    board = BOARDS["icebreaker"]
    config = board_config(board, rows=2, cols=2, weight_depth=2048, param_depth=32)
    program = Program.load(out)
    # The design's widths (acc_bits 22, mult_bits 8), not quantize's defaults.
    net = quantize(mlp, x_train, in_bits=8, w_bits=8, acc_bits=22, mult_bits=8)
    expected = hwgen.compile(net, config)
    assert program.config == config
    assert program.images == expected.images and program.descriptors == expected.descriptors
    np.testing.assert_array_equal(np.load(xq), net.quantize_input(x_test[:16]))
    text = capsys.readouterr().out
    batch = expected.batch
    cycles = program_cycles(expected, batch, board.implementation) / batch
    assert f"cycles per inference {cycles:,.1f} at full batches" in text
    # The iCEBreaker builds no LOAD/FETCH: its wire is whole words, the summary says so.
    wire = wire_bytes_per_run(expected, batch, packed=False) / batch
    assert f"wire bytes per inference {wire:,.1f} (runs of {batch}, whole words" in text, text
    assert "layers 2, device passes 2" in text and "array utilization" in text
    assert f"wrote {out}" in text and f"wrote {xq}: 16 x 64 int64" in text


def test_design_of_a_build_folder(tmp_path, capsys):
    config = board_config(BOARDS["icebreaker"], rows=2, cols=2, weight_depth=2048,
                          param_depth=32)
    (tmp_path / "report.json").write_text(json.dumps({"config": config.to_dict(),
                                                      "board": "icebreaker"}))
    out = tmp_path / "p.npz"
    assert main(["compile", "mlp", "--build", str(tmp_path), "--out", str(out)]) == 0
    assert Program.load(out).config == config
    capsys.readouterr()
    err = _refused(capsys, ["compile", "mlp", "--build", str(tmp_path), "--rows", "4",
                            "--out", str(out)])
    assert "--build takes the design from DIR/report.json; leave out --rows" in err
    err = _refused(capsys, ["compile", "mlp", "--build", str(tmp_path / "none"),
                            "--out", str(out)])
    assert "no such folder" in err


def test_a_model_that_does_not_fit_names_layers_need_capacity_and_cure(tmp_path, capsys):
    err = _refused(capsys, ["compile", "mlp", "--board", "icebreaker", "--weight-depth", "256",
                            "--out", str(tmp_path / "p.npz")])
    # 64x32 and 32x10 on the 4x4 preset with its weight memory cut to 256 words (the preset's
    # before it held the demo MLP): 16*8*4 = 512 and 8*3*4 = 96 weight words of 256.
    assert "layer 0: weight words do not fit: layers 0..0 need 512 words; limit " \
           "weight_depth=256" in err
    assert "(options: --weight-depth 608)" in err
    assert "each layer's weight words: layer 0 512, layer 1 96 (608 in all)" in err
    assert not (tmp_path / "p.npz").exists()


def test_a_saved_program_is_recompiled_for_another_design(tmp_path, capsys, demo_mlp):
    first = tmp_path / "default.npz"
    assert main(["compile", "mlp", "--out", str(first)]) == 0
    assert Program.load(first).config == hwgen.AcceleratorConfig()
    second = tmp_path / "small.npz"
    assert main(["compile", str(first), "--rows", "4", "--cols", "4", "--out",
                 str(second)]) == 0
    mlp, x_train, _ = demo_mlp
    config = hwgen.AcceleratorConfig(rows=4, cols=4)
    net = quantize(mlp, x_train)    # the default design's widths: quantize's own
    assert Program.load(second).images == hwgen.compile(net, config).images
    capsys.readouterr()
    err = _refused(capsys, ["compile", str(first), "--calibration", str(first),
                            "--out", str(second)])
    assert "--calibration" in err
    # Its 16-bit multipliers do not fit the iCEBreaker's 8: the float model would.
    err = _refused(capsys, ["compile", str(first), *SMALL_ICE, "--out", str(second)])
    assert "allowed: unsigned mult_bits=8, 0..255; a program's integers keep the widths " \
           "they were quantized to: compile the float model" in err
    # Nothing is written when the samples cannot be: a program has no input scale.
    third = tmp_path / "third.npz"
    err = _refused(capsys, ["compile", str(first), "--rows", "2", "--out", str(third),
                            "--save-input", str(tmp_path / "xq.npy")])
    assert "give --input X.npy" in err and not third.exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["nope"], "MODEL nope: no such file, nor a model's name; allowed: FILE.onnx"),
    (["mlp", "--preset", "ulx3s-85f-zoo"], "--preset ulx3s-85f-zoo: a board's named design; "
                                           "give --board too"),
    (["mlp", "--input", "x.npy"], "--input: the samples are quantized for --save-input"),
    (["mlp", "--rows", "0"], "rows"),
])
def test_usage_errors_are_one_line(tmp_path, capsys, argv, message):
    err = _refused(capsys, ["compile", *argv, "--out", str(tmp_path / "p.npz")])
    assert message in err


def test_onnx_model_needs_calibration_and_follows_the_design(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from hwgen.nn import from_onnx

    model = torch.nn.Sequential(torch.nn.Linear(12, 6), torch.nn.ReLU(), torch.nn.Linear(6, 4))
    path = tmp_path / "model.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the legacy exporter's deprecation
        torch.onnx.export(model, torch.zeros(1, 12), str(path), dynamo=False)
    out = tmp_path / "p.npz"
    err = _refused(capsys, ["compile", str(path), *SMALL_ICE, "--out", str(out)])
    assert "is a float model: quantizing it needs calibration inputs; allowed: " \
           "--calibration X.npy, float samples of shape (M, 12)" in err
    x = np.random.default_rng(0).standard_normal((32, 12))
    np.save(tmp_path / "x.npy", x)
    err = _refused(capsys, ["compile", str(path), "--calibration", str(tmp_path / "x.npy"),
                            "--board", "icebreaker", "--rows", "2", "--cols", "2",
                            "--out", str(out), "--save-input", str(tmp_path / "xq.npy"),
                            "--input", str(tmp_path / "p.npz")])
    assert "--input" in err     # not a .npy file
    assert main(["compile", str(path), "--calibration", str(tmp_path / "x.npy"), *SMALL_ICE,
                 "--out", str(out), "--save-input", str(tmp_path / "xq.npy"),
                 "--input", str(tmp_path / "x.npy")]) == 0
    config = board_config(BOARDS["icebreaker"], rows=2, cols=2, weight_depth=2048,
                          param_depth=32)
    net, expected = hwgen.compile_for(from_onnx(path), config, x)
    assert net.acc_bits == config.acc_bits and net.mult_bits == config.mult_bits
    assert Program.load(out).images == expected.images
    np.testing.assert_array_equal(np.load(tmp_path / "xq.npy"), net.quantize_input(x))


def test_the_icebreaker_preset_holds_the_demo_mlp(tmp_path, capsys, demo_mlp):
    """The preset's 1,024 weight words hold the MLP's 608 (512 + 96): it compiles for the
    preset, and on a device built as the iCEBreaker builds it (no LOAD, FETCH nor CLASSES)
    the host's words and its own argmax give NumPy's classes, the bytes those of the words'
    model."""
    from host import Accelerator
    from hwgen.protocol import Features
    from hwgen.throughput import wire_bytes_by_direction
    from sim.inprocess import InProcessDevice

    mlp, x_train, x_test = demo_mlp
    out = tmp_path / "mlp.npz"
    assert main(["compile", "mlp", "--board", "icebreaker", "--out", str(out)]) == 0
    capsys.readouterr()
    board = BOARDS["icebreaker"]
    config = board_config(board)
    assert config.weight_depth == 1024
    net = quantize(mlp, x_train, in_bits=8, w_bits=8, acc_bits=22, mult_bits=8)
    program = Program.load(out)
    assert program.config == config
    assert program.images == hwgen.compile(net, config).images
    x = net.quantize_input(x_test[:program.batch])
    with Accelerator(InProcessDevice(config, features=board.implementation.features),
                     config=config) as acc:
        assert acc.info.features == Features.NONE
        acc.load(program)
        got = acc.infer(x, output="argmax")
        counters = acc.counters()
    np.testing.assert_array_equal(got, np.argmax(net.forward(x), axis=1))
    assert (counters.bytes_sent, counters.bytes_received) == wire_bytes_by_direction(
        program, program.batch, output="argmax", packed=False)


def test_an_onnx_model_for_a_bf16_design_is_rounded_without_calibration(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from hwgen.nn import from_onnx, to_bf16
    from sim.interpreter import run_on_interpreter

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 6), torch.nn.ReLU(), torch.nn.Linear(6, 4))
    path = tmp_path / "model.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the legacy exporter's deprecation
        torch.onnx.export(model, torch.zeros(1, 12), str(path), dynamo=False)
    x = np.random.default_rng(0).standard_normal((5, 12)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out, xb = tmp_path / "p.npz", tmp_path / "xb.npy"
    design = ["--dtype", "bf16", "--rows", "4", "--cols", "4", "--spatial", "0"]
    err = _refused(capsys, ["compile", str(path), *design, "--calibration",
                            str(tmp_path / "x.npy"), "--out", str(out)])
    assert "--calibration with --dtype bf16" in err and "leave out --calibration" in err
    assert main(["compile", str(path), *design, "--out", str(out), "--save-input", str(xb),
                 "--input", str(tmp_path / "x.npy")]) == 0
    text = capsys.readouterr().out
    assert "dtypebf16" in text and f"wrote {xb}: 5 x 12 float32" in text
    # The program and the samples are the Python API's; the program runs the reference's bits.
    config = hwgen.AcceleratorConfig(dtype="bf16", rows=4, cols=4, spatial=False)
    net = to_bf16(from_onnx(path), rows=4)
    program = Program.load(out)
    assert program.config == config and program.images == hwgen.compile(net, config).images
    samples = np.load(xb)
    np.testing.assert_array_equal(samples, net.quantize_input(x).astype(np.float32))
    got, _ = run_on_interpreter(program, net.quantize_input(x))
    np.testing.assert_array_equal(np.asarray(got, np.float32).view(np.uint32),
                                  np.asarray(net.forward(net.quantize_input(x)),
                                             np.float32).view(np.uint32))
    # A bf16 program is not recompiled for another design.
    err = _refused(capsys, ["compile", str(out), "--out", str(tmp_path / "q.npz")])
    assert "a program is recompiled for another int8 design only" in err
