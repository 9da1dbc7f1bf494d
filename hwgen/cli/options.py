"""What every ``hwgen`` subcommand shares: one-line usage errors, checked numbers and paths,
and the design options (one per :class:`~hwgen.config.AcceleratorConfig` field).

A usage error is one line on stderr, ``hwgen <command>: error: <what>; allowed: <what is>``,
and exit status 2, whether argparse finds it (a number out of range) or the command does (a
folder that cannot be created).
"""

import argparse
import dataclasses
import json
import math
import os
import sys
from pathlib import Path

from hwgen.config import DATAFLOWS, AcceleratorConfig

__all__ = ["Parser", "RunError", "UsageError", "add_config_options", "config_from_args",
           "dense_bf16_defaults", "device_config_from_args", "input_dir",
           "input_file", "number", "output_dir", "output_file", "read_key_file", "record_figures",
           "record_file"]

SEED_MAX = 2**32 - 1
# pyserial and the UART accept these rates; the boards' clocks allow far fewer (checked later).
BAUD_RANGE = (300, 12_000_000)


class UsageError(Exception):
    """A problem with the user's input: printed as one line, exit status 2."""


class RunError(Exception):
    """A run that could not finish what it was asked, through no fault of its input: printed
    as one line, exit status 1."""


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose usage errors are one line, exit status 2.

    The usage text is one ``--help`` away; the line names the option, the value and what is
    allowed.
    """

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def number(kind, low=None, high=None, *, above=None):
    """Return an argparse ``type`` that parses ``kind`` (int or float) within ``low..high``
    (either may be None), or strictly above ``above``; its error says what is allowed."""
    if above is not None:
        allowed = f"a number > {above:g}"
    elif high is None:
        allowed = f"an integer >= {low}" if kind is int else f"a number >= {low:g}"
    else:
        allowed = f"an integer in {low}..{high}" if kind is int else f"{low:g}..{high:g}"

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {allowed}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not {allowed}")
        if ((above is not None and not value > above)
                or (low is not None and value < low) or (high is not None and value > high)):
            raise argparse.ArgumentTypeError(f"{text} is out of range; allowed: {allowed}")
        return value

    parse.__name__ = kind.__name__   # argparse names the type in its own messages
    return parse


def _reason(exc):
    return exc.strerror or str(exc)


def output_dir(path, option):
    """Create folder ``path`` (and its parents) for ``option``; return it as a ``Path``.

    Raises
    ------
    UsageError
        Naming the option, the path and why it cannot be a writable folder.
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot create the folder ({_reason(exc)})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: the folder is not writable")
    return path


def output_file(path, option):
    """Check that file ``path`` can be written for ``option`` (its folder exists and is
    writable, and it is not a folder); return it as a ``Path``."""
    path = Path(path)
    folder = path.parent
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; allowed: a file name")
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: the folder {folder} is not writable")
    return path


def input_file(path, option):
    """Check that file ``path`` exists and is readable for ``option``; return it."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{option} {path}: no such file")
    if not path.is_file():
        raise UsageError(f"{option} {path}: not a file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{option} {path}: the file is not readable")
    return path


def input_dir(path, option):
    """Check that folder ``path`` exists for ``option``; return it."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{option} {path}: no such folder")
    return path


