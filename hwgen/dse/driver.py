"""The sweep: every point of a design space as a task on a Dask cluster.

By default :func:`sweep` starts a :class:`dask.distributed.LocalCluster` of worker processes
(one thread each: builds and the cycle model are CPU-bound) sized to this machine; given a
scheduler address it uses a cluster the user started (``dask scheduler``, ``dask worker``),
whose workers need hwgen installed and nothing else: the model travels to them with the tasks
(:meth:`~dask.distributed.Client.scatter`), the results come back with them, and no file is
shared. The estimate tier sends a few dozen points per task, the build tier one.

Each finished point is appended to ``DIR/results.csv`` at once (:mod:`hwgen.dse.results`);
a rerun skips the points already there (unless ``fresh``); a failing point is a row with its
reason and the sweep goes on; an interrupted sweep (Ctrl-C) keeps every finished row. After a
complete sweep, ``results.csv`` is rewritten in the order of the space (rows of earlier sweeps
of other spaces after them), and ``DIR/pareto.md`` and ``DIR/pareto.png`` are drawn from the
sweep's rows. A build-tier point leaves its build report in ``DIR/points/<point>/report.json``,
a point that failed with a tool or internal error its whole message in ``.../error.txt``.
"""

import contextlib
import json
import logging
import math
import os
import time
from pathlib import Path

from .interrupts import DeferredInterrupts
from .model import FloatModel, IntegerModel, load_model
from .pareto import render_markdown
from .plot import plot_pareto
from .points import TIERS, evaluate_points
from .results import ResultsFile, as_read
from .space import point_key, points

__all__ = ["DSEError", "sweep"]

# Points per estimate-tier task at most: enough to make the scheduler's few milliseconds per
# task small beside the points' (one to a few each), few enough for the progress bar to move
# and for the workers to share the work.
_MAX_CHUNK = 16
# Seconds to wait for a worker of a user's cluster to join.
WORKER_WAIT_S = 60
# The local cluster's HTTP server (Dask's dashboard): this machine only, on any free port, so
# that a sweep never takes or fights over a running cluster's 8787.
LOCAL_HTTP = "127.0.0.1:0"
# Failures whose whole message is kept beside results.csv.
_DETAILED = ("error", "build-error")


class DSEError(RuntimeError):
    """A sweep cannot run: the cluster cannot be reached, or has no workers."""


def _check_args(board, tier, scheduler, workers, baud):
    from ..boards import BOARDS

    if isinstance(board, str):
        if board not in BOARDS:
            raise ValueError(f"board={board!r}; allowed: {', '.join(sorted(BOARDS))}")
        board = BOARDS[board]
    if tier not in TIERS:
        raise ValueError(f"tier={tier!r}; allowed: {', '.join(TIERS)}")
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers={workers!r}; allowed: an integer >= 1")
        if scheduler is not None:
            raise ValueError("workers applies to the local cluster; a scheduler's cluster has "
                             "the workers started for it (dask worker ADDRESS)")
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler):
        raise ValueError(f"scheduler={scheduler!r}; allowed: an address such as "
                         f"tcp://HOST:8786")
    if baud is not None and (isinstance(baud, bool) or not isinstance(baud, int) or baud < 1):
        raise ValueError(f"baud={baud!r}; allowed: None (the board's rate) or an integer >= 1")
    return board


def _resolved_key(board, values, *, tier, model, baud, seed):
    from ..boards import board_config

    fields = dict(values)
    clock_hz = fields.pop("clock_hz", None)
    try:
        config = board_config(board, clock_hz=clock_hz, **fields).to_dict()
    except (TypeError, ValueError):
        config = {"invalid": values}
    return point_key(board=board.name, tier=tier, model=model.digest, baud=baud, seed=seed,
                     config=config)


