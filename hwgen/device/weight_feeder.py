"""The weight feeder: streams a layer's weight tiles to the engine in the order they are used."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..memmap import descriptor_layout
from .engine import weight_row_layout, weight_transfer_layout
from .memories import read_latency, weight_groups
from .skid import Skid
from .weight_transfer import pair_steps, weight_transfer

__all__ = ["WeightFeeder"]


class WeightFeeder(wiring.Component):
    """Read a layer's weight rows from the weight memory and stream them to the engine.

    The compiler stores the tiles in the order they are used (output tile major, then reduction
    tile, ``rows`` words each from ``w_base``), so the feeder walks one address up; it keeps
    the position ``(row, kt, nt)`` in counters rather than a count of the words left (a
    multiplier of ``k_tiles * n_tiles * rows``). A layer whose geometry has ``wrep`` (an average
    pool) has one tile, read again for every ``(nt, kt)``: after each tile's last row the
    address goes back to ``w_base``. A layer whose geometry has ``wdiag`` (a depthwise
    convolution) stores each tile as one word, its diagonal: the feeder reads that word for each
    of the tile's ``rows`` rows and sends row ``i`` with every lane but ``i`` zero. A device
    without spatial layers has neither.

    With ``pairs`` each transfer carries rows ``i`` and ``i + 1`` of a tile (the second from a
    second read port at the next address; a tile of an odd number of rows ends with one, ``two``
    low): a tile loads in half the cycles. The host writes WEIGHT only while idle, so during a
    run the write's port reads: a DP16KD's two ports, no block more.

    Parameters
    ----------
    config : AcceleratorConfig
    registered_reads : bool
        The memory's word passes a register: the feeder addresses the memory a cycle ahead
        (``rd_addr`` is the address's next value), and a :class:`~hwgen.device.skid.Skid`
        between it and the engine lets it move on without waiting for the engine's ``ready``.
    copies : int
        Registered reads: the address and the port's read for this many memories, each from
        registers of its own (1..4), which synthesis keeps apart (each copy differs from the
        others in its initial value or its polarity), so that each memory's address is a net
        of its own (:func:`~hwgen.device.memories.weight_groups`). The same values every
        cycle of a run.
    pairs : bool
        Two rows a transfer (:meth:`rows_per_cycle_for`); only with ``registered_reads``.

    Members
    -------
    start : In(1)
        A pass over the layer's tiles starts (each chunk of its output pixels takes one).
    desc : In(descriptor_layout(config))
        The layer's descriptor (``w_base``, ``k_tiles``, ``n_tiles``).
    k_end, n_end : In
        The layer's last reduction and output tile.
    wrep : In(1)
        The geometry's ``wrep`` (:func:`~hwgen.memmap.geometry_layout`), held while the layer
        runs; not read without spatial layers.
    wdiag : In(1)
        The geometry's ``wdiag``, likewise.
    tall : In(1)
        The layer's tiles have ``array_rows`` words (a depthwise pass on a device with the
        depthwise unit's extra rows), else ``rows``; held while the layer runs.
    rd_addr : Out(ArrayLayout(range(config.weight_depth + 1), copies))
    rd_en : Out(1)
        The weight memory's read request: the word at ``rd_addr`` is read (plain reads) or
        taken into the register (registered reads) when ``rd_en``; each copy alike.
    rd_port : Out(copies)
        Registered reads: the memory's port reads ``rd_addr`` (the cycles the address moves,
        a chunk's ``start`` and each word taken); otherwise it holds its word, the one the
        register takes next. Plain reads: ``rd_en``.
    rd_data : In(weight_row_layout(config))
        The word read.
    rd_addr_b : Out(ArrayLayout(range(config.weight_depth + 1), copies))
    rd_data_b : In(weight_row_layout(config))
        Only with ``pairs``: the second port's address (read and taken as the first's) and
        word.
    o_weight : Out(stream.Signature(weight_transfer_layout(config, 1 + pairs)))
        To the engine's ``i_weight``.
    """

    #: Copies that initial values and polarity keep apart in a one-bit register.
    MAX_COPIES = 4

    @classmethod
    def for_memories(cls, config, implementation):
        """Return the feeder of the WEIGHT memories ``implementation`` builds for ``config``
        (:func:`~hwgen.device.memories.make_memories`): registered reads as theirs, an address
        copy per memory (memories share copies past :attr:`MAX_COPIES`), pairs where
        :meth:`rows_per_cycle_for` says."""
        return cls(config, registered_reads=read_latency(implementation) > 1,
                   copies=min(len(weight_groups(config, implementation)), cls.MAX_COPIES),
                   pairs=cls.rows_per_cycle_for(config, implementation) == 2)

    @staticmethod
    def rows_per_cycle_for(config, implementation):
        """Return the weight rows a tile loads a cycle with ``implementation``: two with its
        ``weight_pairs`` (:mod:`hwgen.cycles` counts it) for an int8 weight-stationary array,
        else one."""
        return 1 + (implementation is not None and implementation.pairs_for(config))

    def __init__(self, config, *, registered_reads=False, copies=1, pairs=False):
        if copies not in range(1, self.MAX_COPIES + 1) or (copies > 1 and not registered_reads):
            raise ValueError(f"WeightFeeder: copies={copies!r}; allowed: 1 to {self.MAX_COPIES}, "
                             "more than 1 only with registered_reads")
        if pairs and not registered_reads:
            raise ValueError("WeightFeeder: pairs=True needs registered_reads=True")
        self.config = config
        self.registered_reads = registered_reads
        self.copies = copies
        self.pairs = pairs
        layout = descriptor_layout(config)
        row = weight_row_layout(config)
        addrs = data.ArrayLayout(range(config.weight_depth + 1), copies)
        second = {"rd_addr_b": Out(addrs), "rd_data_b": In(row)} if pairs else {}
        super().__init__({
            "start": In(1),
            "desc": In(layout),
            "k_end": In(layout.members["k_tiles"]),
            "n_end": In(layout.members["n_tiles"]),
            "wrep": In(1),
            "wdiag": In(1),
            "tall": In(1),
            "rd_addr": Out(addrs),
            "rd_en": Out(1),
            "rd_port": Out(copies),
            "rd_data": In(row),
            **second,
            "o_weight": Out(stream.Signature(weight_transfer_layout(config, 1 + pairs))),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        nd = self.desc
        step = 1 + self.pairs     # rows a transfer
        addr = Signal(range(cfg.weight_depth + 1))
        addr_n = Signal.like(addr, name="addr_n")     # its next value
        row = Signal(range(cfg.array_rows))

        def at_end(back):
            """The transfer ``back`` before the tile's last; with ``back``, a tile of one
            transfer too."""
            def end(n):
                last = step * ((n - 1) // step)     # the row the tile's last transfer starts
                return (row == last - back * step) | (back and last == 0)
            return (end(cfg.rows) if cfg.array_rows == cfg.rows
                    else Mux(self.tall, end(cfg.array_rows), end(cfg.rows)))
        kt = Signal.like(nd.k_tiles, name="kt")
        nt = Signal.like(nd.n_tiles, name="nt")
        more = Signal()      # words of the layer left to read
        more_n = Signal(name="more_n")      # its next value
        valid = Signal()     # the word in `rd_data` is the layer's
        take = Signal()
        # Without spatial layers there is no wrep; with them, `again` (a register: the next
        # word taken ends a tile of a wrep layer) sends the address back to w_base.
        again, again_n = Signal(), Signal(name="again_n")     # again_n: its next value
        # Likewise `stay` (the next word taken does not end a tile of a wdiag layer) holds the
        # address, and `keep` (a register: the lanes of the word in rd_data that its row
        # sends) zeroes the others.
        stay, stay_n = Signal(), Signal(name="stay_n")
        keep = [Signal(cfg.cols, init=(1 << cfg.cols) - 1, name=f"keep{r}" if r else "keep")
                for r in range(step)]
        m.d.comb += [again_n.eq(again), stay_n.eq(stay)]
        m.d.sync += [again.eq(again_n), stay.eq(stay_n)]
        if cfg.spatial:
            one = cfg.rows <= step      # a tile of one transfer
            with m.If(self.start):
                m.d.comb += [again_n.eq(self.wrep & one), stay_n.eq(self.wdiag & (not one))]
            with m.Elif(take & more):
                ends = at_end(1)
                m.d.comb += [again_n.eq(self.wrep & ends), stay_n.eq(self.wdiag & ~ends)]
            with m.If(~self.start & take):
                for r in range(step):
                    lanes = [((row + r if r else row) == j) | ~self.wdiag
                             for j in range(cfg.cols)]
                    m.d.sync += keep[r].eq(Cat(*lanes))
        word = weight_transfer(m, cfg, keep, row, take=take, start=self.start, tall=self.tall,
                               wdiag=self.wdiag, rd_data=self.rd_data,
                               rd_data_b=self.rd_data_b if self.pairs else None)
        m.d.comb += addr_n.eq(addr)
        m.d.sync += addr.eq(addr_n)
        if self.registered_reads:
            m.submodules.skid = skid = Skid(weight_transfer_layout(cfg, step))
            m.d.comb += [skid.valid.eq(valid), skid.payload.eq(word),
                         take.eq(skid.take), self.rd_en.eq(take)]
            wiring.connect(m, skid.o, wiring.flipped(self.o_weight))
            addr_next = self._ahead(m, addr, addr_n, again_n, stay_n, take=take, more=more,
                                    again=again, stay=stay, skid=skid, more_n=more_n,
                                    **(pair_steps(cfg, at_end, tall=self.tall, wdiag=self.wdiag)
                                       if self.pairs else {}))
        else:
            m.d.comb += [take.eq(~valid | self.o_weight.ready),
                         self.o_weight.valid.eq(valid), self.o_weight.payload.eq(word),
                         self.rd_addr[0].eq(addr), self.rd_en.eq(take), self.rd_port.eq(take)]
            addr_next = addr + 1
        m.d.comb += more_n.eq(more)
        m.d.sync += more.eq(more_n)
        with m.If(self.start):
            m.d.sync += [row.eq(0), kt.eq(0), nt.eq(0), valid.eq(0)]
            m.d.comb += [addr_n.eq(nd.w_base), more_n.eq((nd.k_tiles != 0) & (nd.n_tiles != 0))]
        # Not gated by `busy` (many loads, slow on a large ECP5): outside a run `more` and
        # `valid` are 0 (a layer's weights are all taken before it ends), so taking changes
        # nothing.
        with m.Elif(take):
            m.d.sync += valid.eq(more)
            with m.If(more):
                m.d.sync += row.eq(row + step)
                m.d.comb += addr_n.eq(Mux(again, nd.w_base, Mux(stay, addr, addr_next)))
                with m.If(at_end(0)):
                    m.d.sync += row.eq(0)
                    with m.If(kt != self.k_end):
                        m.d.sync += kt.eq(kt + 1)
                    with m.Else():
                        m.d.sync += [kt.eq(0), nt.eq(nt + 1)]
                        with m.If(nt == self.n_end):
                            m.d.comb += more_n.eq(0)
        return m

    def _ahead(self, m, addr, addr_n, again_n, stay_n, *, take, more, again, stay, skid,
               more_n, inc_first=1, inc_move=1):
        """Address the memories a cycle ahead (registered reads); return the register that
        holds the address the next transfer moves to.

        That address (``addr`` plus a transfer's rows) is in a register, and the address of the
        next word taken (``ahead``) in another: the memory's address is a multiplexer of
        registers, and the port reads only when the address moves (a word taken), so the skid's
        decision reaches the port's enable, not the address (a bus to dozens of block RAMs on a
        large ECP5). With pairs the second port's address (``ahead_b``, the first's plus one)
        is kept likewise, from registers of its own; the words a transfer moves the address
        are ``inc_first`` for a tile's first, ``inc_move`` for the one after the current one.
        """
        cfg = self.config
        nd = self.desc
        step = 1 + self.pairs
        ports = []
        for suffix, offset in [("", 0)] + ([("_b", 1)] if self.pairs else []):
            nxt = Signal(range(cfg.weight_depth + step + 1), name=f"addr_p1{suffix}")
            nxt_n = Signal.like(nxt, name=f"addr_p1{suffix}_n")
            ahead = Signal.like(addr, name=f"ahead{suffix}")
            m.d.comb += nxt_n.eq(nxt)
            # Each branch its own sum: a shared one would change the netlist that the
            # preset's recorded build measured.
            with m.If(self.start):
                m.d.comb += nxt_n.eq(nd.w_base + inc_first + offset if self.pairs
                                     else nd.w_base + 1)
            with m.Elif(take & more & again):
                m.d.comb += nxt_n.eq(nd.w_base + inc_first + offset if self.pairs
                                     else nd.w_base + 1)
            with m.Elif(take & more & ~stay):
                m.d.comb += nxt_n.eq(nxt + inc_move)
            m.d.sync += nxt.eq(nxt_n)
            ahead_n = Signal.like(ahead, name=f"ahead{suffix}_n")
            if offset:    # not read in a wdiag layer: it need not stay
                m.d.comb += ahead_n.eq(Mux(again_n, nd.w_base + offset, nxt_n))
            else:
                m.d.comb += ahead_n.eq(Mux(again_n, nd.w_base, Mux(stay_n, addr_n, nxt_n)))
            ports.append((nxt, ahead, ahead_n, offset))
        # Whether the port reads after the chunk's start (a word taken), a cycle early in a
        # register: the skid's decision through a gate into the enables of all the WEIGHT
        # blocks was the 85F ResNet-8 design's longest path.
        reads_q = Signal(name="reads_n")
        m.d.comb += reads_q.eq(skid.take_next & more_n)
        for i in range(self.copies):
            # Copy i's bits start at 0 or 1 and hold their value or its inverse: no two
            # copies' flip-flops alike, so synthesis merges none of them.
            ones, inverted = i % 2, i >= 2
            for _, ahead, ahead_n, offset in ports:
                copy = ahead if i == 0 else Signal.like(ahead, name=f"{ahead.name}_{i}",
                                                        init=-ones % (1 << len(ahead)))
                if not offset:
                    reads = Signal(name="reads" if i == 0 else f"reads_{i}", init=ones)
                if inverted:
                    m.d.sync += [copy.eq(~ahead_n)] + ([] if offset else [reads.eq(~reads_q)])
                    value, read = ~copy, ~reads
                else:
                    m.d.sync += [copy.eq(ahead_n)] + ([] if offset else [reads.eq(reads_q)])
                    value, read = copy, reads
                if offset:
                    m.d.comb += self.rd_addr_b[i].eq(Mux(self.start, nd.w_base + offset, value))
                else:
                    m.d.comb += [self.rd_addr[i].eq(Mux(self.start, nd.w_base, value)),
                                 self.rd_port[i].eq(self.start | read)]
        return ports[0][0]
