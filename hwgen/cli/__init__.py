"""The ``hwgen`` command line, and the composition root of hwgen.

Each subcommand is a module of this package with ``register(subparsers)``: the only place
where the model and compiler (``hwgen``), the host driver (``host``) and the simulators
(``sim``) meet. The library packages never import this one.
"""

import importlib
import sys

from .options import Parser, RunError, UsageError, add_config_options, config_from_args

__all__ = ["UsageError", "add_config_options", "config_from_args", "main"]

#: The subcommands, in the order ``hwgen --help`` lists them: modules of this package.
COMMANDS = ["demo", "generate", "verify", "sim_board", "compile", "infer", "build", "soc", "dse",
            "serve", "train"]


def _parser():
    from hwgen import __version__

    parser = Parser(prog="hwgen",
                    description="Systolic-array neural-network accelerators for FPGAs.")
    parser.add_argument("--version", action="version", version=f"hwgen {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv=None):
    """Run the ``hwgen`` command line; return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(argv)
    # The words after the subcommand: the key of a run's figures in the record (--record).
    args.argv = argv[argv.index(args.command) + 1:] if args.command in argv else []
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"hwgen {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except RunError as exc:
        print(f"hwgen {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"hwgen {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        # The machine's, not the program's: a full disk, a file that vanished. One line.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"hwgen {args.command}: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
