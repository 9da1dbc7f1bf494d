"""The patch walker: which activation words each row the engine takes is made of.

A layer's input is a batch of images, NHWC: pixel ``(m, y, x)`` starts at ACT word
``src_base + ((m * h + y + pad_top) * w + x + pad_left) * src_stride`` (``src_base`` is the
word of pixel ``(-pad_top, -pad_left)``, where the walk starts, modulo the banks' address
width) and holds its
channels as a row holds its features (channel ``c`` in bank ``c % lanes``, word ``c // lanes``
of the pixel). A matrix layer over plain rows is the case of 1x1 images and a 1x1 kernel.

The engine takes, for each chunk of at most ``acc_depth`` output pixels (the rows the
accumulators hold), each output tile ``nt`` and each reduction tile ``kt``, one row per output
pixel ``(m, oy, ox)`` of the chunk: the ``rows`` channels ``base + cg * rows ..`` of input
pixel ``(oy * sy + ky - pad_top, ox * sx + kx - pad_left)``, where ``kt`` walks the kernel
positions ``(ky, kx)`` and each position's channel groups ``cg``, and ``base`` is the output
tile's channel window (``nt`` times the geometry's ``cb_word``, ``cb_rem``, down to its word's
bank 0 when the feeder does not rotate lanes, ``memmap.rotates_lanes``: a grouped convolution's
tile reads its own groups' channels only; 0 for a dense one). A pixel outside
the image (padding on any side) reads as zeros. The walker computes every address from the
previous one with the geometry's steps and keeps the window's first word and bank as running
counters: no multiplier, and no expansion of patches anywhere.

For the clock, every decision of a step comes from registers: the "last" flags of each counter
are kept beside it (set from comparisons with the bound less two, one step early; the output
pixel's counters also keep a "last but one" flag, from the bound less three, so that the next
pixel's "last" flags are registers too), and the
first input pixel of the current kernel position and its coordinates are kept too, so that a
step is one adder behind a multiplexer. With the look-ahead (:attr:`PatchWalker.LOOKAHEAD`
stages and more) the walk runs two rows ahead of the row the feeder takes: one stage steps the
position, the next forms the banks' addresses (with :attr:`PatchWalker.STAGED_ROWS` three: the
formed row passes a register of its own).

A device without spatial layers (``config.spatial`` False) walks rows only, and its walker has
nothing else: no image or kernel coordinates, no geometry, and one chunk per layer (a batch is
at most ``acc_depth`` rows), so that it costs what a walk of rows needs (on the iCE40UP5K, whose
logic cells the iCEBreaker preset fills, the difference is a few percent of the chip).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..memmap import (
    GEOMETRY_LIMITS,
    act_addr_bits,
    batch_bits,
    descriptor_layout,
    fuses_pool,
    geometry_layout,
    rotates_lanes,
    walks_taps,
)
from .controller import geometry_lead
from .taps_walk import (
    advance,
    coord_shape,
    first_taps,
    lane_banks,
    lane_init,
    lane_layout,
    lane_reads,
    next_taps,
    set_lanes,
)

__all__ = ["PatchWalker", "position_layout", "row_layout"]


def position_layout(config):
    """The walk's position: a row's output pixel, input pixel and tile, with the flags that
    say which counters are at their last value.

    Without spatial layers (``config.spatial`` False) only a row's: its image ``m`` (the
    output pixel), its first word ``pix``, its channel group (the reduction tile ``kt``: one
    kernel position) and output tile.
    """
    desc = descriptor_layout(config)
    addr = unsigned(act_addr_bits(config))
    # The channel group's first word in the pixel: at most the last group's (a group count
    # is a k_tiles field, like cgs), and no wider.
    groups = 1 << desc.members["k_tiles"].width
    kword = (groups - 2) * config.rows // config.act_lanes + 1
    if config.spatial:
        # A grouped convolution's window starts up to a pixel's words in.
        kword += 1 << desc.members["src_stride"].width
    kword = range(kword)
    fields = {
        "m": unsigned(batch_bits(config)),
        "pix": addr,                    # the input pixel's first word (modulo the width)
        "kword": kword, "krem": range(config.act_lanes),
        "kt": desc.members["k_tiles"], "nt": desc.members["n_tiles"],
        "m_last": 1, "kt_last": 1, "nt_last": 1,
        "valid": 1,
    }
    if not config.spatial:
        return data.StructLayout(fields)
    side = unsigned(max(1, config.act_depth.bit_length()))
    coord = coord_shape(config)
    if walks_taps(config):
        # A taps layer's tile: its first element's bank beside t_pix, and the lanes' taps.
        fields.update(t_rem=range(config.act_lanes), **lane_layout(config))
    if fuses_pool(config):
        # A fused pool's window: the pixel in it, the first word (and bank) of its current
        # row and of the next window, and its first pixel's input coordinates.
        window = range(GEOMETRY_LIMITS["pool"])
        fields.update(wx=window, wy=window, wx_last=1, wy_last=1, wx_pen=1, wy_pen=1,
                      wrow=addr, wnext=addr, wix=coord, wiy=coord)
        if walks_taps(config):
            fields.update(wrow_rem=range(config.act_lanes), wnext_rem=range(config.act_lanes))
    return data.StructLayout({
        **fields,
        "ox": side, "oy": side,
        "iy": coord, "ix": coord,       # the input pixel (may lie in the padding)
        "count": range(config.acc_depth),   # the output pixel's row in the chunk
        "kx": side, "cg": desc.members["k_tiles"],
        # The output tile's channel window: its first word and bank in the pixel.
        "bword": kword, "brem": range(config.act_lanes),
        # The kernel position's input pixel of the chunk's first output pixel, and the
        # coordinates an output row and an image start from at this kernel position.
        "t_pix": addr, "t_iy": coord, "t_ix": coord, "iy0": coord, "ix0": coord,
        "ox_last": 1, "oy_last": 1, "count_last": 1, "kx_last": 1, "cg_last": 1,
        # Which of the output pixel's counters is at its last value but one: the step's
        # "last" flags come from them, a register each, not from a comparison.
        "ox_pen": 1, "oy_pen": 1, "m_pen": 1, "count_pen": 1,
        # The step's decisions, combined from the flags above when the position is formed
        # (:meth:`PatchWalker._decided`): the layer's last output pixel, the pass's last row,
        # a reduction or output tile after this one.
        "layer_last": 1, "last": 1, "more": 1,
    })


def row_layout(config):
    """A row as the feeder takes it: its banks' reads and what travels with it."""
    lanes = config.act_lanes
    return data.StructLayout({
        "addr": data.ArrayLayout(unsigned(act_addr_bits(config)), lanes),
        "inrow": lanes,          # which banks' words lie in its pixel (and the pixel inside)
        "krem": range(lanes),    # the bank of its first channel
        "last": 1,               # the last row of its pass
        "final": 1,              # of the layer's last reduction tile
        "valid": 1,
        # A taps layer's lanes that read, before their rotation onto the banks (staged rows).
        **({"lanes_ok": config.rows} if walks_taps(config) else {}),
    })


