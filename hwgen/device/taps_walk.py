"""The patch walker's taps lanes: where each of a row's ``rows`` taps lies in a first
convolution's taps layout (:mod:`hwgen.passes.taps`, the geometry's taps fields in
:func:`hwgen.memmap.geometry_layout`).

Reduction tile ``kt``, lane ``r`` is tap ``t = kt * rows + r`` of the flattened kernel. Each
lane keeps ``t``'s kernel row ``q = t // kwc``, its column ``t % kwc`` and the row's extra
words ``q * d_word`` as counters: at a layer's (or an output tile's) first tile they are
``divmod(r, kwc)`` (a table per lane over ``kwc``, whose entries past ``r`` are ``(0, r)``)
and ``d_word`` times the row (shifted copies of ``d_word``, one per bit of a row below
``rows``); each tile moves them on by ``divmod(rows, kwc)`` (the geometry's ``tq``, ``tr``),
the row by one more where the column passes ``kwc``: no divider, no multiplier in the walk.

A row's element ``e0 + t`` is bank ``(krem + r) % act_lanes`` of its first word on (the
walker's ``pix``, ``krem``), ``q * d_word`` words further: the lanes' words and flags are
rotated onto the banks by ``krem`` (a bank past the tile's ``rows`` lanes reads nothing). A
lane reads where its image row ``iy + q`` lies in ``0 .. h - 1`` (``iy`` from ``-q`` on and
below ``h - q``, bounds the lane keeps beside ``q``) and ``q < kh`` (a tap past the kernel's
last is zero).
"""

from amaranth.hdl import Const, Mux, Signal, signed, unsigned
from amaranth.lib import data

from ..memmap import act_addr_bits

__all__ = ["advance", "coord_shape", "first_taps", "lane_banks", "lane_init", "lane_layout",
           "lane_reads", "lane_step", "next_taps", "row_bits", "set_lanes"]


def row_bits(config):
    """Return the width of a lane's kernel row: up to the last tile's taps, ``max_k`` and a
    tile on."""
    return (config.max_k + config.rows).bit_length()


def lane_layout(config):
    """Return the lanes' counters: each lane's kernel row ``q``, column ``col`` and the
    row's extra words ``off``."""
    rows = config.rows
    return {
        "q": data.ArrayLayout(unsigned(row_bits(config)), rows),
        "col": data.ArrayLayout(unsigned(config.max_k.bit_length()), rows),
        "off": data.ArrayLayout(unsigned(act_addr_bits(config)), rows),
        # The input rows a lane's image row lies in the image between: iy from lo on and
        # below hi, (-q, h - q), so that the row's reads compare registers, no adder first.
        "lo": data.ArrayLayout(coord_shape(config), rows),
        "hi": data.ArrayLayout(coord_shape(config), rows),
    }


def coord_shape(config):
    """Return the shape of an input pixel's coordinate (it may lie in the padding)."""
    return signed(config.act_depth.bit_length() + 2)


