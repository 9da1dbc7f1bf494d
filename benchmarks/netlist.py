"""Build the gate-level board of finished board builds and print its build time and speed.

    python benchmarks/netlist.py build/ulx3s-12f/<name> [more build folders] [--quick]
                                 [--record [FILE]]

For each folder (the ``--out`` of ``hwgen build``): the seconds to build the simulation (a
cached one is deleted first), then a random two-layer network (at most 9 wide, to fit small
buffers) loaded and run on 16 rows over the UART at the build's baud rate, checked against
the NumPy reference, and the simulated cycles per second of the time spent clocking the model
(the harness's run_s). ``--quick`` (the tests' smoke run) keeps a simulation already built and
runs 4 rows; ``--record`` writes the figures into the record (:mod:`hwgen.figures`).
"""

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

import hwgen
from host import Accelerator
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from sim.board import SimulatedBoard
from sim.netgen import random_input, random_network


def measure(out_dir, *, rows=16, rebuild=True):
    """Return the figures of the gate-level board of build ``out_dir`` as a dict: its
    simulation built afresh (``rebuild``) or as cached, ``rows`` rows run."""
    if rebuild:
        shutil.rmtree(Path(out_dir) / "sim", ignore_errors=True)
    start = time.perf_counter()
    with SimulatedBoard.from_build(out_dir, timeout=600) as board:
        built = time.perf_counter() - start
        config = board.config
        rng = np.random.default_rng(0)
        net = random_network(rng, config, layers=2, max_width=9, raw=True)
        program = hwgen.compile(net, config)
        x = random_input(rng, config, rows, net.in_features)
        with Accelerator(board.url, config=config, timeout=120) as acc:
            acc.load(program)
            before = board.stats()
            y = acc.infer(x)
            after = board.stats()
        exact = bool((y == net.forward(x)).all())
    cycles = after.cycles - before.cycles
    run_s = after.run_s - before.run_s
    return {"config": config.name, "build_s": built, "exact": exact, "cycles": cycles,
            "cycles_per_s": cycles / run_s if run_s else float("nan"),
            "divisor": board.divisor}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs="+", type=Path, help="output folders of hwgen build")
    parser.add_argument("--quick", action="store_true",
                        help="a cached simulation, 4 rows (a smoke run)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    print(f"{'build':40} {'build s':>7} {'exact':>5} {'cycles':>9} {'cycles/s':>9} "
          f"{'cyc/bit':>7}")
    ok = True
    figures = {}
    for out in args.builds:
        f = measure(out, rows=4 if args.quick else 16, rebuild=not args.quick)
        ok &= f["exact"]
        figures.update({f"{f['config']}_{k}": f[k]
                        for k in ("build_s", "exact", "cycles", "cycles_per_s", "divisor")})
        print(f"{str(out)[-40:]:40} {f['build_s']:7.0f} {f['exact']!s:>5} {f['cycles']:9d} "
              f"{f['cycles_per_s']:9.0f} {f['divisor']:7d}")
    if ok:
        record_benchmark(__file__, args, argv, figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