class PatchWalker(wiring.Component):
    """Walk a layer's rows, chunk by chunk: their bank addresses and which words to read.

    ``begin_chunk`` loads a chunk: the layer's first with ``start_layer``, the next one (the
    pixel after the last chunk's) without; ``prime``, high for two cycles after it, moves the
    first row into :attr:`cur`; then each ``take`` of a valid row moves the next one in. With
    the look-ahead (registered reads) the walker keeps the rows after :attr:`cur` too, so that
    the banks are addressed a cycle ahead from registers: ``rd_addr``/``rd_en`` are for the row
    :attr:`cur` holds after this cycle. Without it they are :attr:`cur`'s, read when taken.

    Parameters
    ----------
    config : AcceleratorConfig
        Without ``spatial`` every image is one pixel and every kernel one position, and a
        layer is one chunk (``begin_chunk`` starts it over; ``geom`` is not read, and
        ``more_chunks`` is always low).
    stages : int
        The registers between the walk and the banks' reads, each level with the ones before:
        :attr:`PLAIN` (0), :attr:`LOOKAHEAD` (1: the rows after :attr:`cur` kept, the banks
        addressed a cycle ahead, for registered reads), :attr:`REGISTERED_STEP` (2: the step
        comes from a register, set a cycle early from the next values of ``prime`` and
        ``take``, ``prime_next`` and ``take_next``, which must be registers, and so do the
        banks' reads, ``rd_addr`` and ``rd_en``: the step drives the enables of every position
        and row register, and the reads go to every bank, across the die on a large ECP5),
        :attr:`STAGED_ROWS` (3: a row formed from the position passes a register before
        :attr:`cur`'s successor takes it, so that the banks' reads come from registers
        through multiplexers only; ``prime`` then leaves :attr:`cur` empty, and a step of its
        own fills it: the first row comes a cycle later).

    Members
    -------
    start_layer, begin_chunk, prime, take : In(1)
        ``begin_chunk`` is high with ``start_layer`` too: one register, so that no gate
        between the controller's two starts comes before the position's load.
    prime_next, take_next : In(1)
        From :attr:`REGISTERED_STEP` on: ``prime`` and ``take`` of the next cycle.
    desc : In(descriptor_layout(config))
    geom : In(geometry_layout(config))
        From ``start_layer`` on; a spatial layer's from :func:`~.controller.geometry_lead`
        cycles before it, as the controller gives it (the taps lanes' first counters are
        registers where that is a cycle or more).
    last_row : In(batch_bits(config))
        The run's last image.
    cur : Out(row_layout(config))
        The row the feeder takes next, when ``valid``.
    rd_addr : Out(ArrayLayout(unsigned(act_addr_bits), act_lanes))
    rd_en : Out(act_lanes)
        The banks' reads (see above).
    more_chunks : Out(1)
        Pixels remain after the current chunk (valid once its first pass has walked it).
    """

    #: The walker's register levels (``stages``).
    PLAIN, LOOKAHEAD, REGISTERED_STEP, STAGED_ROWS = range(4)

    def __init__(self, config, *, stages=PLAIN):
        if not isinstance(stages, int) or isinstance(stages, bool) or stages not in range(4):
            raise ValueError(f"PatchWalker: stages={stages!r}; allowed: 0 (plain), 1 "
                             "(look-ahead), 2 (its step from a register), 3 (and staged rows)")
        self.stages = stages
        self.lookahead = stages >= self.LOOKAHEAD
        self.registered_step = stages >= self.REGISTERED_STEP
        self.staged_rows = stages >= self.STAGED_ROWS
        self.config = config
        # Without spatial layers (config.spatial False) every image is one pixel and every
        # kernel one position: the walk is the rows', in one chunk.
        self.spatial = config.spatial
        # Without the feeder's rotation a channel window starts at its word's bank 0.
        self.rotates = rotates_lanes(config)
        # A first convolution's taps layout (hwgen.passes.taps): lanes of their own.
        self.taps = walks_taps(config)
        # A max pool fused into a convolution: its output walked window by window.
        self.fuse = fuses_pool(config)
        lanes = config.act_lanes
        super().__init__({
            "start_layer": In(1), "begin_chunk": In(1), "prime": In(1), "take": In(1),
            "desc": In(descriptor_layout(config)),
            "geom": In(geometry_layout(config)),
            "last_row": In(batch_bits(config)),
            "cur": Out(row_layout(config)),
            "rd_addr": Out(data.ArrayLayout(unsigned(act_addr_bits(config)), lanes)),
            "rd_en": Out(lanes),
            "more_chunks": Out(1),
            **({"prime_next": In(1), "take_next": In(1)} if self.registered_step else {}),
        })

    def elaborate(self, platform):
        m = Module()
        layout = position_layout(self.config)
        start = self.begin_chunk
        gen = Signal(layout, name="gen")        # the walk's position
        bounds = _walk_bounds(self, m)
        first = Signal(layout, name="first")    # the first output pixel of the chunk started
        if self.spatial:
            chunk = Signal(layout, name="chunk")    # the chunk's first output pixel, at (0, 0)
            after = Signal(layout, name="after")    # the next chunk's
            m.d.comb += first.eq(after)
            with m.If(self.start_layer):
                m.d.comb += _layer_start(self, first, bounds)
            with m.If(start):
                m.d.sync += chunk.eq(first)
        else:
            # One chunk: the layer's first row, from the descriptor (held while it runs).
            m.d.comb += _layer_start(self, first, bounds)
            chunk = first
        loaded = self._decided(m, self._loaded(m, first, bounds), "loaded")
        succ, pixel = self._successor(m, gen, chunk, bounds)
        step = Signal()           # the walk moves on by a row
        if self.spatial:
            # The pass over kernel position (0, 0) walks the chunk's pixels; the pixel after
            # its last starts the next chunk.
            with m.If(step & gen.valid & gen.last & (gen.kt == 0) & (gen.nt == 0)):
                m.d.sync += [after.eq(pixel), self.more_chunks.eq(~gen.layer_last)]
            with m.If(self.start_layer):
                m.d.sync += self.more_chunks.eq(0)
        with m.If(start):
            m.d.sync += gen.eq(loaded)
        with m.Elif(step):
            m.d.sync += gen.eq(succ)
        if not self.lookahead:
            # The row taken is gen's; it is valid from the last cycle of `prime` on.
            prime_q = Signal()
            m.d.sync += prime_q.eq(self.prime)
            valid = Signal()
            with m.If(start):
                m.d.sync += valid.eq(0)
            with m.Elif(self.prime & prime_q):
                m.d.sync += valid.eq(1)
            with m.Elif(step & ~succ.valid):
                m.d.sync += valid.eq(0)
            m.d.comb += [step.eq(self.take & self.cur.valid),
                         self.cur.eq(_row(self, m, gen, bounds)),
                         self.cur.valid.eq(valid & gen.valid)]
            for b in range(self.config.act_lanes):
                m.d.comb += [self.rd_addr[b].eq(self.cur.addr[b]),
                             self.rd_en[b].eq(step & self.cur.inrow[b])]
            return m
        # Look-ahead: `nxt` is the row after `cur`, `gen` the one after that; each `shift`
        # moves them on by one (`prime` shifts twice, so that cur holds the first row).
        nxt = Signal(row_layout(self.config), name="nxt")
        # Formed outside the step's condition: a row's comb logic built inside it would be
        # gated by it, so that the step ran through every bank's address adder.
        row = _row(self, m, gen, bounds)
        if self.staged_rows:
            staged = Signal.like(nxt, name="staged")
            with m.If(start):
                m.d.sync += staged.valid.eq(0)
            with m.Elif(step):
                m.d.sync += staged.eq(row)
            row = _banked(self, m, staged)
        nxt_n = Signal.like(nxt, name="nxt_n")          # the next values of nxt and cur
        cur_n = Signal.like(self.cur, name="cur_n")
        m.d.comb += [nxt_n.eq(nxt), cur_n.eq(self.cur)]
        with m.If(start):
            m.d.comb += [nxt_n.valid.eq(0), cur_n.valid.eq(0)]
        with m.Elif(step):
            m.d.comb += [cur_n.eq(nxt), nxt_n.eq(row)]
        m.d.sync += [nxt.eq(nxt_n), self.cur.eq(cur_n)]
        if not self.registered_step:
            m.d.comb += step.eq(self.prime | (self.take & self.cur.valid))
            _reads(self, m.d.comb, step, nxt, self.cur, addr=self.rd_addr, en=self.rd_en)
            return m
        # The step and the banks' reads from registers, set a cycle early from the next values.
        step_n = self.prime_next | (self.take_next & cur_n.valid)
        if self.staged_rows:
            step_n |= ~cur_n.valid & nxt_n.valid        # fills cur after prime
        step_q = Signal(name="step_q")
        m.d.sync += step_q.eq(step_n)
        m.d.comb += step.eq(step_q)
        rd_addr = Signal.like(self.rd_addr, name="rd_addr_q")
        rd_en = Signal.like(self.rd_en, name="rd_en_q")
        _reads(self, m.d.sync, step_n, nxt_n, cur_n, addr=rd_addr, en=rd_en)
        m.d.comb += [self.rd_addr.eq(rd_addr), self.rd_en.eq(rd_en)]
        return m

    def _last(self, pos):
        """Whether ``pos`` is its pass's last row: the chunk's last pixel (without spatial
        layers, the batch's last row)."""
        return pos.last if self.spatial else pos.m_last

    def _more(self, pos):
        """Whether a reduction or output tile follows ``pos``'s."""
        return pos.more if self.spatial else ~pos.kt_last | ~pos.nt_last

    def _decided(self, m, pos, name):
        """Return ``pos`` with its step's decisions (``layer_last``, ``last``, ``more``)
        combined from its flags, so that the step after it takes them from registers: each
        was a chain of LUTs into the enables of every position register, spread across the
        die on the 85F (without spatial layers the one flag ``m_last`` decides)."""
        if not self.spatial:
            return pos
        out = Signal(pos.shape(), name=f"{name}_decided")
        layer_last = _layer_last(self, pos)
        m.d.comb += [out.eq(pos), out.layer_last.eq(layer_last),
                     out.last.eq(pos.count_last | layer_last),
                     out.more.eq(~pos.kt_last | ~pos.nt_last)]
        return out

    def _loaded(self, m, first, bounds):
        """Return the walk's first row of a chunk starting at ``first``."""
        g = self.geom
        row = Signal(first.shape(), name="loaded")
        m.d.comb += [row.eq(first), row.kword.eq(0), row.krem.eq(0), row.kt.eq(0),
                     row.nt.eq(0), row.valid.eq(1), row.kt_last.eq(bounds["kt"][1]),
                     row.nt_last.eq(bounds["nt"][1])]
        if self.spatial:
            m.d.comb += [row.count.eq(0), row.kx.eq(0), row.cg.eq(0), row.t_pix.eq(first.pix),
                         row.t_iy.eq(first.iy), row.t_ix.eq(first.ix),
                         row.iy0.eq(-g.pad_top), row.ix0.eq(-g.pad_left), row.bword.eq(0),
                         row.brem.eq(0), row.count_last.eq(bounds["count"][1]),
                         row.count_pen.eq(bounds["count_pen"][1]),
                         row.kx_last.eq(bounds["kw"][1]), row.cg_last.eq(bounds["cgs"][1])]
        if self.taps:
            # A taps layer's first element lies in any bank (0 for other layers).
            m.d.comb += [row.krem.eq(first.krem), row.t_rem.eq(first.krem)]
            set_lanes(m, row, bounds["lanes0"])
        return row

    def _successor(self, m, pos, chunk, bounds):
        """Return ``(succ, pixel)``: the row after ``pos``, and the output pixel after
        ``pos``'s at its kernel position (the next chunk's start, when ``pos`` ends a chunk in
        the pass over kernel position (0, 0))."""
        succ = Signal(pos.shape(), name="succ")
        pixel = _next_pixel(self, m, pos, bounds)
        restart = self._next_tile(m, pos, chunk, bounds)
        with m.If(~pos.valid):
            m.d.comb += succ.eq(pos)
        with m.Elif(~self._last(pos)):
            m.d.comb += succ.eq(pixel)
        with m.Elif(self._more(pos)):
            m.d.comb += succ.eq(restart)
        with m.Else():
            m.d.comb += [succ.eq(pos), succ.valid.eq(0)]
        return self._decided(m, succ, "succ"), pixel

    def _next_tile(self, m, pos, chunk, bounds):
        """Return the first row of the pass after ``pos``'s: the chunk's first pixel at the
        next reduction tile (the next channel group, kernel position, or output tile)."""
        g, d = self.geom, self.desc
        tile = Signal(pos.shape(), name="tile")
        m.d.comb += [tile.eq(pos), tile.kword.eq(0), tile.krem.eq(0), tile.kt.eq(pos.kt + 1),
                     tile.kt_last.eq(pos.kt == bounds["kt"][0])]
        with m.If(pos.kt_last):          # the next output tile, from kernel position (0, 0)
            m.d.comb += [tile.kt.eq(0), tile.kt_last.eq(bounds["kt"][1]), tile.nt.eq(pos.nt + 1),
                         tile.nt_last.eq(pos.nt == bounds["nt"][0])]
        if not self.spatial:
            # One kernel position: the layer's reduction tiles are its channel groups. Back to
            # the layer's first row.
            with m.Else():
                _next_group(m, self.config, tile, pos)
            row = Signal(pos.shape(), name="restart")
            m.d.comb += [row.eq(tile), row.m.eq(chunk.m), row.m_last.eq(chunk.m_last),
                         row.pix.eq(chunk.pix)]
            return row
        # A new kernel position starts at the tile's channel window.
        m.d.comb += [tile.cg.eq(0), tile.cg_last.eq(bounds["cgs"][1]), tile.kword.eq(pos.bword),
                     tile.krem.eq(pos.brem if self.rotates else 0)]
        with m.If(pos.kt_last):
            m.d.comb += [tile.kx.eq(0), tile.kx_last.eq(bounds["kw"][1]),
                         tile.t_pix.eq(chunk.pix), tile.t_iy.eq(chunk.iy),
                         tile.t_ix.eq(chunk.ix), tile.iy0.eq(-g.pad_top),
                         tile.ix0.eq(-g.pad_left)]
            _next_window(m, self.config, g, tile, pos)
            if self.taps:
                first_taps(m, g, tile, chunk, bounds["lanes0"])
        with m.Elif(~pos.cg_last):       # the kernel position's next channel group
            m.d.comb += [tile.cg.eq(pos.cg + 1), tile.cg_last.eq(pos.cg == bounds["cgs"][0])]
            if self.taps:
                with m.If(g.taps):
                    next_taps(m, self.config, g, tile, pos, wrap_at=bounds["wrap_at"])
                with m.Else():
                    _next_group(m, self.config, tile, pos)
            else:
                _next_group(m, self.config, tile, pos)
        with m.Elif(~pos.kx_last):       # the next kernel position in the row
            m.d.comb += [tile.kx.eq(pos.kx + 1), tile.kx_last.eq(pos.kx == bounds["kw"][0]),
                         tile.t_pix.eq(pos.t_pix + d.src_stride),
                         tile.t_ix.eq(pos.t_ix + 1), tile.ix0.eq(pos.ix0 + 1)]
        with m.Else():                   # the first of the next kernel row
            m.d.comb += [tile.kx.eq(0), tile.kx_last.eq(bounds["kw"][1]),
                         tile.t_pix.eq(pos.t_pix + g.ky_step), tile.t_iy.eq(pos.t_iy + 1),
                         tile.t_ix.eq(chunk.ix), tile.iy0.eq(pos.iy0 + 1),
                         tile.ix0.eq(-g.pad_left)]
        # Back to the chunk's first output pixel, at the tile's kernel position.
        row = Signal(pos.shape(), name="restart")
        m.d.comb += [row.eq(tile), row.ox.eq(chunk.ox), row.oy.eq(chunk.oy), row.m.eq(chunk.m),
                     row.ox_last.eq(chunk.ox_last), row.oy_last.eq(chunk.oy_last),
                     row.m_last.eq(chunk.m_last), row.count.eq(0),
                     row.count_last.eq(bounds["count"][1]), row.ox_pen.eq(chunk.ox_pen),
                     row.oy_pen.eq(chunk.oy_pen), row.m_pen.eq(chunk.m_pen),
                     row.count_pen.eq(bounds["count_pen"][1]), row.pix.eq(tile.t_pix),
                     row.iy.eq(tile.t_iy), row.ix.eq(tile.t_ix)]
        if self.fuse:
            m.d.comb += _window_start(row, bounds)
        return row