def add_config_options(parser, *, dtypes=("int8",)):
    """Add one option per :class:`AcceleratorConfig` field (and ``--config JSON``); ``--dtype``
    where the command takes more ``dtypes`` than int8."""
    group = parser.add_argument_group("design parameters (see hwgen.AcceleratorConfig)")
    for field in dataclasses.fields(AcceleratorConfig):
        flag = "--" + field.name.replace("_", "-")
        if field.name == "dataflow":
            group.add_argument(flag, choices=DATAFLOWS, default=field.default,
                               help="ws: weight-stationary (default), os: output-stationary")
        elif field.name == "spatial":
            group.add_argument(flag, type=number(int, 0, 1), default=int(field.default),
                               metavar="0|1",
                               help="1: convolutions and pooling (the patch walker, the pooler; "
                                    "default); 0: matrix layers over rows only, a smaller device")
        elif field.name == "bounds":
            group.add_argument(flag, type=number(int, 0, 1), default=int(field.default),
                               metavar="0|1",
                               help="1: activation bounds and leaky ReLU on the device "
                                    "(default); 0: ReLU and identity only, narrower memories")
        elif field.name == "residual":
            group.add_argument(flag, type=number(int, 0, 1), default=int(field.default),
                               metavar="0|1",
                               help="1: residual adds on the device (the adder; default); "
                                    "0: no adder, the descriptors of before")
        elif field.name == "taps":
            group.add_argument(flag, type=number(int, 0, 1), default=int(field.default),
                               metavar="0|1",
                               help="1: a first convolution of fewer channels than rows packs "
                                    "its kernel's taps into tiles (default); 0: the walker of "
                                    "before")
        elif field.name == "fuse_pool":
            group.add_argument(flag, type=number(int, 0, 1), default=int(field.default),
                               metavar="0|1",
                               help="1: a max pool after a convolution runs in the "
                                    "convolution's pass (default); 0: a pass of its own")
        elif field.name == "depthwise":
            group.add_argument(flag, type=number(int, 0, 1), default=int(field.default),
                               metavar="0|1",
                               help="1: depthwise convolutions and average pools on the "
                                    "array, a channel per column (the depthwise unit); 0: as "
                                    "matrix passes (default)")
        elif field.name == "dw_extra_rows":
            group.add_argument(flag, type=number(int), default=field.default, metavar="N",
                               help="with --depthwise 1: rows of multipliers below the array "
                                    "that only depthwise passes use, 0..8 (default 0; 1 puts "
                                    "a 3x3 kernel in one tile of an 8-row array)")
        elif field.name == "act_spram_depth":
            group.add_argument(flag, type=number(int), default=field.default, metavar="N",
                               help="the first N words of every ACT bank single-ported (the "
                                    "network's input area; SPRAM on the iCE40UP): 0 (default) "
                                    "or a power of two >= act_depth / 2")
        elif field.name == "dtype":
            # Only where the command can use it: no bf16 device is built yet (issue 52).
            if len(dtypes) > 1:
                group.add_argument(flag, choices=dtypes, default=field.default,
                                   help="the arithmetic: int8 integers (default) or bf16 "
                                        "products summed in fp32 (docs/arithmetic.md)")
        elif field.name == "post_lanes":
            group.add_argument(flag, type=number(int), default=None, metavar="N",
                               help="channels requantized per cycle, a divisor of --cols "
                                    "(default: all; fewer save logic, ws only)")
        else:
            # The configuration checks the range and says what is allowed.
            group.add_argument(flag, type=number(int), default=field.default, metavar="N",
                               help=f"default {field.default}")
    group.add_argument("--config", type=Path, metavar="JSON",
                       help="take the parameters from a manifest or config JSON file "
                            "(options given on the command line override it)")


def config_from_args(args, *, dtypes=("int8",)):
    """Build the :class:`AcceleratorConfig` the options describe; raise UsageError if bad,
    or if its dtype is not among the command's ``dtypes``."""
    values = {}
    if getattr(args, "config", None):
        path = input_file(args.config, "--config")
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(f"--config {path}: not a JSON file ({exc})") from None
        if not isinstance(data, dict):
            raise UsageError(f"--config {path}: allowed: a JSON object of configuration fields "
                             "(or a manifest with one under 'config')")
        values.update(data.get("config", data))
    defaults = AcceleratorConfig()
    for field in dataclasses.fields(AcceleratorConfig):
        value = getattr(args, field.name, getattr(defaults, field.name))
        if value != getattr(defaults, field.name) or field.name not in values:
            values[field.name] = value
    try:
        config = AcceleratorConfig.from_dict(values)
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if config.dtype not in dtypes:
        raise UsageError(f"dtype={config.dtype!r}: no bf16 device is built yet, so this "
                         f"command takes {', '.join(map(repr, dtypes))} only; `hwgen compile "
                         "--dtype bf16` compiles a bf16 program")
    return config


def dense_bf16_defaults(args):
    """Fill ``--spatial`` left unset (None) by ``--dtype``: 0 for bf16 (its training runs
    MLPs: a dense design, the smaller simulated board), else its default (1)."""
    if args.spatial is None:
        args.spatial = 0 if getattr(args, "dtype", "int8") == "bf16" else 1


def device_config_from_args(args):
    """:func:`config_from_args` for a command that builds or simulates the device: int8 or
    bf16, and a design its dtype's core builds (else UsageError naming what it does not)."""
    from hwgen.config import DTYPES
    from hwgen.device.cores import check_core

    config = config_from_args(args, dtypes=DTYPES)
    try:
        check_core(config)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return config


def read_key_file(path, option="--key-file"):
    """Return the key bytes in the key file at ``path`` for ``option`` (None for None).

    Raises
    ------
    UsageError
        Naming the option, the path and what is wrong (:func:`host.auth.read_key`).
    """
    if path is None:
        return None
    from host.auth import read_key

    try:
        return read_key(path, option)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def say(text):
    """Print a progress line for people (stderr, flushed)."""
    print(text, file=sys.stderr, flush=True)


def record_file(args):
    """Return the record that ``--record`` names (:mod:`hwgen.figures`), checked before
    anything is measured, or None without ``--record``."""
    if getattr(args, "record", None) is None:
        return None
    from hwgen.figures import record_path

    try:
        return record_path(args.record)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def record_figures(args, path, figures, *, drop=("--out",), **kwargs):
    """Write ``figures`` into the record at ``path`` under this command line (less
    ``--record`` and the options in ``drop``); ``kwargs`` as for
    :func:`hwgen.figures.record`."""
    from hwgen.figures import command_line, record

    command = command_line(f"hwgen {args.command}", args.argv, record=args.record, drop=drop)
    try:
        record(path, command, figures, **kwargs)
    except ValueError as exc:  # nothing measured, or a record that is no longer readable
        raise RunError(str(exc)) from None
