"""A Python model of the patch walk: the rows a layer's walk visits, for the walker's and the
feeders' tests."""

import dataclasses
import itertools

from hwgen.memmap import act_addr_bits, rotates_lanes


@dataclasses.dataclass(frozen=True)
class WalkRow:
    """One row of a matrix layer's walk (see :func:`walk_rows`).

    ``reads`` maps each bank that reads to its address; ``lanes`` gives, per engine lane,
    the ``(bank, address)`` of its element, or None where it reads as zero.
    """

    chunk: int
    nt: int
    kt: int
    m: int
    oy: int
    ox: int
    count: int
    last: bool
    final: bool
    krem: int
    reads: dict
    lanes: tuple


def walk_rows(config, desc, geom, batch):
    """Return the rows a matrix layer's walk takes, in order, as :class:`WalkRow`.

    Written from :class:`hwgen.device.patch_walker.PatchWalker`'s contract with products, not
    steps: the layer's ``batch * oh * ow`` output pixels ``(m, oy, ox)`` (with a fused pool,
    each window's ``p * p`` conv pixels, window by window: :func:`_pixels`) in chunks of at most
    ``acc_depth``; per chunk, each output tile ``nt`` and reduction tile ``kt``, walking the
    kernel positions ``(ky, kx)`` and at each the channel groups ``cg``; per tile the chunk's
    pixels, the last one ``last``, a last reduction tile's ``final``. Input pixel ``(m, y, x)``,
    ``y = oy * sy + ky - pad_top`` (``x = ox * sx + kx - pad_left``), starts at word
    ``src_base + ((m * h + y + pad_top) * w + x + pad_left) * src_stride`` (``src_base`` is the
    word of pixel ``(-pad_top, -pad_left)``, as the compiler lays it out; modulo the address
    width). Output tile ``nt``'s group ``cg``'s channel ``c = start + cg * rows + i`` (``start =
    nt * window``, ``window = cb_word * lanes + cb_rem``, rounded down to a multiple of
    ``lanes`` without the feeder's rotation, ``hwgen.memmap.rotates_lanes``) is word ``c //
    lanes``, bank ``c % lanes`` of the pixel; each bank ``b`` reads the group's word ``kword +
    (b < krem)`` (``kword, krem = divmod(start + cg * rows, lanes)``) while that word lies in
    the pixel (``< src_stride``) and the pixel in the image; elsewhere zeros.
    """
    g, ps = geom, desc["src_stride"]
    lanes, rows = config.act_lanes, config.rows
    wrap = 1 << act_addr_bits(config)
    if g.get("taps"):
        return _taps_rows(config, desc, geom, batch)
    window = g.get("cb_word", 0) * lanes + g.get("cb_rem", 0)
    pixels = _pixels(g, batch)
    tiles = list(itertools.product(range(g["kh"]), range(g["kw"]), range(g["cgs"])))
    assert len(tiles) == desc["k_tiles"], (len(tiles), desc["k_tiles"])
    top, left = g["pad_top"], g["pad_left"]
    out = []
    for chunk, first in enumerate(range(0, len(pixels), config.acc_depth)):
        part = pixels[first:first + config.acc_depth]
        for nt in range(desc["n_tiles"]):
            for kt, (ky, kx, cg) in enumerate(tiles):
                start = nt * window
                if not rotates_lanes(config):   # from the word's first bank
                    start -= start % lanes
                first_channel = start + cg * rows
                kword, krem = divmod(first_channel, lanes)
                for count, (m, oy, ox) in enumerate(part):
                    y, x = oy * g["sy"] + ky - top, ox * g["sx"] + kx - left
                    inside = 0 <= y < g["h"] and 0 <= x < g["w"]
                    pix = (desc["src_base"]
                           + ((m * g["h"] + y + top) * g["w"] + x + left) * ps) % wrap
                    reads = {b: (pix + kword + (b < krem)) % wrap for b in range(lanes)
                             if inside and kword + (b < krem) < ps}
                    channels = [divmod(first_channel + i, lanes) for i in range(rows)]
                    row_lanes = tuple((bank, (pix + word) % wrap)
                                      if inside and word < ps else None
                                      for word, bank in channels)
                    out.append(WalkRow(chunk, nt, kt, m, oy, ox, count, count == len(part) - 1,
                                       kt == len(tiles) - 1, krem, reads, row_lanes))
    return out


def _pixels(g, batch):
    """The output pixels ``(m, oy, ox)`` in walk order: row by row, or with a fused pool of
    side ``p = pool + 1`` (``oh``, ``ow`` its windows) window by window, each window's conv
    pixels ``(oy * p + wy, ox * p + wx)`` row by row."""
    p = g.get("pool", 0) + 1
    return [(m, y * p + wy, x * p + wx) for m, y, x, wy, wx in itertools.product(
        range(batch), range(g["oh"]), range(g["ow"]), range(p), range(p))]


def _taps_rows(config, desc, g, batch):
    """The rows of a first convolution in the taps layout (``hwgen.memmap.geometry_layout``),
    from products: the walk's first element ``e_start = src_base * lanes + rem0``, the pitch
    ``P = kwc + d_word * lanes``, a column ``sx * C = col_step * lanes + col_rem`` elements;
    output pixel ``(m, oy, ox)``'s ``e0 = e_start + (m * h + oy * sy) * P + ox * sx * C``;
    tile ``kt``, lane ``r`` is tap ``t = kt * rows + r``, element ``e0 + t + (t // kwc) *
    d_word * lanes``, read where its kernel row ``q = t // kwc`` is below ``kh`` and its image
    row ``oy * sy - pad_top + q`` in the image; the row's first bank is that of ``e0 + kt *
    rows``."""
    lanes, rows = config.act_lanes, config.rows
    wrap = 1 << act_addr_bits(config)
    modulus = wrap * lanes
    start = desc["src_base"] * lanes + g["rem0"]
    pitch = g["kwc"] + g["d_word"] * lanes
    column = g["col_step"] * lanes + g["col_rem"]
    pixels = _pixels(g, batch)
    out = []
    for chunk, first in enumerate(range(0, len(pixels), config.acc_depth)):
        part = pixels[first:first + config.acc_depth]
        for nt in range(desc["n_tiles"]):
            for kt in range(desc["k_tiles"]):
                for count, (m, oy, ox) in enumerate(part):
                    e0 = start + (m * g["h"] + oy * g["sy"]) * pitch + ox * column
                    row_lanes = []
                    for r in range(rows):
                        t = kt * rows + r
                        q = t // g["kwc"]
                        y = oy * g["sy"] - g["pad_top"] + q
                        element = (e0 + t + q * g["d_word"] * lanes) % modulus
                        inside = q < g["kh"] and 0 <= y < g["h"]
                        row_lanes.append(divmod(element, lanes)[::-1] if inside else None)
                    reads = dict(filter(None, row_lanes))
                    out.append(WalkRow(chunk, nt, kt, m, oy, ox, count, count == len(part) - 1,
                                       kt == desc["k_tiles"] - 1, (e0 + kt * rows) % lanes,
                                       reads, tuple(row_lanes)))
    return out
