"""The host's access to the accelerator's memories, while it is idle.

Every memory has one read port and one write port. While a program runs (``busy``) the
accelerator's own blocks drive them; while it is idle the host port does. :class:`HostAccess`
decodes the host's requests and :func:`share_read` / :func:`share_write` put the two users of
a port behind one multiplexer, so that the blocks see a plain port of their own.

With registered reads (:func:`hwgen.device.memories.read_latency` two) every read port ends at
a register of its own, which takes the word the cycle after the memory does (an ECP5 build
folds it into the block RAM): the blocks address their ports a cycle ahead, and the host's
reads take a cycle more.

With a staged host port (:func:`host_stages`, :func:`stage_host`) the host's requests pass a
register first, each region's write enable decoded into a flip-flop of its own: a large ECP5's
memories then see flip-flops, not the link's decoding routed across the die.
"""

from amaranth.hdl import Cat, Const, Mux, Signal

from ..implementation import Registers
from ..memmap import HostPortSignature, Region
from .shared_ports import split_act_banks

__all__ = ["HostAccess", "act_banks", "host_read", "host_read_latency", "host_stages",
           "host_write", "relay_host", "same_word_port", "share_read", "share_write",
           "stage_host"]

#: The host port's members that the host drives, and those the accelerator answers with.
_REQUESTS = ("region", "addr", "wdata", "we", "re", "start", "batch", "clear", "snapshot")
_STROBES = ("we", "re", "start")
_ANSWERS = ("rdata", "rvalid")
_COUNTERS = ("cycles", "busy_cycles", "macs")


def host_stages(implementation):
    """Return the registers the host port's requests pass on a device built with
    ``implementation`` (:func:`stage_host`): one from ``Registers.HOST`` on, none before."""
    return int(implementation.registers >= Registers.HOST)


def host_read_latency(read_latency, stages):
    """Return the cycles from the host port's ``re`` to its ``rvalid``: the memories'
    ``read_latency`` (:func:`hwgen.device.memories.read_latency`), two more with a staged port
    (``stages`` 1, :func:`host_stages`: the request and the answer each pass a register)."""
    return read_latency + 2 * stages


def stage_host(m, host, config, stages=1):
    """Put a register between the host port ``host`` and the accelerator; return the port the
    accelerator's blocks use instead, and each region's write strobe (a flip-flop). With
    ``stages`` 0 (:func:`host_stages`) return ``host`` itself and None (no strobes).

    Every request takes effect a cycle later, in the order it came; the strobes (``we``,
    ``re``, ``start``) are dropped while ``busy`` is high, as the accelerator drops them, so
    that no access reaches a memory while a run uses it. ``host.busy`` is the accelerator's
    ``busy`` or a ``start`` in the register: it still rises the cycle after ``start``. A
    read's answer (``rdata``, ``rvalid``) passes a register too (the words of memories across
    the die meet in its multiplexer), so reads take two cycles more; the counters pass as
    they are.

    Returns
    -------
    inner : the staged port (:class:`hwgen.memmap.HostPortSignature`'s members)
    we : dict of Region to Signal or None
        ``inner.we`` for that region, decoded before the register.
    """
    if stages not in (0, 1):
        raise ValueError(f"stage_host: stages={stages!r}; allowed: 0, 1")
    if not stages:
        return host, None
    inner = HostPortSignature(config).create(path=("host_q",))
    idle = ~host.busy
    relay_host(m, host, inner, gate=idle)
    we = {r: Signal(name=f"host_q_we_{r.name.lower()}") for r in Region}
    m.d.sync += [we[r].eq(host.we & idle & (host.region == r)) for r in Region]
    return inner, we


