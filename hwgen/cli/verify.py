"""``hwgen verify``: the cocotb regression of a design against the NumPy reference."""

import sys
import tempfile
import time

from .options import (
    SEED_MAX,
    UsageError,
    add_config_options,
    config_from_args,
    number,
    output_dir,
)

__all__ = ["register"]

# The engine bench, then the whole accelerator running random networks.
_BENCHES = [("engine", "sim.tb_engine"), ("accelerator", "sim.tb_network")]


def _run(args):
    from sim.runner import CocotbFailure, run_cocotb, simulator_missing

    config = config_from_args(args)
    reason = simulator_missing(args.simulator)
    if reason:
        raise UsageError(reason)
    if args.build_dir is not None:
        build_root = output_dir(args.build_dir, "--build-dir")
    else:
        from pathlib import Path

        build_root = Path(tempfile.mkdtemp(prefix="hwgen-verify-"))
    env = {"HWGEN_SEED": str(args.seed), "HWGEN_CASES": str(args.cases)}
    failed = 0
    for top, module in _BENCHES:
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


def register(sub):
    """Add ``hwgen verify``."""
    p = sub.add_parser("verify", help="run the cocotb regression of a design",
                       description="Build the design and run the cocotb regression against "
                                   "the NumPy reference (random shapes, idle cycles, "
                                   "backpressure, extreme operands, the cycle model); exit 1 "
                                   "on any mismatch.")
    add_config_options(p)
    p.add_argument("--simulator", choices=["verilator", "icarus"], default="verilator")
    p.add_argument("--seed", type=number(int, 0, SEED_MAX), default=1,
                   help="random seed (default 1)")
    p.add_argument("--cases", type=number(int, 1, 1000), default=6, metavar="N",
                   help="random products per test, 1..1000 (default 6)")
    p.add_argument("--waves", action="store_true", help="record waveforms")
    p.add_argument("--build-dir", metavar="DIR",
                   help="keep builds here (default: a temporary folder)")
    p.set_defaults(func=_run)
