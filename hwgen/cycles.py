"""Exact cycle model of the matmul engine.

The model replays the engine's admission rules (two weight banks, block launches, output
credits) tile by tile, not cycle by cycle, so it costs microseconds even for long runs. The
simulations assert it to the cycle.

A ``dtype="bf16"`` design's matrix chunks are its own datapath's (:mod:`hwgen.bf16_cycles`);
the controller's leads around them are the same.

Cycle 0 is the first cycle in which both input streams are valid; a row "leaves in cycle c" when
``o_result.valid`` and ``ready`` are high in cycle c.
"""

import bisect
import dataclasses
import math

from .bf16_cycles import bf16_chunk_cycles
from .config import Dataflow
from .latency import FIFO_LATENCY, bank_rest, fifo_depth, os_latency, requant_tail, ws_latency
from .memmap import geometry_words
from .passes import lookup
from .timing import unit_latencies

__all__ = ["FIFO_LATENCY", "EngineTiming", "engine_timing", "fifo_depth", "layer_busy_rows",
           "matmul_tiles", "matmul_timing", "os_latency", "program_cycles", "requant_tail",
           "ws_latency"]

@dataclasses.dataclass(frozen=True)
class EngineTiming:
    """When each result row leaves the engine, and what that means for throughput.

    Attributes
    ----------
    admit : list of int
        Cycle in which each activation row entered the engine (in stream order).
    out : list of int
        Cycle in which each result row left the engine (in stream order).
    tile_load : list of int
        Cycle in which each weight tile's first row was taken.
    """

    admit: list
    out: list
    tile_load: list

    @property
    def first(self):
        return self.out[0]

    @property
    def last(self):
        return self.out[-1]

    @property
    def total(self):
        """Cycles from cycle 0 to the cycle after the last result."""
        return self.out[-1] + 1


class _Credits:
    """Free output FIFO entries, given the cycles in which rows leave (sink always ready)."""

    def __init__(self, depth):
        self.depth = depth
        self.reads = []  # sorted cycles in which promised rows are read

    def earliest(self, t, need):
        """Return the first cycle >= t with at least ``need`` credits."""
        while True:
            # Credits in cycle t: depth minus rows promised and not read before t.
            outstanding = len(self.reads) - bisect.bisect_left(self.reads, t)
            if self.depth - outstanding >= need:
                return t
            # Wait until enough promised rows have been read (a credit is usable the cycle after).
            idx = bisect.bisect_left(self.reads, t) + need - (self.depth - outstanding) - 1
            t = self.reads[idx] + 1

    def take(self, read_cycle):
        bisect.insort(self.reads, read_cycle)


