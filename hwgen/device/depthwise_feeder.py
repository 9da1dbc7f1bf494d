"""The depthwise unit: streams a depthwise pass's input through delay lines into the array,
each column its own channel and the rows the kernel's taps (:mod:`hwgen.passes.depthwise`)."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..latency import STREAM_LATENCY
from ..memmap import act_addr_bits, batch_bits, descriptor_layout, geometry_layout
from .delay_lines import DelayLines
from .depthwise_rows import OutputCells
from .depthwise_taps import TileTaps
from .engine import act_row_layout
from .layouts import dw_lines_layout, dw_sel_layout
from .systolic import delay

__all__ = ["DepthwiseFeeder"]


class DepthwiseFeeder(wiring.Component):
    """Run a depthwise pass's chunks: stream each tile's input rows through the delay lines and
    present an activation row to the engine for every output cell.

    For each chunk (``dw_rows`` output rows of a sample) and each pass ``(nt, kt)`` in order,
    the unit plans the tile (:class:`~hwgen.device.depthwise_taps.TileTaps`, a cycle), waits
    until the tile's weight bank is full and the pass before has started its rows, then reads
    the pass's input rows, word ``nt`` of every cell of ``dw_wp`` per row, one a cycle: a cell in
    the padding reads nothing and is zero. The words go, their lane ``j`` ``j`` cycles late
    (the array's column skew), into line 0 of the :class:`~hwgen.device.delay_lines.DelayLines`,
    ``dw_delay`` cycles from line to line. ``lag`` cycles after a pass's first read
    (:meth:`hwgen.passes.depthwise.TilePlan.lag`) the :class:`OutputCells` walk presents its
    output cells, one a cycle, each an engine row (``o_act``, its data unused) whose array rows
    take the lines ``dw_sel`` names; only output positions are valid, the pass's last is
    ``last``.

    Parameters
    ----------
    config : AcceleratorConfig
        With ``depthwise``.
    read_latency : int
        Cycles from a read's address to the banks' word (1, or 2 with registered reads).
    lane_skew : bool
        Lane ``j`` of the lines ``j`` cycles late (the int8 array's column skew); without it
        the lanes come together (the bf16 array's columns add in step).
    pass_gap : int
        The fewest cycles between two passes' first output cells (0: no limit): a pass waits
        to start until its cells come that late (the bf16 accumulators' row rule).

    Members
    -------
    start_layer, begin_chunk, prime : In(1)
        From the controller, as for the activation feeder.
    desc : In(descriptor_layout(config))
    geom : In(geometry_layout(config))
    last_row : In(batch_bits(config))
    k_end, n_end : In
        The controller's loop bounds.
    bank_full : In(2)
        The engine's weight banks that hold a tile (:class:`~hwgen.device.engine.MatmulEngine`).
    a_ptr : In(1)
        The bank the engine's next row uses.
    more_chunks : Out(1)
    rd_addr : Out(unsigned(act_addr_bits))
    rd_en : Out(1)
        Every bank reads this word.
    rd_data : In(ArrayLayout(signed(in_bits), act_lanes))
    o_act : Out(stream.Signature(act_row_layout(config)))
        To the engine; ``ready`` is high while a bank is full (it is not read).
    dw_lines : Out(dw_lines_layout(config))
    dw_sel : Out(dw_sel_layout(config))
        With each row on ``o_act``: the line of each array row.
    """

    def __init__(self, config, *, read_latency=1, lane_skew=True, pass_gap=0):
        self.config = config
        self.read_latency = read_latency
        self.lane_skew = lane_skew
        self.pass_gap = pass_gap
        self.taps = TileTaps(config)
        self.cells = OutputCells(config)
        self.lines = DelayLines(data.ArrayLayout(signed(config.in_bits), config.cols),
                                lines=config.dw_lines, depth=config.dw_depth)
        layout = descriptor_layout(config)
        lanes, value = config.act_lanes, signed(config.in_bits)
        super().__init__({
            "start_layer": In(1), "begin_chunk": In(1), "prime": In(1),
            "desc": In(layout), "geom": In(geometry_layout(config)),
            "last_row": In(batch_bits(config)),
            "k_end": In(layout.members["k_tiles"]), "n_end": In(layout.members["n_tiles"]),
            "bank_full": In(2), "a_ptr": In(1),
            "more_chunks": Out(1),
            "rd_addr": Out(unsigned(act_addr_bits(config))), "rd_en": Out(1),
            "rd_data": In(data.ArrayLayout(value, lanes)),
            "o_act": Out(stream.Signature(act_row_layout(config))),
            "dw_lines": Out(dw_lines_layout(config)),
            "dw_sel": Out(dw_sel_layout(config)),
        })

    def elaborate(self, platform):
        m = Module()
        g = self.geom
        m.submodules.taps = taps = self.taps
        m.submodules.cells = cells = self.cells
        m.submodules.lines = lines = self.lines
        m.d.comb += [taps.geom.eq(g), cells.geom.eq(g), lines.delay.eq(g.dw_delay),
                     lines.restart.eq(self.start_layer)]
        chunk = self._chunks(m)
        walk = self._stream(m, taps, cells, chunk)
        self._words(m, lines, walk)
        m.d.comb += [self.dw_lines.eq(lines.o_lines), self.dw_sel.eq(cells.sel),
                     self.o_act.valid.eq(cells.valid), self.o_act.payload.last.eq(cells.last),
                     cells.rows_last.eq(chunk["rr_last"])]
        return m

    def _chunks(self, m):
        """The chunk's place: its sample's first ACT word and its first output row's input
        row, ``oy0 * sy``; whether it is its sample's last and the layer's."""
        d, g = self.desc, self.geom
        side = len(g.oh) + 5
        sample = Signal.like(self.last_row, name="dw_sample")
        sample_addr = Signal.like(self.rd_addr, name="dw_sample_addr")
        chunk_addr = Signal.like(self.rd_addr, name="dw_chunk_addr")
        oy_sy = Signal(side, name="dw_oy_sy")          # the chunk's first output row * sy
        rows_sy = Signal(side, name="dw_rows_sy")      # dw_rows * sy
        last_sy = Signal(side, name="dw_last_sy")      # (oh - 1) * sy
        m.d.sync += [rows_sy.eq(_times(g.dw_rows, g.sy)), last_sy.eq(_times(g.oh - 1, g.sy))]
        ends = Signal(name="dw_sample_ends")           # the chunk is its sample's last
        m.d.comb += ends.eq(oy_sy + rows_sy > last_sy)
        with m.If(self.start_layer):
            m.d.sync += [sample.eq(0), oy_sy.eq(0), sample_addr.eq(d.src_base),
                         chunk_addr.eq(d.src_base)]
        with m.Elif(self.begin_chunk):
            with m.If(ends):
                m.d.sync += [sample.eq(sample + 1), oy_sy.eq(0),
                             sample_addr.eq(sample_addr + g.img_step),
                             chunk_addr.eq(sample_addr + g.img_step)]
            with m.Else():
                m.d.sync += [oy_sy.eq(oy_sy + rows_sy), chunk_addr.eq(chunk_addr + g.dw_cstep)]
        rr_last = Signal(side, name="dw_rr_last")      # the chunk's last output row, * sy
        m.d.sync += [rr_last.eq(Mux(ends, last_sy - oy_sy, rows_sy - g.sy)),
                     self.more_chunks.eq(~(ends & (sample == self.last_row)))]
        return {"addr": chunk_addr, "oy_sy": oy_sy, "rr_last": rr_last}

    def _stream(self, m, taps, cells, chunk):
        """The passes of a chunk: each planned, started and streamed; return the stream's
        ``issue`` (a read this cycle) and ``inside`` (it reads a word, not the padding)."""
        d, g = self.desc, self.geom
        side = len(chunk["oy_sy"])
        coord = signed(side + 1)
        kt = Signal.like(d.k_tiles, name="dw_kt")
        nt = Signal.like(d.n_tiles, name="dw_nt")
        ky_addr = Signal.like(self.rd_addr, name="dw_ky_addr")   # the tile's ky_min rows' words
        row_addr = Signal.like(self.rd_addr, name="dw_row_addr")
        addr = Signal.like(self.rd_addr, name="dw_addr")
        iy = Signal(coord, name="dw_iy")                # the stream's row, in the image
        ix = Signal(coord, name="dw_ix")                # its column
        r_left = Signal(side, name="dw_r_left")         # rows after this one
        c_left = Signal.like(g.dw_wp, name="dw_c_left")  # cells after this one
        c_last = Signal(name="dw_c_last")
        lag = Signal(side + 8, name="dw_lag")           # the pass's lag, less one
        issue = Signal(name="dw_issue")
        start = Signal(name="dw_start")
        m.d.comb += [self.rd_addr.eq(addr), self.rd_en.eq(issue)]
        go = self._passes_out(m, cells, start=start, lag=lag, lines=taps.lines)
        with m.FSM(name="dw_fsm"):
            with m.State("IDLE"), m.If(self.prime):
                m.d.sync += [kt.eq(0), nt.eq(0), ky_addr.eq(0)]
                m.d.comb += taps.first.eq(1)
                m.next = "PLAN"
            # The tile's taps are in the counters (the lines follow a cycle later).
            with m.State("PLAN"), m.If(~self.prime):
                first = chunk["addr"] + nt + ky_addr
                m.d.sync += [row_addr.eq(first), addr.eq(first),
                             iy.eq(chunk["oy_sy"] + taps.ky0 - g.pad_top),
                             ix.eq(-g.pad_left),
                             r_left.eq(chunk["rr_last"] + taps.span - 1),
                             c_left.eq(g.dw_wp - 1), c_last.eq(g.dw_wp == 1),
                             lag.eq(self.read_latency + STREAM_LATENCY - 1 + taps.kx0
                                    + _times(g.dw_delay, taps.span - 1))]
                m.next = "WAIT"
            with m.State("WAIT"), m.If(go):
                m.d.comb += start.eq(1)
                m.next = "WALK"
            with m.State("WALK"):
                m.d.comb += issue.eq(1)
                with m.If(~c_last):
                    m.d.sync += [addr.eq(addr + g.col_step), ix.eq(ix + 1),
                                 c_left.eq(c_left - 1), c_last.eq(c_left == 1)]
                with m.Else():
                    m.d.sync += [row_addr.eq(row_addr + g.row_step),
                                 addr.eq(row_addr + g.row_step), ix.eq(-g.pad_left),
                                 iy.eq(iy + 1), r_left.eq(r_left - 1),
                                 c_left.eq(g.dw_wp - 1), c_last.eq(g.dw_wp == 1)]
                    with m.If(r_left == 0):
                        self._next_pass(m, taps, kt=kt, nt=nt, ky_addr=ky_addr)
        inside = (iy >= 0) & (iy < g.h) & (ix >= 0) & (ix < g.w)
        return {"issue": issue, "inside": inside}

    def _next_pass(self, m, taps, *, kt, nt, ky_addr):
        """After a pass's last read: the next tile (of this output tile or the next), or the
        chunk's end."""
        g = self.geom
        with m.If((kt == self.k_end) & (nt == self.n_end)):
            m.next = "IDLE"
        with m.Elif(kt == self.k_end):
            m.d.sync += [kt.eq(0), nt.eq(nt + 1), ky_addr.eq(0)]
            m.d.comb += taps.first.eq(1)
            m.next = "PLAN"
        with m.Else():
            m.d.sync += [kt.eq(kt + 1),
                         ky_addr.eq(ky_addr + g.dw_tqstep + Mux(taps.wraps0, g.row_step, 0))]
            m.d.comb += taps.step.eq(1)
            m.next = "PLAN"

    def _passes_out(self, m, cells, *, start, lag, lines):
        """Hold the pass that has started its stream until its first output cell (``lag``
        cycles), then start its cells; return whether the next pass may start: its weight bank
        full and nothing held (or the held pass leaving now).

        ``open`` counts the passes started whose last row has not gone: the next pass's bank
        is ``a_ptr`` past them; with two open (one walking, one held) the next would take the
        walking one's bank, whose full flag is still its tile's.
        """
        pending = Signal(name="dw_pending")
        count = Signal.like(lag, name="dw_count")
        held = Signal.like(lines, name="dw_held_lines")
        fire = Signal(name="dw_fire")
        m.d.comb += fire.eq(pending & (count == 0))
        with m.If(start):
            m.d.sync += [pending.eq(1), count.eq(lag), held.eq(lines)]
        with m.Elif(fire):
            m.d.sync += pending.eq(0)
        with m.Elif(pending):
            m.d.sync += count.eq(count - 1)
        m.d.comb += [cells.begin.eq(fire), cells.lines.eq(held)]
        open_ = Signal(2, name="dw_open")
        done = cells.valid & cells.last
        m.d.sync += open_.eq(open_ + start - done)
        full = Mux(self.a_ptr ^ open_[0], self.bank_full[1], self.bank_full[0])
        go = full & (open_ != 2) & (~pending | fire)
        if self.pass_gap:
            go = go & self._gap_kept(m, fire, lag)
        return go

    def _gap_kept(self, m, fire, lag):
        """Whether a pass started now fires ``pass_gap`` cycles or more after the last fire:
        it fires ``lag + 1`` cycles after its start."""
        gap = self.pass_gap
        left = Signal(range(gap + 1), name="dw_gap_left")   # gap - cycles since the fire
        with m.If(fire):
            m.d.sync += left.eq(gap - 1)
        with m.Elif(left != 0):
            m.d.sync += left.eq(left - 1)
        return Mux(fire, gap, left) <= lag + 1

    def _words(self, m, lines, walk):
        """The banks' words of the stream's reads, zero in the padding, lane ``j``
        ``STREAM_LATENCY + j`` cycles after it arrives, into line 0."""
        cfg = self.config
        got = delay(m, walk["issue"] & walk["inside"], self.read_latency, name="dw_got")
        word = Signal(data.ArrayLayout(signed(cfg.in_bits), cfg.cols), name="dw_word")
        for j in range(cfg.cols):
            lane = Mux(got, self.rd_data[j], 0)
            late = STREAM_LATENCY + (j if self.lane_skew else 0)
            m.d.comb += word[j].eq(delay(m, lane, late, name=f"dw_skew{j}"))
        m.d.comb += lines.i_word.eq(word)


def _times(value, small):
    """Return ``value * small`` for a narrow unsigned ``small`` (a geometry's stride, a span):
    a shifted copy of ``value`` per bit of ``small``, added."""
    total = 0
    for bit in range(len(small)):
        total = total + Mux(small[bit], value << bit, 0)
    return total
