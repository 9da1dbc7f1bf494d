"""The bank arbiter: the pass units' reads and writes of the activation banks, by pass kind.

Every pass unit (the matrix datapath, the pooler, the units later kinds add) reads and writes
the ``act_lanes`` activation banks; the pass running decides whose requests reach them. The
arbiter holds that choice in one place: a port per unit, granted by the running pass's
:class:`hwgen.memmap.PassKind`.
"""

import keyword

from amaranth.hdl import Const, Module, Mux, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..memmap import PassKind, act_addr_bits

__all__ = ["BankArbiter", "BankPortSignature"]


class BankPortSignature(wiring.Signature):
    """A unit's reads and writes of the activation banks, from the unit's side.

    Members
    -------
    rd_addr : Out(ArrayLayout(unsigned(act_addr_bits), act_lanes))
        Each bank's read address.
    rd_en : Out(act_lanes)
        Each bank reads (with registered reads: the memory reads; see ``rd_take``).
    rd_take : Out(1)
        Registered reads: the banks' registers take the words read (unused otherwise).
    rd_data : In(ArrayLayout(signed(in_bits), act_lanes))
        The words read, one per bank.
    wr_addr : Out(ArrayLayout(unsigned(act_addr_bits), act_lanes))
    wr_data : Out(ArrayLayout(signed(in_bits), act_lanes))
    wr_en : Out(act_lanes)
        Each bank's write.
    """

    def __init__(self, config):
        lanes = config.act_lanes
        addr = data.ArrayLayout(unsigned(act_addr_bits(config)), lanes)
        word = data.ArrayLayout(signed(config.in_bits), lanes)
        super().__init__({
            "rd_addr": Out(addr), "rd_en": Out(lanes), "rd_take": Out(1),
            "rd_data": In(word),
            "wr_addr": Out(addr), "wr_data": Out(word), "wr_en": Out(lanes),
        })


# The requests a port makes, as opposed to the words it is given (rd_data).
_REQUESTS = ("rd_addr", "rd_en", "rd_take", "wr_addr", "wr_data", "wr_en")


class BankArbiter(wiring.Component):
    """Give the activation banks to the pass unit of the running pass's kind.

    Parameters
    ----------
    config : AcceleratorConfig
    units : dict of str to iterable of PassKind
        The pass units by name (a Python identifier), each with the kinds it runs; a kind
        belongs to one unit at most. The first unit is the default: it also runs every kind
        no unit claims (a device runs only the kinds its program was compiled for), so a
        single unit is always granted and its port goes straight to the banks.
    registered : bool
        Hold the grant in a register: ``grant`` (and whose requests reach the banks) follows
        ``kind`` a cycle later, so that the kind's decode is not on the paths from the grant
        (the units' starts, the banks' addresses). For a kind that is set a cycle or more
        before any unit reads or writes; a unit's start that must follow the kind at once
        takes :meth:`decode` of the kind's next value, into a register of its own.

    Members
    -------
    kind : In(PassKind)
        The running pass's kind (the descriptor's ``kind``).
    units : In(Signature({name: Out(BankPortSignature(config))}))
        Each unit's port; a unit's requests reach the banks only while it is granted.
    grant : Out(StructLayout({name: 1}))
        The unit whose kind runs (exactly one bit high); with ``registered``, of the kind
        of the cycle before.
    banks : Out(BankPortSignature(config))
        The granted unit's requests, to the banks; every unit sees the words read.
    """

    def __init__(self, config, units, *, registered=False):
        units = dict(units)
        if not units:
            raise ValueError("units must name at least one pass unit, not none")
        claimed = {}
        for name, given in units.items():
            if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
                raise ValueError(f"unit name {name!r} is not a Python identifier")
            kinds = tuple(given)
            for kind in kinds:
                if not isinstance(kind, PassKind):
                    raise TypeError(f"unit {name!r}: kind {kind!r} is not a PassKind; "
                                    f"allowed: {', '.join(k.name for k in PassKind)}")
                if kind in claimed:
                    raise ValueError(f"unit {name!r}: kind {kind.name} is already claimed "
                                     f"by unit {claimed[kind]!r}; a kind runs on one unit")
                claimed[kind] = name
            units[name] = kinds
        self.config = config
        self.kinds = units
        self.registered = registered
        port = BankPortSignature(config)
        grants = data.StructLayout(dict.fromkeys(units, 1))
        super().__init__({
            "kind": In(PassKind),
            "units": In(wiring.Signature({name: Out(port) for name in units})),
            # The default unit is granted out of reset (kind 0 is the matrix pass's).
            "grant": Out(grants, init={next(iter(units)): 1}),
            "banks": Out(port),
        })

    def port(self, name):
        """Return unit ``name``'s port (its :class:`BankPortSignature`, from the unit's side)."""
        return getattr(self.units, name)

    def decode(self, kind):
        """Return the grant of each unit (a dict by name, exactly one high) for ``kind``, a
        value of the shape of :attr:`kind`: what ``grant`` shows for it without
        ``registered``."""
        default, *others = self.kinds
        grants = {}
        for name in others:
            grants[name] = Const(0, 1)
            for one in self.kinds[name]:
                grants[name] = grants[name] | (kind == one)
        # The default unit runs whatever no other unit claims.
        claimed = Const(0, 1)
        for grant in grants.values():
            claimed = claimed | grant
        return {default: ~claimed, **grants}

    def elaborate(self, platform):
        m = Module()
        default, *others = self.kinds
        grants = self.decode(self.kind)
        domain = m.d.sync if self.registered else m.d.comb
        for name, grant in grants.items():
            domain += self.grant[name].eq(grant)
        for field in _REQUESTS:
            value = getattr(self.port(default), field)
            for name in others:
                value = Mux(self.grant[name], getattr(self.port(name), field), value)
            m.d.comb += getattr(self.banks, field).eq(value)
        for name in self.kinds:
            m.d.comb += self.port(name).rd_data.eq(self.banks.rd_data)
        return m
