"""Evaluate one point of a sweep: what a Dask worker runs.

A point is a dict of design values; with the board's preset for the fields it leaves out it
makes an :class:`~hwgen.config.AcceleratorConfig`. Its evaluation goes as far as it can and
records the first failure as the point's status:

============  =======================================================================
status        meaning (``reason`` says which value and what is allowed)
============  =======================================================================
ok            valid, fits, the model compiles (and, in the build tier, it was built)
invalid       :class:`~hwgen.config.AcceleratorConfig` refuses the values
no-clock      the board cannot make the clock (:class:`~hwgen.boards.PLLError`)
no-fit        the fit estimate, or place and route, exceeds the device
no-compile    the model does not compile onto the design, or not at these widths
build-error   Yosys, nextpnr or the packer failed (build tier)
error         anything else (a bug): the reason names the exception
============  =======================================================================

The **estimate tier** checks the configuration, the clock, the fit estimate
(:func:`hwgen.boards.estimate`) and the compilation of the model, and counts the cycles of a
full batch with :func:`hwgen.cycles.program_cycles`. A point that does not fit is still
compiled and timed, so its figures can be drawn beside the front. The **build tier** then runs
the real build (:func:`hwgen.boards.build`) in a temporary folder of the worker, for points
that passed the estimate tier only, and records the resources, Fmax and timing result from its
report; its throughput is computed at Fmax.
"""

import shutil
import tempfile
import time
import traceback

__all__ = ["STATUSES", "TIERS", "dask_setup", "evaluate_point", "evaluate_points"]

TIERS = ("estimate", "build")
STATUSES = ("ok", "invalid", "no-clock", "no-fit", "no-compile", "build-error", "error")
# Characters of a reason kept in results.csv (the whole message goes to the point's detail).
_REASON_CHARS = 300
# Cycle counts kept per worker process.
_CYCLE_CACHE_SIZE = 8192
_cycle_cache = {}
_clock_cache = {}


class _Failed(Exception):
    """Ends a point's evaluation with a status and a reason."""

    def __init__(self, status, exc):
        self.status = status
        self.exc = exc
        super().__init__(str(exc))


def _one_line(text):
    lines = str(text).strip().splitlines() or [""]
    line = lines[0]
    return line if len(line) <= _REASON_CHARS else line[:_REASON_CHARS - 3] + "..."


def _clock_plan(board, clock_hz):
    # The PLL search takes a third of a millisecond on the ECP5: once per board and clock.
    from ..boards import PLLError, clock_plan

    key = (board.name, clock_hz)
    if key not in _clock_cache:
        try:
            _clock_cache[key] = clock_plan(board, clock_hz)
        except PLLError as exc:
            _clock_cache[key] = exc
    found = _clock_cache[key]
    if isinstance(found, Exception):
        raise found
    return found


def _cycle_key(program, m, implementation=None):
    # What hwgen.cycles.program_cycles reads: the dtype (a bf16 design's chunks are its
    # datapath's), the array's shape and dataflow, the requantization's steps per row, the
    # chunk size, each layer's kind, walk and the fields its kind's cycle model reads, and the
    # cycles the implementation's units add (tests/dse/test_points.py checks that
    # configurations alike in these count alike).
    from ..memmap import geometry_words
    from ..passes import lookup
    from ..timing import unit_latencies

    config = program.config
    layers = tuple((d["kind"], d["spatial"],
                    tuple(d[name] for name in lookup(d["kind"]).cycle_fields),
                    tuple(sorted((d.get("geometry") or {}).items())))
                   for d in program.descriptors)
    latency = unit_latencies(config, implementation)
    # Spatial layers run in chunks of acc_depth pixels, after their geometry words.
    return (config.dtype, config.rows, config.cols, config.dataflow, config.requant_steps,
            config.acc_depth, geometry_words(config), layers, m, latency)


