"""The patch walker: which activation words each row the engine takes is made of.

A layer's input is a batch of images, NHWC: pixel ``(m, y, x)`` starts at ACT word
``src_base + ((m * h + y) * w + x) * src_stride`` and holds its channels as a row holds its
features (channel ``c`` in bank ``c % lanes``, word ``c // lanes`` of the pixel). A matrix layer
over plain rows is the case of 1x1 images and a 1x1 kernel.

The engine takes, for each chunk of at most ``acc_depth`` output pixels (the rows the
accumulators hold), each output tile ``nt`` and each reduction tile ``kt``, one row per output
pixel ``(m, oy, ox)`` of the chunk: the ``rows`` channels ``cg * rows ..`` of input pixel
``(oy * stride + ky - pad, ox * stride + kx - pad)``, where ``kt`` walks the kernel positions
``(ky, kx)`` and each position's channel groups ``cg``. A pixel outside the image (padding)
reads as zeros. The walker computes every address from the previous one with the geometry's
steps: no multiplier, and no expansion of patches anywhere.
"""

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..memmap import act_addr_bits, batch_bits, descriptor_layout, geometry_layout

__all__ = ["PatchWalker", "position_layout"]


def position_layout(config):
    """The walker's position: where a row of the walk is, and what comes with it."""
    desc = descriptor_layout(config)
    side = unsigned(max(1, config.act_depth.bit_length()))
    coord = signed(config.act_depth.bit_length() + 2)
    return data.StructLayout({
        "ox": side, "oy": side, "m": unsigned(batch_bits(config)),
        "iy": coord, "ix": coord,                  # the input pixel (may lie in the padding)
        "pix": unsigned(act_addr_bits(config)),    # its first word (modulo the address width)
        "count": range(config.acc_depth),          # the output pixel's row in the chunk
        "kx": side, "ky": side, "cg": desc.members["k_tiles"],
        "kword": range(config.act_depth + 1), "krem": range(config.act_lanes),
        "off": unsigned(act_addr_bits(config)),    # the kernel position's words from (0, 0)
        "kt": desc.members["k_tiles"], "nt": desc.members["n_tiles"],
        "last": 1,        # the last row of the pass (the chunk's last pixel)
        "final": 1,       # of the layer's last reduction tile
        "valid": 1,
    })