def _banked(walker, m, staged):
    """Return the staged row ``staged`` with a taps layer's lanes' reads rotated onto its
    banks (after the register: the comparisons and the rotation were one path before)."""
    if not walker.taps:
        return staged
    g = walker.geom
    row = Signal.like(staged, name="banked")
    reads = lane_banks(m, walker.config, staged.krem, list(staged.lanes_ok), "read")
    m.d.comb += row.eq(staged)
    for b in range(walker.config.act_lanes):
        m.d.comb += row.inrow[b].eq(Mux(g.taps, reads[b], staged.inrow[b]))
    return row


def _reads(walker, domain, step, nxt, cur, *, addr, en):
    """Set ``addr`` and ``en`` in ``domain`` to read ``walker``'s banks for the row ``cur``
    holds after a cycle with ``step``."""
    for b in range(walker.config.act_lanes):
        domain += [addr[b].eq(Mux(step, nxt.addr[b], cur.addr[b])),
                   en[b].eq(Mux(step, nxt.inrow[b] & nxt.valid, cur.inrow[b] & cur.valid))]


def _layer_start(walker, first, bounds):
    """Return the statements that make ``first`` ``walker``'s layer's first output pixel at
    kernel position (0, 0)."""
    g = walker.geom
    stmts = [first.m.eq(0), first.pix.eq(walker.desc.src_base),
             first.m_last.eq(walker.last_row == 0)]
    if walker.spatial:
        stmts += [first.ox.eq(0), first.oy.eq(0), first.iy.eq(-g.pad_top),
                  first.ix.eq(-g.pad_left),
                  first.ox_last.eq(bounds["ow"][1]), first.oy_last.eq(bounds["oh"][1]),
                  first.ox_pen.eq(bounds["ow_pen"][1]), first.oy_pen.eq(bounds["oh_pen"][1]),
                  first.m_pen.eq(bounds["m_pen"][1])]
    if walker.fuse:
        stmts += _window_start(first, bounds)
    if walker.taps:
        stmts.append(first.krem.eq(g.rem0))
    return stmts


