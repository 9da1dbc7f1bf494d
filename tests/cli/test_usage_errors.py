"""Every path and number a subcommand takes is checked before any work: one line, exit 2.

Found by trying hwgen as a new user would: `--out /proc/x` printed a traceback and
`--epochs -1` trained nothing and printed 13 % accuracy.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hwgen.cli import main

# A file that exists but is no folder, a folder that cannot exist, a file that does not.
NOT_A_DIR = "pyproject.toml/sub"
CANNOT_CREATE = "/proc/hwgen-x"
MISSING = "no/such/file.npz"

CASES = [
    # demo
    (["demo", "--epochs", "-1"], "--epochs: -1 is out of range; allowed: an integer in 1..10000"),
    (["demo", "--epochs", "0"], "--epochs: 0 is out of range"),
    (["demo", "--epochs", "ten"], "'ten' is not an integer in 1..10000"),
    (["demo", "--seed", "-3"], "--seed: -3 is out of range"),
    (["demo", "--baud", "0"], "--baud: 0 is out of range; allowed: an integer in 300..12000000"),
    (["demo", "--rows", "0"], "rows=0 is out of range; allowed: 1..64"),
    (["demo", "--config", MISSING], f"--config {MISSING}: no such file"),
    # generate
    (["generate", "--out", CANNOT_CREATE], f"--out {CANNOT_CREATE}: cannot create the folder"),
    (["generate", "--out", NOT_A_DIR], f"--out {NOT_A_DIR}: cannot create the folder"),
    (["generate", "--cols", "-2"], "cols=-2 is out of range"),
    (["generate", "--clock-hz", "1e6"], "--clock-hz: '1e6' is not an integer"),
    (["generate", "--config", "tests"], "--config tests: not a file"),
    # verify
    (["verify", "--cases", "0"], "--cases: 0 is out of range; allowed: an integer in 1..1000"),
    (["verify", "--seed", "x"], "--seed: 'x' is not an integer"),
    (["verify", "--build-dir", CANNOT_CREATE], f"--build-dir {CANNOT_CREATE}: cannot create"),
    # sim-board
    (["sim-board", "--port", "70000"], "--port: 70000 is out of range; allowed: an integer in "
                                       "0..65535"),
    (["sim-board", "--port", "-1"], "--port: -1 is out of range"),
    (["sim-board", "--cache-dir", CANNOT_CREATE], f"--cache-dir {CANNOT_CREATE}: cannot create"),
    (["sim-board", "--netlist", "no/such/build"], "no/such/build/report.json does not exist"),
    # infer
    (["infer", "--url", "loop://", "--program", MISSING, "--input", "x.npy"],
     f"--program {MISSING}: no such file"),
    (["infer", "--url", "loop://", "--program", "tests", "--input", "x.npy"],
     "--program tests: not a file"),
    (["infer", "--url", "loop://", "--program", "pyproject.toml", "--input", MISSING],
     f"--input {MISSING}: no such file"),
    (["infer", "--url", "loop://", "--program", "pyproject.toml", "--input", "pyproject.toml",
      "--output", f"{CANNOT_CREATE}/y.npy"], f"--output {CANNOT_CREATE}/y.npy: the folder"),
    (["infer", "--url", "loop://", "--program", "pyproject.toml", "--input", "pyproject.toml",
      "--output", "tests"], "--output tests: is a folder"),
    (["infer", "--url", "loop://", "--program", "pyproject.toml", "--input", "pyproject.toml"],
     "--program pyproject.toml:"),
    (["infer", "--url", "loop://", "--program", "p", "--input", "x", "--timeout", "0"],
     "--timeout: 0 is out of range; allowed: a number > 0"),
    (["infer", "--url", "loop://", "--program", "p", "--input", "x", "--timeout", "nan"],
     "--timeout: nan is not a number > 0"),
    (["infer", "--url", "loop://", "--program", "p", "--input", "x", "--retries", "-1"],
     "--retries: -1 is out of range; allowed: an integer in 0..100"),
    (["infer", "--url", "loop://", "--program", "p", "--input", "x", "--baud", "12"],
     "--baud: 12 is out of range"),
    (["infer", "--url", "loop://", "--program", "p", "--input", "x", "--baud", "3000000",
      "--board", "icebreaker"], "--baud and --board: give one of them (the serial rate)"),
    (["infer", "--url", "loop://", "--program", "p", "--input", "x", "--build", MISSING],
     f"--build {MISSING}: {MISSING}/report.json: no build report with a baud rate"),
    (["serve", "--device", "loop://", "--board", "nope"], "argument --board: invalid choice"),
    # build
    (["build", "--board", "icebreaker", "--out", CANNOT_CREATE],
     f"--out {CANNOT_CREATE}: cannot create the folder"),
    (["build", "--board", "icebreaker", "--seed", "-1"], "--seed: -1 is out of range"),
    (["build", "--board", "icebreaker", "--baud", "20000000"], "--baud: 20000000 is out of range"),
    (["build", "--board", "icebreaker", "--config", MISSING], f"--config {MISSING}: no such"),
    # a rate the board's clocks cannot make within the receivers' tolerance
    (["build", "--board", "icebreaker", "--baud", "6000000"],
     "cannot run the UART at 6,000,000 baud: 12 MHz gives a divisor of 2 (at least 4 needed)"),
    (["build", "--board", "ulx3s-12f", "--baud", "6000000"],
     "62.5 MHz gives a divisor of 10 (6,250,000 baud, +4.17%)"),
    (["build", "--board", "nope"], "argument --board: invalid choice: 'nope'"),
    (["build", "--board", "icebreaker", "--preset", "ulx3s-85f-zoo"],
     "preset 'ulx3s-85f-zoo' is not one of the board's named presets; allowed: none for this"),
    (["build", "--board", "ulx3s-85f", "--preset", "nope"], "argument --preset: invalid choice"),
]


@pytest.mark.parametrize(("argv", "message"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    try:
        code = main(argv)
    except SystemExit as exc:   # argparse's own errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert message in lines[0], err
    assert lines[0].startswith(f"hwgen {argv[0]}: error: ")


def test_a_subprocess_sees_no_traceback():
    """The same through the installed entry point, as the issue's user ran it."""
    proc = subprocess.run([sys.executable, "-m", "hwgen", "generate", "--rows", "4", "--cols",
                           "4", "--out", CANNOT_CREATE], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"hwgen generate: error: --out {CANNOT_CREATE}: cannot "
                                   "create the folder (No such file or directory)")


