"""``hwgen infer``: run a compiled program on a device from the command line.

.. code-block:: sh

    hwgen sim-board --rows 8 --cols 8 &                 # or a board on /dev/ttyUSB1
    hwgen infer --url socket://127.0.0.1:PORT --program mlp.npz --input x.npy --output y.npy

``--input`` holds integers of the program's input shape: rows ``(M, K)``, or NHWC images ``(M,
H, W, C)`` for a network whose first layer is spatial; ``--output`` gets the network's outputs,
``(M, N)`` or ``(M, H', W', C')``; with ``--probabilities``, the network's final Softmax,
LogSoftmax or Sigmoid applied on the host (float64); with ``--output-mode argmax``, each
sample's class index ``(M,)``, with ``--output-mode top_k --k K`` its ``K`` best in descending
order ``(M, K)`` (picked on the device where it can: one or two bytes per index on the wire).
``--key-file`` opens a board that ``hwgen serve --key-file`` shares on the network (the same
key file).
"""

import argparse
import sys

from .options import UsageError, input_file, number, output_file, read_key_file
from .rate import add_rate_options, rate_from_args

__all__ = ["register"]


def _load_inputs(args):
    import numpy as np

    from hwgen.compiler import Program

    input_file(args.program, "--program")
    input_file(args.input, "--input")
    try:
        program = Program.load(args.program)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--program {args.program}: {exc}") from None
    try:
        x = np.load(args.input, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--input {args.input}: cannot read a .npy array ({exc})") from None
    return program, x


def _summary(counters, program):
    from host.plan import sample_unit

    c = counters
    unit = sample_unit(program)
    device_s = c.cycles / program.config.clock_hz
    return (f"{c.rows} {unit} in {c.seconds:.3f} s ({c.rows_per_second:,.0f} {unit}/s), "
            f"{c.runs} run(s) of at most {program.batch} {unit}\n"
            f"device: {c.cycles:,} cycles ({device_s * 1e3:.3f} ms at "
            f"{program.config.clock_hz / 1e6:g} MHz), {c.macs:,} MACs\n"
            f"link: {c.bytes_sent:,} bytes sent, {c.bytes_received:,} received "
            f"({c.bytes_sent / max(c.rows, 1):.1f} and {c.bytes_received / max(c.rows, 1):.1f} "
            f"per {unit[:-1]}), {c.link_efficiency:.1%} of them input and output data")


def _output_mode(args, program):
    """Return the ``output`` of ``Accelerator.infer`` the options ask for (None: the
    program's own mode)."""
    if args.output_mode is None:
        if args.k is not None:
            raise UsageError("--k is for --output-mode top_k; allowed: --output-mode top_k "
                             "--k K")
        return None
    if args.output_mode != "top_k" and args.k is not None:
        raise UsageError(f"--k is for --output-mode top_k, not --output-mode "
                         f"{args.output_mode}")
    if args.output_mode == "top_k" and args.k is None:
        raise UsageError("--output-mode top_k needs --k K (the indices per sample)")
    output = ("top_k", args.k) if args.output_mode == "top_k" else args.output_mode
    from hwgen.compiler.classes import output_mode

    try:
        output_mode(output, f"--output-mode with {args.program}", spec=program.output)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.probabilities and output != "scores":
        raise UsageError("--probabilities needs the scores; allowed: --output-mode scores "
                         "(or none) with it")
    return output


def _run(args):
    import numpy as np

    from host.accelerator import (
        Accelerator,
        BusyTimeout,
        DeviceError,
        IncompatibleDevice,
        LinkError,
    )

    if args.output is not None:
        output_file(args.output, "--output")
    key = read_key_file(args.key_file)
    baudrate = rate_from_args(args)
    program, x = _load_inputs(args)
    output = _output_mode(args, program)
    if args.probabilities:
        try:
            program.check_probabilities(f"--probabilities with {args.program}")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    try:
        with Accelerator(args.url, timeout=args.timeout, retries=args.retries,
                         progress=args.progress, baudrate=baudrate, key=key) as acc:
            acc.load(program)
            y = acc.infer(x, probabilities=args.probabilities, output=output)
            counters = acc.counters()
    except ValueError as exc:  # the input does not fit the program (the message says why)
        raise UsageError(f"--input {args.input}: {exc}") from None
    except (IncompatibleDevice, LinkError, DeviceError, BusyTimeout) as exc:
        # Errors of the device or the link are the user's to fix too (wrong URL, wrong
        # bitstream, unplugged board): one line, not a traceback.
        raise UsageError(str(exc)) from None
    summary = _summary(counters, program)
    if args.output is None:
        print(summary, file=sys.stderr)
        with np.printoptions(threshold=sys.maxsize if len(y) <= 1000 else 1000):
            print(y)
        return 0
    try:
        np.save(args.output, y)
    except OSError as exc:
        raise UsageError(f"--output {args.output}: {exc}") from None
    print(summary)
    print(f"wrote {args.output}: {' x '.join(map(str, y.shape))} {y.dtype}")
    return 0


def register(sub):
    """Add ``hwgen infer``."""

    p = sub.add_parser(
        "infer", help="run a compiled program on a device (a board or the simulated board)",
        description="Load a compiled program (hwgen.compiler.Program.save) on the device at "
                    "--url, run it on every sample of --input (rows, or NHWC images) and write "
                    "or print the outputs. "
                    "The device must have been built from the program's configuration.")
    p.add_argument("--url", required=True,
                   help="pyserial URL of the device: /dev/ttyUSB1, socket://127.0.0.1:PORT "
                        "(hwgen sim-board), ...")
    p.add_argument("--program", required=True, metavar="FILE",
                   help="compiled program (.npz written by Program.save)")
    p.add_argument("--input", required=True, metavar="X.npy",
                   help="integer array of the program's input shape: (rows, input features), "
                        "or NHWC images (samples, H, W, C) for a network whose first layer is "
                        "spatial")
    p.add_argument("--output", metavar="Y.npy",
                   help="where to write the outputs (default: print them)")
    p.add_argument("--probabilities", action="store_true",
                   help="apply the model's final Softmax/LogSoftmax/Sigmoid on the host and "
                        "return float probabilities (the device returns raw scores)")
    p.add_argument("--output-mode", choices=("scores", "argmax", "top_k"), default=None,
                   help="scores: the network's output; argmax: each sample's class index; "
                        "top_k: its --k best indices, best first (ties to the lowest index); "
                        "default: the program's (hwgen.compile(..., output=...))")
    p.add_argument("--k", type=number(int, 1, 65535), default=None, metavar="K",
                   help="indices per sample of --output-mode top_k, 1..the scores per sample")
    p.add_argument("--timeout", type=number(float, above=0), default=5.0, metavar="S",
                   help="seconds to wait for one answer, > 0 (default 5)")
    p.add_argument("--retries", type=number(int, 0, 100), default=3, metavar="N",
                   help="attempts after the first for a lost or damaged answer, 0..100 "
                        "(default 3)")
    add_rate_options(p)
    p.add_argument("--key-file", metavar="PATH",
                   help="key file of a board that hwgen serve shares with --key-file (the same "
                        "file: its bytes are the key)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar (default: for long runs on a terminal)")
    p.set_defaults(func=_run)
