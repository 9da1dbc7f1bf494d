"""Benchmark of the whole-network accelerator: utilization and model-vs-RTL cycles.

Run: python benchmarks/network.py

Each network is compiled for an 8x8 int8 weight-stationary accelerator, run on the emitted
Verilog under cocotb + Verilator (checked bit-exact against hwgen.nn), and the device's own
cycle counter is compared with the cycle model. Utilization is useful multiply-accumulates
(M * sum K*N) over rows * cols * cycles.
"""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

import hwgen
from hwgen.config import AcceleratorConfig
from hwgen.cycles import program_cycles
from sim.netgen import random_input, random_network
from sim.runner import run_cocotb

CONFIG = AcceleratorConfig(rows=8, cols=8, act_depth=16384, weight_depth=8192,
                           param_depth=64, acc_depth=256, out_depth=8192)
CASES = [
    ("(a) GEMM layer 256x256x256", [256, 256], 256),
    ("(b) MLP 64-32-10", [64, 32, 10], 256),
    ("(c) MLP 16-64-32-32-5 (jet tagging)", [16, 64, 32, 32, 5], 256),
]


def main():
    rng = np.random.default_rng(0)
    print(f"accelerator: {CONFIG.rows}x{CONFIG.cols} {CONFIG.dataflow}, int{CONFIG.in_bits}, "
          "cocotb + Verilator")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for title, widths, m in CASES:
            net = random_network(rng, CONFIG, widths=widths, raw=True)
            prog = hwgen.compile(net, CONFIG, batch=m)
            x = random_input(rng, CONFIG, m, widths[0])
            prog.save(tmp / "p.npz")
            np.save(tmp / "x.npy", x)
            np.save(tmp / "y.npy", net.forward(x))
            out = tmp / "r.json"
            run_cocotb(CONFIG, "sim.tb_network_bench", tmp / "build", top="accelerator",
                       optimize=True,
                       env={"HWGEN_PROGRAM": str(tmp / "p.npz"), "HWGEN_INPUT": str(tmp / "x.npy"),
                            "HWGEN_EXPECTED": str(tmp / "y.npy"), "HWGEN_BENCH_OUT": str(out)})
            r = json.loads(out.read_text())
            useful = m * prog.macs_per_row
            util = useful / (CONFIG.rows * CONFIG.cols * r["cycles"])
            model = program_cycles(prog, m)
            print(f"  {title}, batch {m}: RTL {r['cycles']} cycles, model {model} "
                  f"(error {r['cycles'] - model}), utilization {util:.1%} "
                  f"(array busy {r['busy_cycles'] / r['cycles']:.1%}); "
                  f"{r['cycles'] / r['run_wall_s']:,.0f} simulated cycles/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
