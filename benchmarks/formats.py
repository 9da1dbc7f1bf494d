"""int8 against bfloat16: the weight-stationary arrays alone and the whole devices, built for
the same board and clock, side by side (issue 52).

Each case is a real build (:func:`hwgen.boards.build`) of the int8 array alone
(``top="array"``, :class:`hwgen.boards.tops.ArrayTop`), the bf16 array alone
(``top="bf16-array"``, :class:`hwgen.boards.tops.BF16ArrayTop`), or a whole device of either
dtype (``top="device"``: the core, its buffers and the UART link; the 85F's small preset,
dense networks); the table gives per design
the MACs, LUT4, flip-flops, DSP blocks, LUT4 and DSPs per MAC, Fmax and the peak rate (MACs
x Fmax: one vector a cycle, the tile sums of every column), then the bf16/int8 ratios of each
size built in both formats.

Run ``python benchmarks/formats.py`` (all cases) or ``python benchmarks/formats.py NAME...``;
``--list`` shows the cases; ``--reuse`` reads a case's ``report.json`` from an earlier run
(``build/formats/<case>/``) instead of building it again; ``--record`` writes the figures into
the record (:mod:`hwgen.figures`). ``--quick`` (the tests' smoke run) builds nothing: a bf16
build takes minutes, so it checks a 2x2 bf16 array in the Amaranth simulator against
:func:`hwgen.nn.bf16.bf16_matmul` and says so. ``--accuracy`` builds nothing either: it trains
the demo's MLP and CNN as ``hwgen demo`` does and prints their test accuracy in float, int8
and bf16, from each format's bit-exact reference. ``--training`` trains the demo's 64-32-10
MLP by SGD twice with the same epochs, seed, learning rate and minibatches: in float
(:meth:`hwgen.nn.MLP.fit`) and on bf16 devices (:class:`hwgen.train.Bf16Trainer`: fp32
master weights, every product in bf16 summed in fp32 on in-process devices), and prints both
test accuracies.
"""

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

import numpy as np

from hwgen import boards
from hwgen.figures import add_record_option, benchmark_record, record_benchmark

#: name -> (board, top, rows x cols, clock in Hz, more nextpnr options). The same board and
#: clock for both formats: 50 MHz, which one bf16 element (multiplier latency 3, adder latency
#: 4) meets on an ECP5. The 8x8 bf16 array fills 72 % of the 85F's LUT4: router1 made no
#: headway on it in nine minutes (docs/performance.md), router2 routes it, as it does the bf16
#: device (router1 had not in 40 minutes).
CASES = {
    "ecp5-int8-4x4": ("ulx3s-85f", "array", 4, 50_000_000, ""),
    "ecp5-bf16-4x4": ("ulx3s-85f", "bf16-array", 4, 50_000_000, ""),
    "ecp5-int8-8x8": ("ulx3s-85f", "array", 8, 50_000_000, ""),
    "ecp5-bf16-8x8": ("ulx3s-85f", "bf16-array", 8, 50_000_000, "--router router2"),
    "ecp5-int8-device4x4": ("ulx3s-85f", "device", 4, 50_000_000, "--router router2"),
    "ecp5-bf16-device4x4": ("ulx3s-85f", "device", 4, 50_000_000, "--router router2"),
}
#: The whole devices: the 85F's small preset, dense (the bf16 core's networks so far).
DEVICE_PRESET = "ulx3s-85f-small"
DEVICE_OPTIONS = {"spatial": False, "residual": False}
OUT = Path("build") / "formats"


