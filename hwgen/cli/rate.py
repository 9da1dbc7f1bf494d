"""The serial rate options of ``hwgen infer`` and ``hwgen serve``: ``--baud``, ``--board``,
``--build`` (:func:`host.rate.serial_rate`)."""

from .options import BAUD_RANGE, UsageError, number

__all__ = ["add_rate_options", "rate_from_args"]


def add_rate_options(p):
    """Add ``--baud``, ``--board`` and ``--build`` to the parser ``p``."""
    from hwgen.boards import BOARDS

    p.add_argument("--baud", type=number(int, *BAUD_RANGE), metavar="B",
                   help="serial rate of a real port (default: the rate of --build or --board, "
                        "else 3000000, every board's default build)")
    p.add_argument("--board", choices=sorted(BOARDS),
                   help="open the port at the rate of this board's default build (hwgen build "
                        "--board)")
    p.add_argument("--build", metavar="DIR",
                   help="open the port at the rate of the build in DIR (its report.json)")


def rate_from_args(args):
    """Return the serial rate the options give (:func:`host.rate.serial_rate`).

    Raises
    ------
    UsageError
        If ``--build`` names no build report, or more than one of the options is given.
    """
    from host.rate import serial_rate

    given = [f"--{k}" for k in ("baud", "board", "build") if getattr(args, k) is not None]
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)}: give one of them (the serial rate)")
    try:
        return serial_rate(args.baud, build=args.build, board=args.board)
    except ValueError as exc:
        raise UsageError(f"--build {args.build}: {exc}") from None
