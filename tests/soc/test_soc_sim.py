"""The LiteX SoC in LiteX's Verilator simulation: the VexRiscv firmware classifies the demo
MLP's test digits through the Wishbone core, and every class equals hwgen.nn's (computed
here, not taken from the firmware's image). Slow: LiteX's BIOS, the firmware and a
Verilator build of the SoC, about two minutes on two cores."""

import importlib.util
import re
import shutil

import numpy as np
import pytest

import hwgen
from hwgen.boards import BOARDS, board_config
from hwgen.cli import main
from hwgen.cli.models import load_source

pytestmark = pytest.mark.slow

SAMPLES = 12


def _skip_without_tools():
    if importlib.util.find_spec("litex") is None:
        pytest.skip("LiteX is not installed (pip install 'hwgen[soc]')")
    if shutil.which("riscv64-unknown-elf-gcc") is None:
        pytest.skip("riscv64-unknown-elf-gcc is missing (apt-get install gcc-riscv64-unknown-elf)")


def test_the_soc_classifies_like_the_reference(tmp_path, capsys):
    _skip_without_tools()
    assert main(["soc", "--sim", "--samples", str(SAMPLES), "--out", str(tmp_path)]) == 0
    console = capsys.readouterr().out
    printed = {int(s): int(c) for s, c in re.findall(r"sample (\d+): class (\d+)", console)}
    # The reference, independently: the demo's MLP compiled for the same design, hwgen.nn.
    config = board_config(BOARDS["ulx3s-85f"], clock_hz=50_000_000, preset="ulx3s-85f-small")
    source = load_source("mlp")
    network, _ = hwgen.compile_for(source.model, config, source.calibration)
    x = network.quantize_input(source.samples[:SAMPLES])
    expected = np.argmax(network.forward(x), axis=1)
    assert printed == {s: int(c) for s, c in enumerate(expected)}, console
    rate = int(re.search(r"inferences per second at \d+ Hz: (\d+)", console)[1])
    assert rate > 0, console