def run(name, *, seed, reuse):
    """Build case ``name`` (or read its earlier report with ``reuse``); return the report."""
    board_name, top, n, clock_hz, nextpnr_opts = CASES[name]
    out = OUT / name
    if reuse and (out / "report.json").is_file():
        return json.loads((out / "report.json").read_text())
    board = boards.BOARDS[board_name]
    if top == "device":
        config = boards.board_config(board, preset=DEVICE_PRESET, rows=n, cols=n,
                                     clock_hz=clock_hz, dtype=name.split("-")[1],
                                     **DEVICE_OPTIONS)
    else:
        config = boards.board_config(board, rows=n, cols=n, clock_hz=clock_hz)
    # The build's hook for more nextpnr options (hwgen.boards.flow), set for this case only.
    before = os.environ.get("HWGEN_NEXTPNR_OPTS")
    os.environ["HWGEN_NEXTPNR_OPTS"] = nextpnr_opts
    try:
        return boards.build(board, config, out, baud=1_000_000, seed=seed, top=top,
                            log=lambda *a, **k: None)
    finally:
        if before is None:
            del os.environ["HWGEN_NEXTPNR_OPTS"]
        else:
            os.environ["HWGEN_NEXTPNR_OPTS"] = before


def figures_of(report):
    """Return the table's figures of one build's report."""
    res, cfg = report["resources"], report["config"]
    macs = cfg["rows"] * cfg["cols"]
    fmax = report["timing"]["fmax_mhz"] or 0
    return {"macs": macs, "lut": res["lut"]["used"], "ff": res["ff"]["used"],
            "dsp": res["dsp"]["used"], "lut_per_mac": res["lut"]["used"] / macs,
            "dsp_per_mac": res["dsp"]["used"] / macs, "fmax_mhz": fmax,
            "peak_gmacs": macs * fmax / 1e3, "target_mhz": report["timing"]["target_mhz"],
            "pass": report["timing"]["pass"], "build_s": report["times"]["total_s"]}


def print_table(results):
    """Print the designs and the bf16/int8 ratio of each size built in both formats."""
    print(f"{'design':20} {'MACs':>4} {'LUT4':>6} {'FF':>6} {'DSP':>4} {'LUT4/MAC':>8} "
          f"{'DSP/MAC':>7} {'Fmax':>6} {'GMAC/s':>6} {'target':>6} {'build s':>7}")
    for name, f in results.items():
        print(f"{name:20} {f['macs']:4} {f['lut']:6} {f['ff']:6} {f['dsp']:4} "
              f"{f['lut_per_mac']:8.1f} {f['dsp_per_mac']:7.3f} {f['fmax_mhz']:6.1f} "
              f"{f['peak_gmacs']:6.2f} {f['target_mhz']:6g} {f['build_s']:7.1f}"
              + ("" if f["pass"] else "  (timing FAIL)"))
    ratios = {}
    for name, f in results.items():
        other = name.replace("-bf16-", "-int8-")
        if other != name and other in results:
            i = results[other]
            size = name.rsplit("-", 1)[1]
            ratios[size] = {k: f[k] / i[k] if i[k] else 0.0
                            for k in ("lut", "ff", "dsp", "fmax_mhz", "peak_gmacs")}
            r = ratios[size]
            print(f"bf16/int8 {size:>4}: LUT4 x{r['lut']:.1f}, FF x{r['ff']:.1f}, "
                  f"DSP x{r['dsp']:.2f}, Fmax x{r['fmax_mhz']:.2f}, "
                  f"peak MACs/s x{r['peak_gmacs']:.2f}")
    return ratios


