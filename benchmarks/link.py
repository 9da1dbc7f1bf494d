"""Benchmark of the host link: efficiency, inference rate, simulation speed, UART projection.

Run: python benchmarks/link.py [--calls N] [--quick] [--record [FILE]] [design options, as for
hwgen generate]

An MLP 64-32-10 (random int8 weights, raw logits) is compiled for the default 8x8 int8
weight-stationary accelerator (or the design the options describe) and run through
``host.Accelerator`` on the simulated board (``sim.board.SimulatedBoard``: the device's Verilog
under Verilator, over TCP). For each batch size (rows per ``infer`` call) it prints:

- link efficiency: bytes of input and output data (packed values) over all bytes on the wire
  (requests, responses, framing, COUNTERS polls, retries), as counted by the driver; next to
  it the ideal for one poll per run, from :mod:`hwgen.throughput`'s model;
- inferences per second through the simulated board (the time of ``infer`` alone), the
  simulated cycles per CPU second of the harness (it clocks no cycle while the device is at
  rest), and those cycles per wire byte (how fast the device takes and gives the bytes); at the
  end the simulated cycles per second inside runs, while the device computes, per CPU second and
  per wall second;
- the projection over a 3 Mbaud UART (10 bits per byte): wire bytes per inference at 10 bits
  each, plus the device cycles per inference at ``config.clock_hz``, with no overlap of the two
  and no host turnaround time.

Every output is checked bit-exact against ``QuantizedNetwork.forward``. ``--quick`` (the tests'
smoke run) takes one call of batch 1 and 16 of an MLP 24-16-10; ``--record`` writes the figures
into the record (:mod:`hwgen.figures`).
"""

import argparse
import os
import shlex
import sys
import time

import numpy as np

from host import Accelerator
from hwgen.cli import UsageError, add_config_options, config_from_args
from hwgen.cycles import program_cycles
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from hwgen.throughput import wire_bytes_per_run
from sim.board import SimulatedBoard
from sim.netgen import compiled_mlp, random_input

WIDTHS = [64, 32, 10]
#: --quick's network: one that fits the tests' small board (2x3, 512 weight words).
QUICK_WIDTHS = [24, 16, 10]
BATCHES = (1, 16, 64, 256)
UART_BAUD = 3_000_000
BITS_PER_BYTE = 10  # 8N1: start, 8 data, stop


def ideal_wire_bytes(program, rows):
    """Bytes on the wire for ``rows`` rows with one COUNTERS poll per run
    (:func:`hwgen.throughput.wire_bytes_per_run`: the packed wire's frames)."""
    return sum(wire_bytes_per_run(program, min(program.batch, rows - start))
               for start in range(0, rows, program.batch))


