"""``hwgen serve``: share a board's serial link on a TCP port, one client at a time."""

import signal
import sys

from .options import UsageError, number, read_key_file, say
from .rate import add_rate_options, rate_from_args

__all__ = ["register"]


def _run(args):
    import serial

    from host.auth import KeyRequired
    from host.serve import POLL_S, BoardServer

    key = read_key_file(args.key_file)
    # With a key, the server is on the network: report every client (an access log).
    server = BoardServer(args.device, host=args.host, port=args.port,
                         baudrate=rate_from_args(args),
                         log=say if args.verbose or key else None, key=key)
    try:
        server.start()
    except KeyRequired as exc:
        raise UsageError(str(exc)) from None
    except serial.SerialException as exc:
        raise UsageError(f"--device {args.device}: cannot open it: {exc}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc}") from None

    def stop(signum, frame):
        server.close()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        print(f"serving {args.device} on {server.url}", flush=True)
        say("one client at a time; Ctrl-C stops")
        while not server.wait(POLL_S):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        signal.signal(signal.SIGTERM, previous)
    if server.error is not None:
        print(f"hwgen serve: error: {server.error}", file=sys.stderr)
        return 1
    say("stopped")
    return 0


def register(sub):
    """Add ``hwgen serve``."""

    p = sub.add_parser(
        "serve", help="share a board's serial link on a TCP port (one client at a time)",
        description="Bridge a TCP port to the device at --device, byte for byte, so that hosts "
                    "on other machines open the board as socket://HOST:PORT (host.Accelerator, "
                    "host.AcceleratorPool, hwgen infer --url). One client at a time; another is "
                    "refused with a clear error. Beyond loopback, clients must hold the key of "
                    "--key-file (key=, hwgen infer --key-file). Stops on Ctrl-C or SIGTERM, "
                    "releasing the port.")
    p.add_argument("--device", required=True, metavar="URL",
                   help="pyserial URL of the board: /dev/ttyUSB1, COM3, socket://... (a "
                        "simulated board)")
    p.add_argument("--port", type=number(int, 0, 65535), default=0, metavar="P",
                   help="TCP port to listen on, 0..65535 (default 0: any free port, printed)")
    p.add_argument("--host", default="127.0.0.1", metavar="H",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: "
                        "every interface, which needs --key-file)")
    p.add_argument("--key-file", metavar="PATH",
                   help="shared key (the file's bytes, at least 16, a file only its owner may "
                        "read): every client must prove it holds the same key (HMAC-SHA256 "
                        "challenge-response) before its bytes reach the board; required unless "
                        "--host is a loopback address; every client is then reported on stderr")
    add_rate_options(p)
    p.add_argument("--verbose", action="store_true",
                   help="report each client that connects, leaves or is refused (on stderr; "
                        "always with --key-file)")
    p.set_defaults(func=_run)
