"""examples/zoo.py, run as a user would."""

import subprocess
import sys
from pathlib import Path

import pytest

from sim.runner import simulator_missing

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "zoo.py"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=1800, check=False)


def test_an_unknown_model_is_refused_with_the_models_there_are():
    done = _run("alexnet")
    assert done.returncode == 2
    assert "invalid choice: 'alexnet'" in done.stderr
    assert "'resnet8'" in done.stderr and "'tutorial_cnn'" in done.stderr


@pytest.mark.slow
def test_a_zoo_model_runs_bit_exact_on_the_85f_preset():
    """LeNet-5 on the board's preset (the design that holds the whole zoo): the script checks
    the device against the int8 reference and says so (the first run builds the board)."""
    pytest.importorskip("torch")
    if simulator_missing("verilator"):
        pytest.skip(simulator_missing("verilator"))
    done = _run("lenet5", "--samples", "2")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("lenet5 on ulx3s-85f: "), done.stdout
    assert done.stdout.rstrip().endswith("bit-exact: yes"), done.stdout
