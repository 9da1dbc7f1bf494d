"""``hwgen train``: a short training on simulated boards, its saved file, and every bad value
refused in one line with exit status 2 before any board starts."""

import numpy as np
import pytest
from support import BOARD_SMALL, BOARD_WS, skip_without_board

from hwgen import AcceleratorConfig
from hwgen.cli import main
from hwgen.cli.train import training_config
from hwgen.compiler import Program
from hwgen.nn import load_digits_images
from hwgen.train import load_trained

# The design of the other board tests (its cached build is shared), as options: the digits CNN
# fits it with every layer's output read out.
BOARD_OPTIONS = ["--rows", "2", "--cols", "3", "--clock-hz", "1000000"] + [
    arg for name in BOARD_SMALL
    for arg in (f"--{name.replace('_', '-')}", str(getattr(BOARD_WS, name)))]


def test_board_options_describe_the_shared_board():
    from hwgen.cli.options import Parser
    from hwgen.cli.train import _config, register

    sub = Parser(prog="hwgen").add_subparsers()
    args = register(sub).parse_args(BOARD_OPTIONS)
    assert _config(args) == BOARD_WS


def test_trains_on_two_boards_and_saves(tmp_path, capsys):
    skip_without_board()
    out = tmp_path / "digits.npz"
    status = main(["train", "--devices", "2", "--epochs", "2", "--hidden", "12", "--batch", "96",
                   "--lr", "0.1", "--no-progress", "--out", str(out), *BOARD_OPTIONS])
    captured = capsys.readouterr()
    printed = captured.out
    assert status == 0, printed
    lines = printed.splitlines()
    assert lines[0].startswith("hwgen train: mlp on 2 device(s) of ")
    # A build is announced by the board that makes it, never when the design is cached.
    assert "about a minute" not in captured.err
    assert ("building the simulated board" in captured.err) == ("built the simulated board"
                                                                in captured.err)
    epochs = [line for line in lines if line.startswith("epoch")]
    assert len(epochs) == 2 and all("on devices" in line for line in epochs)
    losses = [float(line.split("loss ")[1].split()[0]) for line in epochs]
    assert losses[1] < losses[0]
    assert "trained 2 epoch(s) on 2 device(s)" in printed and f"wrote {out}" in printed
    trained = load_trained(out)
    assert trained.config == BOARD_WS and len(trained.history) == 2
    assert Program.load(out) == trained.program  # hwgen infer and Accelerator.load take it
    x_test = load_digits_images()[2].reshape(-1, 64)
    accuracy = float(trained.history[-1]["test_accuracy"])
    y_test = load_digits_images()[3]
    reference = np.argmax(trained.network.forward(trained.network.quantize_input(x_test)), 1)
    assert accuracy == np.mean(reference == y_test)  # the devices ran the saved network


def test_bf16_trains_on_a_dense_design_by_default():
    from hwgen.cli.options import Parser
    from hwgen.cli.train import _config, register

    sub = Parser(prog="hwgen").add_subparsers()
    args = register(sub).parse_args(["--dtype", "bf16", "--rows", "4", "--cols", "4"])
    assert _config(args) == AcceleratorConfig(dtype="bf16", rows=4, cols=4, spatial=False)