def quick_check(vectors=6, seed=1):
    """Run ``vectors`` random tiles through a 2x2 bf16 array in the Amaranth simulator and
    return how many tile sums differ from :func:`hwgen.nn.bf16.bf16_matmul`'s."""
    import ml_dtypes
    from amaranth.sim import Simulator

    from hwgen.device.bf16_array import BF16Array
    from hwgen.nn.bf16 import bf16_matmul

    rng = np.random.default_rng(seed)
    array = BF16Array(2, 2)
    w = rng.standard_normal((2, 2)).astype(ml_dtypes.bfloat16)
    xs = rng.standard_normal((vectors, 2)).astype(ml_dtypes.bfloat16)
    got = []

    async def bench(ctx):
        for r in range(2):
            ctx.set(array.w_valid, 1)
            ctx.set(array.w_row, r)
            for c in range(2):
                ctx.set(array.w_data[c].as_value(), int(w[r, c].view(np.uint16)))
            await ctx.tick()
        ctx.set(array.w_valid, 0)
        for cycle in range(vectors + array.sum_latency + 1):
            ctx.set(array.a_valid, cycle < vectors)     # one vector a cycle: tile sums only
            for r in range(2):
                value = xs[cycle, r].view(np.uint16) if cycle < vectors else 0
                ctx.set(array.a_data[r].as_value(), int(value))
            if ctx.get(array.s_valid):
                got.append([ctx.get(array.s[c].as_value()) for c in range(2)])
            await ctx.tick()

    sim = Simulator(array)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    want = bf16_matmul(xs, w, 0.0, 2).view(np.uint32).tolist()
    if len(got) != vectors:
        return vectors
    return sum(g != [int(v) for v in row] for g, row in zip(got, want, strict=True))


def accuracies(models=("mlp", "cnn"), *, rows=8, epochs=None, seed=0):
    """Return, for each of the demo's ``models`` trained as ``hwgen demo`` trains it, its
    test accuracy in float, in int8 (:func:`hwgen.nn.quantize`, the default design's widths)
    and in bf16 (:func:`hwgen.nn.to_bf16` with ``rows``, the order of the sums), each from the
    bit-exact reference of its format, which the devices equal bit for bit."""
    from hwgen import AcceleratorConfig
    from hwgen.cli.demo import train_model
    from hwgen.nn import quantize, to_bf16

    config = AcceleratorConfig()
    results = {}
    for model in models:
        _, trained, x_train, x_test, y_test = train_model(model, epochs, seed)
        int8 = quantize(trained, x_train, in_bits=config.in_bits, w_bits=config.w_bits,
                        acc_bits=config.acc_bits, mult_bits=config.mult_bits)
        bf16 = to_bf16(trained, rows=rows)
        results[model] = {
            "float": trained.accuracy(x_test, y_test),
            "int8": _accuracy(int8.forward(int8.quantize_input(x_test)), y_test),
            "bf16": _accuracy(bf16.forward(bf16.quantize_input(x_test)), y_test),
        }
    return results


def _accuracy(scores, labels):
    return float(np.mean(np.argmax(scores.reshape(len(labels), -1), axis=1) == labels))


def print_accuracies(results):
    """Print each model's accuracy per format and each format's points below float."""
    print(f"{'model':6} {'float':>7} {'int8':>7} {'bf16':>7} {'int8-float':>10} "
          f"{'bf16-float':>10}  (test accuracy, %; points)")
    for model, a in results.items():
        print(f"{model:6} {100 * a['float']:7.2f} {100 * a['int8']:7.2f} {100 * a['bf16']:7.2f} "
              f"{100 * (a['int8'] - a['float']):+10.2f} {100 * (a['bf16'] - a['float']):+10.2f}")


def training_accuracies(*, epochs=10, seed=0, lr=0.05, momentum=0.9, batch=64, samples=None,
                        devices=1):
    """Train the demo's 64-32-10 MLP by SGD with momentum in float and on ``devices`` bf16
    in-process devices (the same epochs, seed, minibatches and update); return the test
    accuracies (``float``, ``bf16``: the trained bf16 network as the devices run it), the
    bf16 training's seconds and its share of MACs on the devices. ``samples`` cuts the
    training split (the quick run)."""
    from host import Accelerator
    from hwgen import AcceleratorConfig
    from hwgen.nn import MLP, load_digits_split
    from hwgen.train import Bf16Trainer
    from sim.inprocess import InProcessDevice

    x, y, x_test, y_test = load_digits_split()
    x, y = x[:samples], y[:samples]
    fit = {"epochs": epochs, "batch_size": batch, "seed": seed}
    floats = MLP([64, 32, 10], seed=seed).fit(x, y, lr=lr, optimizer="sgd", momentum=momentum,
                                              **fit)
    config = AcceleratorConfig(dtype="bf16")
    with contextlib.ExitStack() as stack:
        opened = [stack.enter_context(Accelerator(InProcessDevice(config), config=config,
                                                  progress=False)) for _ in range(devices)]
        trainer = Bf16Trainer(MLP([64, 32, 10], seed=seed), config, opened, lr=lr,
                              momentum=momentum)
        reports = trainer.fit(x, y, x_test=x_test, y_test=y_test, **fit)
    return {"float": floats.accuracy(x_test, y_test), "bf16": reports[-1].test_accuracy,
            "bf16_seconds": sum(r.seconds for r in reports),
            "bf16_device_share": reports[-1].device_share}


