"""Benchmark of the whole-network accelerator: utilization and model-vs-RTL cycles.

Run: python benchmarks/network.py [--quick] [--record [FILE]]

Each network is compiled for an 8x8 int8 weight-stationary accelerator, run on the emitted
Verilog under cocotb + Verilator (checked bit-exact against hwgen.nn), and the device's own
cycle counter is compared with the cycle model. Utilization is useful multiply-accumulates
(M * sum K*N) over rows * cols * cycles. ``--quick`` runs one small network on a 2x2 design (the
tests' smoke run); ``--record`` writes the figures into the record (:mod:`hwgen.figures`).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import hwgen
from hwgen.config import AcceleratorConfig
from hwgen.cycles import program_cycles
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from sim.netgen import random_input, random_network
from sim.runner import run_cocotb

CONFIG = AcceleratorConfig(rows=8, cols=8, act_depth=16384, weight_depth=8192,
                           param_depth=64, acc_depth=256, out_depth=8192)
#: (key in the record, title, widths, batch)
CASES = [
    ("gemm", "(a) GEMM layer 256x256x256", [256, 256], 256),
    ("mlp", "(b) MLP 64-32-10", [64, 32, 10], 256),
    ("jet", "(c) MLP 16-64-32-32-5 (jet tagging)", [16, 64, 32, 32, 5], 256),
]
QUICK_CONFIG = AcceleratorConfig(rows=2, cols=2, act_depth=256, weight_depth=256,
                                 param_depth=16, acc_depth=16, out_depth=64)
QUICK_CASES = [("mlp", "MLP 8-4-3", [8, 4, 3], 4)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small network (a smoke run)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    config, cases = (QUICK_CONFIG, QUICK_CASES) if args.quick else (CONFIG, CASES)
    rng = np.random.default_rng(0)
    figures = {}
    print(f"accelerator: {config.rows}x{config.cols} {config.dataflow}, int{config.in_bits}, "
          "cocotb + Verilator")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for key, title, widths, m in cases:
            net = random_network(rng, config, widths=widths, raw=True)
            prog = hwgen.compile(net, config, batch=m)
            x = random_input(rng, config, m, widths[0])
            prog.save(tmp / "p.npz")
            np.save(tmp / "x.npy", x)
            np.save(tmp / "y.npy", net.forward(x))
            out = tmp / "r.json"
            run_cocotb(config, "sim.tb_network_bench", tmp / "build", top="accelerator",
                       optimize=True,
                       env={"HWGEN_PROGRAM": str(tmp / "p.npz"), "HWGEN_INPUT": str(tmp / "x.npy"),
                            "HWGEN_EXPECTED": str(tmp / "y.npy"), "HWGEN_BENCH_OUT": str(out)})
            r = json.loads(out.read_text())
            useful = m * prog.macs_per_row
            util = useful / (config.rows * config.cols * r["cycles"])
            model = program_cycles(prog, m)
            if r["cycles"] != model:
                raise AssertionError(f"{title}: the device took {r['cycles']} cycles, the "
                                     f"cycle model {model}")
            figures.update({f"{key}_cycles": r["cycles"], f"{key}_utilization_pct": 100 * util,
                            f"{key}_sim_cycles_per_s": r["cycles"] / r["run_wall_s"]})
            print(f"  {title}, batch {m}: RTL {r['cycles']} cycles, model {model} "
                  f"(error {r['cycles'] - model}), utilization {util:.1%} "
                  f"(array busy {r['busy_cycles'] / r['cycles']:.1%}); "
                  f"{r['cycles'] / r['run_wall_s']:,.0f} simulated cycles/s")
    record_benchmark(__file__, args, argv, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