def _program_cycles(program, m, implementation=None):
    """Return :func:`hwgen.cycles.program_cycles` of a run of ``m`` rows on a device built
    with ``implementation`` (a board's), once per distinct count in this process."""
    from ..cycles import program_cycles

    key = _cycle_key(program, m, implementation)
    found = _cycle_cache.get(key)
    if found is None:
        if len(_cycle_cache) >= _CYCLE_CACHE_SIZE:
            _cycle_cache.clear()
        found = _cycle_cache[key] = program_cycles(program, m, implementation)
    return found


def _resolve(board, values):
    """Return the configuration of a point; raise _Failed("invalid") if it is not one."""
    from ..boards import board_config

    fields = dict(values)
    clock_hz = fields.pop("clock_hz", None)
    try:
        return board_config(board, clock_hz=clock_hz, **fields)
    except (TypeError, ValueError) as exc:
        raise _Failed("invalid", exc) from None


def _record_config(row, config):
    row.update(config.to_dict())
    row["post_lanes"] = config.post_lanes
    row["name"] = config.name
    row["config_hash"] = config.hash


def _rate(board, config, baud):
    """The point's UART rate: ``baud``, or (None) the one ``hwgen build`` takes by default, the
    board's bridge rate where the point's clocks make it."""
    from ..boards import BaudError, default_baud

    if baud is not None:
        return baud
    try:
        return default_baud(board, config)[0]
    except BaudError as exc:
        raise _Failed("no-clock", exc) from None


def _estimate(row, board, config, model, baud):
    """Fill the estimate tier's columns; return the compiled program (None if it failed)."""
    from ..boards import FitError, PLLError, check_fit, estimate
    from ..compiler import CompileError
    from ..throughput import link_bound_rate
    from .model import ModelError

    try:
        _clock_plan(board, config.clock_hz)
    except PLLError as exc:
        raise _Failed("no-clock", exc) from None
    failure = None
    try:
        est = check_fit(board, config)
    except FitError as exc:
        est = estimate(board, config)
        failure = _Failed("no-fit", exc)
    row.update({f"est_{res}": est[res] for res in ("lut", "ff", "dsp", "bram")})
    try:
        network = model.network(config.in_bits, config.w_bits, config.acc_bits,
                                config.mult_bits)
        from .. import compile as compile_network

        program = compile_network(network, config)
    except (ModelError, CompileError) as exc:
        raise failure or _Failed("no-compile", exc) from None
    # The board's implementation: its requantization pipeline adds cycles to every layer.
    from ..boards.fit import implementation_for

    cycles = _program_cycles(program, program.batch, implementation_for(board, config))
    row.update(batch=program.batch, cycles_per_run=cycles,
               cycles_per_inference=round(cycles / program.batch, 3),
               # The wire the board builds: the packed one, or words through its receive FIFO.
               link_infer_per_s=round(link_bound_rate(
                   program, baud, packed=board.implementation.packed_wire,
                   rx_fifo=board.implementation.rx_fifo), 1))
    _rates(row, config.clock_hz)
    if failure is not None:
        raise failure
    return program


def _rates(row, clock_hz):
    row["clock_mhz"] = round(clock_hz / 1e6, 3)
    device = clock_hz * row["batch"] / row["cycles_per_run"]
    row["device_infer_per_s"] = round(device, 1)
    row["infer_per_s"] = round(min(device, row["link_infer_per_s"]), 1)


def _build(row, extra, board, config, *, baud, seed):
    """Run the real build; fill its columns (resources, Fmax, timing, time)."""
    from ..boards import FitError, build

    lines = []

    def log(*args, **_):
        lines.append(" ".join(str(a) for a in args))
        del lines[:-40]

    out = tempfile.mkdtemp(prefix="hwgen-dse-")
    try:
        report = build(board, config, out, baud=baud, seed=seed, log=log)
    except FitError as exc:
        raise _Failed("no-fit", exc) from None
    except (RuntimeError, ValueError, OSError) as exc:
        extra["detail_log"] = "\n".join(lines)
        raise _Failed("build-error", exc) from None
    finally:
        shutil.rmtree(out, ignore_errors=True)
    extra["report"] = report
    for res in ("lut", "ff", "dsp", "bram"):
        if res in report["resources"]:
            row[res] = report["resources"][res]["used"]
    timing = report["timing"]
    row["fmax_mhz"] = timing["fmax_mhz"]
    row["timing_pass"] = bool(timing["pass"])
    row["build_s"] = report["times"].get("total_s")
    if timing["fmax_mhz"]:
        _rates(row, timing["fmax_mhz"] * 1e6)


