"""Benchmark of a long load on the simulated board: many calls of mixed batch sizes.

Run: python benchmarks/soak.py [--inferences N] [--largest N] [--seed S] [--quick] [--record [FILE]]
                               [design options, as for hwgen generate]

An MLP 37-29-11 (random int8 weights, raw logits: odd widths, so that rows fill neither a
word nor an array tile) is compiled for the default 8x8 accelerator (or the design the options
describe) and run through ``host.Accelerator`` on the simulated board (``sim.board``: the
device's Verilog under Verilator, over TCP): ``--inferences`` inferences in calls of a batch size
drawn uniformly from 1 to ``--largest`` (default 100,000 rows in calls of 1 to 2,000). Every
output is checked bit-exact against ``QuantizedNetwork.forward``. It prints the rows per second
of the ``infer`` calls alone (not the check), the calls, the wire bytes and simulated cycles per
row, and the slowest call. ``--quick`` (the tests' smoke run) takes 3,000 rows in calls of 1 to
500; ``--record`` writes the figures into the record (:mod:`hwgen.figures`).
"""

import argparse
import os
import shlex
import sys
import time

import numpy as np

from host import Accelerator
from hwgen.cli import UsageError, add_config_options, config_from_args
from hwgen.cli.options import number
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from sim.board import SimulatedBoard
from sim.netgen import compiled_mlp, random_input

WIDTHS = [37, 29, 11]


def soak(board, net, program, *, rows, largest, rng):
    """Run ``rows`` rows in calls of 1 to ``largest`` rows; return the totals."""
    config = program.config
    totals = {"rows": 0, "calls": 0, "seconds": 0.0, "slowest": 0.0, "wire": 0, "cycles": 0}
    with Accelerator(board.url, config=config) as acc:
        acc.load(program)
        while totals["rows"] < rows:
            batch = min(int(rng.integers(1, largest + 1)), rows - totals["rows"])
            x = random_input(rng, config, batch, WIDTHS[0])
            start = time.perf_counter()
            y = acc.infer(x)
            seconds = time.perf_counter() - start
            if not np.array_equal(y, net.forward(x)):
                raise AssertionError(f"call {totals['calls']} ({batch} rows): the device's "
                                     "output differs from hwgen.nn")
            c = acc.counters()
            totals["rows"] += batch
            totals["calls"] += 1
            totals["seconds"] += seconds
            totals["slowest"] = max(totals["slowest"], seconds)
            totals["wire"] += c.wire_bytes
            totals["cycles"] += c.cycles
    return totals


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inferences", type=number(int, 1), default=100_000, metavar="N",
                        help="inferences in all (default 100,000)")
    parser.add_argument("--largest", type=number(int, 1), default=2_000, metavar="N",
                        help="the largest call, in rows (default 2,000)")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="the seed of the network, the inputs and the batch sizes")
    parser.add_argument("--quick", action="store_true",
                        help="3,000 rows in calls of 1 to 500 (a smoke run)")
    add_record_option(parser)
    add_config_options(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    if args.quick:
        args.inferences, args.largest = 3_000, 500
    try:
        config = config_from_args(args)
        rng, net, program = compiled_mlp(config, WIDTHS, seed=args.seed)
    except (UsageError, ValueError) as exc:
        print(f"soak.py: error: {exc}", file=sys.stderr)
        return 2
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"network: MLP {'-'.join(map(str, WIDTHS))}, raw logits; accelerator {config.name}; "
          f"{args.inferences:,} rows in calls of 1 to {args.largest:,}")
    with SimulatedBoard(config, log=lambda line: print(line, flush=True)) as board:
        t = soak(board, net, program, rows=args.inferences, largest=args.largest, rng=rng)
    rate = t["rows"] / t["seconds"]
    print(f"\n{t['rows']:,} rows in {t['calls']:,} calls, all bit-exact: {rate:,.0f} rows/s "
          f"({t['seconds']:.1f} s in infer); {t['wire'] / t['rows']:.1f} wire bytes and "
          f"{t['cycles'] / t['rows']:.1f} device cycles per row; slowest call "
          f"{t['slowest']:.2f} s (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          "CPUs)")
    record_benchmark(__file__, args, argv, {
        "rows_per_s": rate, "calls": t["calls"], "wire_bytes_per_row": t["wire"] / t["rows"],
        "cycles_per_row": t["cycles"] / t["rows"], "slowest_call_s": t["slowest"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
