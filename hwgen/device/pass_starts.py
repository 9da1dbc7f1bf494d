"""The pass units' starts: the controller's pulses, given to the unit whose kind runs, each in a
register of its own."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..memmap import PassKind

__all__ = ["PassStarts"]


class PassStarts(wiring.Component):
    """Give the controller's ``start_layer``, ``prime`` and chunk starts to the pass unit of
    the running kind (the bank arbiter's units), each a register decoded a cycle early.

    A unit's start drives hundreds of registers (the walker's step, its read enables); a gate
    after the controller's register and the grant's was the 85F designs' longest path, so each
    start is a register of its own, from the controller's next values and the decode of the
    descriptor's next kind (``now``: this cycle's grant, a register of that decode).

    Parameters
    ----------
    arbiter : BankArbiter
        Its units (by name, the kinds each runs) and their decode.
    groups : dict of str to tuple of str
        Further starts, each for units that share blocks (the array's: the matrix datapath's
        and the depthwise unit's weight feeder and accumulators).

    Members
    -------
    kind_next : In(PassKind)
        The controller's ``kind_next``.
    prime_next, start_layer_next, start_chunk_next : In(1)
        The controller's next values of ``prime``, ``start_layer``, ``start_chunk``.
    now_<unit> : Out(1)
        Per unit: its kind runs (this cycle's grant, a register of the next kind's decode).
    prime_<unit>, start_<unit>, begin_<unit> : Out(1)
        Per unit: ``prime`` and ``start_layer`` while its kind runs; ``begin``: a chunk of its
        kind starts (the layer's first with ``start_layer``, or the next).
    prime_<group>, start_<group>, begin_<group> : Out(1)
        Per group: the same for any of its units' kinds.
    """

    def __init__(self, arbiter, groups=None):
        self.arbiter = arbiter
        self.groups = dict(groups or {})
        units = tuple(arbiter.kinds)
        for name, members in self.groups.items():
            unknown = [u for u in members if u not in units]
            if name in units or unknown:
                raise ValueError(f"group {name!r} of units {members!r}; allowed: a new name, "
                                 f"of units among {', '.join(units)}")
        outs = {f"{what}_{u}": Out(1) for u in (*units, *self.groups)
                for what in ("prime", "start", "begin")}
        super().__init__({
            "kind_next": In(PassKind), "prime_next": In(1), "start_layer_next": In(1),
            "start_chunk_next": In(1), **{f"now_{u}": Out(1) for u in units}, **outs,
        })

    def elaborate(self, platform):
        m = Module()
        units = tuple(self.arbiter.kinds)
        decoded = self.arbiter.decode(self.kind_next)
        # This cycle's grant: the default unit's out of reset (kind 0 is the matrix pass's).
        now = {u: Signal(name=f"grant_now_{u}", init=u == units[0]) for u in units}
        for u in units:
            m.d.sync += now[u].eq(decoded[u])
            m.d.comb += getattr(self, f"now_{u}").eq(now[u])
        for name, members in {**{u: (u,) for u in units}, **self.groups}.items():
            here = decoded_now = 0
            for u in members:
                here, decoded_now = here | now[u], decoded_now | decoded[u]
            m.d.sync += [
                getattr(self, f"prime_{name}").eq(self.prime_next & here),
                getattr(self, f"start_{name}").eq(self.start_layer_next & decoded_now),
                getattr(self, f"begin_{name}").eq((self.start_layer_next & decoded_now)
                                                  | (self.start_chunk_next & here)),
            ]
        return m
