"""The README's board path without Python, end to end: ``hwgen build`` a small iCEBreaker
design, ``hwgen sim-board --netlist`` its synthesized netlist, ``hwgen compile --build`` the
demo's MLP for it, ``hwgen infer`` on the netlist, compared with the NumPy reference; and a
program of another design refused in the user's terms."""

import contextlib
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from support import yowasp_missing

from hwgen.boards import BOARDS, board_config
from hwgen.cli import main
from hwgen.nn import MLP, load_digits_split, quantize

DESIGN = ["--rows", "2", "--cols", "2", "--weight-depth", "2048", "--param-depth", "32"]


@contextlib.contextmanager
def netlist_board(build):
    """Serve ``build``'s netlist with `hwgen sim-board --netlist`; yield its URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "hwgen", "sim-board", "--netlist", str(build), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("serving "):
                yield line.split(" on ")[1].strip()
                break
        else:
            pytest.fail("hwgen sim-board --netlist did not serve:\n" + "".join(lines))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


@pytest.mark.slow
def test_build_netlist_compile_infer(tmp_path, capsys):
    reason = yowasp_missing()
    if reason:
        pytest.skip(reason)
    build = tmp_path / "ice"
    assert main(["build", "--board", "icebreaker", *DESIGN, "--out", str(build)]) == 0
    program, xq, y = tmp_path / "mlp.npz", tmp_path / "xq.npy", tmp_path / "y.npy"
    assert main(["compile", "mlp", "--build", str(build), "--out", str(program),
                 "--save-input", str(xq)]) == 0
    other = tmp_path / "default.npz"
    assert main(["compile", "mlp", "--out", str(other)]) == 0
    capsys.readouterr()
    with netlist_board(build) as url:
        assert main(["infer", "--url", url, "--program", str(program), "--input", str(xq),
                     "--output", str(y)]) == 0
        assert main(["infer", "--url", url, "--program", str(other), "--input",
                     str(xq)]) == 2
    err = capsys.readouterr().err
    assert "\n  rows: device 2 vs program 8\n" in err and "hwgen compile MODEL --build DIR" in err
    assert "RegionGeometry" not in err and "<Region" not in err
    # The reference: the demo's MLP trained, quantized with the design's widths, in NumPy.
    x_train, y_train, x_test, _ = load_digits_split()
    mlp = MLP([64, 32, 10], seed=0).fit(x_train, y_train, epochs=40, seed=0)
    config = board_config(BOARDS["icebreaker"], rows=2, cols=2, weight_depth=2048,
                          param_depth=32)
    net = quantize(mlp, x_train, in_bits=config.in_bits, w_bits=config.w_bits,
                   acc_bits=config.acc_bits, mult_bits=config.mult_bits)
    x = net.quantize_input(x_test[:16])
    np.testing.assert_array_equal(np.load(xq), x)
    np.testing.assert_array_equal(np.load(y), net.forward(x))
