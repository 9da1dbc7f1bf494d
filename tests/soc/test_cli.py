"""``hwgen soc``'s options are checked before any work: one line, exit 2; the tools it needs
are named when missing."""

import pytest

from hwgen.cli import main

CASES = [
    (["soc", "--samples", "0"], "--samples: 0 is out of range; allowed: an integer in 1..16"),
    (["soc", "--batch", "-1"], "--batch: -1 is out of range"),
    (["soc", "--board", "icebreaker"], "invalid choice: 'icebreaker'"),
    (["soc", "--model", "kws"], "invalid choice: 'kws'"),
    (["soc", "--out", "/proc/hwgen-x"], "--out /proc/hwgen-x: cannot create the folder"),
]


@pytest.mark.parametrize(("argv", "message"), CASES)
def test_usage_errors(argv, message, capsys):
    # argparse exits; a UsageError returns 2.
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_missing_tools_are_named(monkeypatch, tmp_path, capsys):
    import importlib.util
    import shutil

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["soc", "--sim", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--sim needs litex (pip install 'hwgen[soc]')" in err
    assert "riscv64-unknown-elf-gcc (apt-get install gcc-riscv64-unknown-elf)" in err
