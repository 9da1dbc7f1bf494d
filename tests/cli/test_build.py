"""``hwgen build``: refusals before any tool runs."""

import argparse

import pytest


def test_cli_refuses_unreachable_clock(capsys):
    from hwgen.cli import UsageError
    from hwgen.cli.build import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["build", "--board", "icebreaker", "--clock-hz", "40000000"])
    with pytest.raises(UsageError, match="cannot make 40 MHz"):
        args.func(args)
    args = parser.parse_args(["build", "--board", "icebreaker", "--rows", "6", "--cols", "4"])
    with pytest.raises(UsageError, match="SB_MAC16"):
        args.func(args)


def test_a_record_of_nothing_measured_is_one_line_and_exit_1(tmp_path, monkeypatch, capsys):
    """A build whose report yields no figures leaves the record's entry as it was and says
    so in one line (exit 1: the run, not its input, fell short)."""
    import hwgen.boards
    import hwgen.boards.report
    from hwgen.cli import main

    record = tmp_path / "figures.json"
    before = '{"hwgen build --board icebreaker": {"date": "2026-12-01", "figures": {"lut": 1}}}\n'
    record.write_text(before)
    report = {"timing": {"fmax_mhz": 30.0, "target_mhz": 12.0, "pass": True},
              "resources": {}, "times": {"total_s": 1.0}, "bitstream": "top.bin",
              "program": "iceprog top.bin", "serial": "/dev/ttyUSB1"}
    monkeypatch.setattr(hwgen.boards, "build", lambda *a, **k: report)
    monkeypatch.setattr(hwgen.boards.report, "report_figures", lambda report: {})
    status = main(["build", "--board", "icebreaker", "--out", str(tmp_path / "b"),
                   "--record", str(record)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1
    assert len(err) == 1 and err[0].startswith("hwgen build: error: record: ")
    assert "measured no figures" in err[0]
    assert record.read_text() == before


def test_cli_refuses_a_pnr_clock_nextpnr_cannot_take():
    """``--pnr-clock-hz`` needs a clock a PLL makes on an iCE40 or ECP5: the oscillator's
    constraint comes from its pin and Gowin's from the constraints file, and each refusal
    names what is allowed."""
    from hwgen.cli import UsageError
    from hwgen.cli.build import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    for argv, match in (
            (["--board", "ulx3s-12f", "--clock-hz", "25000000", "--pnr-clock-hz", "20000000"],
             "oscillator, whose pin sets the constraint; allowed only for a clock a PLL makes"),
            (["--board", "tang-nano-9k", "--pnr-clock-hz", "20000000"],
             "allowed on iCE40 and ECP5 boards only")):
        args = parser.parse_args(["build", *argv])
        with pytest.raises(UsageError, match=match):
            args.func(args)
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["build", "--board", "ulx3s-12f", "--pnr-clock-hz", "5"])
    assert exit_info.value.code == 2