def _row(walker, m, pos, bounds):
    """Return the row at ``walker``'s position ``pos``: each bank's word (the pixel's first
    word plus the channel group's word, one more in the banks before the group's first),
    which of them lie in the pixel and the image, and its flags."""
    cfg, g, d = walker.config, walker.geom, walker.desc
    row = Signal(row_layout(cfg), name="row")
    inside = 1
    if walker.spatial:
        inside = (pos.iy >= 0) & (pos.iy < g.h) & (pos.ix >= 0) & (pos.ix < g.w)
    if walker.taps:
        offs = lane_banks(m, cfg, pos.krem, list(pos.off), "off")
        ok = lane_reads(g, pos, cfg.rows)
        if walker.staged_rows:
            # Rotated onto the banks after the staging register (_banked).
            m.d.comb += row.lanes_ok.eq(Cat(*ok))
            reads = None
        else:
            reads = lane_banks(m, cfg, pos.krem, ok, "read")
    for b in range(cfg.act_lanes):
        before = Const(b) < pos.krem
        if walker.spatial:
            # kword + before < src_stride, compared without the adder (src_stride >= 1).
            inrow = inside & Mux(before, pos.kword < bounds["stride"], pos.kword < d.src_stride)
        else:
            inrow = inside & (pos.kword + before < d.src_stride)
        if walker.taps:
            # A taps layer's banks: each its lane's word (its kernel row's words on; its
            # channel word is 0), another layer's the channel group's: one adder each.
            m.d.comb += [row.addr[b].eq(pos.pix + Mux(g.taps, offs[b], pos.kword) + before),
                         row.inrow[b].eq(inrow if reads is None else Mux(g.taps, reads[b], inrow))]
        else:
            m.d.comb += [row.addr[b].eq(pos.pix + pos.kword + before), row.inrow[b].eq(inrow)]
    m.d.comb += [row.krem.eq(pos.krem), row.last.eq(walker._last(pos)),
                 row.final.eq(pos.kt_last), row.valid.eq(pos.valid)]
    return row


