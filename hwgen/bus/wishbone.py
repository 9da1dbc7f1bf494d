"""The Wishbone B4 classic bus signature, written with :mod:`amaranth.lib.wiring`.

amaranth-soc has ``amaranth_soc.wishbone.Signature``, but it is not released on PyPI; this one
has the same member names, directions and widths (seen from the initiator), so that a later
version can swap it for amaranth-soc's without changing a port. Only what the Wishbone top
uses is declared: no ``cti``/``bte`` (classic cycles), no ``stall`` (not pipelined), no
``rty``.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["WishboneSignature"]


class WishboneSignature(wiring.Signature):
    """A Wishbone B4 classic (non-pipelined) bus, as LiteX's ``wishbone.Interface``.

    Members, seen from the initiator (the CPU); a target component takes ``In(...)``:

    Parameters
    ----------
    addr_width : int
        Width of ``adr``, a word address (``data_width`` bits per address).
    data_width : int
        8, 16, 32 or 64.
    granularity : int
        Bits per ``sel`` bit: 8 (byte lanes) or ``data_width``.

    Members
    -------
    adr : Out(addr_width)
    dat_w : Out(data_width)
    dat_r : In(data_width)
    sel : Out(data_width // granularity)
    cyc, stb, we : Out(1)
    ack, err : In(1)
        One cycle each, ending the transfer that ``cyc & stb`` holds.

    Raises
    ------
    ValueError
        If a width is not one of those allowed, naming it.
    """

    def __init__(self, *, addr_width, data_width=32, granularity=8):
        if isinstance(addr_width, bool) or not isinstance(addr_width, int) \
                or not 0 <= addr_width <= 64:
            raise ValueError(f"addr_width must be an int in 0..64, not {addr_width!r}")
        if data_width not in (8, 16, 32, 64):
            raise ValueError(f"data_width must be 8, 16, 32 or 64, not {data_width!r}")
        if granularity not in (8, data_width):
            raise ValueError(f"granularity must be 8 or data_width ({data_width}), "
                             f"not {granularity!r}")
        self.addr_width = addr_width
        self.data_width = data_width
        self.granularity = granularity
        super().__init__({
            "adr": Out(addr_width),
            "dat_w": Out(data_width),
            "dat_r": In(data_width),
            "sel": Out(data_width // granularity),
            "cyc": Out(1),
            "stb": Out(1),
            "we": Out(1),
            "ack": In(1),
            "err": In(1),
        })

    def __eq__(self, other):
        return (type(other) is type(self) and other.addr_width == self.addr_width
                and other.data_width == self.data_width
                and other.granularity == self.granularity)

    def __hash__(self):
        return hash((self.addr_width, self.data_width, self.granularity))

    def __repr__(self):
        return (f"WishboneSignature(addr_width={self.addr_width}, "
                f"data_width={self.data_width}, granularity={self.granularity})")
