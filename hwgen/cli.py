"""The ``hwgen`` command line."""

import argparse
import dataclasses
import importlib
import sys
import tempfile
import time
from pathlib import Path

from .config import DATAFLOWS, AcceleratorConfig

__all__ = ["UsageError", "add_config_options", "config_from_args", "main"]

_SUBCOMMAND_MODULES = ["hwgen.demo", "sim.board", "host.cli", "hwgen.boards"]


class UsageError(Exception):
    """A problem with the user's input: printed as one line, exit status 2."""


def add_config_options(parser):
    """Add one option per :class:`AcceleratorConfig` field (and ``--config JSON``)."""
    group = parser.add_argument_group("design parameters (see hwgen.AcceleratorConfig)")
    for field in dataclasses.fields(AcceleratorConfig):
        flag = "--" + field.name.replace("_", "-")
        if field.name == "dataflow":
            group.add_argument(flag, choices=DATAFLOWS, default=field.default,
                               help="ws: weight-stationary (default), os: output-stationary")
        elif field.name == "post_lanes":
            group.add_argument(flag, type=int, default=None, metavar="N",
                               help="channels requantized per cycle, a divisor of --cols "
                                    "(default: all; fewer save logic, ws only)")
        else:
            group.add_argument(flag, type=int, default=field.default, metavar="N",
                               help=f"default {field.default}")
    group.add_argument("--config", type=Path, metavar="JSON",
                       help="take the parameters from a manifest or config JSON file "
                            "(options given on the command line override it)")


def config_from_args(args):
    """Build the :class:`AcceleratorConfig` the options describe; raise UsageError if bad."""
    import json

    values = {}
    if getattr(args, "config", None):
        try:
            data = json.loads(Path(args.config).read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"--config {args.config}: {exc}") from None
        values.update(data.get("config", data))
    defaults = AcceleratorConfig()
    for field in dataclasses.fields(AcceleratorConfig):
        value = getattr(args, field.name)
        if value != getattr(defaults, field.name) or field.name not in values:
            values[field.name] = value
    try:
        return AcceleratorConfig.from_dict(values)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def cmd_generate(args):
    from .generate import write_design

    config = config_from_args(args)
    start = time.perf_counter()
    v_path, j_path = write_design(config, args.out, top=args.top)
    print(f"wrote {v_path} and {j_path} ({time.perf_counter() - start:.1f} s, "
          f"config hash {config.hash})")
    return 0


def cmd_verify(args):
    from sim.runner import CocotbFailure, run_cocotb, simulator_missing

    config = config_from_args(args)
    reason = simulator_missing(args.simulator)
    if reason:
        raise UsageError(reason)
    benches = [("engine", "sim.tb_engine"), ("accelerator", "sim.tb_network")]
    build_root = Path(args.build_dir) if args.build_dir else Path(tempfile.mkdtemp(
        prefix="hwgen-verify-"))
    env = {"HWGEN_SEED": str(args.seed), "HWGEN_CASES": str(args.cases)}
    failed = 0
    for top, module in benches:
        start = time.perf_counter()
        build_dir = build_root / f"{top}_{args.simulator}"
        print(f"{top}: building and running {module} on {args.simulator} "
              f"({config.name}) ...", flush=True)
        try:
            ran = run_cocotb(config, module, build_dir, top=top, simulator=args.simulator,
                             env=env, waves=args.waves)
        except CocotbFailure as exc:
            failed += 1
            print(f"{top}: FAILED\n{exc}", file=sys.stderr)
            continue
        waves = sorted(build_dir.glob("*.vcd")) + sorted(build_dir.glob("*.fst"))
        print(f"{top}: {ran} cocotb tests passed in {time.perf_counter() - start:.1f} s"
              + "".join(f"; waves: {w}" for w in waves))
    return 1 if failed else 0


def _parser():
    from .generate import DEFAULT_TOP, TOPS

    parser = argparse.ArgumentParser(
        prog="hwgen", description="Systolic-array neural-network accelerators for FPGAs.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("generate", help="write the Verilog and manifest of a design")
    add_config_options(p)
    p.add_argument("--top", default=DEFAULT_TOP, choices=sorted(TOPS),
                   help=f"design to emit (default: {DEFAULT_TOP})")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="output folder (default: rtl_out/<name>/)")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("verify", help="run the cocotb regression of a design")
    add_config_options(p)
    p.add_argument("--simulator", choices=["verilator", "icarus"], default="verilator")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cases", type=int, default=6, metavar="N",
                   help="random products per test (default 6)")
    p.add_argument("--waves", action="store_true", help="record waveforms")
    p.add_argument("--build-dir", type=Path, metavar="DIR",
                   help="keep builds here (default: a temporary folder)")
    p.set_defaults(func=cmd_verify)

    # Subcommands that live next to what they drive; each module has `register_cli(sub)`.
    for module in _SUBCOMMAND_MODULES:
        importlib.import_module(module).register_cli(sub)
    return parser


def main(argv=None):
    """Run the ``hwgen`` command line; return the exit status."""
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"hwgen {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hwgen {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
