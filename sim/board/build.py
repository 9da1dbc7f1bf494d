"""Building a simulated board: the C++ harness and the device's Verilog under Verilator.

:func:`_build` compiles ``sim/board_main.cpp`` (:data:`HARNESS`) with the Verilog of a device
and of its wrapper (:mod:`sim.board.wrapper`) into one executable, ``board``, in a folder, with
the build's log and a ``board.json`` that records the configuration and the harness's run-time
arguments (:func:`_run_params`). The gate-level board (:mod:`sim.board.netlist`) builds with
the same command (:func:`_harness_command`) and logged runs (:func:`_run_logged`). Where the
folder lives and when a build is needed is :mod:`sim.board.cache`'s business.
"""

import importlib.metadata
import json
import os
import shutil
import subprocess
from pathlib import Path

from hwgen import protocol
from hwgen.device.top import Link

from .. import data_path
from .errors import BoardError
from .wrapper import _WRAPPER_MODULE

__all__ = ["HARNESS", "board_missing", "frame_timeout_cycles"]

#: The harness's C++ source (package data of :mod:`sim`).
HARNESS = data_path("board_main.cpp")
# Compiling the model with optimisation costs build time once and pays back on every cycle.
_OPT_FLAGS = "OPT_FAST=-O2 OPT_SLOW=-O1 OPT_GLOBAL=-O2"
# Without: a gate-level board of a small device builds in a third of the time and runs a short
# check in about twice the time (the tests' netlists). Its C++ then compiles as one file, which
# spares the precompiled headers and each file's pass over Verilator's headers (the 12F smoke
# test's netlist: 39 s instead of 56 s).
_NO_OPT_FLAGS = "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0 VM_PARALLEL_BUILDS=0"
# Cycles the harness keeps clocking after the device's partial-frame timeout has run out, so that
# a truncated request is surely dropped before the board goes to sleep.
_QUIESCE_MARGIN = 4096
_BUILD_TIMEOUT = 3600


def board_missing():
    """Return why a simulated board cannot be built here, or None when it can."""
    from hwgen.toolchain import setup_verilator

    try:
        setup_verilator()
    except RuntimeError as exc:
        return str(exc)
    for tool, package in (("make", "make"), ("c++", "g++"), ("perl", "perl")):
        if shutil.which(tool) is None:
            return f"{tool!r} is not installed (Verilator's build needs it; apt-get install " \
                   f"{package})"
    return None


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def frame_timeout_cycles(config):
    """Return the clock cycles after which the device of ``config`` drops a partial request."""
    return protocol.frame_timeout_cycles(config.clock_hz)


def _run_params(config, divisor):
    """Return the harness's run-time arguments for a device of ``config`` whose UART has
    ``divisor`` cycles per bit (None: the byte streams, whose device says when it is at rest:
    none)."""
    if divisor is None:
        return {}
    # A byte takes 10 bit periods on the line; the frame timeout counts from the FIFO side.
    quiesce = frame_timeout_cycles(config) + _QUIESCE_MARGIN
    return {"quiesce": quiesce + 20 * divisor, "divisor": divisor}


def _harness_command(sources, *, uart, jobs, flags=(), optimize=True):
    """Return the Verilator command that builds ``board`` in the current folder from the
    Verilog ``sources`` (the wrapper module :data:`_WRAPPER_MODULE` among them) and the
    harness, copied there; ``optimize``: the C++ with optimization (else ``-O0``)."""
    return ["verilator", "--cc", "--exe", "--build", "--build-jobs", str(jobs or os.cpu_count()),
            # Amaranth's output trips Verilator's width lints; they are not errors.
            "-Wno-fatal", "-Wno-lint", "--prefix", "Vboard", "--top-module", _WRAPPER_MODULE,
            "-O3", "--x-assign", "fast", "--x-initial", "fast", "--Mdir", "obj", "-o", "../board",
            "-CFLAGS", f"-DBOARD_UART={int(uart)}", "-MAKEFLAGS",
            _OPT_FLAGS if optimize else _NO_OPT_FLAGS, *flags,
            *map(str, sources), HARNESS.name]


def _run_logged(cmd, folder, what, error=BoardError):
    """Run ``cmd`` in ``folder`` with its output appended to ``folder/build.log``; raise
    ``error`` naming ``what`` with the end of the log if it fails."""
    log_path = Path(folder) / "build.log"
    with open(log_path, "a") as log_file:
        proc = subprocess.run(cmd, cwd=folder, stdout=log_file, stderr=subprocess.STDOUT,
                              timeout=_BUILD_TIMEOUT, check=False)
    if proc.returncode != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise error(f"{what} failed (exit {proc.returncode}):\n{tail}")


# Builds the board of ``config`` (``link``: a hwgen.device.top.Link) from the device's
# ``verilog`` and the ``wrapper`` into ``folder``: the executable ``board``, ``build.log`` and
# ``board.json`` (the manifest, with the harness's run-time arguments ``run``); raises
# BoardError. No docstring: the source of this function is part of the cache key
# (sim.board.cache._binary_key), so an edit of it rebuilds every board, and an edit of anything
# else in this module rebuilds none.
def _build(config, link, *, verilog, wrapper, run, folder, jobs):
    reason = board_missing()
    if reason:
        raise BoardError(reason)
    (folder / "device.v").write_text(verilog)
    (folder / "wrapper.v").write_text(wrapper)
    shutil.copyfile(HARNESS, folder / HARNESS.name)
    _run_logged(_harness_command(["device.v", "wrapper.v"], uart=link is Link.UART, jobs=jobs),
                folder, f"building the simulated board for {config.name}")
    if not (folder / "board").exists():
        raise BoardError(f"building the simulated board for {config.name} left no executable; "
                         f"see {folder / 'build.log'}")
    # The object files are ~1 MB and not needed to run; keep the Verilog and log for people.
    shutil.rmtree(folder / "obj", ignore_errors=True)
    manifest = {"config": config.to_dict(), "config_hash": config.hash, "link": link,
                "run": run, "hwgen": _version("hwgen"), "verilator": _version("verilator")}
    (folder / "board.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