def lane_init(m, config, geom, *, registered=False):
    """Return the lanes' counters at the first tile (lane ``r`` tap ``r``), computed once from
    the geometry: ``{"q": [...], "col": [...], "off": [...], "lo": [...], "hi": [...]}``, a
    value per lane (lane 0's constant 0: it has no signal, whose process would hold only a
    constant). ``registered``: each value a register, for a geometry that is whole from the
    cycle before the layer's load on (:func:`hwgen.device.controller.geometry_lead`): the case
    on ``kwc`` and the adders were the load's longest path on the 85F."""
    lanes = {"q": [Const(0)], "col": [Const(0)], "off": [Const(0)], "lo": [Const(0)],
             "hi": [geom.h]}
    for r in range(1, config.rows):
        q = Signal(range(config.rows), name=f"init_q{r}")
        col = Signal(range(config.rows), name=f"init_col{r}")
        with m.Switch(geom.kwc):
            for k in range(1, r + 1):
                with m.Case(k):
                    m.d.comb += [q.eq(r // k), col.eq(r % k)]
            with m.Default():
                m.d.comb += [q.eq(0), col.eq(r)]
        off = Signal(unsigned(act_addr_bits(config)), name=f"init_off{r}")
        total = 0
        for bit in range(len(q)):
            total = total + Mux(q[bit], geom.d_word << bit, 0)
        m.d.comb += off.eq(total)
        lanes["q"].append(q)
        lanes["col"].append(col)
        lanes["off"].append(off)
        lanes["lo"].append(-q)
        lanes["hi"].append(geom.h - q)
    if not registered:
        return lanes
    shapes = lane_layout(config)

    def held(name, r, value):
        if isinstance(value, Const):
            return value
        reg = Signal(shapes[name].elem_shape, name=f"init_{name}{r}_q")
        m.d.sync += reg.eq(value)
        return reg

    return {name: [held(name, r, value) for r, value in enumerate(values)]
            for name, values in lanes.items()}


def set_lanes(m, pos, lanes):
    """Add the statements that give ``pos`` the lanes' counters ``lanes`` (:func:`lane_init`)."""
    for name, values in lanes.items():
        for r, value in enumerate(values):
            m.d.comb += pos[name][r].eq(value)


def lane_step(m, config, geom, tile, pos, *, wrap_at):
    """Add the statements that move ``pos``'s lanes on by a tile into ``tile``: ``rows`` taps.
    ``wrap_at`` is ``kwc - tr`` (a register): a column from it on passes the row's end."""
    for r in range(config.rows):
        wrap = pos.col[r] >= wrap_at
        with m.If(wrap):
            m.d.comb += [tile.col[r].eq(pos.col[r] - wrap_at),
                         tile.q[r].eq(pos.q[r] + geom.tq + 1),
                         tile.off[r].eq(pos.off[r] + geom.tq_word + geom.d_word),
                         tile.lo[r].eq(pos.lo[r] - geom.tq - 1),
                         tile.hi[r].eq(pos.hi[r] - geom.tq - 1)]
        with m.Else():
            m.d.comb += [tile.col[r].eq(pos.col[r] + geom.tr),
                         tile.q[r].eq(pos.q[r] + geom.tq),
                         tile.off[r].eq(pos.off[r] + geom.tq_word),
                         tile.lo[r].eq(pos.lo[r] - geom.tq),
                         tile.hi[r].eq(pos.hi[r] - geom.tq)]


def lane_reads(geom, pos, rows):
    """Return, per lane of the row at ``pos``, whether it reads: its image row ``iy + q`` in
    ``0 .. h - 1`` and its tap in the kernel."""
    return [(pos.iy >= pos.lo[r]) & (pos.iy < pos.hi[r]) & (pos.q[r] < geom.kh)
            for r in range(rows)]


def lane_banks(m, config, krem, values, name):
    """Return ``values`` (one per lane) rotated onto the banks by ``krem``: bank ``b`` takes
    lane ``(b - krem) % act_lanes``, 0 past the ``rows`` lanes."""
    lanes, rows = config.act_lanes, config.rows
    banks = []
    for b in range(lanes):
        bank = Signal.like(values[0], name=f"bank_{name}{b}")
        with m.Switch(krem):
            for k in range(lanes):
                r = (b - k) % lanes
                if r < rows:
                    with m.Case(k):
                        m.d.comb += bank.eq(values[r])
        banks.append(bank)
    return banks


def advance(m, config, nxt, *, pix, krem, word, rem):
    """Add the statements that make ``nxt``'s first element the one ``word`` words and
    ``rem`` banks on from word ``pix``, bank ``krem`` (a carry into the word past the last
    bank)."""
    lanes = config.act_lanes
    total = Signal(range(2 * lanes), name="step_rem")
    m.d.comb += total.eq(krem + rem)
    with m.If(total >= lanes):
        m.d.comb += [nxt.krem.eq(total - lanes), nxt.pix.eq(pix + word + 1)]
    with m.Else():
        m.d.comb += [nxt.krem.eq(total), nxt.pix.eq(pix + word)]


def first_taps(m, geom, tile, chunk, lanes0):
    """Add the statements that make ``tile`` a taps layer's first tile at the chunk's first
    pixel (``chunk``; another layer's first element is bank 0 of its word), its lanes'
    counters ``lanes0`` (:func:`lane_init`)."""
    m.d.comb += tile.t_rem.eq(chunk.krem)
    with m.If(geom.taps):
        m.d.comb += [tile.kword.eq(0), tile.krem.eq(chunk.krem)]
    set_lanes(m, tile, lanes0)


def next_taps(m, config, geom, tile, pos, *, wrap_at):
    """Add the statements that move ``tile`` on to a taps layer's next tile: its first element
    ``rows`` on from ``pos``'s tile's (``t_pix``, ``t_rem``), and its lanes' taps."""
    word, rem = divmod(config.rows, config.act_lanes)
    advance(m, config, tile, pix=pos.t_pix, krem=pos.t_rem, word=word, rem=rem)
    m.d.comb += [tile.t_pix.eq(tile.pix), tile.t_rem.eq(tile.krem), tile.kword.eq(0)]
    lane_step(m, config, geom, tile, pos, wrap_at=wrap_at)