def engine_timing(config, batches, spacing=None, *, registered=False, first_row=0,
                  weight_rows=1):
    """Return the :class:`EngineTiming` of a run with streams that are always valid and ready.

    Parameters
    ----------
    config : AcceleratorConfig
    batches : list of int
        Rows of each batch, in order; batch ``n`` is multiplied by weight tile ``n``.
    spacing : list of int, optional
        Fewest cycles between the admissions of two rows, per batch, counted from each of the
        batch's rows (also from its last to the next batch's first); 1 each by default.
        WS only.
    registered : bool
        The weight-stationary array's inputs pass a register: each row's result a cycle later
        (:func:`ws_latency`); its weight tiles' cycles are the same.
    first_row : int
        The first cycle the activation stream may deliver a row (the weights' from 0).
    weight_rows : int
        The rows of a weight tile that load a cycle (:class:`hwgen.timing.UnitLatencies`).
    """
    if not batches or min(batches) < 1:
        raise ValueError(f"batches={batches!r}: every batch needs at least one row")
    if spacing is None:
        spacing = [1] * len(batches)
    elif len(spacing) != len(batches) or min(spacing) < 1 or (
            config.dataflow is not Dataflow.WS and max(spacing) > 1):
        raise ValueError(f"spacing={spacing!r}: one value >= 1 per batch (WS only for > 1)")
    rows = config.rows
    load_cycles = -(-rows // weight_rows)
    rest = bank_rest(config, weight_rows)
    admit, out, tile_load = [], [], []
    free = [0, 0]       # first cycle each bank may be loaded again
    load_end = 0        # first cycle the weight stream is free
    next_row = first_row    # first cycle the activation stream may deliver the next row
    if config.dataflow is Dataflow.WS:
        lat = ws_latency(config, registered) + FIFO_LATENCY
        # Its output FIFO holds every row in flight: when a row is admitted, at most `lat`
        # rows (one a cycle at most) are admitted and not yet read, and fifo_depth is more.
        # So the credits never hold a row back, and a batch's rows go in at its spacing.
        depth = fifo_depth(config, registered)
        if depth <= lat:
            raise AssertionError(f"fifo_depth {depth} must exceed the latency {lat}")
        for n, m in enumerate(batches):
            load = max(load_end, free[n % 2])
            tile_load.append(load)
            load_end = load + load_cycles
            t = max(next_row, load_end)
            step = spacing[n]
            admit.extend(range(t, t + m * step, step))
            out.extend(range(t + lat, t + lat + m * step, step))
            next_row = t + m * step
            free[n % 2] = admit[-1] + 1 + rest
        return EngineTiming(admit, out, tile_load)

    lat = os_latency(config) + FIFO_LATENCY
    credits = _Credits(fifo_depth(config, registered))
    period = max(rows, config.cols)
    last_launch = -period
    for n, m in enumerate(batches):
        load = max(load_end, free[n % 2])
        tile_load.append(load)
        load_end = load + rows
        for start in range(0, m, rows):
            count = min(rows, m - start)
            first_admit = next_row
            admit.extend(range(first_admit, first_admit + count))
            launch = max(first_admit + count, load_end, last_launch + period)
            launch = credits.earliest(launch, count)
            for i in range(count):
                out.append(launch + lat + i)
                credits.take(launch + lat + i)
            last_launch = launch
            next_row = launch  # a row may be taken in the launch cycle
        free[n % 2] = last_launch + 1
    return EngineTiming(admit, out, tile_load)


def matmul_tiles(config, m, k, n):
    """Return the batches of an ``M x K`` by ``K x N`` product, tiled n-tile-major.

    For every output tile (``cols`` columns) and every reduction tile (``rows`` inputs) the
    engine takes one weight tile and the ``M`` activation rows.
    """
    k_tiles, n_tiles = config.tiles(k, n)
    return [m] * (k_tiles * n_tiles)


def matmul_timing(config, m, k, n):
    """Return ``(timing, ideal)`` for an ``M x K`` by ``K x N`` product on the engine.

    ``ideal`` is ``M * ceil(K / rows) * ceil(N / cols)``: one activation row per cycle with no
    weight-load, fill or drain cycles.
    """
    timing = engine_timing(config, matmul_tiles(config, m, k, n))
    return timing, m * math.ceil(k / config.rows) * math.ceil(n / config.cols)


# The controller decodes a spatial layer's geometry words in three cycles each; the rest of a
# layer's lead and tail is its kind's (hwgen.passes).
_GEOMETRY_CYCLES = 3
#: The geometry of a layer over rows, as far as the cycle models read it.
_PLAIN_GEOMETRY = {"oh": 1, "ow": 1, "kh": 1, "kw": 1}


def layer_spacing(config, k_tiles, n_tiles, raw):
    """Return the admission spacing of each batch of a layer (see :func:`engine_timing`).

    With fewer requantization lanes than columns, a requantized layer's rows of the last
    reduction tile of each output tile enter ``config.requant_steps`` cycles apart.
    """
    steps = 1 if raw else config.requant_steps
    return [steps if kt == k_tiles - 1 else 1 for _ in range(n_tiles) for kt in range(k_tiles)]


def chunk_cycles(config, k_tiles, n_tiles, rows, raw, *, implementation=None):
    """Return the cycles one chunk of ``rows`` output pixels (rows) of a matrix layer takes,
    from its first pass's start to the cycle before the next step begins, its lead not
    counted (see :func:`layer_cycles`).

    ``implementation`` (an :class:`~hwgen.implementation.Implementation`, the plain one by
    default) adds what its units state (:func:`hwgen.timing.unit_latencies`): the stages of
    the requantization pipeline and the write-back to a requantized layer, the register before
    the array, and the walker's staged rows (the first activation row a cycle later, which the
    weights' first tile may hide).
    """
    units = unit_latencies(config, implementation)
    timing = engine_timing(config, [rows] * (k_tiles * n_tiles),
                           layer_spacing(config, k_tiles, n_tiles, raw), registered=units.array,
                           first_row=units.first_row, weight_rows=units.weight_rows)
    return timing.last + requant_tail(config, raw, units.requant) + 1


def layer_cycles(config, descriptor, m, *, implementation=None):
    """Return the cycles a layer takes on the accelerator with a batch of ``m`` samples.

    ``descriptor`` holds the layer's descriptor fields (and a spatial layer's ``geometry``),
    as :attr:`hwgen.compiler.Program.descriptors` gives them. Its kind's cycle model
    (:meth:`hwgen.passes.base.Pass.cycles`) counts the layer; a matrix layer runs its
    ``m * oh * ow`` output pixels in chunks of at most ``acc_depth``, each a pass per
    reduction and output tile (:func:`chunk_cycles`; a ``dtype="bf16"`` design's,
    :func:`hwgen.bf16_cycles.bf16_chunk_cycles`); a pooling layer reads ``kh * kw``
    words per output word; an add pass two (:mod:`hwgen.passes.add`). A graph's program is
    its passes in order: :func:`program_cycles` sums them.
    """
    d = descriptor
    geometry = d.get("geometry") or _PLAIN_GEOMETRY
    walk = _GEOMETRY_CYCLES * geometry_words(config) if d.get("spatial") else 0

    # A bf16 design's chunks are its datapath's (hwgen.bf16_cycles); its controller the same.
    count = bf16_chunk_cycles if config.dtype == "bf16" else chunk_cycles

    def chunk(k_tiles, n_tiles, rows, raw):
        return count(config, k_tiles, n_tiles, rows, raw, implementation=implementation)

    return walk + lookup(d["kind"]).cycles(config, d, geometry, m, chunk,
                                             implementation=implementation)


def layer_busy_rows(descriptor, m):
    """Return the rows a layer puts through the array on ``m`` samples: what it adds to the
    device's ``busy_cycles`` counter (its kind's :meth:`hwgen.passes.base.Pass.busy_rows`)."""
    d = descriptor
    return lookup(d["kind"]).busy_rows(d, d.get("geometry") or _PLAIN_GEOMETRY, m)


def program_cycles(program, m, implementation=None):
    """Return the cycles a run of ``program`` on ``m`` samples keeps the accelerator busy.

    This is what the device's ``cycles`` counter reads after the run, on a device built with
    ``implementation`` (a board's: :attr:`hwgen.boards.Board.implementation`; the plain one
    by default).
    """
    return sum(layer_cycles(program.config, d, m, implementation=implementation)
               for d in program.descriptors)