def test_version_and_help(capsys):
    import hwgen

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"hwgen {hwgen.__version__}"
    assert hwgen.__version__[0].isdigit()
    for command in ("demo", "generate", "verify", "sim-board", "infer", "build"):
        with pytest.raises(SystemExit) as exc:
            main([command, "--help"])
        assert exc.value.code == 0
        assert f"usage: hwgen {command}" in capsys.readouterr().out


def test_missing_command_is_usage():
    proc = subprocess.run([sys.executable, "-m", "hwgen"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2
    assert "the following arguments are required: COMMAND" in proc.stderr


def test_probabilities_of_a_program_without_its_scale(tmp_path, capsys, monkeypatch):
    """A program saved before programs kept the output scale: refused before any link."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 8, 8, 1), dtype=np.int64))
    code = main(["infer", "--url", "loop://", "--program", "tests/data/program_v4_cnn.npz",
                 "--input", str(x), "--probabilities"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hwgen infer: error: --probabilities with "
                          "tests/data/program_v4_cnn.npz: the program has no output_scale"), err


def test_a_bf16_design_from_a_config_file_is_refused_without_a_traceback(tmp_path, capsys):
    # A command that has no bf16 path (verify's benches are int8's) refuses a config file
    # that asks for one with a usage error naming dtype and what is allowed.
    path = tmp_path / "bf16.json"
    path.write_text('{"rows": 2, "cols": 2, "dtype": "bf16"}')
    assert main(["verify", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "dtype='bf16'" in err and "takes 'int8' only" in err and "hwgen compile" in err
    # Nor has it a --dtype option.
    with pytest.raises(SystemExit) as exit_:
        main(["verify", "--dtype", "bf16"])
    assert exit_.value.code == 2 and "--dtype" in capsys.readouterr().err


def test_generate_writes_a_bf16_design_the_same_each_time(tmp_path):
    # Every unit of the bf16 core (the walker, the pooler, the adder, the depthwise unit).
    design = ["--dtype", "bf16", "--rows", "2", "--cols", "2"]
    texts = []
    for run in ("a", "b"):
        assert main(["generate", *design, "--out", str(tmp_path / run)]) == 0
        (verilog,) = (tmp_path / run).glob("*.v")
        texts.append(verilog.read_bytes())
        manifest = json.loads(next((tmp_path / run).glob("*.json")).read_text())
        assert manifest["config"]["dtype"] == "bf16"
    assert texts[0] == texts[1] and b"bf16" in texts[0].lower()


def test_build_refuses_a_bf16_design_that_does_not_fit(tmp_path, capsys):
    # Before any tool runs: a bf16 MAC's float units are logic, about a thousand LUT4 each.
    assert main(["build", "--board", "ulx3s-12f", "--dtype", "bf16",
                 "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "does not fit the ulx3s-12f" in err and "LUT4s" in err, err
    assert not (tmp_path / "b").exists()
