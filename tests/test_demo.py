"""The main job, end to end: train, quantize, generate, simulated board, offload."""

import subprocess
import sys

import pytest

from hwgen.config import AcceleratorConfig
from sim.runner import simulator_missing

# A small device keeps the board build short; the demo's default is the 8x8 configuration.
SMALL = {"rows": 4, "cols": 4, "act_depth": 2048, "weight_depth": 1024, "param_depth": 32,
         "acc_depth": 64, "out_depth": 256, "prog_depth": 4}


@pytest.fixture(autouse=True)
def _needs_verilator():
    if simulator_missing("verilator"):
        pytest.skip(simulator_missing("verilator"))


def test_demo_device_equals_int8_reference():
    from hwgen.demo import run_demo

    figures = run_demo(AcceleratorConfig(**SMALL), epochs=40, progress=False)
    assert figures["float_accuracy"] >= 0.90
    assert figures["int8_accuracy"] >= figures["float_accuracy"] - 0.02
    # run_demo raises DemoMismatch unless every row equals the int8 reference exactly.
    assert figures["device_accuracy"] == figures["int8_accuracy"]
    assert figures["rows"] == 360
    assert 0 < figures["utilization"] <= 1


def test_demo_command_prints_table():
    args = [f"--{k.replace('_', '-')}={v}" for k, v in SMALL.items()]
    proc = subprocess.run([sys.executable, "-m", "hwgen", "demo", "--no-progress", *args],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for label in ("float accuracy", "int8 reference accuracy", "device accuracy",
                  "cycles per inference", "array utilization", "projected inferences/s",
                  "elapsed"):
        assert label in proc.stdout


def test_offload_example_script(tmp_path):
    """examples/offload.py, run as a user would, returns exactly the reference's answer."""
    from pathlib import Path

    import numpy as np

    import hwgen
    from sim.board import SimulatedBoard
    from sim.netgen import random_input, random_network

    config = AcceleratorConfig(**SMALL)
    rng = np.random.default_rng(11)
    net = random_network(rng, config, widths=[20, 12, 7], raw=False)
    program = hwgen.compile(net, config)
    x = random_input(rng, config, program.batch + 3, 20)  # more rows than one run holds
    program.save(tmp_path / "model.npz")
    np.save(tmp_path / "x.npy", x)
    script = Path(__file__).resolve().parents[1] / "examples" / "offload.py"
    with SimulatedBoard(config) as board:
        proc = subprocess.run([sys.executable, str(script), board.url, str(tmp_path / "model.npz"),
                               str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                              capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), net.forward(x))
