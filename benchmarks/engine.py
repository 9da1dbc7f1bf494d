"""Benchmark of the matmul engine: generation time, simulation speed, utilization.

Run: python benchmarks/engine.py [--quick] [--record [FILE]]

``--quick`` generates and simulates small engines (the tests' smoke run); ``--record`` writes
the figures into the record of figures (:mod:`hwgen.figures`).
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from hwgen.config import AcceleratorConfig
from hwgen.cycles import matmul_timing
from hwgen.figures import add_record_option, benchmark_record, record_benchmark
from hwgen.generate import emit_design
from sim.runner import run_cocotb, simulator_missing


def generation_times(sizes, figures):
    emit_design(AcceleratorConfig(rows=2, cols=2), "engine", "warmup")  # load Yosys once
    for size in sizes:
        cfg = AcceleratorConfig(rows=size, cols=size)
        start = time.perf_counter()
        _, text = emit_design(cfg, "engine", cfg.name)
        elapsed = time.perf_counter() - start
        figures[f"generate_{size}x{size}_s"] = elapsed
        print(f"  generate {size:2d}x{size:<2d} ws: {elapsed:6.2f} s  ({len(text) / 1e6:.2f} MB)")


def simulation_speed(simulator, cfg, shape, figures):
    reason = simulator_missing(simulator)
    if reason:
        print(f"  {simulator}: skipped ({reason})")
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        run_cocotb(cfg, "sim.tb_engine_bench", Path(tmp) / "build", simulator=simulator,
                   optimize=True,
                   env={"HWGEN_SHAPE": ",".join(map(str, shape)), "HWGEN_BENCH_OUT": str(out)})
        r = json.loads(out.read_text())
    if r["rtl_cycles"] != r["model_cycles"]:
        raise AssertionError(f"{simulator}: the engine took {r['rtl_cycles']} cycles, the "
                             f"cycle model {r['model_cycles']}")
    figures[f"{simulator}_cycles_per_s"] = r["rtl_cycles"] / r["wall_s"]
    print(f"  cocotb+{simulator:9s} {cfg.rows}x{cfg.cols} {cfg.dataflow}: "
          f"{r['rtl_cycles'] / r['wall_s']:9,.0f} simulated cycles/s "
          f"({r['rtl_cycles']} cycles in {r['wall_s']:.2f} s; RTL = model: "
          f"{r['rtl_cycles'] == r['model_cycles']})")


def utilization(cfg, m, k, n, figures):
    timing, ideal = matmul_timing(cfg, m, k, n)
    figures[f"{m}x{k}x{n}_{cfg.dataflow}_utilization_pct"] = 100 * ideal / timing.total
    print(f"  {m}x{k}x{n} on {cfg.rows}x{cfg.cols} {cfg.dataflow}: {timing.total} cycles, "
          f"ideal M*ceil(K/R)*ceil(N/C) = {ideal}, utilization {ideal / timing.total:.1%}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true",
                        help="small engines and products (a smoke run)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    figures = {}
    print("Verilog generation (after a warm-up run):")
    generation_times([2, 4] if args.quick else [4, 16, 32], figures)
    shape = (8, 8, 8) if args.quick else (256, 64, 64)
    size = 2 if args.quick else 8
    print(f"Simulation speed, {shape[0]}x{shape[1]}x{shape[2]} product, per-cycle cocotb "
          "drivers:")
    for simulator in ("verilator", "icarus"):
        simulation_speed(simulator, AcceleratorConfig(rows=size, cols=size), shape, figures)
    print("Utilization (cycle model, equal to the RTL's cycle counts):")
    for dataflow in ("ws", "os"):
        utilization(AcceleratorConfig(rows=8, cols=8, dataflow=dataflow), 256, 64, 64, figures)
    for m in (8, 32, 64):
        utilization(AcceleratorConfig(rows=8, cols=8), m, 64, 64, figures)
    record_benchmark(__file__, args, argv, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
