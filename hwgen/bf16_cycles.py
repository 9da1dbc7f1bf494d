"""Exact cycle model of the bf16 device's matrix passes (issue 52): what
:func:`hwgen.cycles.layer_cycles` counts a chunk of a ``dtype="bf16"`` design with.

The controller, the feeders and the chunk's lead are the int8 device's (the matrix pass's
:meth:`~hwgen.passes.matrix.MatrixPass.cycles`); the chunk itself is the bf16 datapath's
(:class:`~hwgen.device.bf16_datapath.BF16MatrixDatapath`): its rows enter when
:meth:`~hwgen.device.bf16_datapath.BF16MatrixDatapath.entry_cycles` says (the engine's weight
banks and the accumulators' row rule), the last one's finished row comes
:attr:`~hwgen.device.bf16_datapath.BF16MatrixDatapath.latency` cycles later, is written
(:attr:`~hwgen.device.bf16_writeback.BF16WriteBack.STAGES` registers on the way), and the
controller hears of it :attr:`~hwgen.device.bf16_core.BF16AcceleratorCore.LAYER_END` cycles
after that. The numbers are the units' own: the model builds the core's datapath and reads
it.
"""

import functools
from typing import NamedTuple

from .timing import unit_latencies

__all__ = ["Bf16DepthwiseTiming", "bf16_add_pipeline", "bf16_chunk_cycles",
           "bf16_depthwise_timing", "bf16_timing_datapath"]


def _never_elaborated(unit):
    """Silence Amaranth's "created but never used" warning of ``unit`` and of the units it
    holds: they are built for their timing only."""
    seen, todo = set(), [unit]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        obj._MustUse__silence = True
        for value in vars(obj).values():
            for item in value if isinstance(value, (list, tuple)) else (value,):
                if hasattr(item, "elaborate") and hasattr(item, "__dict__"):
                    todo.append(item)
    return unit


@functools.lru_cache(maxsize=64)
def bf16_timing_datapath(config, implementation=None):
    """Return the :class:`~hwgen.device.bf16_datapath.BF16MatrixDatapath` that
    ``config``'s bf16 core builds with ``implementation`` (None: the plain one), for its
    timing (never elaborated)."""
    # Imported when first asked: the gateware's package imports the pass kinds, which the
    # cycle model imports.
    from .device.bf16_core import bf16_datapath
    from .implementation import Implementation

    impl = Implementation() if implementation is None else implementation
    return _never_elaborated(bf16_datapath(config, impl))


def bf16_chunk_cycles(config, k_tiles, n_tiles, rows, raw, *, implementation=None):
    """Return the cycles one chunk of ``rows`` rows of a bf16 matrix layer takes, from its
    first weight row to the cycle before the controller's next step, its lead not counted
    (as :func:`hwgen.cycles.chunk_cycles` counts an int8 one).

    ``raw`` changes nothing: a raw row and a bf16 row are written in the same cycle. The
    implementation's memories set the datapath's bias read, which the datapath hides, and the
    activation feeder's staged rows (the first row a cycle later), which the first weight
    tile hides; both are read, not assumed.
    """
    from .device.bf16_core import BF16AcceleratorCore
    from .device.bf16_writeback import BF16WriteBack

    datapath = bf16_timing_datapath(config, implementation)
    first_row = unit_latencies(config, implementation).first_row
    last_entry = datapath.entry_cycles([rows], k_tiles, n_tiles, first_row=first_row)[-1]
    return (last_entry + datapath.latency + BF16WriteBack.STAGES
            + BF16AcceleratorCore.LAYER_END + 1)


@functools.lru_cache(maxsize=64)
def bf16_add_pipeline(config):
    """Return the registers from an add pass's last word's arrival to its write on
    ``config``'s bf16 core (:attr:`~hwgen.device.bf16_add.BF16Adder.pipeline`): what the add
    pass's cycle model counts in place of the int8 adder's."""
    from .device.bf16_add import BF16Adder

    return _never_elaborated(BF16Adder(config)).pipeline


class Bf16DepthwiseTiming(NamedTuple):
    """What a bf16 depthwise chunk's count (:meth:`hwgen.passes.depthwise.DepthwisePass.cycles`)
    takes from the datapath: ``rewrite``, the cycles from a weight bank's last row to its
    next tile's first write (the engine's ``rewrite_wait``); ``gap``, the fewest cycles
    between two passes' first result rows (the row rule, the depthwise unit's ``pass_gap``);
    ``after``, the cycles from the last result row's entry to the controller's ``layer_done``
    (the datapath, the write-back and the core's ``LAYER_END``)."""

    rewrite: int
    gap: int
    after: int


def bf16_depthwise_timing(config, implementation=None):
    """Return the :class:`Bf16DepthwiseTiming` of ``config``'s bf16 core built with
    ``implementation``, read from its units."""
    from .device.bf16_core import BF16AcceleratorCore
    from .device.bf16_writeback import BF16WriteBack

    datapath = bf16_timing_datapath(config, implementation)
    return Bf16DepthwiseTiming(
        rewrite=datapath.engine.rewrite_wait, gap=datapath.row_interval,
        after=datapath.latency + BF16WriteBack.STAGES + BF16AcceleratorCore.LAYER_END)
