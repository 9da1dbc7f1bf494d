"""``hwgen dse``: sweep a design space on a Dask cluster and draw its Pareto front."""

import dataclasses
import sys
import textwrap
from pathlib import Path

__all__ = ["register"]

# nextpnr takes a signed 32-bit seed.
_SEED_MAX = 2**31 - 1
# Failure reasons the summary lists, the most frequent first (all are in results.csv).
_REASONS = 3

_EXAMPLES = """\
value lists: 2,4,8 | 2..8 | 2..8:2 (a step) | 64..1024x2 (a factor) | post-lanes: all
examples:
  hwgen dse --board ulx3s-85f --rows 2,4,8 --cols 2,4,8 --post-lanes 1,2,all
  hwgen dse --board icebreaker --rows 1..4 --cols 1..4 --weight-depth 1024,2048 --param-depth 32
  hwgen dse --board icebreaker --rows 2 --cols 2 --tier build --workers 2
  hwgen dse --board ulx3s-12f --scheduler tcp://10.0.0.5:8786 --tier build
"""


def _space(args):
    from hwgen.dse.space import FIELDS, SpaceError, parse_values

    from .options import UsageError

    space = {}
    for field in FIELDS:
        text = getattr(args, f"dse_{field}")
        if text is None:
            continue
        try:
            space[field] = parse_values(field, text)
        except SpaceError as exc:
            raise UsageError(str(exc)) from None
    return space


def _print_summary(rows, out, board):
    from hwgen.dse.pareto import FAMILY_UNITS, cost, fronts

    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    ok = counts.pop("ok", 0)
    failed = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"{len(rows)} points: {ok} ok" + (f", failed: {failed}" if failed else ""))
    reasons = {}
    for r in rows:
        if r["status"] != "ok":
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda item: -item[1])[:_REASONS]:
        print(f"  {count} x {reason}")
    units = FAMILY_UNITS.get(board.family, {})
    front = fronts(rows)["lut"]
    if front:
        print(f"Pareto front, inferences/s against {units.get('lut', 'LUTs')}:")
        for r in front:
            print(f"  {r['name']}: {cost(r, 'lut'):,} {units.get('lut', 'LUTs')}, "
                  f"{cost(r, 'dsp')} DSPs, {r['device_infer_per_s']:,.0f}/s at "
                  f"{r['clock_mhz']:g} MHz (link-bound {r['link_infer_per_s']:,.0f}/s)")
    print(f"wrote {out / 'results.csv'}, {out / 'pareto.md'}, {out / 'pareto.png'}")


def _cmd_dse(args):
    from hwgen.boards import BOARDS
    from hwgen.dse.driver import DSEError, sweep
    from hwgen.dse.model import ModelError
    from hwgen.dse.results import ResultsError

    from .options import UsageError, input_file, output_dir

    space = _space(args)
    for option, path in (("--model", args.model), ("--calib", args.calib)):
        if path is not None:
            input_file(path, option)
    if args.scheduler is not None and args.workers is not None:
        raise UsageError(f"--workers {args.workers}: applies to the local cluster only; the "
                         f"cluster of --scheduler has the workers started for it")
    out = output_dir(args.out or Path("dse_out") / f"{args.board}-{args.tier}", "--out")
    try:
        rows = sweep(args.board, space, model=args.model, calib=args.calib, tier=args.tier,
                     scheduler=args.scheduler, workers=args.workers, out=out,
                     fresh=args.fresh, baud=args.baud, seed=args.seed,
                     progress=not args.no_progress)
    except (ModelError, ResultsError) as exc:
        raise UsageError(str(exc)) from None
    except DSEError as exc:
        print(f"hwgen dse: error: {exc}", file=sys.stderr)
        return 1
    _print_summary(rows, out, BOARDS[args.board])
    return 0


def register(subparsers):
    """Add ``hwgen dse`` to the ``hwgen`` command line."""
    import argparse

    from hwgen.boards import BOARDS
    from hwgen.config import AcceleratorConfig
    from hwgen.dse.points import TIERS
    from hwgen.dse.space import DEFAULT_SPACE

    from .options import BAUD_RANGE, number

    p = subparsers.add_parser(
        "dse", help="sweep design options on a Dask cluster and draw the Pareto front",
        description=textwrap.fill(
                    "Evaluate every combination of the design options given (each a comma "
                    "list or a range) on a board: validity, fit, the model's compilation, "
                    "cycles and throughput (estimate tier), and the real Yosys + nextpnr "
                    "build (build tier). Points run in parallel on a local Dask cluster, or on "
                    "a cluster started with 'dask scheduler' and 'dask worker'. Each finished "
                    "point is appended to DIR/results.csv at once; a rerun skips points "
                    "already there. Options not given take the board's preset.", 79),
        epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--board", required=True, choices=sorted(BOARDS))
    p.add_argument("--model", type=Path, metavar="FILE",
                   help="a saved program (.npz) or an ONNX model (.onnx); default: the demo's "
                        "64-32-10 MLP on the digits")
    p.add_argument("--calib", type=Path, metavar="NPY",
                   help="float calibration inputs (M, K) for an ONNX model (default: the "
                        "digits for 64 inputs, else random normal rows)")
    p.add_argument("--tier", choices=TIERS, default="estimate",
                   help="estimate: fit estimate, compilation and cycles (fast); build: also "
                        "the real build of every point that passes (minutes each)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="a running Dask scheduler, e.g. tcp://HOST:8786 (default: a local "
                        "cluster)")
    p.add_argument("--workers", type=number(int, 1), metavar="N",
                   help="worker processes of the local cluster (default: one per CPU)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="results folder (default: dse_out/<board>-<tier>/)")
    p.add_argument("--fresh", action="store_true",
                   help="start results.csv afresh instead of skipping points already in it")
    p.add_argument("--baud", type=number(int, *BAUD_RANGE),
                   help="UART rate for the link bound and builds (default: each point's as "
                        "hwgen build takes it, the board's bridge rate where the point's "
                        "clocks make it)")
    p.add_argument("--seed", type=number(int, 0, _SEED_MAX), metavar="N",
                   help="nextpnr placement seed (build tier)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    group = p.add_argument_group(
        "design options (each a value list; default: the board's preset, rows and cols "
        + ",".join(map(str, DEFAULT_SPACE["rows"])) + ")")
    for field in dataclasses.fields(AcceleratorConfig):
        flag = "--" + field.name.replace("_", "-")
        kind = "ws,os" if field.name == "dataflow" else "LIST"
        group.add_argument(flag, dest=f"dse_{field.name}", metavar=kind)
    p.set_defaults(func=_cmd_dse)
