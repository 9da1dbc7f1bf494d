"""``hwgen build``: a bitstream for a board with the YoWASP tools."""

import dataclasses
import sys
from pathlib import Path

from hwgen.config import DTYPES, AcceleratorConfig
from hwgen.figures import add_record_option

from .options import (
    BAUD_RANGE,
    UsageError,
    add_config_options,
    input_file,
    number,
    output_dir,
    record_figures,
    record_file,
)

__all__ = ["register"]

# nextpnr takes a signed 32-bit seed.
_SEED_MAX = 2**31 - 1
# The clocks nextpnr may route for, in Hz: those a design's --clock-hz may be.
_PNR_CLOCK_RANGE = (1_000_000, 1_000_000_000)

#: Options left out of a build's key in the record: they change nothing it measures (the
#: report says whether the clock was met).
UNMEASURED = ("--out", "--allow-timing-fail")


def _run(args):
    from hwgen.boards import BOARDS, board_config, build, check_fit, clock_plan
    from hwgen.boards.baud import default_baud, link_plan
    from hwgen.boards.config import preset_of, preset_seed
    from hwgen.boards.flow import check_pnr_clock
    from hwgen.boards.report import report_figures
    from hwgen.device.cores import check_core

    board = BOARDS[args.board]
    record = record_file(args)
    if args.config is not None:
        input_file(args.config, "--config")
    try:
        config = board_config(board, args)
        check_core(config)
        clock_plan(board, config.clock_hz)
        check_fit(board, config)
        if args.baud is None:
            args.baud, note = default_baud(board, config)
            if note is not None:
                print(f"hwgen build: note: {note}", flush=True)
        link_plan(board, config, args.baud)
        check_pnr_clock(board, config, args.pnr_clock_hz)
    except (ValueError, OSError) as exc:  # FitError, PLLError and BaudError are ValueErrors
        raise UsageError(str(exc)) from None
    out = output_dir(args.out if args.out is not None
                     else Path("build") / board.name / config.name, "--out")
    try:
        seed = args.seed if args.seed is not None else preset_seed(board, config)
        if args.seed is None and seed is not None:
            print(f"hwgen build: note: nextpnr seed {seed}, the preset's (the placement its "
                  "recorded build routed with; --seed N for another)", flush=True)
        report = build(board, config, out, baud=args.baud, seed=seed,
                       pnr_clock_hz=args.pnr_clock_hz,
                       log=lambda *a, **k: print(*a, **{"flush": True, **k}))
    except ValueError as exc:  # e.g. a baud rate the clock cannot make
        raise UsageError(str(exc)) from None
    except RuntimeError as exc:
        print(f"hwgen build: error: {exc}", file=sys.stderr)
        return 1
    t = report["timing"]
    res = report["resources"]
    print(", ".join(f"{k} {v['used']}/{v['available']} ({v['percent']}%)"
                    for k, v in res.items()))
    routed = (f" (placed and routed for {t['pnr_target_mhz']:g} MHz)"
              if "pnr_target_mhz" in t else "")
    print(f"Fmax {t['fmax_mhz']} MHz, target {t['target_mhz']:g} MHz{routed}: "
          f"{'PASS' if t['pass'] else 'FAIL'}; {report['times']['total_s']} s in total")
    print(f"wrote {out / report['bitstream']}, {out / 'report.json'}, {out / 'report.md'}")
    print(f"program: cd {out} && {report['program']}; serial port: {report['serial']}")
    print(f"simulate the built netlist first: hwgen sim-board --netlist {out}")
    if record is not None:
        record_figures(args, record, report_figures(report), drop=UNMEASURED,
                       design=preset_of(board, config))
    if not t["pass"]:
        msg = (f"the design misses its {t['target_mhz']:g} MHz clock (Fmax "
               f"{t['fmax_mhz']} MHz); lower --clock-hz or pass --allow-timing-fail")
        if not args.allow_timing_fail:
            print(f"hwgen build: error: {msg}", file=sys.stderr)
            return 1
        print(f"hwgen build: warning: {msg}", file=sys.stderr)
    return 0


def register(sub):
    """Add ``hwgen build``."""
    from hwgen.boards import BOARDS
    from hwgen.boards.catalog import PRESET_NAMES

    p = sub.add_parser(
        "build", help="build a bitstream for a board with the YoWASP tools",
        description="Build the device (accelerator + UART + LEDs) for a board. Design "
                    "options that are not given take the board's preset (not the defaults "
                    "shown below). "
                    "--clock-hz must be a clock the board makes (its oscillator or an exact "
                    "PLL setting).")
    p.add_argument("--board", required=True, choices=sorted(BOARDS))
    p.add_argument("--preset", choices=PRESET_NAMES,
                   help="a named design of the board instead of its preset (the 85F's preset "
                        "holds all of the MLPerf Tiny zoo; ulx3s-85f-small: the 8x8 with small "
                        "buffers at 62.5 MHz; ulx3s-85f-resnet8: the 8x8 design that holds "
                        "ResNet-8 at 84.375 MHz; ulx3s-85f-vww: VWW and the zoo's other CNNs; "
                        "ulx3s-85f-zoo: the 85F's preset, by its former name)")
    add_config_options(p, dtypes=DTYPES)
    # A design option that is not given takes the board's preset, not AcceleratorConfig's
    # default, so tell the two apart.
    p.set_defaults(**{f.name: None for f in dataclasses.fields(AcceleratorConfig)})
    p.add_argument("--baud", type=number(int, *BAUD_RANGE), default=None,
                   help="UART rate (default: the board's USB bridge's, 3000000 on the ULX3S, "
                        "6000000 on the iCEBreaker where its clocks make it, else the fastest "
                        "rate they make); checked against the receivers' tolerance")
    p.add_argument("--out", metavar="DIR",
                   help="output folder (default: build/<board>/<config name>/)")
    p.add_argument("--allow-timing-fail", action="store_true",
                   help="exit 0 even if the design misses its target clock")
    p.add_argument("--seed", type=number(int, 0, _SEED_MAX), help="nextpnr placement seed")
    p.add_argument("--pnr-clock-hz", type=number(int, *_PNR_CLOCK_RANGE), metavar="HZ",
                   help="the clock nextpnr places and routes for (default: the design's "
                        "--clock-hz), e.g. above it for margin; the "
                        "timing passes only if the routed design's Fmax reaches --clock-hz "
                        "(iCE40 and ECP5, a clock a PLL makes)")
    add_record_option(p)
    p.set_defaults(func=_run)