def test_bf16_trains_on_two_boards_and_saves(tmp_path, capsys):
    # The bf16 demo's small board (tests/cli/test_demo.py, with --spatial 1): one build for
    # both; the dense design train picks by default is the test above's.
    out = tmp_path / "bf16.npz"
    status = main(["train", "--dtype", "bf16", "--rows", "4", "--cols", "4", "--spatial", "1",
                   "--devices", "2", "--epochs", "1", "--hidden", "12", "--batch", "128",
                   "--lr", "0.1", "--no-progress", "--out", str(out)])
    captured = capsys.readouterr()
    printed = captured.out
    assert status == 0, printed + captured.err
    assert ("starting 2 simulated board(s) of hwgen_ws_4x4_i16w16_dtypebf16"
            in captured.err), captured.err
    epochs = [line for line in printed.splitlines() if line.startswith("epoch")]
    losses = [float(line.split("loss ")[1].split()[0]) for line in epochs]
    assert len(losses) == 1 and losses[0] < np.log(10)   # below a uniform guess's loss
    assert "on devices 100.00%" in epochs[0] and "calibration" not in printed
    trained = load_trained(out)
    assert trained.config.dtype == "bf16" and trained.scales is None
    x_test, y_test = load_digits_images()[2].reshape(-1, 64), load_digits_images()[3]
    accuracy = float(trained.history[-1]["test_accuracy"])
    assert accuracy == np.mean(trained.network.predict(x_test) == y_test)


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_saved_file_line_counts_the_network_layers_and_the_passes(model):
    # The digits CNN has 6 layers (its Flatten included) and runs in 3 device passes: each
    # max pool in its convolution's pass.
    from hwgen.cli.train import _wrote_line
    from hwgen.compiler import compile_network
    from hwgen.nn import MLP, digits_cnn, quantize

    x = load_digits_images()[0][:64]
    float_model = digits_cnn(seed=1) if model == "cnn" else MLP([64, 12, 10], seed=1)
    config = AcceleratorConfig()
    network = quantize(float_model, x if model == "cnn" else x.reshape(-1, 64),
                       in_bits=config.in_bits, w_bits=config.w_bits, acc_bits=config.acc_bits,
                       mult_bits=config.mult_bits)
    program = compile_network(network, config)
    layers = len(network.layers)
    passes = len(program.descriptors)
    assert (layers, passes) == ((6, 3) if model == "cnn" else (2, 2))
    line = _wrote_line("out.npz", layers, program)
    assert line.startswith(f"wrote out.npz: the trained network ({layers} layers, {passes} "
                           f"device passes) and its program (batch {program.batch};"), line


@pytest.mark.parametrize(("bits", "expected"), [
    (8, AcceleratorConfig()),
    (16, AcceleratorConfig(in_bits=16, w_bits=16, acc_bits=48)),
])
def test_bits_choose_the_design(bits, expected):
    assert training_config(AcceleratorConfig(), bits) == expected


def test_sixteen_bits_keep_a_wider_accumulator():
    config = AcceleratorConfig(acc_bits=60)
    assert training_config(config, 16).acc_bits == 60


CASES = [
    (["--devices", "0"], "--devices: 0 is out of range; allowed: an integer in 1..16"),
    (["--devices", "17"], "--devices: 17 is out of range"),
    (["--devices", "2", "--url", "socket://127.0.0.1:1"], "not allowed with argument"),
    (["--epochs", "0"], "--epochs: 0 is out of range; allowed: an integer in 1..10000"),
    (["--batch", "0"], "--batch: 0 is out of range; allowed: an integer in 1..4096"),
    (["--batch", "x"], "--batch: 'x' is not an integer"),
    (["--bits", "12"], "--bits: invalid choice: 12 (choose from 8, 16)"),
    (["--model", "rnn"], "--model: invalid choice: 'rnn'"),
    (["--lr", "0"], "--lr: 0 is out of range; allowed: a number > 0"),
    (["--lr", "inf"], "--lr: inf is not a number > 0"),
    (["--momentum", "1"], "--momentum: 1 is out of range; allowed: 0..0.999"),
    (["--hidden", "0"], "--hidden: 0 is out of range"),
    (["--seed", "-1"], "--seed: -1 is out of range"),
    (["--out", "/proc/hwgen-x/t.npz"], "--out /proc/hwgen-x/t.npz: the folder /proc/hwgen-x "
                                       "does not exist"),
    (["--out", "{tmp}"], "--out {tmp}: is a folder"),
    (["--bits", "16", "--in-bits", "4"], "--bits 16 with --in-bits 4 --w-bits 8; allowed: "
                                         "--bits, or --in-bits/--w-bits, not both"),
    (["--model", "cnn", "--hidden", "8"], "--hidden is the MLP's hidden width"),
    (["--weight-depth", "16"], "--model mlp cannot run on hwgen_ws_8x8_i8w8"),
    # The CNN's five passes are spatial, each a descriptor and its geometry words.
    (["--model", "cnn", "--prog-depth", "8"], "--model cnn cannot run on hwgen_ws_8x8_i8w8_"
                                              "prog_depth8 with every layer's output read "
                                              "out: layer 5: the program takes 15 words"),
    (["--url", "socket://127.0.0.1:1"], "socket://127.0.0.1:1"),
    (["--dtype", "bf16", "--bits", "16"], "--bits 16 with --dtype bf16, whose operands are "
                                          "bf16 and sums fp32; allowed: --bits with --dtype "
                                          "int8 only"),
    (["--dtype", "bf16", "--bits", "8"], "--bits 8 with --dtype bf16"),
    (["--dtype", "bf16", "--model", "cnn"], "--model cnn with --dtype bf16; allowed: --model "
                                            "mlp"),
    (["--dtype", "fp8"], "--dtype: invalid choice: 'fp8' (choose from 'int8', 'bf16')"),
    (["--dtype", "bf16", "--weight-depth", "64"], "--model mlp cannot run on "
                                                  "hwgen_ws_8x8_i16w16_weight_depth64_spatial0_"
                                                  "dtypebf16: "
                                                  "layer 0: weight words do not fit"),
]