class PatchWalker(wiring.Component):
    """Walk a layer's rows, chunk by chunk: their bank addresses and which words to read.

    ``start_layer`` loads the layer's first chunk, ``start_chunk`` the next one (the pixel
    after the last chunk's), ``prime`` (the cycle after either) moves the first row into
    :attr:`cur`; then each ``take`` of a valid row moves the next one in. With ``lookahead``
    (registered reads) the walker keeps the row after :attr:`cur` too, so that the banks can be
    addressed a cycle ahead from registers: ``rd_addr``/``rd_en`` are for the row :attr:`cur`
    holds after this cycle. Without it they are :attr:`cur`'s, read when taken.

    Parameters
    ----------
    config : AcceleratorConfig
    lookahead : bool

    Members
    -------
    start_layer, start_chunk, prime, take : In(1)
    desc : In(descriptor_layout(config))
    geom : In(geometry_layout(config))
    last_row : In(batch_bits(config))
        The run's last image.
    cur : Out(position_layout(config))
        The row the feeder takes next (``valid``), with its ``last``, ``final`` and ``krem``.
    cur_inrow : Out(act_lanes)
        Which banks' words of :attr:`cur` lie in its pixel (and the pixel in the image).
    rd_addr : Out(ArrayLayout(unsigned(act_addr_bits), act_lanes))
    rd_en : Out(act_lanes)
        The banks' reads (see above).
    more_chunks : Out(1)
        Pixels remain after the current chunk (valid once its first pass has walked it).
    """

    def __init__(self, config, *, lookahead=False):
        self.config = config
        self.lookahead = lookahead
        lanes = config.act_lanes
        super().__init__({
            "start_layer": In(1), "start_chunk": In(1), "prime": In(1), "take": In(1),
            "desc": In(descriptor_layout(config)),
            "geom": In(geometry_layout(config)),
            "last_row": In(batch_bits(config)),
            "cur": Out(position_layout(config)),
            "cur_inrow": Out(lanes),
            "rd_addr": Out(data.ArrayLayout(unsigned(act_addr_bits(config)), lanes)),
            "rd_en": Out(lanes),
            "more_chunks": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        lanes = cfg.act_lanes
        layout = position_layout(cfg)
        # The chunk's first output pixel, at kernel position (0, 0), and the next chunk's.
        chunk = Signal(layout, name="chunk")
        after = Signal(layout, name="after")
        shift = Signal()            # the row after `cur` moves in
        gen = Signal(layout, name="gen")    # the walk's position: cur's, or the row after it
        start = self.start_layer | self.start_chunk
        first = self._first(m, chunk, after)
        succ, pixel = self._successor(m, gen, chunk)
        with m.If(gen.last & (gen.kt == 0) & (gen.nt == 0) & gen.valid & shift):
            # The pass over kernel position (0, 0) walks the chunk's pixels where the next
            # chunk's start is found: the pixel after its last.
            m.d.sync += [after.eq(pixel), self.more_chunks.eq(~self._layer_last(gen))]
        with m.If(self.start_layer):
            m.d.sync += self.more_chunks.eq(0)
        with m.If(start):
            m.d.sync += chunk.eq(first)
        if not self.lookahead:
            # The first row is taken after `prime`, as with the look-ahead.
            m.d.comb += [shift.eq(self.take & self.cur.valid), gen.eq(self.cur)]
            with m.If(start):
                m.d.sync += [self.cur.eq(self._loaded(m, first)), self.cur.valid.eq(0)]
            with m.Elif(self.prime):
                m.d.sync += self.cur.valid.eq(1)
            with m.Elif(shift):
                m.d.sync += self.cur.eq(succ)
            self._inrow(m, self.cur, self.cur_inrow)
            for b in range(lanes):
                m.d.comb += [self.rd_addr[b].eq(self._word(self.cur, b)),
                             self.rd_en[b].eq(self.take & self.cur.valid & self.cur_inrow[b])]
            return m
        # Look-ahead: `gen` is the row after `cur`, and both rows' bank addresses are registers.
        nxt_addr = Signal(self.rd_addr.shape(), name="nxt_addr")
        nxt_inrow = Signal(lanes, name="nxt_inrow")
        cur_addr = Signal(self.rd_addr.shape(), name="cur_addr")
        m.d.comb += shift.eq(self.prime | (self.take & self.cur.valid))
        new = Signal(layout, name="new")     # what `gen` holds next
        m.d.comb += new.eq(gen)
        with m.If(start):
            m.d.comb += new.eq(self._loaded(m, first))
        with m.Elif(shift):
            m.d.comb += new.eq(succ)
        m.d.sync += gen.eq(new)
        new_inrow = Signal(lanes, name="new_inrow")
        self._inrow(m, new, new_inrow)
        with m.If(start | shift):
            m.d.sync += [nxt_inrow.eq(new_inrow),
                         *(nxt_addr[b].eq(self._word(new, b)) for b in range(lanes))]
        with m.If(start):
            m.d.sync += self.cur.valid.eq(0)
        with m.Elif(shift):
            m.d.sync += [self.cur.eq(gen), self.cur_inrow.eq(nxt_inrow), cur_addr.eq(nxt_addr)]
        for b in range(lanes):
            m.d.comb += [self.rd_addr[b].eq(Mux(shift, nxt_addr[b], cur_addr[b])),
                         self.rd_en[b].eq(Mux(shift, nxt_inrow[b] & gen.valid,
                                              self.cur_inrow[b] & self.cur.valid))]
        return m

    @staticmethod
    def _word(pos, b):
        """Bank ``b``'s word of the row at ``pos``: the pixel's first word plus the channel
        group's word in the pixel, one more in the banks before the group's first."""
        return pos.pix + pos.kword + (Const(b) < pos.krem)

    def _inrow(self, m, pos, out):
        """Drive ``out``: which banks' words of the row at ``pos`` lie in its pixel (past its
        channels they belong to the next pixel, or lie past the memory), the pixel in the
        image (outside, padding reads as zeros)."""
        g = self.geom
        inside = (pos.iy >= 0) & (pos.iy < g.h) & (pos.ix >= 0) & (pos.ix < g.w)
        for b in range(self.config.act_lanes):
            m.d.comb += out[b].eq(inside & (pos.kword + (Const(b) < pos.krem)
                                            < self.desc.src_stride))

    def _layer_last(self, pos):
        g = self.geom
        return (pos.m == self.last_row) & (pos.oy == g.oh - 1) & (pos.ox == g.ow - 1)

    def _first(self, m, chunk, after):
        """Return the first output pixel (at kernel position (0, 0)) of the chunk that
        ``start_layer`` or ``start_chunk`` loads."""
        g, d = self.geom, self.desc
        first = Signal(chunk.shape(), name="first")
        with m.If(self.start_layer):
            m.d.comb += [first.ox.eq(0), first.oy.eq(0), first.m.eq(0), first.pix.eq(d.src_base),
                         first.iy.eq(-g.pad), first.ix.eq(-g.pad)]
        with m.Else():
            m.d.comb += first.eq(after)
        return first

    def _loaded(self, m, first):
        """Return the walk's first row of a chunk starting at ``first``."""
        row = Signal(first.shape(), name="loaded")
        m.d.comb += [row.eq(first), row.count.eq(0), row.kx.eq(0), row.ky.eq(0), row.cg.eq(0),
                     row.kword.eq(0), row.krem.eq(0), row.off.eq(0), row.kt.eq(0),
                     row.nt.eq(0), row.valid.eq(1),
                     row.last.eq(self._layer_last(first) | (self.config.acc_depth == 1)),
                     row.final.eq(self.desc.k_tiles == 1)]
        return row

    def _successor(self, m, pos, chunk):
        """Return ``(succ, pixel)``: the row after ``pos``, and the output pixel after ``pos``'s
        at kernel position (0, 0) (the next chunk's start, when ``pos`` ends a chunk)."""
        cfg = self.config
        g, d = self.geom, self.desc
        succ = Signal(pos.shape(), name="succ")
        pixel = Signal(pos.shape(), name="pixel")
        # The next output pixel, the kernel position kept.
        m.d.comb += [pixel.eq(pos), pixel.count.eq(pos.count + 1)]
        with m.If(pos.ox != g.ow - 1):
            m.d.comb += [pixel.ox.eq(pos.ox + 1), pixel.ix.eq(pos.ix + g.stride),
                         pixel.pix.eq(pos.pix + g.col_step)]
        with m.Elif(pos.oy != g.oh - 1):
            m.d.comb += [pixel.ox.eq(0), pixel.oy.eq(pos.oy + 1), pixel.ix.eq(pos.kx - g.pad),
                         pixel.iy.eq(pos.iy + g.stride), pixel.pix.eq(pos.pix + g.row_step)]
        with m.Else():
            m.d.comb += [pixel.ox.eq(0), pixel.oy.eq(0), pixel.m.eq(pos.m + 1),
                         pixel.ix.eq(pos.kx - g.pad), pixel.iy.eq(pos.ky - g.pad),
                         pixel.pix.eq(pos.pix + g.img_step)]
        # The next reduction tile: the channel group, then the kernel position.
        tile = Signal(pos.shape(), name="tile")
        m.d.comb += [tile.eq(pos), tile.kt.eq(pos.kt + 1), tile.cg.eq(0), tile.kword.eq(0),
                     tile.krem.eq(0)]
        with m.If(pos.kt == d.k_tiles - 1):
            m.d.comb += [tile.kt.eq(0), tile.nt.eq(pos.nt + 1), tile.kx.eq(0), tile.ky.eq(0),
                         tile.off.eq(0)]
        with m.Elif(pos.cg != g.cgs - 1):
            word, rem = divmod(cfg.rows, cfg.act_lanes)
            m.d.comb += tile.cg.eq(pos.cg + 1)
            if rem:
                with m.If(pos.krem + rem >= cfg.act_lanes):
                    m.d.comb += [tile.krem.eq(pos.krem + rem - cfg.act_lanes),
                                 tile.kword.eq(pos.kword + word + 1)]
                with m.Else():
                    m.d.comb += [tile.krem.eq(pos.krem + rem), tile.kword.eq(pos.kword + word)]
            else:
                m.d.comb += [tile.krem.eq(pos.krem), tile.kword.eq(pos.kword + word)]
        with m.Elif(pos.kx != g.kw - 1):
            m.d.comb += [tile.kx.eq(pos.kx + 1), tile.off.eq(pos.off + d.src_stride)]
        with m.Else():
            m.d.comb += [tile.kx.eq(0), tile.ky.eq(pos.ky + 1),
                         tile.off.eq(pos.off + g.ky_step)]
        restart = self._chunk_start(m, tile, chunk)
        with m.If(~pos.valid):
            m.d.comb += succ.eq(pos)
        with m.Elif(~pos.last):
            m.d.comb += succ.eq(pixel)
        with m.Elif((pos.kt != d.k_tiles - 1) | (pos.nt != d.n_tiles - 1)):
            m.d.comb += succ.eq(restart)
        with m.Else():
            m.d.comb += [succ.eq(pos), succ.valid.eq(0)]
        # Flags of the new row, from its counters.
        with m.If(pos.valid & ~pos.last):
            m.d.comb += succ.last.eq(self._layer_last(pixel)
                                     | (pixel.count == cfg.acc_depth - 1))
        m.d.comb += succ.final.eq(succ.kt == d.k_tiles - 1)
        return succ, pixel

    def _chunk_start(self, m, tile, first):
        """Return the row that starts the next pass over the chunk: its ``first`` pixel at the
        new tile's kernel position."""
        row = Signal(tile.shape(), name="restart")
        m.d.comb += [row.eq(tile), row.ox.eq(first.ox), row.oy.eq(first.oy), row.m.eq(first.m),
                     row.count.eq(0), row.pix.eq(first.pix + tile.off),
                     row.iy.eq(first.iy + tile.ky), row.ix.eq(first.ix + tile.kx),
                     row.last.eq(self._layer_last(first) | (self.config.acc_depth == 1))]
        return row
