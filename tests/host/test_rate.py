"""The rate at which the host opens a board's serial port (host.rate)."""

import json

import pytest

import host.accelerator
from host.rate import BOARD_BAUD, board_baud, build_baud, serial_rate
from hwgen.boards import BOARDS


def test_the_caller_the_build_the_board_then_every_boards_default(tmp_path):
    (tmp_path / "report.json").write_text(json.dumps({"baud": 2_000_000}))
    assert serial_rate(115_200, build=tmp_path, board="icebreaker") == 115_200
    assert serial_rate(build=tmp_path, board="icebreaker") == build_baud(tmp_path) == 2_000_000
    # The ULX3S's FT231X at 3 Mbaud; the iCEBreaker's 12 MHz preset makes 3 of the FT2232H's 6.
    assert serial_rate(board="ulx3s-85f") == 3_000_000
    assert serial_rate(board="icebreaker") == 3_000_000
    assert serial_rate() == BOARD_BAUD
    assert {board_baud(name) for name in BOARDS} == {BOARD_BAUD}


def test_bad_sources_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"report.json: no build report with a baud rate"):
        build_baud(tmp_path)
    (tmp_path / "report.json").write_text(json.dumps({"baud": "fast"}))
    with pytest.raises(ValueError, match=r"baud 'fast' is not a positive int"):
        build_baud(tmp_path)
    with pytest.raises(ValueError, match=r"board 'nope' is unknown; allowed: icebreaker, "):
        board_baud("nope")


def test_accelerator_opens_a_port_at_the_resolved_rate(monkeypatch):
    opened = []

    def fake_open(device, baudrate):
        opened.append((device, baudrate))
        raise OSError("stop here")

    monkeypatch.setattr(host.accelerator, "open_transport", fake_open)
    for rate in (None, 6_000_000):
        with pytest.raises(host.accelerator.LinkError, match="stop here"):
            host.accelerator.Accelerator("/dev/ttyUSB1", baudrate=rate)
    assert opened == [("/dev/ttyUSB1", BOARD_BAUD), ("/dev/ttyUSB1", 6_000_000)]
