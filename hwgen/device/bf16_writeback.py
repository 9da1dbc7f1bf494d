"""The bf16 write-back: a dense layer's finished rows into the activation banks (bf16 lanes)
or, for a raw last layer, into the output memory (fp32 lanes)."""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..memmap import descriptor_layout, writes_streams
from .bf16_datapath import bf16_finished_row_layout
from .layouts import acc_row_layout
from .positions import advance

__all__ = ["BF16WriteBack", "check_tile_lanes"]


def check_tile_lanes(config):
    """Refuse a bf16 design whose output tiles cross activation words: one whose
    ``act_lanes`` (``max(rows, cols)``) is not a multiple of ``cols``. (A tile across two
    words could not write +0.0 to the lanes past ``n`` of the second in the same cycle.)"""
    if config.act_lanes % config.cols:
        raise ValueError(f"dtype='bf16' with rows={config.rows}, cols={config.cols}: the "
                         f"device needs max(rows, cols) a multiple of cols (an output tile "
                         "within one activation word) so far")


class BF16WriteBack(wiring.Component):
    """Write each finished row of :class:`~hwgen.device.bf16_datapath.BF16MatrixDatapath`
    where the layer's descriptor says, in the cycle it comes.

    The rows come chunk after chunk, output tile after output tile, rows ``0 ..`` the one
    marked ``last`` of each (the order of the datapath's passes), so the row's first word and
    its tile's first channel are counted, not multiplied: row ``m`` of a chunk whose first
    output pixel is ``p`` starts at ``dst_base + (p + m) * dst_stride`` (a dense layer is one
    chunk, ``p = 0``; a spatial layer's chunks follow each other pixel after pixel, as the
    int8 accumulators' positions do).

    - A ``raw`` layer: the row's ``cols`` fp32 accumulators to OUTPUT word
      ``dst_base + m * dst_stride + nt``, as the int8 raw layer writes its accumulators.
    - Otherwise the bf16 results (each value's top 16 bits) to the banks: channel
      ``n0 + j`` (``n0 = nt * cols``) to bank ``(n0 + j) % lanes`` of word
      ``dst_base + m * dst_stride + (n0 + j) // lanes``. A tile lies within one word
      (:func:`check_tile_lanes`); every bank of that word from the tile's first channel on is
      written, +0.0 (all bits 0) past ``n`` and past the tile: the contract's "+0.0 past
      ``n``" (docs/arithmetic.md, "bf16 program words"). The lanes past the tile that are
      channels of later tiles are written again by those, which come later.
    - On a design that :func:`~hwgen.memmap.writes_streams`, a layer with ``dst_run`` writes
      its rows as the taps layout's element stream (:func:`~hwgen.memmap.descriptor_layout`):
      row ``q``'s channel ``n0 + j`` to element ``(q // dst_run) * P + (q % dst_run) * n + n0
      + j``, only the ``n`` channels (the next pixel's elements follow them). The element of
      the row's pixel and of its run are counted as ``(word, bank)`` pairs, as the tile's
      are; a tile (``cols <= act_lanes`` elements) lies across at most two words.

    Parameters
    ----------
    config : AcceleratorConfig
        A ``dtype="bf16"`` design.
    depth : int
        The datapath's rows (``m`` of a finished row).
    addr_width : int
        Of the banks' addresses.

    Members
    -------
    start : In(1)
        A layer starts: its first chunk's first row goes to ``desc.dst_base``, its first tile
        is 0.
    desc : In(descriptor_layout(config))
        The running layer's (``raw``, ``n``, ``n_tiles``, ``dst_base``, ``dst_stride``).
    i_valid : In(1)
        A finished row is on ``i_row``.
    i_row : In(bf16_finished_row_layout(cols, depth, n_tiles width))
    wr_addr, wr_data, wr_en : Out
        Each bank's write (as :class:`~hwgen.device.writeback.WriteBack`'s).
    raw_addr, raw_data, raw_we : Out
        The write of a raw layer's row to the output memory.
    end : Out(1)
        The chunk's last row is written in this cycle (a dense layer's last).
    """

    #: Registers between a finished row on ``i_row`` and its write: none, the row is written
    #: in the cycle it comes (the cycle model, :mod:`hwgen.bf16_cycles`, adds them).
    STAGES = 0

    def __init__(self, config, depth, addr_width):
        check_tile_lanes(config)
        self.config = config
        layout = descriptor_layout(config)
        lanes = config.act_lanes
        super().__init__({
            "start": In(1),
            "desc": In(layout),
            "i_valid": In(1),
            "i_row": In(bf16_finished_row_layout(config.cols, depth,
                                                 layout.members["n_tiles"].width)),
            "wr_addr": Out(data.ArrayLayout(addr_width, lanes)),
            "wr_data": Out(data.ArrayLayout(signed(config.in_bits), lanes)),
            "wr_en": Out(lanes),
            "raw_addr": Out(range(config.out_depth)),
            "raw_data": Out(acc_row_layout(config)),
            "raw_we": Out(1),
            "end": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, desc, row = self.config, self.desc, self.i_row
        cols, lanes = cfg.cols, cfg.act_lanes
        # The row's first word, and its tile's first channel as (word, bank) and as a count;
        # the first word of the chunk's first pixel.
        dst = Signal(range(cfg.act_depth + cfg.out_depth + 1), name="row_dst")
        chunk_dst = Signal.like(dst, name="chunk_dst")
        word = Signal(range(cfg.act_depth * 2), name="tile_word")
        rem = Signal(range(lanes), name="tile_rem")
        n0 = Signal(len(desc.n_tiles) + cols.bit_length(), name="tile_n0")
        chunk_end = Signal(name="chunk_end")
        m.d.comb += chunk_end.eq(row.last & (row.nt == desc.n_tiles - 1))
        with m.If(self.start):
            m.d.sync += [dst.eq(desc.dst_base), chunk_dst.eq(desc.dst_base), word.eq(0),
                         rem.eq(0), n0.eq(0)]
        with m.Elif(self.i_valid):
            with m.If(chunk_end):
                # The next chunk starts at the pixel after this one's last.
                m.d.sync += [dst.eq(dst + desc.dst_stride), chunk_dst.eq(dst + desc.dst_stride),
                             word.eq(0), rem.eq(0), n0.eq(0)]
            with m.Elif(row.last):
                m.d.sync += [dst.eq(chunk_dst), n0.eq(n0 + cols)]
                advance(m, word, rem, cols, lanes)
            with m.Else():
                m.d.sync += dst.eq(dst + desc.dst_stride)

        m.d.comb += [self.raw_addr.eq(dst + row.nt), self.raw_data.eq(row.data),
                     self.raw_we.eq(self.i_valid & desc.raw),
                     self.end.eq(self.i_valid & chunk_end)]
        base = Signal(len(self.wr_addr[0]), name="wb_base")
        m.d.comb += base.eq(dst + word)
        if writes_streams(cfg):
            with m.If(desc.dst_run != 0):
                self._stream(m, chunk_end, (word, rem), n0)
            with m.Else():
                self._words(m, base, rem, n0)
        else:
            self._words(m, base, rem, n0)
        return m

    def _words(self, m, base, rem, n0):
        """Write the tile of the row at word ``base``, bank ``rem``: pixel by pixel."""
        cfg, desc, row = self.config, self.desc, self.i_row
        cols, lanes = cfg.cols, cfg.act_lanes
        for b in range(lanes):
            # Bank b holds the tile's lane b - rem (a tile is within a word, rem + cols <=
            # lanes); below rem, channels of earlier tiles.
            lane = b - rem
            value = Signal(signed(cfg.in_bits), name=f"wb_value{b}")
            with m.Switch(lane):
                for j in range(min(cols, b + 1)):
                    with m.Case(j):
                        m.d.comb += value.eq(Mux(n0 + j < desc.n,
                                                 row.data[j].as_value()[16:], 0))
            m.d.comb += [self.wr_addr[b].eq(base), self.wr_data[b].eq(value),
                         self.wr_en[b].eq(self.i_valid & ~desc.raw & (rem <= b))]

    def _stream(self, m, chunk_end, offset, n0):
        """Write the tile of the row as elements of the stream (``dst_run``): its pixel's
        element, counted as the rows come, plus the tile's first channel ``n0``, counted as
        ``offset`` (a ``(word, bank)`` pair)."""
        cfg, desc, row = self.config, self.desc, self.i_row
        cols, lanes = cfg.cols, cfg.act_lanes
        width = len(self.wr_addr[0])
        # The row's pixel and its run, and the same at the chunk's first row (where each of
        # its tiles starts again).
        pix, run, chunk_pix, chunk_run = (
            (Signal(width, name=f"{what}_word"), Signal(range(lanes), name=f"{what}_rem"))
            for what in ("pix", "run", "chunk_pix", "chunk_run"))
        x = Signal(len(desc.dst_run), name="run_x")
        chunk_x = Signal.like(x, name="chunk_x")
        # The next pixel's (x, pix, run): along the run by n elements, or the next run.
        nxt_x, nxt_pix, nxt_run = (Signal.like(x, name="next_x"),
                                   (Signal(width, name="next_pix_word"),
                                    Signal(range(lanes), name="next_pix_rem")),
                                   (Signal(width, name="next_run_word"),
                                    Signal(range(lanes), name="next_run_rem")))
        with m.If(x == desc.dst_run - 1):
            carry = run[1] + desc.dst_pitch_rem >= lanes
            m.d.comb += [nxt_x.eq(0),
                         nxt_run[1].eq(Mux(carry, run[1] + desc.dst_pitch_rem - lanes,
                                           run[1] + desc.dst_pitch_rem)),
                         nxt_run[0].eq(run[0] + desc.dst_pitch_word + carry),
                         nxt_pix[0].eq(nxt_run[0]), nxt_pix[1].eq(nxt_run[1])]
        with m.Else():
            carry = pix[1] + desc.dst_step_rem >= lanes
            m.d.comb += [nxt_x.eq(x + 1), nxt_run[0].eq(run[0]), nxt_run[1].eq(run[1]),
                         nxt_pix[1].eq(Mux(carry, pix[1] + desc.dst_step_rem - lanes,
                                           pix[1] + desc.dst_step_rem)),
                         nxt_pix[0].eq(pix[0] + desc.dst_step_word + carry)]

        def load(target, source):
            return [t.eq(v) for pair_t, pair_v in zip(target, source, strict=True)
                    for t, v in zip(pair_t, pair_v, strict=True)]

        state, chunk = (pix, run), (chunk_pix, chunk_run)
        first = ((desc.dst_base, 0), (desc.dst_base, 0))
        nxt = (nxt_pix, nxt_run)
        with m.If(self.start):
            m.d.sync += [x.eq(0), chunk_x.eq(0), *load(state, first), *load(chunk, first)]
        with m.Elif(self.i_valid):
            with m.If(chunk_end):
                m.d.sync += [x.eq(nxt_x), chunk_x.eq(nxt_x), *load(state, nxt),
                             *load(chunk, nxt)]
            with m.Elif(row.last):
                m.d.sync += [x.eq(chunk_x), *load(state, chunk)]
            with m.Else():
                m.d.sync += [x.eq(nxt_x), *load(state, nxt)]
        # The tile's first element: the pixel's plus the tile's offset.
        tile_word, tile_rem = Signal(width, name="st_word"), Signal(range(lanes), name="st_rem")
        carry = pix[1] + offset[1] >= lanes
        m.d.comb += [tile_rem.eq(Mux(carry, pix[1] + offset[1] - lanes, pix[1] + offset[1])),
                     tile_word.eq(pix[0] + offset[0] + carry)]
        for b in range(lanes):
            # Bank b holds the tile's lane (b - tile_rem) % lanes, a word on below tile_rem.
            value = Signal(signed(cfg.in_bits), name=f"st_value{b}")
            enable = Signal(name=f"st_en{b}")
            with m.Switch(tile_rem):
                for r in range(lanes):
                    j = (b - r) % lanes
                    if j < cols:
                        with m.Case(r):
                            m.d.comb += [value.eq(row.data[j].as_value()[16:]),
                                         enable.eq(n0 + j < desc.n)]
            m.d.comb += [self.wr_addr[b].eq(tile_word + (b < tile_rem)),
                         self.wr_data[b].eq(value),
                         self.wr_en[b].eq(self.i_valid & ~desc.raw & enable)]
