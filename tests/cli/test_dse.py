"""``hwgen dse``: usage errors, a sweep end to end, and Ctrl-C in a real terminal's way."""

import contextlib
import csv
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import hwgen
from hwgen.boards import BOARDS, board_config
from hwgen.cli import main
from hwgen.dse import sweep
from hwgen.dse.results import ResultsFile
from sim.netgen import random_network


@pytest.fixture(scope="module")
def saved_program(tmp_path_factory):
    """A small network compiled for the iCEBreaker's preset at 2x2, saved as a user would."""
    config = board_config(BOARDS["icebreaker"], rows=2, cols=2)
    net = random_network(np.random.default_rng(4), config, widths=[12, 6, 3])
    path = tmp_path_factory.mktemp("model") / "small.npz"
    hwgen.compile(net, config).save(path)
    return path


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["dse", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for option in ("--board", "--model", "--tier", "--scheduler", "--workers", "--out",
                   "--fresh", "--rows", "--post-lanes", "--clock-hz", "64..1024x2"):
        assert option in text


@pytest.mark.parametrize(("argv", "message"), [
    (["--rows", "2.."], "--rows '2..': malformed value; allowed: a comma list"),
    (["--act-depth", "64..32"], "--act-depth '64..32': the range ends before it starts"),
    (["--workers", "0"], "argument --workers: 0 is out of range; allowed: an integer >= 1"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"],
     "--workers 2: applies to the local cluster only"),
    (["--tier", "synth"], "argument --tier: invalid choice: 'synth'"),
    (["--baud", "10"], "argument --baud: 10 is out of range; allowed: an integer in 300.."),
    (["--model", "missing.npz"], "--model missing.npz: no such file"),
])
def test_usage_errors_are_one_line_and_exit_2(capsys, tmp_path, argv, message):
    with contextlib.chdir(tmp_path):
        try:
            status = main(["dse", "--board", "icebreaker", "--out", str(tmp_path), *argv])
        except SystemExit as exc:   # argparse's own checks
            status = exc.code
    err = capsys.readouterr().err
    assert status == 2
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("hwgen dse: error: ") and message in err


def test_a_model_file_that_cannot_be_read_is_a_usage_error(capsys, tmp_path):
    bad = tmp_path / "model.h5"
    bad.write_text("x")
    assert main(["dse", "--board", "icebreaker", "--model", str(bad), "--out",
                 str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "model.h5: unknown model file type '.h5'; allowed: .npz" in err


def test_a_sweep_from_the_command_line(capsys, tmp_path, saved_program):
    out = tmp_path / "sweep"
    status = main(["dse", "--board", "icebreaker", "--model", str(saved_program),
                   "--rows", "1,2", "--cols", "1..2", "--in-bits", "8,6", "--workers", "1",
                   "--no-progress", "--out", str(out)])
    text = capsys.readouterr().out
    assert status == 0
    rows = ResultsFile(out / "results.csv").read()
    assert len(rows) == 8
    by_width = {w: [r["status"] for r in rows if r["in_bits"] == w] for w in (8, 6)}
    assert by_width[8] == ["ok"] * 4
    # The saved program's integer network has 8-bit operands: 6-bit points fail, saying so.
    assert by_width[6] == ["no-compile"] * 4
    assert all("small.npz is an integer network of in_bits=8" in r["reason"]
               for r in rows if r["in_bits"] == 6)
    assert "8 points: 4 ok, failed: no-compile 4\n  4 x small.npz is an integer network" in text
    assert "Pareto front, inferences/s against logic cells:" in text
    assert f"wrote {out / 'results.csv'}, {out / 'pareto.md'}, {out / 'pareto.png'}" in text
    assert (out / "pareto.png").stat().st_size > 0


def test_an_estimate_sweep_on_the_tang_nano_9k(capsys, tmp_path):
    """The estimate tier on a Gowin board: the demo's MLP on its 4x4 preset and a 2x4, with
    the fit model's Gowin estimate (LUT4s with ALUs, MULT18X18s) and the board's 27 MHz; the
    2x2, whose weight buffer cannot hold the MLP, fails saying so."""
    out = tmp_path / "sweep"
    status = main(["dse", "--board", "tang-nano-9k", "--rows", "2,4", "--cols", "2,4",
                   "--workers", "1", "--no-progress", "--out", str(out)])
    text = capsys.readouterr().out
    assert status == 0, text
    rows = {(r["rows"], r["cols"]): r for r in ResultsFile(out / "results.csv").read()}
    assert rows[2, 2]["status"] == "no-compile"
    assert "weight words do not fit" in rows[2, 2]["reason"]
    board = BOARDS["tang-nano-9k"]
    for shape in ((2, 4), (4, 4)):
        row = rows[shape]
        assert row["status"] == "ok", row
        est = hwgen.boards.estimate(board, board_config(board, rows=shape[0], cols=shape[1]))
        assert (row["est_lut"], row["est_dsp"], row["est_bram"]) == \
            (est["lut"], est["dsp"], est["bram"])
        assert row["clock_mhz"] == 27.0
    assert "Pareto front, inferences/s against LUTs:" in text


def test_an_estimate_sweep_on_the_tang_primer_20k(capsys, tmp_path):
    """The estimate tier on the other Gowin board: the demo's MLP on its spatial 4x4 preset
    and a 2x4, each at the board's 27 MHz and the BL702's 3 Mbaud on the packed wire."""
    out = tmp_path / "sweep"
    status = main(["dse", "--board", "tang-primer-20k", "--rows", "2,4", "--cols", "4",
                   "--workers", "1", "--no-progress", "--out", str(out)])
    text = capsys.readouterr().out
    assert status == 0, text
    board = BOARDS["tang-primer-20k"]
    rows = ResultsFile(out / "results.csv").read()
    assert sorted((r["rows"], r["cols"]) for r in rows) == [(2, 4), (4, 4)]
    for row in rows:
        assert row["status"] == "ok", row
        config = board_config(board, rows=row["rows"], cols=row["cols"])
        est = hwgen.boards.estimate(board, config)
        assert (row["est_lut"], row["est_dsp"], row["est_bram"]) == \
            (est["lut"], est["dsp"], est["bram"])
        assert (row["clock_mhz"], row["baud"]) == (27.0, 3_000_000)
        assert 0 < row["link_infer_per_s"] < row["device_infer_per_s"]


def _data_rows(path):
    with contextlib.suppress(FileNotFoundError), open(path, newline="") as f:
        return max(0, len(list(csv.reader(f))) - 1)
    return 0


def test_ctrl_c_keeps_the_finished_rows(tmp_path):
    # A space far too large to finish: Ctrl-C (SIGINT to the whole process group, as a
    # terminal sends it) comes as soon as the first rows are in.
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "hwgen", "dse", "--board", "ulx3s-85f", "--rows", "1..16",
           "--cols", "1..16", "--clock-hz", "50000000..75000000:500000", "--workers", "2",
           "--no-progress", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    try:
        deadline = time.monotonic() + 120
        while _data_rows(out / "results.csv") < 1:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no row within 120 s"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, stderr
        assert "hwgen dse: interrupted" in stderr and "Traceback" not in stderr, stderr
        # Every process of the sweep (the local cluster's too) is gone.
        deadline = time.monotonic() + 30
        while True:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, "processes of the sweep outlived it"
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    kept = ResultsFile(out / "results.csv").read()
    assert 1 <= len(kept) < 16 * 16 * 51
    # A rerun skips them: of a finished point and a new one, only the new one is evaluated
    # (the new one: another clock of a finished point's array, or another width at its clock
    # when the sweep had got through every clock of the arrays it finished).
    have = {(r["rows"], r["cols"], r["clock_hz"]) for r in kept}
    clock_range = range(50_000_000, 75_500_000, 500_000)
    space = next(
        ({"rows": [d["rows"]], "cols": [d["cols"]], "clock_hz": [d["clock_hz"], h]}
         for d in kept for h in clock_range if (d["rows"], d["cols"], h) not in have), None) \
        or next({"rows": [d["rows"]], "cols": [d["cols"], c], "clock_hz": [d["clock_hz"]]}
                for d in kept for c in range(1, 17)
                if (d["rows"], c, d["clock_hz"]) not in have)
    done = next(r for r in kept if (r["rows"], r["cols"], r["clock_hz"])
                == (space["rows"][0], space["cols"][0], space["clock_hz"][0]))
    evaluated = []
    rows = sweep("ulx3s-85f", space, workers=1, out=out, on_row=evaluated.append)
    assert [(r["cols"], r["clock_hz"]) for r in evaluated] == [
        (space["cols"][-1], space["clock_hz"][-1])]
    assert rows[0] == done
