"""The device's fixed latencies: the array's, the engine's output FIFO's and the
post-processing's tail, which the cycle models (:mod:`hwgen.cycles`, the pass kinds'
:mod:`hwgen.passes`) and the blocks that have them read alike (the cycles an implementation's
units add: :mod:`hwgen.timing`)."""

from .config import Dataflow

__all__ = ["FIFO_LATENCY", "STREAM_LATENCY", "bank_rest", "fifo_depth", "late_weight_rows",
           "os_latency", "requant_tail", "ws_latency"]

# SyncFIFOBuffered: a row written in cycle c can be read in cycle c + 2.
FIFO_LATENCY = 2

#: The depthwise unit's cycles from a stream element's read to its word in line 0, beyond the
#: banks' read latency (the padding's zeros and lane 0 of the lane skew; lane ``j`` is ``j``
#: cycles later): the unit's and the depthwise pass's cycle count's.
STREAM_LATENCY = 1


def ws_latency(config, registered=False):
    """Cycles from admitting an activation row to its result leaving the array (WS), one more
    with ``registered`` inputs (:attr:`hwgen.timing.UnitLatencies.array`): the sums pass every
    row, the depthwise unit's extra rows too (``array_rows``)."""
    return config.array_rows + config.cols + 1 + int(registered)


def bank_rest(config, weight_rows=1):
    """Cycles a weight bank rests after the last activation row that uses it before a tile may
    be written into it (WS), beyond the cycle the engine always leaves.

    An activation row reaches the array's row ``r`` ``r`` cycles after it enters, and a write
    to row ``r`` must come after it. A tile loaded a row a cycle writes row ``r`` ``r`` cycles
    after its first: never too early. Loaded two rows a cycle (``weight_rows`` 2) row ``r``
    is written ``floor(r / 2)`` cycles after the first, and the rows for which that comes too
    early by more than the rest (:func:`late_weight_rows`) a cycle later still: the bank rests
    ``array_rows // 2 - 1`` cycles, three on 8 or 9 rows, which a batch of one row a tile (four
    cycles a tile's load) does not wait for."""
    if weight_rows == 1:
        return 0
    return max(0, config.array_rows // 2 - 1)


def late_weight_rows(config, weight_rows=1):
    """Return the array rows whose weight writes pass a register more (loaded two rows a
    cycle, :func:`bank_rest`): those ``r`` with ``ceil(r / 2)`` beyond the bank's rest."""
    if weight_rows == 1:
        return ()
    rest = bank_rest(config, weight_rows)
    return tuple(r for r in range(config.array_rows) if -(-r // 2) > rest)


def os_latency(config):
    """Cycles from launching a block to its first result row leaving the array (OS)."""
    return config.rows + config.cols + 2


def fifo_depth(config, registered=False):
    """Depth of the engine's output FIFO (and its credit count); ``registered``: a
    weight-stationary array's inputs pass a register (see :func:`ws_latency`)."""
    if config.dataflow is Dataflow.WS:
        return ws_latency(config, registered) + 4
    return os_latency(config) + 2 * config.rows + 4


# After the engine's last result of a chunk the accumulate stage and the post-processing
# pipeline (bias, requantize, write) take these many cycles, then one to move on.
_RAW_TAIL = 2
_REQUANT_TAIL = 4


def requant_tail(config, raw, stages=0):
    """Return the cycles from a chunk's last result row leaving the engine to its last write:
    the accumulate stage and the post-processing (bias, requantize, write, with ``stages``
    more: :attr:`hwgen.timing.UnitLatencies.requant`), or a raw row's write."""
    if raw:
        return _RAW_TAIL
    return _REQUANT_TAIL + config.requant_steps - 1 + stages
