"""Benchmark of the host on a link that damages bytes: batches completed, retries, bytes resent.

Run: python benchmarks/lossy_link.py [--damage RATE ...] [--burst N] [--batches N] [--samples N]
                                     [--timeout S] [--quick] [--record [FILE]]
                                     [design options, as for hwgen generate]

An MLP 64-32-10 (random int8 weights, raw logits) is compiled for the default 8x8 accelerator
(or the design the options describe), loaded onto a simulated board (``sim.board``: the
device's Verilog under Verilator, over TCP) on a clean link, and then run through a TCP proxy
that damages each byte it forwards, both ways, with probability ``RATE`` (``sim.lossy``: a
flipped bit, a dropped byte or an inserted one, drawn at random; with ``--burst N`` in bursts
of N bytes), ``--batches`` calls of ``--samples`` rows each, for each rate given. For each rate
it prints the batches that completed (the rest raised ``LinkError``), the answers that were
wrong (checked against ``QuantizedNetwork.forward``: there must be none), the attempts sent
again and the bytes they took, the attempts given up after a timeout, the damage the proxy did
and the driver saw, the payload size the link settled at, and the inferences per second of the
completed batches. ``--quick`` runs 3 calls of 16 rows per rate of an MLP 24-16-10 (a check
that it works, not a figure); ``--record`` writes the figures into the record
(:mod:`hwgen.figures`).
"""

import argparse
import os
import shlex
import sys
import time

import numpy as np

from host import Accelerator
from host.errors import LinkError
from hwgen.cli import UsageError, add_config_options, config_from_args
from hwgen.cli.options import number
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from sim.board import SimulatedBoard
from sim.lossy import Damage, LossyProxy
from sim.netgen import compiled_mlp, random_input

WIDTHS = [64, 32, 10]
#: --quick's network: one that fits the tests' small board (2x3, 512 weight words).
QUICK_WIDTHS = [24, 16, 10]


def run_rate(board, net, program, args, *, rate, seed, inputs):
    """Run the batches through a proxy damaging ``rate`` of the bytes; return a result row."""
    config = program.config
    rng = np.random.default_rng(seed)
    to_device = Damage(rate, args.burst, seed=2 * seed)
    to_host = Damage(rate, args.burst, seed=2 * seed + 1)
    completed = wrong = rows = 0
    seconds = 0.0
    errors = []
    with LossyProxy(board.url, to_device, to_host) as proxy, \
            Accelerator(proxy.url, config=config, timeout=args.timeout) as acc:
        to_device.rate = to_host.rate = 0       # the handshake and the load on a clean link
        acc.load(program)
        to_device.rate = to_host.rate = rate
        for _ in range(args.batches):
            x = random_input(rng, config, args.samples, inputs)
            start = time.perf_counter()
            try:
                y = acc.infer(x)
            except LinkError as error:
                errors.append(str(error))
                continue
            seconds += time.perf_counter() - start
            completed += 1
            rows += len(x)
            wrong += not np.array_equal(y, net.forward(x))
        plan, stats = acc.client.plan, acc.client.stats
        damaged = sum(d.counts[k] for d in (to_device, to_host) for k in ("flip", "drop", "insert"))
        return {"rate": rate, "completed": completed, "wrong": wrong,
                "retries": stats["retries"], "resent": plan.resent_bytes,
                "timeouts": plan.timeouts, "damaged": damaged,
                "seen": sum(plan.damage.values()), "limit": plan.limit,
                "ips": rows / seconds if seconds else 0.0, "errors": errors}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--damage", type=number(float, 0.0, 0.999), nargs="+",
                        default=[0.002, 0.01], metavar="RATE",
                        help="shares of the bytes damaged (default 0.002 0.01)")
    parser.add_argument("--burst", type=number(int, 1), default=1, metavar="N",
                        help="bytes in a row each damage takes (default 1)")
    parser.add_argument("--batches", type=number(int, 1), default=50, metavar="N",
                        help="infer calls per rate (default 50)")
    parser.add_argument("--samples", type=number(int, 1), default=256, metavar="N",
                        help="rows per call (default 256)")
    parser.add_argument("--timeout", type=number(float, above=0), default=5.0, metavar="S",
                        help="the driver's timeout (default 5 s, as Accelerator's)")
    parser.add_argument("--quick", action="store_true",
                        help="3 calls of 16 rows per rate: a check that it runs, not a figure")
    add_record_option(parser)
    add_config_options(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    if args.quick:
        args.batches, args.samples = 3, 16
    widths = QUICK_WIDTHS if args.quick else WIDTHS
    try:
        config = config_from_args(args)
        _, net, program = compiled_mlp(config, widths)
    except (UsageError, ValueError) as exc:
        print(f"lossy_link.py: error: {exc}", file=sys.stderr)
        return 2
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"network: MLP {'-'.join(map(str, widths))}, raw logits; accelerator {config.name}; "
          f"{args.batches} calls of {args.samples} rows per rate, bursts of {args.burst}")
    results = []
    with SimulatedBoard(config, log=lambda line: print(line, flush=True)) as board:
        for seed, rate in enumerate(args.damage, start=1):
            results.append(run_rate(board, net, program, args, rate=rate, seed=seed,
                                    inputs=widths[0]))
            print(f"  damage {rate:.2%}: done", flush=True)
    print()
    print(f"{'damage':>7} {'completed':>10} {'wrong':>5} {'retries':>8} {'bytes resent':>12} "
          f"{'timeouts':>8} {'damaged B':>9} {'failures':>8} {'payload':>7} {'inf/s':>7}")
    for r in results:
        print(f"{r['rate']:>7.2%} {r['completed']:>4}/{args.batches:<5} {r['wrong']:>5} "
              f"{r['retries']:>8,} {r['resent']:>12,} {r['timeouts']:>8,} {r['damaged']:>9,} "
              f"{r['seen']:>8,} {r['limit']:>7} {r['ips']:>7,.0f}")
        for error in r["errors"][:3]:
            print(f"        {error}")
    print(f"\n(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs) damaged B: bytes "
          "the proxy damaged, both ways; failures: attempts the driver saw fail (BAD_CRC, "
          "damaged answers, lost ones); payload: the payload size the link settled at.")
    figures = {}
    for r in results:
        key = f"damage{r['rate'] * 100:g}pct"
        figures.update({f"{key}_completed_pct": 100 * r["completed"] / args.batches,
                        f"{key}_wrong": r["wrong"], f"{key}_retries": r["retries"],
                        f"{key}_bytes_resent": r["resent"], f"{key}_inferences_per_s": r["ips"]})
    record_benchmark(__file__, args, argv, figures)
    return 0 if all(r["wrong"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