def _walk_bounds(walker, m):
    """Return ``walker``'s layer's bounds less two, in registers set by ``start_layer`` (the flags
    of a step compare with them before it is taken), and which bounds are 1.

    Without spatial layers, the bounds less two are computed from the controller's
    registers (``desc``, ``last_row``: they hold the layer's) instead: on the small chips
    such devices are for, registers of their own cost more logic cells than the
    subtraction costs time.
    """
    cfg, g, d = walker.config, walker.geom, walker.desc
    if not walker.spatial:
        return {"kt": (d.k_tiles - 2, d.k_tiles == 1), "nt": (d.n_tiles - 2, d.n_tiles == 1),
                "m": (walker.last_row - 1, walker.last_row == 0)}
    names = {"kt": d.k_tiles, "nt": d.n_tiles, "m": walker.last_row + 1,
             "ow": g.ow, "oh": g.oh, "kw": g.kw, "cgs": g.cgs}
    if walker.fuse:
        names["pool"] = g.pool + 1
    bounds = {}
    for name, value in names.items():
        minus2 = Signal(len(value) + 1, name=f"{name}_m2")
        with m.If(walker.start_layer):
            m.d.sync += minus2.eq(value - 2)
        bounds[name] = (minus2, value == 1)
    # The output pixel's counters' "last but one" flags compare with the bound less three.
    for name in ("m", "ow", "oh", "pool") if walker.fuse else ("m", "ow", "oh"):
        value = names[name]
        minus3 = Signal(len(value) + 1, name=f"{name}_m3")
        with m.If(walker.start_layer):
            m.d.sync += minus3.eq(value - 3)
        bounds[f"{name}_pen"] = (minus3, value == 2)
    count = len(Signal(range(cfg.acc_depth + 1)))
    bounds["count"] = (Const(cfg.acc_depth - 2, count), Const(cfg.acc_depth == 1, 1))
    stride = Signal.like(d.src_stride, name="stride_m1")    # a pixel's words less one
    with m.If(walker.start_layer):
        m.d.sync += stride.eq(d.src_stride - 1)
    bounds["stride"] = stride
    # A count that is never reached where acc_depth is below 3.
    bounds["count_pen"] = (Const(cfg.acc_depth - 3 if cfg.acc_depth >= 3 else cfg.acc_depth,
                                 count), Const(cfg.acc_depth == 2, 1))
    if walker.taps:
        # A lane's column from kwc - tr on passes its kernel row's end at the next tile.
        wrap_at = Signal.like(g.kwc, name="wrap_at")
        with m.If(walker.start_layer):
            m.d.sync += wrap_at.eq(g.kwc - g.tr)
        bounds["wrap_at"] = wrap_at
        # The lanes' counters at a first tile, from the geometry (once for both uses).
        bounds["lanes0"] = lane_init(m, cfg, g, registered=geometry_lead(cfg) >= 1)
    return bounds


def _layer_last(walker, pos):
    """Whether ``pos`` is the layer's last output pixel (of a fused pool's last window)."""
    last = pos.m_last & pos.oy_last & pos.ox_last
    return last & pos.wx_last & pos.wy_last if walker.fuse else last


def _next_pixel(walker, m, pos, bounds):
    """Return the next output pixel at ``pos``'s kernel position in ``walker``'s walk."""
    g = walker.geom
    pixel = Signal(pos.shape(), name="pixel")
    m.d.comb += pixel.eq(pos)
    if not walker.spatial:
        # The next row, src_stride words on (a plain layer's img_step).
        m.d.comb += [pixel.m.eq(pos.m + 1), pixel.m_last.eq(pos.m == bounds["m"][0]),
                     pixel.pix.eq(pos.pix + walker.desc.src_stride)]
        return pixel
    m.d.comb += [pixel.count.eq(pos.count + 1), pixel.count_last.eq(pos.count_pen),
                 pixel.count_pen.eq(pos.count == bounds["count_pen"][0])]
    if not walker.fuse:
        _next_output(walker, m, pixel, pos, bounds)
        return pixel
    with m.If(~pos.wx_last):             # the next pixel in the window's row
        m.d.comb += [pixel.wx.eq(pos.wx + 1), pixel.wx_last.eq(pos.wx_pen),
                     pixel.wx_pen.eq(pos.wx == bounds["pool_pen"][0]), pixel.ix.eq(pos.ix + g.sx)]
        _step(walker, m, pixel, pos, "col")
        with m.If((pos.wx == 0) & (pos.wy == 0)):
            # The window's first pixel: where its rows and the next window start from.
            m.d.comb += [pixel.wrow.eq(pos.pix), pixel.wix.eq(pos.ix), pixel.wiy.eq(pos.iy)]
            if walker.taps:
                m.d.comb += pixel.wrow_rem.eq(pos.krem)
    with m.Elif(~pos.wy_last):           # the first pixel of the window's next row
        m.d.comb += [pixel.wx.eq(0), pixel.wx_last.eq(bounds["pool"][1]),
                     pixel.wx_pen.eq(bounds["pool_pen"][1]), pixel.wy.eq(pos.wy + 1),
                     pixel.wy_last.eq(pos.wy_pen),
                     pixel.wy_pen.eq(pos.wy == bounds["pool_pen"][0]),
                     pixel.ix.eq(pos.wix), pixel.iy.eq(pos.iy + g.sy)]
        _window_down(walker, m, pixel, pos)
        with m.If(pos.wy == 0):
            # The pixel after the first row's last: the next window's first.
            nxt = _stepped(walker, m, pos.pix, pos.krem, "col")
            m.d.comb += pixel.wnext.eq(nxt.pix)
            if walker.taps:
                m.d.comb += pixel.wnext_rem.eq(nxt.krem)
    with m.Else():                       # the next window
        m.d.comb += _window_start(pixel, bounds)
        _next_output(walker, m, pixel, pos, bounds)
    return pixel


def _window_start(pos, bounds):
    """Return the statements that put ``pos`` at its window's first pixel (every pixel its
    own window without a fused pool)."""
    return [pos.wx.eq(0), pos.wy.eq(0), pos.wx_last.eq(bounds["pool"][1]),
            pos.wy_last.eq(bounds["pool"][1]), pos.wx_pen.eq(bounds["pool_pen"][1]),
            pos.wy_pen.eq(bounds["pool_pen"][1])]


def _stepped(walker, m, pix, krem, name):
    """Return a ``(pix, krem)`` struct: word ``pix`` (bank ``krem``) moved on by the
    geometry's ``<name>_step`` (and ``<name>_rem`` on a device that walks taps)."""
    g = walker.geom
    cfg = walker.config
    out = Signal(data.StructLayout({"pix": unsigned(act_addr_bits(cfg)),
                                    "krem": range(cfg.act_lanes)}), name=f"{name}_stepped")
    if walker.taps:
        advance(m, cfg, out, pix=pix, krem=krem, word=getattr(g, f"{name}_step"),
                rem=getattr(g, f"{name}_rem"))
    else:
        m.d.comb += [out.pix.eq(pix + getattr(g, f"{name}_step")), out.krem.eq(krem)]
    return out


def _window_down(walker, m, pixel, pos):
    """Move ``pixel`` to the first pixel of the row below ``pos``'s window row: ``down_step``
    on from that row's first (``wrow``), which it becomes."""
    rem = pos.wrow_rem if walker.taps else pos.krem
    down = _stepped(walker, m, pos.wrow, rem, "down")
    m.d.comb += [pixel.pix.eq(down.pix), pixel.wrow.eq(down.pix)]
    if walker.taps:
        m.d.comb += [pixel.krem.eq(down.krem), pixel.wrow_rem.eq(down.krem)]