@contextlib.contextmanager
def _client(scheduler, workers):
    """Yield a Dask client: of the user's cluster, or of a local one closed on leaving."""
    from dask.distributed import Client, LocalCluster

    if scheduler is None:
        n = workers or os.cpu_count() or 1
        # The preload makes the workers leave Ctrl-C to this process (points.dask_setup).
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                          dashboard_address=LOCAL_HTTP, silence_logs=logging.ERROR,
                          preload=["hwgen.dse.points"]) as cluster, \
                Client(cluster) as client:
            yield client
        return
    try:
        client = Client(scheduler, timeout=f"{WORKER_WAIT_S}s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise DSEError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    with client:
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except TimeoutError:
            raise DSEError(f"no worker joined the Dask scheduler at {scheduler} within "
                           f"{WORKER_WAIT_S} s; start one with: dask worker {scheduler}") \
                from None
        yield client


def _threads(client):
    return max(1, sum(client.nthreads().values()))


class _Progress:
    """The progress bar: points done, failed and running."""

    def __init__(self, total, show):
        self.failed = 0
        self.bar = None
        if show:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="point", desc="dse", dynamic_ncols=True)

    def update(self, rows, running):
        self.failed += sum(r["status"] != "ok" for r in rows)
        if self.bar is not None:
            self.bar.set_postfix_str(f"failed {self.failed}, running {running}", refresh=False)
            self.bar.update(len(rows))

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _error_rows(chunk, exc, base):
    reason = f"the Dask task failed: {type(exc).__name__}: {exc}".splitlines()[0][:300]
    return [{**base, "point": key, **values, "status": "error", "reason": reason,
             "_extra": {"detail": repr(exc)}} for key, values in chunk]


def _keep_extra(out, row):
    extra = row.pop("_extra", None) or {}
    if row["status"] not in _DETAILED and not extra.get("report"):
        return
    folder = out / "points" / row["point"]
    folder.mkdir(parents=True, exist_ok=True)
    if extra.get("report"):
        (folder / "report.json").write_text(json.dumps(extra["report"], indent=2,
                                                       sort_keys=True) + "\n")
    if row["status"] in _DETAILED:
        text = extra.get("detail", "") + ("\n\n" + extra["detail_log"]
                                          if extra.get("detail_log") else "")
        (folder / "error.txt").write_text(text + "\n")


def _run(client, todo, *, board, model, tier, baud, seed, record, progress):
    """Evaluate ``todo`` ([(key, values)]) on the cluster; call ``record(row)`` as each
    finishes."""
    from dask.distributed import as_completed

    threads = _threads(client)
    size = 1 if tier == "build" else max(1, min(_MAX_CHUNK,
                                                math.ceil(len(todo) / (8 * threads))))
    chunks = iter([todo[i:i + size] for i in range(0, len(todo), size)])
    model_future = client.scatter(model, broadcast=True, hash=False)
    base = {"board": board.name, "tier": tier, "model": model.label, "baud": baud}
    inflight = {}
    done = as_completed()
    checked = time.monotonic()

    def submit():
        # A build takes minutes: one per worker thread. Estimates: two tasks per thread, so
        # that a worker never waits for the scheduler between two.
        limit = threads if tier == "build" else 2 * threads
        while len(inflight) < limit:
            chunk = next(chunks, None)
            if chunk is None:
                return
            future = client.submit(evaluate_points, board.name, model_future, tier, chunk,
                                   baud=baud, seed=seed, pure=False)
            inflight[future] = chunk
            done.add(future)

    with DeferredInterrupts() as interrupts:
        try:
            submit()
            for future in interrupts.each(done):
                chunk = inflight.pop(future)
                try:
                    rows = future.result()
                except Exception as exc:   # a worker died, or the task could not run there
                    rows = _error_rows(chunk, exc, base)
                for row in rows:
                    record(row)
                progress.update(rows, sum(len(c) for c in inflight.values()))
                if time.monotonic() - checked > 5:   # workers may join a user's cluster
                    threads, checked = _threads(client), time.monotonic()
                submit()
        finally:
            if inflight:
                client.cancel(list(inflight), force=True)
            progress.close()


