"""The AXI4-Stream signature (``tdata``, ``tvalid``, ``tready``, ``tlast``).

``amaranth.lib.stream`` 0.5 has ``payload``/``valid``/``ready`` only, no ``last``; this is the
subset of AXI4-Stream the AXI4-Stream top uses, declared with :mod:`amaranth.lib.wiring` so
that its ports carry AXI's names.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiStreamSignature"]


class AxiStreamSignature(wiring.Signature):
    """An AXI4-Stream of ``data_width``-bit beats, seen from its transmitter.

    No ``tkeep``/``tstrb`` (every beat is whole), ``tid``, ``tdest`` or ``tuser``.

    Parameters
    ----------
    data_width : int
        Bits of ``tdata``, a multiple of 8.

    Members
    -------
    tdata : Out(data_width)
    tvalid : Out(1)
    tready : In(1)
    tlast : Out(1)
        The beat ends a packet (here: a protocol frame).

    Raises
    ------
    ValueError
        If ``data_width`` is not a positive multiple of 8.
    """

    def __init__(self, data_width=8):
        if isinstance(data_width, bool) or not isinstance(data_width, int) \
                or data_width < 8 or data_width % 8:
            raise ValueError(f"data_width must be a positive multiple of 8, not {data_width!r}")
        self.data_width = data_width
        super().__init__({"tdata": Out(data_width), "tvalid": Out(1), "tready": In(1),
                          "tlast": Out(1)})

    def __eq__(self, other):
        return type(other) is type(self) and other.data_width == self.data_width

    def __hash__(self):
        return hash(self.data_width)

    def __repr__(self):
        return f"AxiStreamSignature({self.data_width})"
