"""``hwgen sim-board`` (hwgen.cli.sim_board): serves a simulated board until Ctrl-C, and refuses
bad options with one line."""

import select
import signal
import subprocess
import sys

import pytest
from support import BOARD_WS as WS
from support import host_port
from support import port_refused as refused
from support import started_board as started


@pytest.fixture(scope="module")
def board():
    # Started once so that the board is built (and cached) before the command runs.
    with started(WS) as b:
        yield b


def config_args(config):
    args = []
    for name, value in config.to_dict().items():
        args += ["--" + name.replace("_", "-"), str(value)]
    return args


def test_sim_board_command_serves_until_ctrl_c(board):
    from host.accelerator import Accelerator

    with subprocess.Popen([sys.executable, "-m", "hwgen", "sim-board", *config_args(WS)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            assert select.select([proc.stdout], [], [], 120)[0], "hwgen sim-board is silent"
            line = proc.stdout.readline()
            assert line.startswith(f"serving {WS.name} ") and " on socket://127.0.0.1:" in line
            url = line.split()[-1]
            with Accelerator(url, config=WS) as acc:
                assert acc.config_hash == WS.hash
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=20) == 0
            assert "stopped" in proc.stderr.read()
            assert refused(host_port(url)[1])
        finally:
            if proc.poll() is None:
                proc.kill()


@pytest.mark.parametrize(("args", "message"), [
    (["--port", "70000"], "--port: 70000 is out of range"),
    (["--rows", "0"], "rows=0 is out of range"),
    (["--uart", "--clock-hz", "1000000"], "--uart: clk_hz=1000000 and baud=1000000"),
    (["--netlist", "no/such/build"], "no/such/build/report.json does not exist"),
    (["--netlist", "tests", "--rows", "2"], "--netlist takes the design from DIR/report.json"),
])
def test_sim_board_usage_errors_are_one_line(args, message):
    proc = subprocess.run([sys.executable, "-m", "hwgen", "sim-board", *args],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr

