"""The activation feeder: streams a layer's input rows to the engine, one reduction tile at a
time, read across the activation banks."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..memmap import batch_bits, descriptor_layout
from .engine import act_row_layout
from .positions import advance
from .skid import Skid

__all__ = ["ActivationFeeder"]


class ActivationFeeder(wiring.Component):
    """Read each reduction tile of a layer's ``M`` input rows and stream it to the engine.

    For every output tile ``nt`` and reduction tile ``kt`` the feeder sends the batch's rows,
    each the ``rows`` elements ``kt * rows ..`` of an input row (row ``m`` starts at word
    ``src_base + m * src_stride``; element ``k`` is in bank ``k % lanes``, word ``k // lanes``).
    A tile's elements span the banks from any lane: the feeder reads every bank at its own word
    and rotates the lanes into place. Words past a row's end are not read (they may be the
    first words of the area the layer is writing) and feed zeros.

    Parameters
    ----------
    config : AcceleratorConfig
        With ``requant_steps > 1`` the rows of a requantized layer's last reduction tile enter
        the engine ``requant_steps`` cycles apart, as fast as the requantization takes them.
    registered_reads : bool
        The banks' words pass registers: every bank is addressed a cycle ahead, from registers
        only (:meth:`_lane_addresses`), and a :class:`~hwgen.device.skid.Skid` lets the feeder
        move on without waiting for the engine's ``ready`` (one requantization step only).

    Members
    -------
    busy, start_layer : In(1)
    next_desc, desc : In(descriptor_layout(config))
    last_row, before_last_row, k_end, n_end : In
        The controller's loop bounds.
    rd_addr : Out(ArrayLayout(unsigned, act_lanes))
    rd_en : Out(act_lanes)
        Each bank's read: its address and whether to read it (plain reads), or its address a
        cycle ahead and whether to read it then (registered reads).
    rd_take : Out(1)
        Registered reads: the banks' registers take the words.
    rd_data : In(ArrayLayout(signed(in_bits), act_lanes))
        The banks' words.
    o_act : Out(stream.Signature(act_row_layout(config)))
        To the engine's ``i_act``.
    """

    def __init__(self, config, *, registered_reads=False):
        self.config = config
        self.registered_reads = registered_reads
        layout = descriptor_layout(config)
        lanes = config.act_lanes
        batch = unsigned(batch_bits(config))
        addr = unsigned(Signal(range(config.act_depth)).shape().width)
        super().__init__({
            "busy": In(1),
            "start_layer": In(1),
            "next_desc": In(layout),
            "desc": In(layout),
            "last_row": In(batch),
            "before_last_row": In(batch),
            "k_end": In(layout.members["k_tiles"]),
            "n_end": In(layout.members["n_tiles"]),
            "rd_addr": Out(data.ArrayLayout(addr, lanes)),
            "rd_en": Out(lanes),
            "rd_take": Out(1),
            "rd_data": In(data.ArrayLayout(signed(config.in_bits), lanes)),
            "o_act": Out(stream.Signature(act_row_layout(config))),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        rows, lanes = cfg.rows, cfg.act_lanes
        desc, nd = self.desc, self.next_desc
        busy, last_row = self.busy, self.last_row
        a_m = Signal.like(self.last_row, name="a_m")
        kt = Signal.like(desc.k_tiles, name="kt")
        nt = Signal.like(desc.n_tiles, name="nt")
        row = Signal(range(cfg.act_depth * 2))       # src_base + m * src_stride
        kword = Signal(range(cfg.act_depth * 2))     # k0 // lanes
        krem = Signal(range(lanes))                  # k0 % lanes
        active = Signal()    # rows of the layer left to send
        valid = Signal()     # the row in `feed` is the layer's
        last = Signal()
        rem_q = Signal.like(krem)
        take = Signal()
        o = self.o_act
        feed = Signal(o.payload.shape(), name="feed")   # the row in `valid`
        steps = cfg.requant_steps
        if self.registered_reads and steps == 1:
            m.submodules.skid = skid = Skid(o.payload.shape())
            m.d.comb += [skid.valid.eq(valid), skid.payload.eq(feed), take.eq(skid.take)]
            wiring.connect(m, skid.o, wiring.flipped(o))
        elif steps == 1:
            m.d.comb += [take.eq(~valid | o.ready), o.valid.eq(valid), o.payload.eq(feed)]
        else:
            m.d.comb += o.payload.eq(feed)
            # Rows whose results are requantized enter `steps` cycles apart: the requantization
            # takes that long per row (it has `requant_lanes` of the `cols` lanes).
            final = Signal()    # the row in `valid` is of a requantized last k-tile
            gap = Signal(range(steps))
            gate = gap == 0
            m.d.comb += [take.eq(~valid | (o.ready & gate)), o.valid.eq(valid & gate)]
            with m.If(valid & gate & o.ready & final):
                m.d.sync += gap.eq(steps - 1)
            with m.Elif(~gate):
                m.d.sync += gap.eq(gap - 1)
            with m.If(busy & take):
                m.d.sync += final.eq(~desc.raw & (kt == self.k_end))
        # Words past the end of a row belong to the next row (or lie past the memory): their
        # lanes meet zero weights, but must read as zero, not as whatever (or X) is there.
        inrow = Signal(lanes)
        inrow_q = Signal(lanes)
        # The address registers' next values: a registered read addresses the memory with them.
        row_n, kword_n, krem_n = (Signal.like(v, name=f"{v.name}_n")
                                  for v in (row, kword, krem))
        m.d.comb += [row_n.eq(row), kword_n.eq(kword), krem_n.eq(krem)]
        m.d.sync += [row.eq(row_n), kword.eq(kword_n), krem.eq(krem_n)]
        for b in range(lanes):
            m.d.comb += inrow[b].eq(kword + (Const(b) < krem) < desc.src_stride)
        if self.registered_reads:
            # `active` is set only while busy, and never in DECODE (start_layer): neither needs
            # to be in the address's path (busy's many loads make it slow on a large ECP5).
            nexts, next_inrow = self._lane_addresses(
                m, advance_=take & active, a_m=a_m, kt=kt, inrow=inrow)
            m.d.comb += self.rd_take.eq(take)
            for b in range(lanes):
                m.d.comb += [self.rd_addr[b].eq(nexts[b]), self.rd_en[b].eq(next_inrow[b])]
        else:
            for b in range(lanes):
                word = kword + (Const(b) < krem)
                m.d.comb += [self.rd_addr[b].eq(row + word), self.rd_en[b].eq(take & inrow[b])]
        lane_data = [Mux(inrow_q[b], self.rd_data[b], 0) for b in range(lanes)]
        if rows < lanes:
            # Rotate so that engine lane i is element k0 + i.
            for i in range(rows):
                with m.Switch(rem_q):
                    for r in range(lanes):
                        with m.Case(r):
                            m.d.comb += feed.data[i].eq(lane_data[(r + i) % lanes])
        else:
            for i in range(rows):
                m.d.comb += feed.data[i].eq(lane_data[i])
        m.d.comb += feed.last.eq(last)
        with m.If(self.start_layer):
            m.d.sync += [a_m.eq(0), kt.eq(0), nt.eq(0), active.eq(1), valid.eq(0)]
            m.d.comb += [row_n.eq(nd.src_base), kword_n.eq(0), krem_n.eq(0)]
        with m.Elif(busy & take):
            m.d.sync += [valid.eq(active), last.eq(a_m == last_row), rem_q.eq(krem),
                         inrow_q.eq(inrow)]
            with m.If(active):
                with m.If(a_m != last_row):
                    m.d.sync += a_m.eq(a_m + 1)
                    m.d.comb += row_n.eq(row + desc.src_stride)
                with m.Else():
                    m.d.sync += a_m.eq(0)
                    m.d.comb += row_n.eq(desc.src_base)
                    with m.If(kt != self.k_end):
                        m.d.sync += kt.eq(kt + 1)
                        advance(m, kword_n, krem_n, rows, lanes, frm=(kword, krem),
                                domain="comb")
                    with m.Else():
                        m.d.sync += kt.eq(0)
                        m.d.comb += [kword_n.eq(0), krem_n.eq(0)]
                        with m.If(nt != self.n_end):
                            m.d.sync += nt.eq(nt + 1)
                        with m.Else():
                            m.d.sync += active.eq(0)
        return m

    def _lane_addresses(self, m, *, advance_, a_m, kt, inrow):
        """Return the next address of each activation bank, for reads a cycle ahead, and
        whether that word lies within its row (``inrow``: the same for the current position).

        Bank ``b`` reads word ``row + kword + (b < krem)``. Computed from the feeder's next
        values, that is two adders behind the decisions of the cycle (the engine's ``ready``
        among them), the address missed the clock. Here every candidate is a register: the
        bank's address now, the address of the next row (``+ src_stride``), of the next
        reduction tile's first row (kept a tile ahead) and the layer's base, chosen by
        registered "last row" and "last tile" flags.
        """
        cfg = self.config
        rows, lanes = cfg.rows, cfg.act_lanes
        desc, nd, start_layer = self.desc, self.next_desc, self.start_layer
        last_row, k_end = self.last_row, self.k_end
        width = len(self.rd_addr[0])

        def step(r):
            # Words bank b moves on by when the tile's first element moves from r to r + rows.
            end = r + rows
            return [end // lanes + (b < end % lanes) - (b < r) for b in range(lanes)]

        steps = [step(r) for r in range(lanes)]
        m_last = Signal(name="m_last")       # a_m == last_row
        kt_last = Signal(name="kt_last")     # kt == k_end
        with m.If(start_layer):
            m.d.sync += [m_last.eq(last_row == 0), kt_last.eq(nd.k_tiles == 1)]
        with m.Elif(advance_):
            m.d.sync += m_last.eq(Mux(m_last, last_row == 0, a_m == self.before_last_row))
            with m.If(m_last):
                m.d.sync += kt_last.eq(Mux(kt_last, k_end == 0, kt + 1 == k_end))
        # The next reduction tile's position and which banks' words lie within its rows, kept a
        # tile ahead like `tile_next` (computed when needed, they put an adder and a comparator
        # before the banks' read enables).
        tile_word = Signal(range(cfg.act_depth * 2), name="tile_word")   # as kword
        tile_rem = Signal(range(lanes), name="tile_rem")
        tile_inrow = Signal(lanes, name="tile_inrow")
        after_word = Signal.like(tile_word, name="after_word")
        after_rem = Signal.like(tile_rem, name="after_rem")
        advance(m, after_word, after_rem, rows, lanes, frm=(tile_word, tile_rem), domain="comb")
        first_word, first_rem = divmod(rows, lanes)     # the second tile of a layer

        def inrows_at(word, rem, stride):
            return Cat(word + (Const(b) < rem) < stride for b in range(lanes))

        with m.If(start_layer):
            m.d.sync += [tile_word.eq(first_word), tile_rem.eq(first_rem),
                         tile_inrow.eq(inrows_at(first_word, first_rem, nd.src_stride))]
        with m.Elif(advance_ & m_last):
            with m.If(~kt_last):
                m.d.sync += [tile_word.eq(after_word), tile_rem.eq(after_rem),
                             tile_inrow.eq(inrows_at(after_word, after_rem, desc.src_stride))]
            with m.Else():
                m.d.sync += [tile_word.eq(first_word), tile_rem.eq(first_rem),
                             tile_inrow.eq(inrows_at(first_word, first_rem, desc.src_stride))]
        nexts, inrows = [], []
        for b in range(lanes):
            inrow_n = Signal(name=f"bank{b}_inrow_n")
            m.d.comb += inrow_n.eq(inrow[b])
            addr = Signal(width, name=f"bank{b}_addr")
            # addr + src_stride, the next row's word, kept in a register (an adder before the
            # block RAM's address otherwise).
            row_next = Signal(width, name=f"bank{b}_row_next")
            tile_next = Signal(width, name=f"bank{b}_tile_next")
            nxt = Signal(width, name=f"bank{b}_addr_n")
            # The words bank b moves on by from this tile's first row to the next tile's,
            # by the next tile's first element's bank (a register: tile_rem).
            delta = Signal(range(rows // lanes + 3), name=f"bank{b}_delta")
            with m.Switch(tile_rem):
                for r in range(lanes):
                    with m.Case(r):
                        m.d.comb += delta.eq(steps[r][b])
            m.d.comb += nxt.eq(addr)
            # A row's first word is always in it (every stride is at least one word).
            with m.If(start_layer):
                m.d.comb += [nxt.eq(nd.src_base), inrow_n.eq(1)]
                m.d.sync += tile_next.eq(nd.src_base + steps[0][b])
            with m.Elif(advance_):
                with m.If(~m_last):
                    m.d.comb += nxt.eq(row_next)
                with m.Elif(~kt_last):
                    m.d.comb += [nxt.eq(tile_next), inrow_n.eq(tile_inrow[b])]
                    m.d.sync += tile_next.eq(tile_next + delta)
                with m.Else():
                    m.d.comb += [nxt.eq(desc.src_base), inrow_n.eq(1)]
                    m.d.sync += tile_next.eq(desc.src_base + steps[0][b])
            # (`desc` takes the next descriptor at the end of `start_layer`.)
            m.d.sync += [addr.eq(nxt), row_next.eq(
                nxt + Mux(start_layer, nd.src_stride, desc.src_stride))]
            nexts.append(nxt)
            inrows.append(inrow_n)
        return nexts, inrows
