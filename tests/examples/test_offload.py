"""examples/offload.py, run as a user would."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hwgen
from hwgen.config import AcceleratorConfig
from sim.board import SimulatedBoard
from sim.netgen import random_input, random_network
from sim.runner import simulator_missing

# The default design, whose simulated board the README's tour builds in the same run.
CONFIG = AcceleratorConfig()
SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "offload.py"


def test_offload_example_script(tmp_path):
    """examples/offload.py, run as a user would, returns exactly the reference's answer."""
    if simulator_missing("verilator"):
        pytest.skip(simulator_missing("verilator"))
    config = CONFIG
    rng = np.random.default_rng(11)
    net = random_network(rng, config, widths=[20, 12, 7], raw=False)
    program = hwgen.compile(net, config)
    x = random_input(rng, config, program.batch + 3, 20)  # more rows than one run holds
    program.save(tmp_path / "model.npz")
    np.save(tmp_path / "x.npy", x)
    with SimulatedBoard(config) as board:
        proc = subprocess.run([sys.executable, str(SCRIPT), board.url, str(tmp_path / "model.npz"),
                               str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
                              capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), net.forward(x))
