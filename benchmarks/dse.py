"""Benchmark of hwgen dse: the build tier's speed-up with workers, the estimate tier's rate.

Run: python benchmarks/dse.py [--board icebreaker] [--skip-build] [--estimate-board ulx3s-85f]
                              [--quick] [--record [FILE]]

Build tier: the same sweep of four tiny points (a 2x2 array with the board's preset buffers,
``acc_depth`` 16, 32, 48 and 64, so the four builds take about as long) on a local Dask cluster
of 1 worker, then of 2 workers, each into a fresh folder; it prints the wall time of each and
their ratio. The target is at least 1.7 with 2 workers on 2 cores. The model is a small random
network, so that every point compiles onto the small buffers.

Estimate tier: a sweep of the demo's MLP over the array shape, the requantization lanes, the
clock and the accumulator depth (216 distinct points on the ULX3S-85F) on one worker; it
prints the points per second of the sweep itself (the cluster is started and warmed by a
first point, and the model trained, before the clock starts), in all (the pareto files
included) and up to the last row. The target is at least 100 points per second. Most of a
point's time is the exact cycle model of small arrays with large batches; points that differ
only in the clock or in buffers that leave the batch alone reuse a cached count.
"""

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hwgen.boards import BOARDS, board_config
from hwgen.dse import sweep
from hwgen.dse.driver import LOCAL_HTTP
from hwgen.dse.model import IntegerModel, load_model
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from sim.netgen import random_network

# Builds are CPU-bound: the speed-up only means something on a machine otherwise idle, so each
# line says how loaded it was (the load average counts this benchmark's own processes too).
BUILD_SPACE = {"rows": [2], "cols": [2], "acc_depth": [16, 32, 48, 64]}
ESTIMATE_SPACE = {"rows": [2, 4, 8], "cols": [2, 4, 8], "post_lanes": [1, 2, None],
                  "clock_hz": [50_000_000, 62_500_000, 75_000_000],
                  "acc_depth": [64, 128, 256]}


def _cluster(workers):
    from dask.distributed import LocalCluster

    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                        dashboard_address=LOCAL_HTTP, silence_logs=logging.ERROR,
                        preload=["hwgen.dse.points"])


def _tiny_model(board):
    config = board_config(board, rows=2, cols=2, acc_depth=16)
    net = random_network(np.random.default_rng(0), config, widths=[16, 8, 4])
    return IntegerModel(net, label="random-16-8-4", digest="benchmark")


def _load():
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


#: ``--quick``: four points of the estimate tier, no build tier (the tests' smoke run).
QUICK_SPACE = {"rows": [2, 4], "cols": [2, 4]}


def build_tier(board_name, root):
    board = BOARDS[board_name]
    model = _tiny_model(board)
    # A throwaway build first, so that neither run pays for compiling the tools' WebAssembly.
    sweep(board, {"rows": [1], "cols": [1]}, model=model, tier="build", workers=1,
          out=root / "warm", fresh=True)
    seconds = {}
    for workers in (1, 2):
        with _cluster(workers) as cluster:
            start = time.perf_counter()
            rows = sweep(board, BUILD_SPACE, model=model, tier="build",
                         scheduler=cluster.scheduler_address, out=root / f"build{workers}",
                         fresh=True)
            seconds[workers] = time.perf_counter() - start
        bad = [r for r in rows if r["status"] != "ok"]
        if bad:
            raise RuntimeError(f"build tier: {len(bad)} point(s) failed: {bad[0]['status']}: "
                               f"{bad[0]['reason']}")
        builds = ", ".join(f"{r['build_s']:.0f} s" for r in rows)
        print(f"build tier, {len(rows)} points on {board.name}, {workers} worker(s): "
              f"{seconds[workers]:.1f} s wall (builds: {builds}; {_load()})", flush=True)
    print(f"build tier speed-up with 2 workers: {seconds[1] / seconds[2]:.2f}x "
          f"(target >= 1.7 on 2 cores)")
    return {"build_1_worker_s": seconds[1], "build_2_workers_s": seconds[2],
            "build_speedup": seconds[1] / seconds[2]}


def estimate_tier(board_name, root, space=ESTIMATE_SPACE):
    model = load_model()   # trained here, before the clock starts
    with _cluster(1) as cluster:
        # A first point warms the worker (its imports) and this process (Matplotlib's).
        sweep(board_name, {"rows": [1], "cols": [1]}, model=model,
              scheduler=cluster.scheduler_address, out=root / "warm", fresh=True)
        times = []
        start = time.perf_counter()
        rows = sweep(board_name, space, model=model,
                     scheduler=cluster.scheduler_address, out=root / "estimate", fresh=True,
                     on_row=lambda row: times.append(time.perf_counter()))
        seconds = time.perf_counter() - start
    ok = sum(r["status"] == "ok" for r in rows)
    cycles = len({(r["rows"], r["cols"], r["post_lanes"], r["batch"]) for r in rows})
    print(f"estimate tier, {len(rows)} points on {board_name} ({ok} ok, {cycles} distinct "
          f"cycle counts), 1 worker: {seconds:.2f} s in all, {len(rows) / seconds:.0f} "
          f"points/s (target >= 100); {times[-1] - start:.2f} s to the last row, "
          f"{len(rows) / (times[-1] - start):.0f} points/s")
    if not ok:
        raise RuntimeError(f"estimate tier: none of the {len(rows)} points fits")
    return {"estimate_points": len(rows), "estimate_points_per_s": len(rows) / seconds}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="icebreaker", choices=sorted(BOARDS),
                        help="board of the build-tier sweep (default icebreaker)")
    parser.add_argument("--estimate-board", default="ulx3s-85f", choices=sorted(BOARDS),
                        help="board of the estimate-tier sweep (default ulx3s-85f)")
    parser.add_argument("--skip-build", action="store_true", help="the estimate tier only")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep the sweeps' folders here (default: a temporary folder)")
    parser.add_argument("--quick", action="store_true",
                        help="four points of the estimate tier, no build tier (a smoke run)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    root = args.keep or Path(tempfile.mkdtemp(prefix="hwgen-dse-bench-"))
    try:
        figures = estimate_tier(args.estimate_board, root,
                                QUICK_SPACE if args.quick else ESTIMATE_SPACE)
        if not (args.skip_build or args.quick):
            figures.update(build_tier(args.board, root))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    record_benchmark(__file__, args, argv, figures, note=_load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