def relay_host(m, outer, inner, *, gate=None):
    """Join the host port ``outer`` (the frame engine's) to ``inner`` (the accelerator's)
    through a register each way: every request reaches the accelerator a cycle later, every
    answer the engine a cycle later, in order; the counters pass as they are. ``outer.busy`` is
    the accelerator's or a ``start`` in the register, so that it still rises the cycle after
    ``start``. With ``gate`` (a signal) the strobes (``we``, ``re``, ``start``) pass only in
    the cycles it is high.

    On a large ECP5 (``Registers.ARRAY``, :class:`hwgen.device.Device`) the placer pulled the
    engine's word register towards the staged port's registers in the die's middle, and the
    engine's decisions crossed the die to it: with the relay's registers between, each hop
    is shorter.
    """
    def request(name):
        value = getattr(outer, name)
        return value & gate if gate is not None and name in _STROBES else value

    m.d.sync += [getattr(inner, name).eq(request(name)) for name in _REQUESTS]
    m.d.sync += [getattr(outer, name).eq(getattr(inner, name)) for name in _ANSWERS]
    m.d.comb += [getattr(outer, name).eq(getattr(inner, name)) for name in _COUNTERS]
    m.d.comb += outer.busy.eq(inner.busy | inner.start)


class HostAccess:
    """The host's requests of one cycle, decoded once for every memory.

    Parameters
    ----------
    m : Module
        Where the decoding and the read-latency register live.
    host : the accelerator's host port (:class:`hwgen.memmap.HostPortSignature`)
    busy : Signal
        A program is running: the host's memory accesses are ignored.
    registered : bool
        Reads end at a register: they take two cycles, not one.
    we : dict of Region to Signal or None
        The host's write strobe of each region, decoded already (:func:`stage_host`'s: a
        staged request is never one made while busy); None: decoded here from ``host``.

    Attributes
    ----------
    we : dict of Region to Signal
        The host writes this region in this cycle.
    rd : Signal
        The host reads (any region) in this cycle.
    rd_q : Signal
        ``rd`` a cycle ago (registered reads: the cycle the read's register takes the word);
        ``Const(0)`` otherwise.
    words : dict of Region to Value
        The word each region's read returns, filled in by the memories' users; see
        :meth:`drive_read_data`.
    """

    def __init__(self, m, host, busy, *, registered, we=None):
        self.host = host
        self.busy = busy
        self.registered = registered
        idle = ~busy
        if we is None:
            we = {r: Signal(name=f"host_we_{r.name.lower()}") for r in Region}
            for r in Region:
                m.d.comb += we[r].eq(idle & host.we & (host.region == r))
        self.we = we
        self.rd = Signal(name="host_rd")
        m.d.comb += self.rd.eq(idle & host.re)
        if registered:
            self.rd_q = Signal(name="host_rd_q")
            m.d.sync += self.rd_q.eq(self.rd)
        else:
            self.rd_q = Const(0, 1)
        self.words = {}

    def drive_read_data(self, m):
        """Drive the host port's ``rdata`` and ``rvalid`` from :attr:`words`, a fixed latency
        after ``re``: one cycle, two with registered reads. Narrower words are zero-extended:
        the port promises zeros above a region's word."""
        host = self.host
        region_q = Signal(Region)
        m.d.sync += region_q.eq(host.region)
        if self.registered:
            region_qq = Signal(Region)
            m.d.sync += [region_qq.eq(region_q), host.rvalid.eq(self.rd_q)]
            region_q = region_qq
        else:
            m.d.sync += host.rvalid.eq(self.rd)
        with m.Switch(region_q):
            for region, word in self.words.items():
                with m.Case(region):
                    m.d.comb += host.rdata.eq(word)


def share_read(m, port, access, region, *, addr, en, port_en=1, always_take=False,
               exclusive=False, host_addr=None, name):
    """Drive read ``port`` of ``region``'s memory from a block's request while busy and from
    the host while idle; return the word (the port's data, or the register after it).

    Plain reads: the port reads ``addr`` when ``en``, as a block expects. Registered reads:
    ``addr`` is a cycle ahead, the port reads it when ``port_en`` (the host's reads: always)
    and the register takes the word when ``en`` (or every cycle, ``always_take``); the port
    does not read in a cycle in which the host writes the memory (a block RAM's read of the
    word being written is undefined). ``exclusive``: plain reads never happen while the host
    writes either (a single-port RAM). ``host_addr`` replaces the host port's address while
    idle. The word is also what the host's reads of ``region`` return.
    """
    busy = access.busy
    host = access.host
    hwe = access.we[region]
    host_addr = host.addr if host_addr is None else host_addr
    m.d.comb += port.addr.eq(Mux(busy, addr, host_addr))
    if access.registered:
        word = Signal.like(port.data, name=f"{name}_q", reset_less=True)
        m.d.comb += port.en.eq(~hwe & (~busy | port_en))
        if always_take:
            m.d.sync += word.eq(port.data)
        else:
            with m.If(Mux(busy, en, access.rd_q)):
                m.d.sync += word.eq(port.data)
    else:
        read = Mux(busy, en, access.rd)
        m.d.comb += port.en.eq(read & ~hwe if exclusive else read)
        word = port.data
    access.words[region] = word
    return word