def evaluate_point(board, model, tier, values, *, key=None, baud, seed=None):
    """Evaluate one point; return its row.

    Parameters
    ----------
    board : hwgen.boards.Board
    model : FloatModel or IntegerModel
        See :mod:`hwgen.dse.model`.
    tier : {"estimate", "build"}
    values : dict
        The point's design values (fields of :class:`~hwgen.config.AcceleratorConfig`).
    key : str, optional
        The point's key in ``results.csv`` (:func:`hwgen.dse.space.point_key`).
    baud : int or None
        Link rate for the link bound (and the UART of a build); None: the rate ``hwgen
        build`` takes by default, the board's bridge rate where the point's clocks make it.
    seed : int, optional
        nextpnr's placement seed (build tier).

    Returns
    -------
    dict
        The row of :data:`hwgen.dse.results.COLUMNS` (missing columns are unknown), plus
        ``"_extra"``: ``{"report": build report, "detail": the whole failure message}`` as far
        as they exist. Never raises for a failing point: its ``status`` and ``reason`` say why.
    """
    started = time.perf_counter()
    row = {"point": key, "board": board.name, "tier": tier, "model": model.label, "baud": baud,
           **values}
    extra = {}
    try:
        if tier not in TIERS:
            raise ValueError(f"tier={tier!r}; allowed: {', '.join(TIERS)}")
        config = _resolve(board, values)
        _record_config(row, config)
        row["baud"] = rate = _rate(board, config, baud)
        _estimate(row, board, config, model, rate)
        if tier == "build":
            _build(row, extra, board, config, baud=rate, seed=seed)
        row["status"], row["reason"] = "ok", ""
    except _Failed as failed:
        row["status"], row["reason"] = failed.status, _one_line(failed.exc)
        extra["detail"] = str(failed.exc)
    except Exception as exc:   # a bug must not end the sweep: the point records it
        row["status"], row["reason"] = "error", _one_line(f"{type(exc).__name__}: {exc}")
        extra["detail"] = traceback.format_exc()
    row["eval_s"] = round(time.perf_counter() - started, 4)
    row["_extra"] = extra
    return row


def evaluate_points(board_name, model, tier, points, *, baud, seed=None):
    """Evaluate ``[(key, values), ...]`` on ``BOARDS[board_name]``; return their rows.

    The Dask task of a sweep: the estimate tier sends several points per task, so that the
    scheduler's per-task cost (milliseconds) does not dominate.
    """
    from ..boards import BOARDS

    board = BOARDS[board_name]
    return [evaluate_point(board, model, tier, values, key=key, baud=baud, seed=seed)
            for key, values in points]


def _on_sigint(signum, frame):
    """Ignore Ctrl-C in a worker of the local cluster (see :func:`dask_setup`)."""


def dask_setup(worker):
    """Dask's preload hook: make a local cluster's worker leave Ctrl-C to the sweep.

    Ctrl-C in a terminal interrupts every process of the foreground group, the local cluster's
    worker processes included, which would die printing tracebacks while the sweep closes the
    cluster. A handler that does nothing (rather than ignoring the signal, which the tools a
    build starts would inherit) keeps them quiet; the tools still stop at Ctrl-C.
    """
    import logging
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_sigint)
    # After Ctrl-C the sweep's scheduler may close before a worker's next heartbeat, which the
    # worker would log at ERROR with a traceback; a point's failure reaches the sweep as its
    # row's reason, so a local worker has nothing else to tell the user.
    logging.getLogger("distributed.worker").setLevel(logging.CRITICAL)