def compute_rate(board, acc, program, samples=15):
    """Return ``[(cycles per wall second, cycles per CPU second)]`` measured inside runs.

    Only windows in which every simulated cycle was busy count, so this is the speed of the
    model while the device computes; the CPU figure leaves out time other processes took. A
    window that a run ends within halves the next (a short program); none may count.
    """
    rates, window = [], 0.004
    for _ in range(3 * samples):
        acc.client.run(program.batch)
        first = board.stats()
        time.sleep(window)
        second = board.stats()
        cycles = second.cycles - first.cycles
        if cycles and second.busy_cycles - first.busy_cycles == cycles:
            rates.append((cycles / (second.run_s - first.run_s),
                          cycles / (second.cpu_s - first.cpu_s)))
        else:
            window = max(window / 2, 0.0002)
        acc.client.wait_idle()
        if len(rates) == samples:
            break
    return rates


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=None, metavar="N",
                        help="infer calls per batch size (default: about 1024 rows' worth, "
                             "at least 20 calls)")
    parser.add_argument("--quick", action="store_true",
                        help="one call of batch 1 and of 16 (a smoke run)")
    add_record_option(parser)
    add_config_options(parser)  # default: the default design, 8x8 int8 ws at 50 MHz
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    widths = QUICK_WIDTHS if args.quick else WIDTHS
    try:
        config = config_from_args(args)
        rng, net, program = compiled_mlp(config, widths)
    except (UsageError, ValueError) as exc:
        print(f"link.py: error: {exc}", file=sys.stderr)
        return 2
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"network: MLP {'-'.join(map(str, widths))}, raw logits; accelerator {config.name} "
          f"({config.rows}x{config.cols} {config.dataflow}, {config.clock_hz / 1e6:g} MHz), "
          f"compiled batch {program.batch}")

    def say(text):
        print(text, flush=True)

    rows_out = []
    with SimulatedBoard(config, log=say) as board, \
            Accelerator(board.url, config=config) as acc:
        acc.load(program)
        acc.infer(random_input(rng, config, 4, widths[0]))  # warm up: rate estimate, caches
        for batch in BATCHES[:2] if args.quick else BATCHES:
            calls = 1 if args.quick else args.calls or max(20, 1024 // batch)
            xs = [random_input(rng, config, batch, widths[0]) for _ in range(calls)]
            before = board.stats()
            totals = {"rows": 0, "wire": 0, "payload": 0, "cycles": 0, "seconds": 0.0}
            for x in xs:
                y = acc.infer(x)
                c = acc.counters()
                if not np.array_equal(y, net.forward(x)):
                    raise AssertionError(f"batch {batch}: the device's output differs from "
                                         "hwgen.nn")
                totals["rows"] += c.rows
                totals["wire"] += c.wire_bytes
                totals["payload"] += c.payload_bytes
                totals["cycles"] += c.cycles
                totals["seconds"] += c.seconds  # infer alone, not the check
            after = board.stats()
            model = sum(program_cycles(program, min(program.batch, batch - s))
                        for s in range(0, batch, program.batch)) * calls
            if model != totals["cycles"]:
                raise AssertionError(f"batch {batch}: device counted {totals['cycles']} cycles, "
                                     f"the cycle model {model}")
            rows = totals["rows"]
            ideal = ideal_wire_bytes(program, batch)
            wire_per_row = totals["wire"] / rows
            cycles_per_row = totals["cycles"] / rows
            uart_s = wire_per_row * BITS_PER_BYTE / UART_BAUD + cycles_per_row / config.clock_hz
            sim_cycles = after.cycles - before.cycles
            sim_cps = sim_cycles / (after.cpu_s - before.cpu_s)
            busy = (after.busy_cycles - before.busy_cycles) / sim_cycles
            rows_out.append((batch, totals["payload"] / totals["wire"],
                             totals["payload"] / calls / ideal, rows / totals["seconds"],
                             sim_cps, sim_cycles / totals["wire"], busy, wire_per_row,
                             cycles_per_row, 1 / uart_s))
        computing = compute_rate(board, acc, program, samples=2 if args.quick else 15)
    print()
    print(f"{'batch':>5} {'link eff.':>9} {'ideal':>6} {'inf/s sim':>10} "
          f"{'sim cycles/s':>13} {'cycles/wire B':>13} {'busy':>5} {'wire B/inf':>10} "
          f"{'cycles/inf':>10} {'inf/s 3 Mbaud UART':>18}")
    for batch, eff, ideal, ips, cps, per_byte, busy, wire, cyc, uart in rows_out:
        print(f"{batch:>5} {eff:>9.1%} {ideal:>6.1%} {ips:>10,.0f} {cps:>13,.0f} "
              f"{per_byte:>13.1f} {busy:>5.0%} {wire:>10.1f} {cyc:>10.1f} {uart:>18,.0f}")
    figures = {}
    if computing:
        wall, cpu = np.median(np.array(computing), axis=0)
        figures = {"sim_cycles_per_cpu_s": cpu, "sim_cycles_per_wall_s": wall}
        print(f"\nsimulated cycles per second while the device computes (batch {program.batch}, "
              f"median of {len(computing)} windows): {cpu:,.0f} per CPU second, {wall:,.0f} "
              f"per wall second (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
              "CPUs)")
    else:
        print(f"\nsimulated cycles per second while the device computes: no window fell inside "
              f"a run (batch {program.batch}: each run too short to time)")
    print("\nlink eff.: input and output data bytes / all bytes sent and received (measured); "
          "ideal: the same with one COUNTERS poll per run, from hwgen.throughput's model.\n"
          "sim cycles/s: simulated clock cycles per CPU second of the harness; cycles/wire B: "
          "those cycles per byte on the wire; busy: share of them in which the device "
          "computed.\n"
          f"UART projection: wire bytes x {BITS_PER_BYTE} bits / {UART_BAUD:,} baud + device "
          f"cycles / {config.clock_hz / 1e6:g} MHz per inference, no overlap, no host delays.")
    for batch, eff, _, ips, cps, per_byte, _, wire, cyc, uart in rows_out:
        figures.update({f"batch{batch}_link_efficiency_pct": 100 * eff,
                        f"batch{batch}_inferences_per_s": ips,
                        f"batch{batch}_sim_cycles_per_s": cps,
                        f"batch{batch}_sim_cycles_per_wire_byte": per_byte,
                        f"batch{batch}_wire_bytes_per_inference": wire,
                        f"batch{batch}_cycles_per_inference": cyc,
                        f"batch{batch}_uart_inferences_per_s": uart})
    record_benchmark(__file__, args, argv, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
