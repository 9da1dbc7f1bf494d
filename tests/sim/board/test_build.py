"""The Verilator build of a simulated board (sim.board.build): its command, its logged runs,
the harness's run-time arguments, and the refusal to build without the tools."""

import pytest
from support import BOARD_WS as WS

from hwgen import protocol
from sim.board import BoardError, board_missing, frame_timeout_cycles
from sim.board import build as board_build


def test_harness_command_builds_the_wrapper_with_the_harness_last():
    cmd = board_build._harness_command(["device.v", "wrapper.v"], uart=True, jobs=3,
                                       flags=["-Wno-style"])
    assert cmd[0] == "verilator"
    assert cmd[cmd.index("--top-module") + 1] == "hwgen_board"
    assert cmd[cmd.index("--build-jobs") + 1] == "3"
    assert cmd[cmd.index("-CFLAGS") + 1] == "-DBOARD_UART=1"
    assert cmd[-4:] == ["-Wno-style", "device.v", "wrapper.v", "board_main.cpp"]
    stream = board_build._harness_command(["d.v"], uart=False, jobs=None)
    assert stream[stream.index("-CFLAGS") + 1] == "-DBOARD_UART=0"


def test_run_logged_appends_to_the_log_and_names_a_failure(tmp_path):
    board_build._run_logged(["sh", "-c", "echo first"], tmp_path, "step one")
    with pytest.raises(BoardError, match=r"^step two failed \(exit 3\):\nfirst\nsecond\n$"):
        board_build._run_logged(["sh", "-c", "echo second; exit 3"], tmp_path, "step two")
    with pytest.raises(KeyError, match="step three failed"):
        board_build._run_logged(["false"], tmp_path, "step three", KeyError)
    assert (tmp_path / "build.log").read_text() == "first\nsecond\n"


def test_run_params_outlast_the_frame_timeout():
    assert frame_timeout_cycles(WS) == protocol.frame_timeout_cycles(WS.clock_hz)
    # The byte-stream device says when it is at rest: the harness needs no quiet period.
    assert board_build._run_params(WS, None) == {}
    # Over the UART, a byte takes 10 bit periods on each side of the FIFO.
    uart = board_build._run_params(WS, 7)
    assert uart == {"quiesce": frame_timeout_cycles(WS) + board_build._QUIESCE_MARGIN + 20 * 7,
                    "divisor": 7}
    assert board_build._QUIESCE_MARGIN > 0


def test_missing_tools_are_named(monkeypatch):
    if board_missing() is not None:
        pytest.skip(board_missing())
    real = board_build.shutil.which
    monkeypatch.setattr(board_build.shutil, "which",
                        lambda tool: None if tool == "perl" else real(tool))
    assert board_missing() == ("'perl' is not installed (Verilator's build needs it; apt-get "
                               "install perl)")


def test_build_refuses_without_the_tools(monkeypatch, tmp_path):
    monkeypatch.setattr(board_build, "board_missing", lambda: "no C++ compiler here")
    with pytest.raises(BoardError, match=r"^no C\+\+ compiler here$"):
        board_build._build(WS, "stream", verilog="", wrapper="", run={}, folder=tmp_path,
                           jobs=1)
    assert list(tmp_path.iterdir()) == []
