"""Instructions per simulated cycle of the simulated board, counted by callgrind.

Run: python benchmarks/board_callgrind.py [--batches N] [--quick] [--record [FILE]]
                                          [design options, as for hwgen generate]

The simulated board (``sim.board``: the device's Verilog under Verilator) runs under
``valgrind --tool=callgrind`` while ``host.Accelerator`` loads the link benchmark's MLP
64-32-10 (random int8 weights, raw logits) and runs ``--batches`` calls of 256 rows (default 2),
each checked bit-exact against ``QuantizedNetwork.forward``. It prints the instructions the
harness executed (start-up included), the simulated cycles and their quotient. Unlike cycles
per second, the count does not depend on the machine's load. ``--quick`` (the tests' smoke run)
takes one call of 16 rows of an MLP 24-16-10; ``--record`` writes the figures into the record
(:mod:`hwgen.figures`).
"""

import argparse
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from host import Accelerator
from hwgen.cli import UsageError, add_config_options, config_from_args
from hwgen.cli.options import number
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from sim.board import SimulatedBoard
from sim.netgen import compiled_mlp, random_input

WIDTHS = [64, 32, 10]
QUICK_WIDTHS = [24, 16, 10]
_TOTAL = re.compile(r"^summary:\s+(\d+)", re.M)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=number(int, 1), default=2, metavar="N",
                        help="infer calls of 256 rows (default 2)")
    parser.add_argument("--quick", action="store_true",
                        help="one call of 16 rows of a smaller MLP (a smoke run)")
    add_record_option(parser)
    add_config_options(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    if shutil.which("valgrind") is None:
        print("board_callgrind.py: error: valgrind is not on PATH (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    widths, batches, rows = (QUICK_WIDTHS, 1, 16) if args.quick else (WIDTHS, args.batches, 256)
    try:
        config = config_from_args(args)
        rng, net, program = compiled_mlp(config, widths)
    except (UsageError, ValueError) as exc:
        print(f"board_callgrind.py: error: {exc}", file=sys.stderr)
        return 2
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"network: MLP {'-'.join(map(str, widths))}, raw logits; accelerator {config.name}; "
          f"a load and {batches} call(s) of {rows} rows under callgrind")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        launcher = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        with SimulatedBoard(config, log=lambda line: print(line, flush=True), timeout=120,
                            launcher=launcher) as board, \
                Accelerator(board.url, config=config, timeout=60) as acc:
            acc.load(program)
            for _ in range(batches):
                x = random_input(rng, config, rows, widths[0])
                if not np.array_equal(acc.infer(x), net.forward(x)):
                    raise AssertionError("the device's output differs from hwgen.nn")
            stats = board.stats()
        # (callgrind writes its counts when the harness exits, as the board closes.)
        found = _TOTAL.search(out.read_text())
    if found is None:
        print("board_callgrind.py: error: no instruction total in callgrind's output",
              file=sys.stderr)
        return 1
    instructions = int(found.group(1))
    print(f"\n{instructions:,} instructions for {stats.cycles:,} simulated cycles "
          f"({stats.busy_cycles / stats.cycles:.0%} of them busy): "
          f"{instructions / stats.cycles:,.0f} instructions per simulated cycle")
    record_benchmark(__file__, args, argv, {
        "instructions": instructions, "sim_cycles": stats.cycles,
        "instructions_per_sim_cycle": instructions / stats.cycles})
    return 0


if __name__ == "__main__":
    sys.exit(main())
