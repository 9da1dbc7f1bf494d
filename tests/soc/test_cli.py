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
    assert "cc (apt-get install gcc), make (apt-get install make)" in err
    assert len(err.strip().splitlines()) == 1


def test_missing_c_headers_name_their_packages(monkeypatch, tmp_path, capsys):
    """The simulation's C libraries are looked for with the real preprocessor before anything
    is built: a header that is not there names its Debian package, on one line."""
    from hwgen.soc import requirements

    assert requirements.header_found("stdio.h")
    assert not requirements.header_found("hwgen/no-such-header.h")
    headers = (("stdio.h", "libc6-dev"), ("hwgen/no-such-header.h", "libhwgen-dev"),
               ("hwgen/no-such-either.h", "libother-dev"))
    missing = requirements.missing_requirements(True, headers)
    assert missing[-1] == ("the C headers of libhwgen-dev, libother-dev (apt-get install "
                           "libhwgen-dev libother-dev)")
    # Without --sim the simulation's headers are not needed.
    assert not any("C headers" in m for m in requirements.missing_requirements(False, headers))


def test_figures_for_the_record():
    """What `hwgen soc --record` writes: the firmware's timing lines, nextpnr's report."""
    from hwgen.soc.board import BoardReport
    from hwgen.soc.sim import console_figures

    console = ("timing: 512 inferences in runs of 256 (class sum 2291)\n"
               "cycles per inference: 267 total = 98 copy in + 40 array (core busy 38) + "
               "129 copy out and argmax\ninferences per second at 50000000 Hz: 186609\n")
    assert console_figures(console) == {"cycles_per_inference": 267, "copy_in_cycles": 98,
                                        "array_cycles": 40, "clock_mhz": 50.0,
                                        "inferences_per_s": 186609}
    # As LiteX's simulated console prints them: each line led by a carriage return.
    assert console_figures(console.replace("\n", "\n\r")) == console_figures(console)
    assert console_figures("hwgen: done\n") == {}
    report = BoardReport("soc.bit", {"TRELLIS_COMB": (13805, 83640), "DP16KD": (116, 208),
                                     "TRELLIS_IO": (9, 365)}, 69.75, 50.0, 2066.0)
    assert report.figures() == {"target_mhz": 50.0, "build_s": 2066.0, "fmax_mhz": 69.75,
                                "pass": True, "lut": 13805, "lut_available": 83640,
                                "bram": 116, "bram_available": 208}
