"""Benchmark of host.AcceleratorPool: inferences per second with 1 and 2 simulated boards.

Run: python benchmarks/pool.py [--inputs N] [--repeat R] [--quick] [--record [FILE]]
     [design options, as for hwgen generate]

An MLP 64-32-10 (random int8 weights, raw logits, the shape of the digits demo's network) is
compiled for the default 8x8 int8 weight-stationary accelerator (or the design the options
describe) and run on simulated boards (``sim.board.SimulatedBoard``: the device's Verilog
under Verilator, each board its own process, over TCP). It prints the rows per second of:

- ``Accelerator``: one board driven directly, without the pool (the baseline);
- ``AcceleratorPool`` of 1 board, then of 2 boards, and the ratio of the two;

each the best of ``--repeat`` calls on ``--inputs`` rows (the time of ``infer`` alone), with
the rows each board ran and the CPU seconds the host process and the boards used. Every output
is checked bit-exact against ``QuantizedNetwork.forward``.

The boards compute in their own processes and the host threads mostly wait on their sockets,
so two boards approach twice the rate of one as long as the machine has a core per board; the
target is a ratio of at least 1.5 on 2 cores. ``--quick`` (the tests' smoke run) is one call of
a few rows; ``--record`` writes the figures into the record (:mod:`hwgen.figures`).
"""

import argparse
import os
import resource
import shlex
import sys
import time

import numpy as np

from host import Accelerator, AcceleratorPool
from hwgen.cli import UsageError, add_config_options, config_from_args
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from sim.board import SimulatedBoard
from sim.netgen import compiled_mlp, random_input

WIDTHS = [64, 32, 10]
#: The network of --quick: one that fits the tests' small board.
QUICK_WIDTHS = [24, 16, 10]


def _cpu_seconds(boards):
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime, sum(b.stats().cpu_s for b in boards)


def measure(name, target, boards, xs, reference):
    """Run ``target.infer`` on each of ``xs``; return a dict of the best rate and the CPU use."""
    best = None
    host_cpu, board_cpu = _cpu_seconds(boards)
    wall = 0.0
    for x, expected in zip(xs, reference, strict=True):
        start = time.perf_counter()
        y = target.infer(x)
        seconds = time.perf_counter() - start
        wall += seconds
        if not np.array_equal(y, expected):
            raise AssertionError(f"{name}: the output differs from hwgen.nn")
        best = seconds if best is None else min(best, seconds)
    host_after, board_after = _cpu_seconds(boards)
    shares = ""
    if isinstance(target, AcceleratorPool):
        rows = [c.rows for c in target.counters().devices.values()]
        shares = " / ".join(str(n) for n in rows)
    return {"name": name, "rate": len(xs[0]) / best, "shares": shares,
            "host_cpu": (host_after - host_cpu) / wall,
            "board_cpu": (board_after - board_cpu) / wall}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=4096, metavar="N",
                        help="input rows per infer call (default 4096)")
    parser.add_argument("--repeat", type=int, default=5, metavar="R",
                        help="infer calls per measurement; the best counts (default 5)")
    parser.add_argument("--quick", action="store_true",
                        help="one call of two batches' rows (a smoke run)")
    add_record_option(parser)
    add_config_options(parser)  # default: the default design, 8x8 int8 ws at 50 MHz
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    try:
        if args.inputs < 1 or args.repeat < 1:
            raise UsageError("--inputs and --repeat must be at least 1")
        config = config_from_args(args)
        widths = QUICK_WIDTHS if args.quick else WIDTHS
        rng, net, program = compiled_mlp(config, widths)
    except (UsageError, ValueError) as exc:
        print(f"pool.py: error: {exc}", file=sys.stderr)
        return 2
    if args.quick:
        args.inputs, args.repeat = 2 * program.batch, 1
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"network: MLP {'-'.join(map(str, widths))}, raw logits; accelerator {config.name} "
          f"({config.rows}x{config.cols} {config.dataflow}), compiled batch {program.batch}; "
          f"{args.inputs} rows per call, best of {args.repeat}; {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.1f}", flush=True)
    xs = [random_input(rng, config, args.inputs, widths[0]) for _ in range(args.repeat)]
    reference = [net.forward(x) for x in xs]

    def say(text):
        print(text, flush=True)

    results = []
    with SimulatedBoard(config, log=say) as one, SimulatedBoard(config, log=say) as two:
        with Accelerator(one.url, config=config) as acc:
            acc.load(program)
            acc.infer(xs[0][:program.batch])  # warm up: the run-time estimate
            results.append(measure("Accelerator, 1 board", acc, [one], xs, reference))
        for boards in ([one], [one, two]):
            with AcceleratorPool([b.url for b in boards], config=config) as pool:
                pool.load(program)
                pool.infer(xs[0][:len(boards) * program.batch])  # warm up
                results.append(measure(f"AcceleratorPool, {len(boards)} board(s)", pool,
                                       boards, xs, reference))
    print()
    print(f"{'':<28} {'rows/s':>9} {'rows per board':>15} {'host CPU':>9} {'boards CPU':>11}")
    for r in results:
        print(f"{r['name']:<28} {r['rate']:>9,.0f} {r['shares']:>15} {r['host_cpu']:>9.0%} "
              f"{r['board_cpu']:>11.0%}")
    ratio = results[2]["rate"] / results[1]["rate"]
    print(f"\npool of 2 boards / pool of 1 board: {ratio:.2f}x (target >= 1.5x on 2 cores); "
          f"pool of 1 / Accelerator: {results[1]['rate'] / results[0]['rate']:.2f}x")
    print("host CPU, boards CPU: CPU seconds of this process and of the board processes per "
          "wall second of infer (100% = one core).")
    keys = ("accelerator", "pool1", "pool2")
    figures = {f"{key}_rows_per_s": r["rate"] for key, r in zip(keys, results, strict=True)}
    figures["pool2_over_pool1"] = ratio
    record_benchmark(__file__, args, argv, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