def sweep(board, space=None, *, model=None, calib=None, tier="estimate", scheduler=None,
          workers=None, out="dse_out", fresh=False, baud=None, seed=None,
          progress=False, on_row=None):
    """Evaluate every point of ``space`` on ``board`` in parallel; return the rows.

    Parameters
    ----------
    board : str or hwgen.boards.Board
        A board of :data:`hwgen.boards.BOARDS`.
    space : dict, optional
        ``{field: values}`` of :class:`~hwgen.config.AcceleratorConfig` fields (see
        :func:`hwgen.dse.space.points`: values a sequence, one value, or a string such as
        ``"2..8:2"``); fields left out take the board's preset, ``rows`` and ``cols`` 2, 4, 8
        when neither is given.
    model : path-like or model source, optional
        The model compiled onto each point (:func:`hwgen.dse.model.load_model`): the demo's MLP
        by default, an ``.npz`` saved program or an ``.onnx`` file; or a
        :class:`~hwgen.dse.model.FloatModel` / :class:`~hwgen.dse.model.IntegerModel`.
    calib : path-like, optional
        Calibration inputs for an ONNX model.
    tier : {"estimate", "build"}
        ``"build"`` also runs Yosys and nextpnr for every point that passes the estimate.
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://HOST:8786``); by default a local cluster.
    workers : int, optional
        Worker processes of the local cluster (default: one per CPU).
    out : path-like
        Folder of ``results.csv``, ``pareto.md`` and ``pareto.png``.
    fresh : bool
        Start ``results.csv`` afresh instead of skipping the points already in it.
    baud : int, optional
        UART rate for the link bound and the builds; by default each point's rate as ``hwgen
        build`` takes it, the board's bridge rate where the point's clocks make it.
    seed : int, optional
        nextpnr placement seed (build tier).
    progress : bool
        Show a progress bar (points done, failed, running) on stderr.
    on_row : callable, optional
        Called with each finished row (as :meth:`ResultsFile.read` returns it), after it is
        in ``results.csv``.

    Returns
    -------
    list of dict
        One row per distinct point of the space, in the space's order (:data:`COLUMNS`), the
        points found in ``results.csv`` included.

    Raises
    ------
    ValueError
        For a bad argument or space (:class:`~hwgen.dse.space.SpaceError`), a model that cannot
        be loaded (:class:`~hwgen.dse.model.ModelError`) or a ``results.csv`` of another
        format (:class:`~hwgen.dse.results.ResultsError`).
    DSEError
        If the scheduler cannot be reached or no worker joins it.
    KeyboardInterrupt
        On Ctrl-C, after the running tasks are cancelled; the finished rows stay in the file.
    """
    board = _check_args(board, tier, scheduler, workers, baud)
    space_points = points(space)
    if not isinstance(model, FloatModel | IntegerModel):
        model = load_model(model, calib=calib)
    keys = {}
    for values in space_points:
        key = _resolved_key(board, values, tier=tier, model=model, baud=baud, seed=seed)
        keys.setdefault(key, values)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = ResultsFile(out / "results.csv")
    earlier = [] if fresh else results.read()
    found = {r["point"]: r for r in earlier}
    results.start(fresh=fresh)
    todo = [(key, values) for key, values in keys.items() if key not in found]

    def record(row):
        _keep_extra(out, row)
        results.append(row)
        found[row["point"]] = typed = as_read(row)
        if on_row is not None:
            on_row(typed)

    if todo:
        bar = _Progress(len(todo), progress)
        with _client(scheduler, workers) as client:
            _run(client, todo, board=board, model=model, tier=tier, baud=baud, seed=seed,
                 record=record, progress=bar)
    rows = [found[key] for key in keys]
    others = [r for r in earlier if r["point"] not in keys]
    results.rewrite(rows + others)
    (out / "pareto.md").write_text(render_markdown(rows, board, tier=tier, model=model.label,
                                                   baud=baud))
    plot_pareto(rows, out / "pareto.png", board,
                title=f"{model.label} on {board.name}, {tier} tier: {len(rows)} points",
                baud=baud)
    return rows
