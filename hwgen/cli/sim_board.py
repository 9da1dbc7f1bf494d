"""``hwgen sim-board``: serve a simulated device (or a build's netlist) on a TCP port."""

import contextlib
import sys

from hwgen.config import DTYPES, AcceleratorConfig

from .options import (
    UsageError,
    add_config_options,
    device_config_from_args,
    number,
    output_dir,
    say,
)

__all__ = ["register"]


def _run(args):
    from sim.board import SimulatedBoard

    config = device_config_from_args(args)
    if args.netlist is not None:
        return _serve_netlist(args, config)
    if args.uart:
        from hwgen.device import Device, Link

        try:
            Device(config, link=Link.UART)
        except ValueError as exc:
            raise UsageError(f"--uart: {exc}") from None
    cache = output_dir(args.cache_dir, "--cache-dir") if args.cache_dir is not None else None
    board = SimulatedBoard(config, port=args.port, uart=args.uart, build_dir=cache, log=say)
    return _serve(board, "UART pins" if args.uart else "byte streams")


def _serve_netlist(args, config):
    from sim.board import NetlistError, SimulatedBoard

    if config != AcceleratorConfig() or args.uart or args.cache_dir is not None:
        raise UsageError("--netlist takes the design from DIR/report.json and always uses the "
                         "UART pins; leave out the design options, --uart and --cache-dir")
    try:
        board = SimulatedBoard.from_build(args.netlist, port=args.port, log=say)
    except NetlistError as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    return _serve(board, f"the netlist of {args.netlist}, UART pins")


def _serve(board, link):
    """Start ``board`` and serve until Ctrl-C; return the exit status."""
    from sim.board import BoardError

    config = board.config
    try:
        board.start()
    except BoardError as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    except OSError as exc:
        raise UsageError(f"cannot start the simulated board: {exc}") from None
    with contextlib.closing(board):
        print(f"serving {config.name} on {board.url}", flush=True)
        if board.divisor is not None:
            link += f", {board.divisor} cycles per bit"
        say(f"config hash {config.hash}, {link}; Ctrl-C stops")
        try:
            code = board.process.wait()
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
            return 0
        raise UsageError(f"the simulated board exited unexpectedly ({code})"
                         f"{board.stderr_tail()}")


def register(sub):
    """Add ``hwgen sim-board``."""
    p = sub.add_parser(
        "sim-board", help="serve a simulated device on a TCP port (until Ctrl-C)",
        description="Build the device of a design under Verilator (cached) and serve its byte "
                    "link on socket://127.0.0.1:PORT, which hosts open like a serial port.")
    add_config_options(p, dtypes=DTYPES)
    p.add_argument("--port", type=number(int, 0, 65535), default=0, metavar="P",
                   help="TCP port on 127.0.0.1, 0..65535 (default 0: any free port, printed)")
    p.add_argument("--uart", action="store_true",
                   help="simulate the UART pins (bit by bit) instead of the byte streams")
    p.add_argument("--netlist", metavar="DIR",
                   help="serve the synthesized netlist of `hwgen build --out DIR` instead "
                        "(gate level, UART pins; the design comes from DIR/report.json)")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="folder of cached boards (default $HWGEN_CACHE_DIR/boards, else "
                        "$XDG_CACHE_HOME/hwgen/boards or ~/.cache/hwgen/boards)")
    p.set_defaults(func=_run)
