"""The cycles the units of a device add, as each unit states them: what the cycle models
(:mod:`hwgen.cycles`, the pass kinds' :mod:`hwgen.passes`, a sweep's cycle cache) read of an
:class:`~hwgen.implementation.Implementation`. Each unit builds its registers from the same
number (its ``stages_for`` or the like), so that the model and the gateware cannot disagree."""

import functools
import typing

__all__ = ["UnitLatencies", "unit_latencies"]


class UnitLatencies(typing.NamedTuple):
    """The cycles the units of a device add, as the units state them (:func:`unit_latencies`).
    """

    #: From a memory read's address to the word its reader takes
    #: (:func:`hwgen.device.memories.read_latency`).
    read: int
    #: The registers before a weight-stationary array's skew
    #: (:meth:`hwgen.device.systolic.WeightStationaryArray.input_stages_for`).
    array: int
    #: The activation feeder's delay of a chunk's first row
    #: (:meth:`hwgen.device.activation_feeder.ActivationFeeder.first_row_for`).
    first_row: int
    #: The stages of the requantizer and the write-back, each a cycle per chunk of a
    #: requantized layer (:meth:`hwgen.device.requantizer.Requantizer.stages_for`,
    #: :meth:`hwgen.device.writeback.WriteBack.stages_for`).
    requant: int
    #: The weight rows a tile loads a cycle
    #: (:meth:`hwgen.device.weight_feeder.WeightFeeder.rows_per_cycle_for`).
    weight_rows: int = 1


#: A device without an implementation's registers.
_PLAIN = UnitLatencies(read=1, array=0, first_row=0, requant=0)


@functools.lru_cache(maxsize=1024)
def unit_latencies(config, implementation=None):
    """Return the :class:`UnitLatencies` of ``config``'s device built with ``implementation``
    (None: the plain one), read from the units that build them."""
    if implementation is None:
        return _PLAIN
    # Imported when first asked: the gateware's package imports the pass kinds, which import
    # this module.
    from .device.activation_feeder import ActivationFeeder
    from .device.memories import read_latency
    from .device.requantizer import Requantizer
    from .device.systolic import WeightStationaryArray
    from .device.weight_feeder import WeightFeeder
    from .device.writeback import WriteBack

    impl = implementation
    return UnitLatencies(
        read=read_latency(impl), array=WeightStationaryArray.input_stages_for(impl),
        first_row=ActivationFeeder.first_row_for(config, impl),
        requant=Requantizer.stages_for(impl) + WriteBack.stages_for(impl),
        weight_rows=WeightFeeder.rows_per_cycle_for(config, impl))
