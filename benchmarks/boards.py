"""Build a few designs per board and print Fmax, LUT and DSP per MAC, block RAM and build time.

The build time is split into Yosys, nextpnr and nextpnr's own phases: placement (HeAP),
its simulated-annealing refinement (SA) and routing.

Run ``python benchmarks/boards.py`` (all cases) or ``python benchmarks/boards.py NAME...``;
``--list`` shows the cases; ``--quick`` builds the smallest, ``ice40-array-2x2`` (the tests'
smoke run); ``--record`` writes the figures into the record (:mod:`hwgen.figures`). Each case
is a real ``hwgen build`` (the same code path), so the YoWASP tools must be installed; the
first run of each tool compiles its WebAssembly (about a minute). Results go to
``build/bench/<case>/`` with the usual ``report.json``/``report.md``.
"""

import argparse
import sys
import time
from pathlib import Path

from hwgen import boards
from hwgen.figures import add_record_option, benchmark_record, record_benchmark

# name -> (board, top, design options, what it measures). "array" builds the systolic array
# alone (boards.ArrayTop), "device" the whole device as `hwgen build` does.
CASES = {
    "ice40-array-2x2": ("icebreaker", "array", {"rows": 2, "cols": 2, "clock_hz": 48_000_000},
                        "2x2 int8 array alone, 4 MACs on 2 SB_MAC16 (the smoke run)"),
    "ecp5-array-4x4": ("ulx3s-85f", "array", {"rows": 4, "cols": 4, "clock_hz": 150_000_000},
                       "4x4 int8 array alone, registered MULT18X18D"),
    "ecp5-array-8x8": ("ulx3s-85f", "array", {"rows": 8, "cols": 8, "clock_hz": 150_000_000},
                       "8x8 int8 array alone, registered MULT18X18D"),
    "ice40-array-4x4": ("icebreaker", "array", {"rows": 4, "cols": 4, "clock_hz": 48_000_000},
                        "4x4 int8 array alone, 16 MACs on 8 SB_MAC16"),
    "icebreaker-4x4": ("icebreaker", "device", {},
                       "whole device, 4x4 int8, one requantization lane (board preset)"),
    "ulx3s-12f-2x2": ("ulx3s-12f", "device",
                      {"rows": 2, "cols": 2, "acc_bits": 20, "max_k": 16, "mult_bits": 8,
                       "act_depth": 256, "weight_depth": 64, "out_depth": 64, "acc_depth": 32,
                       "param_depth": 8, "clock_hz": 50_000_000},
                      "whole device, 2x2, small buffers"),
    "ulx3s-12f-4x4": ("ulx3s-12f", "device", {},
                      "whole device, 4x4 int8 (board preset): the build-time target"),
    "ulx3s-85f-8x8": ("ulx3s-85f", "device", {},
                      "whole device, 8x8 int8, the zoo's buffers (board preset)"),
}


def _command(name, board, top, options):
    if top == "array":
        # The array alone has no `hwgen build` equivalent.
        return f"python benchmarks/boards.py {name}"
    opts = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in options.items())
    return f"hwgen build --board {board}" + (f" {opts}" if opts else "")


def run(name, seed):
    """Build case ``name`` and return its report."""
    board_name, top, options, _ = CASES[name]
    board = boards.BOARDS[board_name]
    config = boards.board_config(board, **options)
    out = Path("build") / "bench" / name
    return boards.build(board, config, out, baud=1_000_000, seed=seed, top=top,
                        log=lambda *a, **k: None)


def main(argv=None):
    """Run the benchmark; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true",
                        help="the smallest case, ice40-array-2x2 (a smoke run)")
    add_record_option(parser)
    args = parser.parse_args(argv)
    benchmark_record(parser, args)
    if args.list:
        for name, (board, top, options, what) in CASES.items():
            print(f"{name:16} {what}\n{'':16} {_command(name, board, top, options)}")
        return 0
    names = ["ice40-array-2x2"] if args.quick else args.cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; see --list")
    header = (f"{'case':16} {'MACs':>4} {'Fmax':>7} {'target':>6} {'LUT':>6} {'LUT/MAC':>7} "
              f"{'DSP':>4} {'DSP/MAC':>7} {'BRAM':>5} {'time s':>6} {'yosys':>5} {'pnr':>5} "
              f"{'place':>5} {'SA':>5} {'route':>5}")
    print(header)
    figures = {}
    for name in names:
        start = time.perf_counter()
        rep = run(name, args.seed)
        res, t = rep["resources"], rep["timing"]
        cfg = rep["config"]
        macs = cfg["rows"] * cfg["cols"]
        print(f"{name:16} {macs:4} {t['fmax_mhz'] or 0:7.1f} {t['target_mhz']:6g} "
              f"{res['lut']['used']:6} {res['lut']['used'] / macs:7.1f} {res['dsp']['used']:4} "
              f"{res['dsp']['used'] / macs:7.3f} {res['bram']['used']:5} "
              f"{time.perf_counter() - start:6.1f} {rep['times']['yosys_s']:5.1f} "
              f"{rep['times']['nextpnr_s']:5.1f} "
              + " ".join(f"{rep['nextpnr_phases_s'].get(k, 0):5.1f}"
                         for k in ("place", "refine", "route")), flush=True)
        board_name, top, options, _ = CASES[name]
        print(f"{'':16} {_command(name, board_name, top, options)}   "
              f"({'PASS' if t['pass'] else 'FAIL'} at {t['target_mhz']:g} MHz)", flush=True)
        figures.update({f"{name}_{k}": v for k, v in {
            "fmax_mhz": t["fmax_mhz"] or 0, "target_mhz": t["target_mhz"], "pass": t["pass"],
            "lut": res["lut"]["used"], "lut_per_mac": res["lut"]["used"] / macs,
            "dsp": res["dsp"]["used"], "bram": res["bram"]["used"],
            "build_s": rep["times"]["total_s"]}.items()})
    record_benchmark(__file__, args, argv, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