@pytest.mark.parametrize(("args", "message"), CASES)
def test_bad_values_are_one_line(args, message, capsys, tmp_path):
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    message = message.replace("{tmp}", str(tmp_path))
    with pytest.raises(SystemExit) as info:
        raise SystemExit(main(["train", *args]))
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_cnn_trains_on_two_boards_and_saves(tmp_path, capsys):
    # A whole epoch of the digits on the boards: about a minute. The CNN's training on the
    # devices is covered fast by tests/train/test_trainer.py, this command's loop by the MLP's
    # run above and its refusal of a design the CNN does not fit by CASES.
    skip_without_board()
    out = tmp_path / "cnn.npz"
    status = main(["train", "--model", "cnn", "--devices", "2", "--epochs", "1", "--batch",
                   "480", "--no-progress", "--out", str(out), *BOARD_OPTIONS])
    printed = capsys.readouterr().out
    assert status == 0, printed
    lines = printed.splitlines()
    assert lines[0].startswith("hwgen train: cnn on 2 device(s) of ")
    epochs = [line for line in lines if line.startswith("epoch")]
    assert len(epochs) == 1 and "on devices" in epochs[0]
    assert "trained 1 epoch(s) on 2 device(s)" in printed and f"wrote {out}" in printed
    trained = load_trained(out)
    assert trained.config == BOARD_WS and Program.load(out) == trained.program
    _, _, x_test, y_test = load_digits_images()
    reference = np.argmax(trained.network.forward(trained.network.quantize_input(x_test)), 1)
    accuracy = float(trained.history[-1]["test_accuracy"])
    assert accuracy == np.mean(reference == y_test)  # the devices ran the saved network


def test_trains_on_a_keyed_board_and_refuses_a_wrong_key(tmp_path, capsys):
    from support.tcp_device import TcpDevice

    from host.serve import BoardServer

    key, other = tmp_path / "board.key", tmp_path / "other.key"
    for path, data in ((key, bytes(range(32))), (other, bytes(32))):
        path.write_bytes(data)
        path.chmod(0o600)
    args = ["train", "--epochs", "1", "--hidden", "12", "--batch", "96", "--no-progress"]
    with TcpDevice(BOARD_WS) as board, BoardServer(board.url, key=key) as server:
        assert main([*args, "--url", server.url, "--key-file", str(other)]) == 2
        assert "rejected the key" in capsys.readouterr().err
        assert board.received == 0  # a rejected client never reaches the board
        assert main([*args, "--url", server.url, "--key-file", str(key), *BOARD_OPTIONS]) == 0
    assert "trained 1 epoch(s) on 1 device(s)" in capsys.readouterr().out
    assert board.received > 0