def _next_output(walker, m, pixel, pos, bounds):
    """Move ``pixel`` to the output pixel after ``pos``'s (with a fused pool: the first pixel
    of the next window, ``pos`` the last of its window)."""
    g = walker.geom
    with m.If(~pos.ox_last):
        m.d.comb += [pixel.ox.eq(pos.ox + 1), pixel.ox_last.eq(pos.ox_pen),
                     pixel.ox_pen.eq(pos.ox == bounds["ow_pen"][0]), pixel.ix.eq(pos.ix + g.sx)]
        _step(walker, m, pixel, pos, "col")
        if walker.fuse:
            with m.If(~bounds["pool"][1]):
                # The next window in the row: from where its first row's end said.
                m.d.comb += [pixel.pix.eq(pos.wnext), pixel.iy.eq(pos.wiy)]
                if walker.taps:
                    m.d.comb += pixel.krem.eq(pos.wnext_rem)
    with m.Else():
        m.d.comb += [pixel.ox.eq(0), pixel.ox_last.eq(bounds["ow"][1]),
                     pixel.ox_pen.eq(bounds["ow_pen"][1]), pixel.ix.eq(pos.ix0)]
        with m.If(~pos.oy_last):
            m.d.comb += [pixel.oy.eq(pos.oy + 1), pixel.oy_last.eq(pos.oy_pen),
                         pixel.oy_pen.eq(pos.oy == bounds["oh_pen"][0]),
                         pixel.iy.eq(pos.iy + g.sy)]
            _step(walker, m, pixel, pos, "row")
        with m.Else():
            m.d.comb += [pixel.oy.eq(0), pixel.oy_last.eq(bounds["oh"][1]),
                         pixel.oy_pen.eq(bounds["oh_pen"][1]), pixel.m.eq(pos.m + 1),
                         pixel.m_last.eq(pos.m_pen),
                         pixel.m_pen.eq(pos.m == bounds["m_pen"][0]), pixel.iy.eq(pos.iy0)]
            _step(walker, m, pixel, pos, "img")


def _step(walker, m, pixel, pos, name):
    """Move ``pixel``'s first word on by the geometry's ``<name>_step`` (and bank by
    ``<name>_rem``, on a device that walks taps)."""
    g = walker.geom
    if walker.taps:
        advance(m, walker.config, pixel, pix=pos.pix, krem=pos.krem,
                word=getattr(g, f"{name}_step"), rem=getattr(g, f"{name}_rem"))
    else:
        m.d.comb += pixel.pix.eq(pos.pix + getattr(g, f"{name}_step"))


def _next_window(m, config, geom, tile, pos):
    """Move ``tile``'s channel window (and its first channel) to the next output tile's:
    ``cb_word`` words and ``cb_rem`` banks on, a carry into the word past the last bank
    (without rotation, the window's first channel is the word's bank 0)."""
    lanes = config.act_lanes
    rem = Signal(range(2 * lanes), name="window_rem")
    m.d.comb += rem.eq(pos.brem + geom.cb_rem)
    with m.If(rem >= lanes):
        m.d.comb += [tile.brem.eq(rem - lanes), tile.bword.eq(pos.bword + geom.cb_word + 1)]
    with m.Else():
        m.d.comb += [tile.brem.eq(rem), tile.bword.eq(pos.bword + geom.cb_word)]
    m.d.comb += [tile.kword.eq(tile.bword),
                 tile.krem.eq(tile.brem if rotates_lanes(config) else 0)]


def _next_group(m, config, tile, pos):
    """Move ``tile``'s first channel to ``pos``'s channel group's next: ``rows`` elements
    on, as a word and a bank."""
    word, rem = divmod(config.rows, config.act_lanes)
    if rem:
        with m.If(pos.krem + rem >= config.act_lanes):
            m.d.comb += [tile.krem.eq(pos.krem + rem - config.act_lanes),
                         tile.kword.eq(pos.kword + word + 1)]
        with m.Else():
            m.d.comb += [tile.krem.eq(pos.krem + rem), tile.kword.eq(pos.kword + word)]
    else:
        m.d.comb += [tile.krem.eq(pos.krem), tile.kword.eq(pos.kword + word)]
