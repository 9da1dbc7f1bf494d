"""Build the gate-level board of finished board builds and print its build time and speed.

    python benchmarks/netlist.py build/ulx3s-12f/<name> [more build folders] [--quick]
                                 [--mlp N | --cnn N] [--record [FILE]]

For each folder (the ``--out`` of ``hwgen build``): the seconds to build the simulation (a
cached one is deleted first), then a random two-layer network (at most 9 wide, to fit small
buffers; a bf16 MLP on a bf16 device) loaded and run on 16 rows over the UART at the build's
baud rate, checked against the NumPy reference, and the simulated cycles per second of the time
spent clocking the model (the harness's run_s). ``--quick`` (the tests' smoke run) keeps a
simulation already built and runs 4 rows; ``--record`` writes the figures into the record
(:mod:`hwgen.figures`).

``--mlp N`` runs the demo's MLP instead (64-32-10, trained and quantized as ``hwgen demo``
trains it, rounded to bf16 on a bf16 device, compiled with the device's argmax at its largest
batch; ``--cnn N`` the demo's CNN, on a spatial device) on the first N test digits through the
host driver at the build's baud rate, checked against the argmax of hwgen.nn's scores, and
prints the inferences per second of simulated time (the N digits over the cycles the board
clocked for them, at the build's clock) and the digits' accuracy. The harness stops clocking
only once the device has been quiet for its partial-frame timeout, so the host's turnarounds
between answer and request count, in cycles of the slow simulation: the count moves by about a
percent between runs.
"""

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

import hwgen
from host import Accelerator
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from sim.bf16_runs import bf16_mlp, bf16_rows
from sim.board import SimulatedBoard
from sim.cases import output_mismatch
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
        net, program, x = _random_case(np.random.default_rng(0), config, rows)
        with Accelerator(board.url, config=config, timeout=120) as acc:
            acc.load(program)
            before = board.stats()
            y = acc.infer(x)
            after = board.stats()
        exact = output_mismatch(y, net.forward(x)) is None
    cycles = after.cycles - before.cycles
    run_s = after.run_s - before.run_s
    return {"config": config.name, "build_s": built, "exact": exact, "cycles": cycles,
            "cycles_per_s": cycles / run_s if run_s else float("nan"),
            "divisor": board.divisor}


def _random_case(rng, config, rows):
    """Return ``(network, program, x)``: a random two-layer network at most 9 wide (raw
    scores) for ``config``'s dtype and ``rows`` input rows (bf16: values over a wide range,
    some of them overflowing)."""
    if config.dtype == "bf16":
        net = bf16_mlp([int(v) for v in rng.integers(2, 10, size=3)], 0, rows=config.rows)
        return net, hwgen.compile(net, config), bf16_rows(net, rows, 0)
    net = random_network(rng, config, layers=2, max_width=9, raw=True)
    return net, hwgen.compile(net, config), random_input(rng, config, rows, net.in_features)


def demo_network(model, config):
    """Return ``(network, test digits, their labels)``: the demo's ``model`` ("mlp" or "cnn",
    :func:`hwgen.cli.models.train_demo`) quantized at ``config``'s widths, as ``hwgen demo``
    makes it (rounded to bf16 on a bf16 design), and the test split quantized for it."""
    from hwgen.cli.models import train_demo
    from hwgen.nn import quantize, to_bf16

    trained, x_train, x_test, y_test = train_demo(model)
    if config.dtype == "bf16":
        net = to_bf16(trained, rows=config.rows)
    else:
        net = quantize(trained, x_train, in_bits=config.in_bits, w_bits=config.w_bits,
                       acc_bits=config.acc_bits, mult_bits=config.mult_bits)
    return net, net.quantize_input(x_test), y_test


def measure_demo(out_dir, model, digits):
    """Return the figures of the demo's ``model`` (:func:`demo_network`) on ``digits`` test
    digits on the gate-level board of build ``out_dir`` (its simulation as cached) as a
    dict."""
    report = json.loads((Path(out_dir) / "report.json").read_text())
    with SimulatedBoard.from_build(out_dir, timeout=600) as board:
        config = board.config
        net, x, labels = demo_network(model, config)
        x, labels = x[:digits], labels[:digits]
        program = hwgen.compile(net, config, output="argmax")
        with Accelerator(board.url, config=config, timeout=600) as acc:
            acc.load(program)
            before = board.stats()
            classes = acc.infer(x)
            after = board.stats()
    cycles = after.cycles - before.cycles
    scores = np.asarray(net.forward(x), dtype=np.float64)
    return {"config": config.name, "exact": bool((classes == scores.argmax(1)).all()),
            "accuracy_pct": 100 * float((classes == labels).mean()), "digits": len(x),
            "batch": program.batch, "cycles": cycles, "baud": report["baud"],
            # The harness counts cycles of the oscillator, the link's clock (a PLL's output is
            # a stand-in that passes it through).
            "inferences_per_s": len(x) * report["link"]["clock_hz"] / cycles}


def main_demo(args, argv, model, digits):
    """``--mlp N`` / ``--cnn N``: the demo's ``model`` on each build's gate-level board."""
    print(f"{'build':40} {'exact':>5} {'digits':>6} {'batch':>5} {'accuracy':>8} "
          f"{'cycles':>9} {'baud':>9} {'inf/s':>7}")
    ok, figures = True, {}
    for out in args.builds:
        f = measure_demo(out, model, digits)
        ok &= f["exact"]
        figures.update({f"{f['config']}_{model}_{k}": f[k] for k in
                        ("exact", "accuracy_pct", "digits", "batch", "cycles", "baud",
                         "inferences_per_s")})
        print(f"{str(out)[-40:]:40} {f['exact']!s:>5} {f['digits']:6d} {f['batch']:5d} "
              f"{f['accuracy_pct']:7.1f}% {f['cycles']:9d} {f['baud']:9d} "
              f"{f['inferences_per_s']:7.0f}")
    if ok:
        record_benchmark(__file__, args, argv, figures)
    return 0 if ok else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs="+", type=Path, help="output folders of hwgen build")
    parser.add_argument("--quick", action="store_true",
                        help="a cached simulation, 4 rows (a smoke run)")
    demo = parser.add_mutually_exclusive_group()
    for model, what in (("mlp", "MLP"), ("cnn", "CNN (a spatial device)")):
        demo.add_argument(f"--{model}", type=int, metavar="N",
                          help=f"the demo's {what} on N test digits (1..360) instead, its "
                               "rate in simulated time")
    add_record_option(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    for model in ("mlp", "cnn"):
        digits = getattr(args, model)
        if digits is None:
            continue
        if not 1 <= digits <= 360:
            parser.error(f"--{model} {digits}: the test split has 360 digits; allowed: 1..360")
        return main_demo(args, argv, model, digits)
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
