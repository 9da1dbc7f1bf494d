"""``hwgen generate``: write the Verilog and manifest of a design."""

import time

from hwgen.config import DTYPES

from .options import UsageError, add_config_options, device_config_from_args, output_dir

__all__ = ["register"]


def _run(args):
    from hwgen.generate import default_out, write_design_files

    config = device_config_from_args(args)
    out = output_dir(args.out if args.out is not None else default_out(config, args.top),
                     "--out")
    start = time.perf_counter()
    try:
        paths = write_design_files(config, out, top=args.top)
    except ValueError as exc:   # a top this configuration cannot make (a bus's address space)
        raise UsageError(f"--top {args.top}: {exc}") from None
    names = [str(p) for p in paths]
    print(f"wrote {', '.join(names[:-1])} and {names[-1]} "
          f"({time.perf_counter() - start:.1f} s, config hash {config.hash})")
    return 0


def register(sub):
    """Add ``hwgen generate``."""
    from hwgen.generate import DEFAULT_TOP, TOPS

    p = sub.add_parser("generate", help="write the Verilog and manifest of a design",
                       description="Write DIR/<name>.v and DIR/<name>.json (configuration, its "
                                   "hash, ports, tool versions) for a design, and for the "
                                   "Wishbone top its register map as DIR/hwgen_regs.h and "
                                   "DIR/hwgen_regs.json. The same parameters give "
                                   "byte-identical files.")
    add_config_options(p, dtypes=DTYPES)
    p.add_argument("--top", default=DEFAULT_TOP, choices=sorted(TOPS),
                   help=f"design to emit (default: {DEFAULT_TOP})")
    p.add_argument("--out", metavar="DIR", help="output folder (default: rtl_out/<name>/)")
    p.set_defaults(func=_run)
