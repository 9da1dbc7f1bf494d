"""The accumulator bank: sums each result row of a layer's reduction tiles in block RAM."""

from amaranth.hdl import EnableInserter, Module, Mux, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..memattrs import NO_COLLISION_ATTRS
from ..memmap import descriptor_layout, fuses_pool, geometry_layout
from .engine import result_row_layout
from .layouts import acc_row_layout, position_layout, summed_row_layout
from .positions import advance

__all__ = ["AccumulatorBank"]


class AccumulatorBank(wiring.Component):
    """Add each result row of the engine to the accumulators of its row, tile after tile.

    The engine delivers, for each chunk of a layer's output pixels, each output tile and each
    reduction tile, the chunk's rows in order, the last one of each pass marked ``last``.
    Stage A takes a row and its position (row ``m`` of the chunk, tiles ``kt``, ``nt``); stage
    B adds it to the accumulators of row ``m`` (a row's first reduction tile adds to zero) and
    writes the sum back, or, after the last reduction tile, hands the sum on (``o_row``) with
    where the row goes: output pixel after output pixel, chunk after chunk. The accumulator
    memory holds ``acc_depth`` rows of ``cols`` sums.

    Parameters
    ----------
    config : AcceleratorConfig
    registered_reads : bool
        The accumulators' read ends at a register: the memory is addressed three cycles before
        stage B (the engine's rows pass a register first), its word crosses into the fabric in
        a cycle of its own, and the sums the read misses are forwarded
        (:meth:`_registered_read`). The position's "last" flags are registers too.

    Members
    -------
    en : In(1)
        Clock enable of the datapath registers (the engine's rows and stage B): low only while
        no row is in flight.
    start_layer, begin_chunk : In(1)
        A layer's first chunk starts (at ``desc.dst_base``); a chunk starts (high with
        ``start_layer`` too: the controller's ``start_layer`` or ``start_chunk``). Without
        spatial layers (``config.spatial`` False) a layer is one chunk: every chunk starts at
        ``desc.dst_base``.
    desc : In(descriptor_layout(config))
    k_end, n_end : In
        The controller's loop bounds.
    pool : In
        Only on a design that fuses pools (:func:`~hwgen.memmap.fuses_pool`): the geometry's
        ``pool`` (a fused max pool's window side less one, 0 for none). The rows of a chunk
        then come window by window of ``(pool + 1) ** 2`` rows; each row carries whether it
        is its window's first and last, and the output pixel (``dst``) moves on after a
        window's last row.
    i_result : In(stream.Signature(result_row_layout(config)))
        The engine's result rows, taken as they come (``ready`` is high).
    o_row : Out(stream.Signature(summed_row_layout(config), always_ready=True))
        Stage B's row (any tile; ``final`` marks a finished sum), with where it goes. The
        post-processing takes every row in the cycle it comes (its datapath runs on the same
        enable), so the stream has no ``ready``.
    param_nt : Out
        The output tile whose parameters the post-processing needs next: stage B's, or with
        registered reads the one it will hold in the next cycle (the parameters' read ends at
        a register too).
    param_addr : Out
        Its parameters' word, ``p_base + param_nt`` (modulo the descriptor's ``p_base``
        width), kept in registers beside the tile counters: the PARAM memory's address
        leaves flip-flops, not an adder (on a large ECP5 that adder was a long path).

    Attributes
    ----------
    memory : amaranth.lib.memory.Memory
        The accumulators (named ``acc`` in the design), set by ``elaborate``.
    """

    def __init__(self, config, *, registered_reads=False):
        self.config = config
        self.registered_reads = registered_reads
        self.memory = None
        layout = descriptor_layout(config)
        pool = ({"pool": In(geometry_layout(config).members["pool"])} if fuses_pool(config)
                else {})
        super().__init__({
            **pool,
            "en": In(1),
            "start_layer": In(1),
            "begin_chunk": In(1),
            "desc": In(layout),
            "k_end": In(layout.members["k_tiles"]),
            "n_end": In(layout.members["n_tiles"]),
            "i_result": In(stream.Signature(result_row_layout(config))),
            "o_row": Out(stream.Signature(summed_row_layout(config), always_ready=True)),
            "param_nt": Out(layout.members["n_tiles"]),
            "param_addr": Out(layout.members["p_base"]),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        cols, lanes = cfg.cols, cfg.act_lanes
        desc = self.desc
        start = self.begin_chunk
        # The registers after the array hold still between runs (they are empty then).
        dp = Module()
        m.submodules.datapath = EnableInserter({"sync": self.en})(dp)
        attrs = NO_COLLISION_ATTRS if self.registered_reads else None
        self.memory = mem = memory.Memory(shape=acc_row_layout(cfg), depth=cfg.acc_depth,
                                          init=[], attrs=attrs)
        m.submodules.acc = mem
        wr = mem.write_port()
        # Registered reads forward the sums themselves (see _registered_read).
        rd = mem.read_port(transparent_for=() if self.registered_reads else (wr,))

        r_m = Signal(range(cfg.acc_depth), name="r_m")
        r_kt = Signal.like(desc.k_tiles, name="r_kt")
        r_nt = Signal.like(desc.n_tiles, name="r_nt")
        pos_layout = position_layout(cfg)
        pos = Signal(pos_layout, name="r_pos")     # travels with the row to the writes
        res = self.i_result
        m.d.comb += res.ready.eq(1)
        r_wrap, r_step = Signal(name="r_wrap"), Signal(name="r_step")
        look = None
        if self.registered_reads:
            # The engine's rows pass a register before stage A: the accumulators' row counter
            # (e_m, r_m a cycle ahead) counts the engine's own valid, so the memory is
            # addressed two cycles before stage A and its word reaches the fabric a cycle
            # before stage B. The layer ends a cycle earlier after its last row (see the
            # accelerator's layer_done), so the cycles are the same.
            a_valid = Signal(name="res_q_valid")
            r_last = Signal(name="res_q_last")
            a_row = Signal.like(res.payload.data, name="res_q_data")
            dp.d.sync += [a_valid.eq(res.valid), r_last.eq(res.payload.last),
                          a_row.eq(res.payload.data)]
            look = self._row_ahead(m, r_m, start)
            kt_last, nt_last = _last_tiles(m, desc, self.k_end, self.n_end, start=start,
                                           step=a_valid & r_last, r_kt=r_kt, r_nt=r_nt)
        else:
            a_valid, a_row, r_last = res.valid, res.payload.data, res.payload.last
            m.d.sync += r_m.eq(Mux(r_wrap, 0, Mux(r_step, r_m + 1, r_m)))
            kt_last, nt_last = r_kt == self.k_end, r_nt == self.n_end
        # The first row of the running chunk's output pixels: the layer's without spatial
        # layers, whose layers are one chunk each.
        chunk_dst = Signal.like(pos.dst, name="chunk_dst") if cfg.spatial else desc.dst_base
        w_last = self._window(m, pos, start=start, step=a_valid & ~r_last,
                              wrap=a_valid & r_last)
        # p_base + r_nt, counted with it (the descriptor holds from `start` on).
        r_par = Signal.like(desc.p_base, name="r_par")
        with m.If(start):
            m.d.sync += [r_kt.eq(0), r_nt.eq(0), pos.n0.eq(0), pos.oword.eq(0), pos.orem.eq(0),
                         r_par.eq(desc.p_base)]
            m.d.comb += r_wrap.eq(1)
            with m.If(self.start_layer):
                m.d.sync += pos.dst.eq(desc.dst_base)
                if cfg.spatial:
                    m.d.sync += chunk_dst.eq(desc.dst_base)
        with m.Elif(a_valid):
            with m.If(~r_last):
                with m.If(w_last):
                    m.d.sync += pos.dst.eq(pos.dst + desc.dst_stride)
                m.d.comb += r_step.eq(1)
            with m.Else():
                m.d.comb += r_wrap.eq(1)
                # The chunk's last pass goes on to the next chunk's pixels; the others
                # start over.
                m.d.sync += pos.dst.eq(chunk_dst)
                if cfg.spatial:
                    with m.If(kt_last & nt_last):
                        m.d.sync += [pos.dst.eq(pos.dst + desc.dst_stride),
                                     chunk_dst.eq(pos.dst + desc.dst_stride)]
                with m.If(~kt_last):
                    m.d.sync += r_kt.eq(r_kt + 1)
                with m.Else():
                    m.d.sync += [r_kt.eq(0), r_nt.eq(r_nt + 1), pos.n0.eq(pos.n0 + cols),
                                 r_par.eq(r_par + 1)]
                    advance(m, pos.oword, pos.orem, cols, lanes)
        m.d.comb += pos.nt.eq(r_nt)

        # Stage B.
        b_row = Signal.like(a_row, name="b_row")
        b_first = Signal(name="b_first")
        b_m = Signal.like(r_m, name="b_m")
        b_valid, b_final, b_end = (Signal(name=f"row_{n}") for n in ("valid", "final", "end"))
        b_pos = Signal(pos_layout, name="row_pos")
        b_sum = Signal(acc_row_layout(cfg), name="row_sum")
        dp.d.sync += [b_pos.eq(pos), b_valid.eq(a_valid), b_row.eq(a_row),
                      b_first.eq(r_kt == 0), b_final.eq(kt_last), b_m.eq(r_m),
                      b_end.eq(a_valid & r_last & kt_last & nt_last)]
        o_row = self.o_row
        m.d.comb += [o_row.valid.eq(b_valid), o_row.p.final.eq(b_final), o_row.p.end.eq(b_end),
                     o_row.p.sum.eq(b_sum), o_row.p.pos.eq(b_pos)]
        # Registered reads: read a cycle ahead, the output tile stage B holds next.
        m.d.comb += self.param_nt.eq(Mux(self.en, pos.nt, b_pos.nt) if self.registered_reads
                                     else b_pos.nt)
        b_par = Signal.like(r_par, name="row_par")
        dp.d.sync += b_par.eq(r_par)
        m.d.comb += self.param_addr.eq(Mux(self.en, r_par, b_par) if self.registered_reads
                                       else b_par)
        we = Signal(name="acc_we")
        m.d.comb += we.eq(b_valid & ~b_final)
        if self.registered_reads:
            old = self._registered_read(m, rd, wr, r_m=r_m, look=look, b_m=b_m, b_sum=b_sum,
                                        we=we)
        else:
            m.d.comb += [rd.addr.eq(r_m), rd.en.eq(1),
                         wr.addr.eq(b_m), wr.data.eq(b_sum), wr.en.eq(we)]
            old = rd.data
        # A row's first tile adds to zero: the choice before the adder, where it joins the
        # forwarding multiplexer's last LUT, not after it (a LUT more on the accumulate path).
        for j in range(cols):
            m.d.comb += b_sum[j].eq(Mux(b_first, 0, old[j]) + b_row[j])
        return m

    def _window(self, m, pos, *, start, step, wrap):
        """Count stage A's row in its fused pool's window (a design that fuses pools): set
        ``pos.wfirst``, ``pos.wlast``; return whether the row is its window's last (1 without
        fused pools). ``step`` moves on by a row, ``wrap`` or ``start`` back to a window's
        first (a chunk holds whole windows)."""
        if not fuses_pool(self.config):
            return 1
        wx = Signal.like(self.pool, name="win_x")
        wy = Signal.like(self.pool, name="win_y")
        x_last, y_last = wx == self.pool, wy == self.pool
        with m.If(start | wrap):
            m.d.sync += [wx.eq(0), wy.eq(0)]
        with m.Elif(step):
            with m.If(~x_last):
                m.d.sync += wx.eq(wx + 1)
            with m.Else():
                m.d.sync += [wx.eq(0), wy.eq(Mux(y_last, 0, wy + 1))]
        m.d.comb += [pos.wfirst.eq((wx == 0) & (wy == 0)), pos.wlast.eq(x_last & y_last)]
        return pos.wlast

    def _row_ahead(self, m, r_m, start):
        """Registered reads: count the engine's rows a cycle ahead of stage A (``e_m``; ``r_m``
        follows it) and return ``(e_m, e_m1, e_next, e_wrap, e_step)`` for the read."""
        res = self.i_result
        e_m = Signal.like(r_m, name="e_m")
        e_m1 = Signal(len(r_m) + 1, name="e_m1")     # e_m + 1
        e_m_n = Signal.like(r_m, name="e_m_n")
        e_wrap, e_step = Signal(name="e_wrap"), Signal(name="e_step")
        m.d.comb += e_m_n.eq(Mux(e_wrap, 0, Mux(e_step, e_m1, e_m)))
        m.d.sync += [e_m.eq(e_m_n), e_m1.eq(e_m_n + 1), r_m.eq(e_m)]
        with m.If(start):
            m.d.comb += e_wrap.eq(1)
        with m.Elif(res.valid):
            with m.If(~res.payload.last):
                m.d.comb += e_step.eq(1)
            with m.Else():
                m.d.comb += e_wrap.eq(1)
        return e_m, e_m1, e_m_n, e_wrap, e_step

    def _registered_read(self, m, port, write, *, r_m, look, b_m, b_sum, we):
        """Return the accumulators of stage B's row (the caller starts a row's first tile from
        zero) from a read port with a register after it, and drive ``write`` from a registered
        copy of stage B's sum.

        The memory's output ends at its register, and that register's route into the fabric at
        another: the port is addressed three cycles before stage B, with the row ``e_m``
        (stage A's row a cycle ahead) will hold next (``e_next``), and its word joins the sums
        written since the read a cycle before stage B, in ``base``. Stage B then adds only
        ``base`` or its own last sum (a batch of one row): one LUT before the adder. The sums
        the read misses (one not yet written, three written since, the oldest in the read's
        own cycle, whose read is skipped so that the block RAM never sees a collision) come
        from the write's register and copies of it; every select is a register, from
        comparisons of registers. (The collision test compares, a cycle early, the row to be
        written with each of ``e_next``'s three candidates (``e_m1`` is ``e_m + 1``) and
        chooses with ``e_wrap``/``e_step``.)
        """
        e_m, e_m1, e_next, e_wrap, e_step = look
        acc_shape = b_sum.shape()
        # Copies k of stage B's row, sum and write enable, k cycles old; copy 1 is written.
        ws = [Signal(acc_shape, name=f"acc_w{k}") for k in (1, 2, 3)]
        wm = [Signal.like(b_m, name=f"acc_w{k}_m") for k in (1, 2, 3)]
        wwe = [Signal(name=f"acc_w{k}_we") for k in (1, 2, 3)]
        m.d.sync += [ws[0].eq(b_sum), wm[0].eq(b_m), wwe[0].eq(we)]
        for k in (1, 2):
            m.d.sync += [ws[k].eq(ws[k - 1]), wm[k].eq(wm[k - 1]), wwe[k].eq(wwe[k - 1])]
        # Whether copy 1's row equals each candidate, compared a cycle early into registers
        # (e_m2 is e_m + 2, for e_m1's next value).
        e_m2 = Signal(len(e_m1) + 1, name="acc_e_m2")
        m.d.sync += e_m2.eq(e_next + 2)
        e_m1_next = Mux(e_wrap, 1, Mux(e_step, e_m2, e_m1))
        is_zero, is_m1, is_m = (Signal(name=f"acc_meets_{n}") for n in ("0", "m1", "m"))
        m.d.sync += [is_zero.eq(b_m == 0), is_m1.eq(b_m == e_m1_next), is_m.eq(b_m == e_next)]
        meets = Mux(e_wrap, is_zero, Mux(e_step, is_m1, is_m))
        m.d.comb += [write.addr.eq(wm[0]), write.data.eq(ws[0]), write.en.eq(wwe[0]),
                     port.addr.eq(e_next), port.en.eq(~(wwe[0] & meets))]
        # Cycle t: stage B holds row b_m (= r_m of t-1 = e_m of t-2). The memory's register
        # holds that row's word in cycle t-1, as read at edge t-2 (addressed in t-3), before
        # the writes of edges t-2, t-1 and t (stage B's sums of t-4, t-3 and t-2: copies 3, 2
        # and 1 in t-1) and the one of copy 1 in t (stage B's sum of t-1).
        q = Signal(acc_shape, name="acc_q", reset_less=True)
        m.d.sync += q.eq(port.data)
        # Selects for cycle t-1 (copies 1, 2, 3 or the memory), compared in t-2 (e_m = row).
        sel = [Signal(name=f"acc_sel{k}") for k in (1, 2, 3)]
        sel_q = Signal(name="acc_sel_q")
        hit = [we & (b_m == e_m), wwe[0] & (wm[0] == e_m), wwe[1] & (wm[1] == e_m)]
        m.d.sync += [sel[0].eq(hit[0]), sel[1].eq(~hit[0] & hit[1]),
                     sel[2].eq(~hit[0] & ~hit[1] & hit[2]),
                     sel_q.eq(~(hit[0] | hit[1] | hit[2]))]
        base = Signal(acc_shape, name="acc_base")
        # The memory's word enters at the last multiplexer, one LUT before the register.
        m.d.sync += base.eq(Mux(sel_q, q, Mux(sel[0], ws[0], Mux(sel[1], ws[1], ws[2]))))
        # Stage B's own sum of the last cycle, if it was of the same row (selected in t-1).
        last = Signal(name="acc_last")
        m.d.sync += last.eq(we & (b_m == r_m))
        old = Signal(acc_shape, name="acc_old")
        m.d.comb += old.eq(Mux(last, ws[0], base))
        return old


def _last_tiles(m, desc, k_end, n_end, *, start, step, r_kt, r_nt):
    """Registered reads: return the "last tile" flags as registers (comparators before
    stage A's enables otherwise): ``r_kt == k_end`` and ``r_nt == n_end``, compared with
    the bound less one, updated at each pass's last row (``step``)."""
    kt_last, nt_last = Signal(name="r_kt_last"), Signal(name="r_nt_last")
    kt_before = Signal.like(desc.k_tiles, name="r_kt_before")     # k_end - 1
    nt_before = Signal.like(desc.n_tiles, name="r_nt_before")     # n_end - 1
    with m.If(start):
        m.d.sync += [kt_last.eq(desc.k_tiles == 1), nt_last.eq(desc.n_tiles == 1),
                     kt_before.eq(desc.k_tiles - 2), nt_before.eq(desc.n_tiles - 2)]
    with m.Elif(step):
        with m.If(~kt_last):
            m.d.sync += kt_last.eq(r_kt == kt_before)
        with m.Else():
            m.d.sync += [kt_last.eq(k_end == 0),
                         nt_last.eq(Mux(nt_last, n_end == 0, r_nt == nt_before))]
    return kt_last, nt_last