def share_write(m, port, access, region, *, addr, data, en, host_data=None):
    """Drive write ``port`` of ``region``'s memory from a block while busy and from the host
    while idle (``host_data``: the host's word, by default its ``wdata``)."""
    busy = access.busy
    host = access.host
    host_data = host.wdata if host_data is None else host_data
    m.d.comb += [
        port.addr.eq(Mux(busy, addr, host.addr)),
        port.data.eq(Mux(busy, data, host_data)),
        port.en.eq(Mux(busy, en, access.we[region])),
    ]


def host_write(m, port, access, region):
    """Drive write ``port`` of ``region``'s memory from the host alone."""
    host = access.host
    m.d.comb += [port.addr.eq(host.addr), port.data.eq(host.wdata),
                 port.en.eq(access.we[region])]


def host_read(m, port, access, region, *, name):
    """Drive read ``port`` of ``region``'s memory from the host alone (the output memory);
    with registered reads its word passes a register ``<name>_q``, as the shared memories'
    do."""
    m.d.comb += [port.addr.eq(access.host.addr), port.en.eq(access.rd)]
    word = port.data
    if access.registered:
        word = Signal.like(port.data, name=f"{name}_q", reset_less=True)
        with m.If(access.rd_q):
            m.d.sync += word.eq(port.data)
    access.words[region] = word


def act_banks(m, mems, access, banks, config):
    """Drive the activation banks (``mems``' ``act*``) from the bank arbiter's ``banks``
    (its granted unit's requests) while busy and from the host while idle, the banks below
    ``act_spram_depth`` split into single-port memories
    (:func:`~hwgen.device.shared_ports.split_act_banks`); the words read are the arbiter's
    ``rd_data`` and what the host's reads of ACT return."""
    if config.act_spram_depth:
        words = split_act_banks(m, mems, access, banks, config)
    else:
        words = []
        for b in range(config.act_lanes):
            rd, wr = mems[f"act{b}"].read_port(), mems[f"act{b}"].write_port()
            # Registered reads: the port reads at rd_en, the register takes at rd_take.
            en, port_en = ((banks.rd_take, banks.rd_en[b]) if access.registered
                           else (banks.rd_en[b], 1))
            words.append(share_read(m, rd, access, Region.ACT, addr=banks.rd_addr[b], en=en,
                                    port_en=port_en, name=f"act{b}"))
            share_write(m, wr, access, Region.ACT, addr=banks.wr_addr[b],
                        data=banks.wr_data[b], en=banks.wr_en[b],
                        host_data=access.host.wdata[b * config.in_bits:
                                                    (b + 1) * config.in_bits])
    m.d.comb += banks.rd_data.eq(Cat(*words))
    access.words[Region.ACT] = Cat(*words)


def same_word_port(m, port, config, *, read, write=None):
    """Drive a bank arbiter ``port`` (:class:`~hwgen.device.bank_arbiter.BankPortSignature`)
    for a unit that reads (``read``: its ``rd_addr``, ``rd_en``, ``rd_data``) and writes
    (``write``: its ``wr_addr``, ``wr_data``, ``wr_en``) the same word of every bank, taking
    every read."""
    lanes = range(config.act_lanes)
    m.d.comb += [port.rd_addr[b].eq(read.rd_addr) for b in lanes]
    m.d.comb += [port.rd_en.eq(read.rd_en.replicate(config.act_lanes)), port.rd_take.eq(1),
                 read.rd_data.eq(port.rd_data)]
    if write is not None:
        m.d.comb += [port.wr_addr[b].eq(write.wr_addr) for b in lanes]
        m.d.comb += [port.wr_data.eq(write.wr_data),
                     port.wr_en.eq(write.wr_en.replicate(config.act_lanes))]
