"""Benchmark of hwgen.train: the digits MLP trained on 1 and 2 simulated boards against NumPy
float training with the same hyperparameters.

Run: python benchmarks/train.py [--epochs E] [--batch B] [--lr LR] [--momentum M]
     [--hidden H] [--boards 1,2] [--quick] [--record [FILE]] [design options, as for hwgen
     generate]

The float baseline is :meth:`hwgen.nn.MLP.fit` with ``optimizer="sgd"`` (the same update rule,
seed, minibatches and initial weights as :class:`hwgen.train.Trainer`). Each device run trains
a fresh MLP on N simulated boards (``sim.board.SimulatedBoard``, each its own process, over
TCP) of the default 8x8 int8 design (or the design the options describe) and prints:

- the test accuracy of the trained quantized network, as the boards run it, and of the
  trained float weights (on the host, for comparison with the float baseline);
- the share of the training's multiply-accumulates run on the boards (the rest: the host's
  one calibration pass), the MACs the boards' own counters report, device cycles, wire bytes;
- the wall time, and whether the weights on N boards are bit-identical to those on 1.

Targets: test accuracy >= 95 %, within 2 points of the float training; >= 95 % of the
training's MACs on the devices.
"""

import argparse
import contextlib
import os
import shlex
import sys
import time

import numpy as np

from host import Accelerator
from hwgen.cli import UsageError, add_config_options, config_from_args
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from hwgen.nn import MLP, load_digits_split
from hwgen.train import Trainer
from sim.board import SimulatedBoard


def float_baseline(args, data):
    x_train, y_train, x_test, y_test = data
    start = time.perf_counter()
    mlp = MLP([64, args.hidden, 10], seed=args.seed).fit(
        x_train, y_train, epochs=args.epochs, batch_size=args.batch, lr=args.lr,
        optimizer="sgd", momentum=args.momentum, seed=args.seed)
    return {"name": "NumPy float (host)", "test": mlp.accuracy(x_test, y_test),
            "float_test": mlp.accuracy(x_test, y_test), "share": 0.0, "macs": 0,
            "issued": 0, "cycles": 0, "wire": 0, "seconds": time.perf_counter() - start,
            "weights": None, "loss": mlp.history[-1]}


def on_boards(args, config, data, n):
    x_train, y_train, x_test, y_test = data
    with contextlib.ExitStack() as stack:
        boards = [stack.enter_context(SimulatedBoard(config)) for _ in range(n)]
        devices = [stack.enter_context(Accelerator(b.url, config=config)) for b in boards]
        mlp = MLP([64, args.hidden, 10], seed=args.seed)
        trainer = Trainer(mlp, config, devices, lr=args.lr, momentum=args.momentum)
        start = time.perf_counter()
        reports = trainer.fit(x_train, y_train, epochs=args.epochs, batch_size=args.batch,
                              seed=args.seed, x_test=x_test, y_test=y_test,
                              on_epoch=lambda r: print(f"  {n} board(s): {r.line()}",
                                                       flush=True))
        seconds = time.perf_counter() - start
    device = sum(r.device_macs for r in reports)
    host = sum(r.host_macs for r in reports)
    return {"name": f"hwgen.train, {n} board(s)", "test": reports[-1].test_accuracy,
            "float_test": mlp.accuracy(x_test, y_test), "share": device / (device + host),
            "macs": device + host, "issued": sum(r.issued_macs for r in reports),
            "cycles": sum(r.cycles for r in reports),
            "wire": sum(r.wire_bytes for r in reports), "seconds": seconds,
            "weights": [p.copy() for p in trainer.optimizer.params], "loss": reports[-1].loss}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10, help="default 10")
    parser.add_argument("--batch", type=int, default=64, help="default 64")
    parser.add_argument("--lr", type=float, default=0.05, help="default 0.05")
    parser.add_argument("--momentum", type=float, default=0.9, help="default 0.9")
    parser.add_argument("--hidden", type=int, default=32, help="hidden width (default 32)")
    parser.add_argument("--seed", type=int, default=0, help="default 0")
    parser.add_argument("--boards", default="1,2", help="board counts to run (default 1,2)")
    parser.add_argument("--quick", action="store_true",
                        help="one epoch of 128 training digits, a hidden layer of 8, one "
                             "board (a smoke run)")
    add_record_option(parser)
    add_config_options(parser)  # default: the default design, 8x8 int8 ws at 50 MHz
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    if args.quick:
        args.epochs, args.hidden, args.boards = 1, 8, "1"
    try:
        config = config_from_args(args)
        counts = [int(n) for n in args.boards.split(",")]
        if min(counts) < 1 or args.epochs < 1 or args.batch < 1:
            raise UsageError("--boards, --epochs and --batch must be at least 1")
    except (UsageError, ValueError) as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        return 2
    print("command: python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"digits MLP 64-{args.hidden}-10, SGD lr {args.lr:g} momentum {args.momentum:g}, "
          f"batch {args.batch}, {args.epochs} epochs, seed {args.seed}; accelerator "
          f"{config.name}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
          flush=True)
    data = load_digits_split()
    if args.quick:
        x_train, y_train, x_test, y_test = data
        data = (x_train[:128], y_train[:128], x_test[:64], y_test[:64])
    results = [float_baseline(args, data)]
    results += [on_boards(args, config, data, n) for n in counts]
    print()
    print(f"{'':<26} {'test acc':>8} {'float w.':>8} {'on devices':>10} {'train MACs':>12} "
          f"{'counted':>12} {'cycles':>11} {'wire MB':>8} {'wall s':>7} {'identical':>9}")
    first = results[1]["weights"] if len(results) > 1 else None
    for r in results:
        same = "-" if r["weights"] is None else (
            "yes" if all(np.array_equal(a, b) for a, b in zip(r["weights"], first,
                                                               strict=True)) else "NO")
        print(f"{r['name']:<26} {r['test']:>8.2%} {r['float_test']:>8.2%} {r['share']:>10.2%} "
              f"{r['macs']:>12,} {r['issued']:>12,} {r['cycles']:>11,} {r['wire'] / 1e6:>8.2f} "
              f"{r['seconds']:>7.1f} {same:>9}")
    print("\ntest acc: the trained network as the devices run it (int8 on the boards); float w.: "
          "the trained float weights on the host; on devices: share of the training's MACs "
          "(forward, dW, dX) run on the boards, the rest is the host's one calibration pass; "
          "counted: the boards' own MAC counters (partial tiles padded); identical: weights "
          f"bit-identical to the run on {counts[0]} board(s).")
    base = results[0]["test"]
    for r in results[1:]:
        ok = r["test"] >= 0.95 and base - r["test"] <= 0.02 and r["share"] >= 0.95
        print(f"{r['name']}: {'meets' if ok else 'MISSES'} the targets (test >= 95 %, within 2 "
              f"points of float {base:.2%}, >= 95 % of MACs on the devices)")
    figures = {"float_test_accuracy_pct": 100 * base, "float_s": results[0]["seconds"]}
    for n, r in zip(counts, results[1:], strict=True):
        figures.update({f"boards{n}_test_accuracy_pct": 100 * r["test"],
                        f"boards{n}_device_share_pct": 100 * r["share"],
                        f"boards{n}_macs": r["macs"], f"boards{n}_cycles": r["cycles"],
                        f"boards{n}_wall_s": r["seconds"]})
    record_benchmark(__file__, args, argv, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