def print_training(results, what):
    """Print the float and bf16 trainings' test accuracies and their difference."""
    print(f"{what}: test accuracy float {100 * results['float']:.2f} %, bf16 on the devices "
          f"{100 * results['bf16']:.2f} % ({100 * (results['bf16'] - results['float']):+.2f} "
          f"points; {results['bf16_seconds']:.1f} s, "
          f"{100 * results['bf16_device_share']:.2f} % of the MACs on the devices)")


def main(argv=None):
    """Run the benchmark; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reuse", action="store_true",
                        help="read a case's report.json from an earlier run, if there is one")
    parser.add_argument("--accuracy", action="store_true",
                        help="only the demo models' accuracy in float, int8 and bf16 (from "
                             "the references; nothing is built)")
    parser.add_argument("--training", action="store_true",
                        help="only the digits MLP trained by SGD in float and on bf16 "
                             "in-process devices (fp32 master weights), test accuracies")
    parser.add_argument("--epochs", type=int, default=10,
                        help="epochs of --training (default 10)")
    parser.add_argument("--quick", action="store_true",
                        help="no build: a 2x2 bf16 array in the simulator against the "
                             "reference (a smoke run)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    if args.list:
        for name, (board, top, n, hz, opts) in CASES.items():
            print(f"{name:20} {n}x{n} {top} on the {board} at {hz / 1e6:g} MHz"
                  + (f" (nextpnr {opts})" if opts else ""))
        return 0
    if args.quick:
        bad = quick_check()
        print(f"quick: a 2x2 bf16 array in the Amaranth simulator, 6 tile sums against "
              f"bf16_matmul: {bad} differ; nothing was built (a bf16 build takes minutes)")
        # The accuracy table's path on the MLP, trained briefly.
        print_accuracies(accuracies(("mlp",), epochs=3, seed=args.seed))
        # The training's path, on 128 samples for one epoch.
        print_training(training_accuracies(epochs=1, samples=128), "quick bf16 training")
        record_benchmark(__file__, args, argv, {"quick_sim_tiles": 6, "quick_sim_differ": bad})
        return 1 if bad else 0
    if args.accuracy:
        results = accuracies(seed=0)
        print_accuracies(results)
        record_benchmark(__file__, args, argv, {f"{model}_{fmt}_accuracy": v
                                                for model, a in results.items()
                                                for fmt, v in a.items()})
        return 0
    if args.training:
        results = training_accuracies(epochs=args.epochs)
        print_training(results, f"digits 64-32-10 MLP, SGD lr 0.05 momentum 0.9, batch 64, "
                                f"{args.epochs} epochs, seed 0")
        record_benchmark(__file__, args, argv, {f"training_{k}": v for k, v in results.items()})
        return 0
    names = args.cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; see --list")
    results = {}
    for name in names:
        results[name] = figures_of(run(name, seed=args.seed, reuse=args.reuse))
    ratios = print_table(results)
    figures = {f"{name}_{k}": v for name, f in results.items() for k, v in f.items()}
    figures |= {f"bf16_over_int8_{size}_{k}": v for size, r in ratios.items()
                for k, v in r.items()}
    # --reuse reads what an earlier run of the same cases measured: the same figures.
    record_benchmark(__file__, args, [w for w in (sys.argv[1:] if argv is None else argv)
                                      if w != "--reuse"], figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
