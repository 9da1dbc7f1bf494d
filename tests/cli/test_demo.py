"""The main job, end to end: train, quantize, generate, simulated board, offload."""

import json
import subprocess
import sys

import pytest

from hwgen.config import AcceleratorConfig
from sim.runner import simulator_missing

# The demo's own design, the default 8x8 configuration: the README's tour builds its simulated
# board in the same run (tests/test_readme.py), so it costs no build of its own.
DEFAULT = AcceleratorConfig()


@pytest.fixture(autouse=True)
def _needs_verilator():
    if simulator_missing("verilator"):
        pytest.skip(simulator_missing("verilator"))


def test_demo_device_equals_int8_reference():
    from hwgen.cli.demo import run_demo

    figures = run_demo(DEFAULT, epochs=40, progress=False)
    assert figures["float_accuracy"] >= 0.90
    assert figures["reference_accuracy"] >= figures["float_accuracy"] - 0.02
    # run_demo raises DemoMismatch unless every row equals the int8 reference exactly.
    assert figures["device_accuracy"] == figures["reference_accuracy"]
    assert figures["rows"] == 360
    assert 0 < figures["utilization"] <= 1
    # The link: the 64 int8 pixels go in, the device's argmax (one byte) comes back, and the
    # UART's rate follows from the busier direction (full duplex).
    assert figures["output"] == "argmax"
    assert figures["payload_bytes_per_inference"] == 64 + 1
    assert figures["sent_bytes_per_inference"] > 64
    assert figures["received_bytes_per_inference"] > 1
    assert figures["wire_bytes_per_inference"] == pytest.approx(
        figures["sent_bytes_per_inference"] + figures["received_bytes_per_inference"])
    assert figures["link_inferences_per_second"] == pytest.approx(
        figures["baud"] / 10 / max(figures["sent_bytes_per_inference"],
                                   figures["received_bytes_per_inference"]))
    assert figures["end_to_end_inferences_per_second"] == min(
        figures["link_inferences_per_second"], figures["inferences_per_second"])
    assert figures["bound"] == "link"   # 1 Mbaud against a 50 MHz array


def test_demo_cnn_device_equals_int8_reference():
    from support import BOARD_WS

    from hwgen.cli.demo import run_demo
    from hwgen.cycles import program_cycles

    figures = run_demo(BOARD_WS, model="cnn", progress=False, output="scores")
    assert figures["float_accuracy"] >= 0.93
    assert figures["reference_accuracy"] >= figures["float_accuracy"] - 0.02
    assert figures["device_accuracy"] == figures["reference_accuracy"]   # else DemoMismatch
    assert figures["rows"] == 360
    # Only the images cross the link: 64 one-byte pixels (the LOADs carry each image row's 8
    # values of the first convolution's taps layout, whose rows have a pitch of 12 elements
    # in memory), and ten logits at the width their accumulator proof gives (rounded up to
    # whole bytes per FETCH) per inference.
    program = figures["program"]
    assert program.input.pitch == 12
    bits = program.output.wire_bits
    assert bits < 32
    assert figures["payload_bytes_per_inference"] == pytest.approx(64 + 10 * bits / 8, abs=0.1)
    assert figures["wire_bytes_per_inference"] > figures["payload_bytes_per_inference"]
    # The cycles per inference are the model's at full batches, the utilization follows.
    cycles = program_cycles(program, program.batch) / program.batch
    assert figures["cycles_per_inference"] == pytest.approx(cycles)
    assert figures["utilization"] == pytest.approx(
        program.macs_per_row / (BOARD_WS.rows * BOARD_WS.cols * cycles))
    assert figures["end_to_end_inferences_per_second"] == min(
        figures["link_inferences_per_second"], figures["inferences_per_second"])


def test_demo_command_prints_table_and_records_it(tmp_path):
    """The command prints its table and, with --record, writes the same figures into the
    record under its command line (without --no-progress, which changes nothing measured)."""
    args = ["--rows=8", "--cols=8"]   # the defaults, given: the record's key names them
    record = tmp_path / "figures.json"
    record.write_text("{}\n")
    (tmp_path / "performance.md").write_text("<!-- figures: begin -->\n<!-- figures: end -->\n")
    proc = subprocess.run([sys.executable, "-m", "hwgen", "demo", "--no-progress", *args,
                           "--record", str(record)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(record.read_text())[" ".join(["hwgen demo", *args])]["figures"]
    assert f"device accuracy             {figures['device_accuracy_pct']:.2f}%" in proc.stdout
    assert f"cycles per inference        {figures['cycles_per_inference']:.1f}" in proc.stdout
    for label in ("float accuracy", "int8 reference accuracy", "device accuracy",
                  "cycles per inference", "array utilization", "compute-bound inferences/s",
                  "wire bytes per inference", "link-bound inferences/s",
                  "end to end on a board", "elapsed"):
        assert label in proc.stdout
    assert "inferences/s: the link is the bound" in proc.stdout
    assert "the device's argmax equals the int8 reference's" in proc.stdout
    assert "full duplex: the busier direction" in proc.stdout


# The bf16 demo's design, small: what `hwgen demo --dtype bf16 --rows 4 --cols 4` builds (the
# walker, the pooler and the adder; tests/cli/test_train.py trains on its board too).
BF16 = AcceleratorConfig(dtype="bf16", rows=4, cols=4)


@pytest.mark.parametrize(("model", "epochs", "input_bytes"), [("mlp", 5, 64 * 2),
                                                              ("cnn", 3, 8 * 8 * 2)])
def test_demo_bf16_device_equals_bf16_reference(model, epochs, input_bytes, capsys):
    """The MLP and the CNN on the bf16 simulated board: every score has the bf16 reference's
    bits, the accuracy is the reference's and within 0.5 points of float's."""
    import numpy as np

    from hwgen.cli import main
    from hwgen.cli.demo import run_demo, train_model
    from hwgen.nn import to_bf16

    figures = run_demo(BF16, model=model, epochs=epochs, progress=False, output="scores")
    # run_demo raises DemoMismatch unless every score has the bf16 reference's bits.
    assert figures["dtype"] == "bf16" and figures["device_accuracy"] == \
        figures["reference_accuracy"]
    _, trained, _, x_test, y_test = train_model(model, epochs)
    net = to_bf16(trained, rows=4)
    expected = np.mean(np.argmax(net.forward(net.quantize_input(x_test)), axis=1) == y_test)
    assert figures["reference_accuracy"] == expected
    assert abs(figures["reference_accuracy"] - figures["float_accuracy"]) <= 0.005
    # Two bytes a bf16 pixel in, four an fp32 score back.
    assert figures["payload_bytes_per_inference"] == input_bytes + 10 * 4
    if model == "mlp":
        capsys.readouterr()
        # The command: its bf16 design by default, the device's classes, the bf16 lines.
        assert main(["demo", "--dtype", "bf16", "--rows", "4", "--cols", "4", "--epochs", "5",
                     "--no-progress"]) == 0
        out = capsys.readouterr().out
        assert BF16.name in out and "bf16 reference accuracy" in out, out
        assert "the device's argmax equals the bf16 reference's" in out
