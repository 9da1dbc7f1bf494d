"""What a weight feeder's transfer carries, one row of a tile or two
(:class:`~hwgen.device.weight_feeder.WeightFeeder`'s ``pairs``), and how far each moves its
address."""

from amaranth.hdl import Mux, Signal

from .engine import weight_row_layout, weight_transfer_layout

__all__ = ["pair_steps", "weight_transfer"]


def weight_transfer(m, config, keep, row, *, take, start, tall, wdiag, rd_data, rd_data_b=None):
    """Return the transfer the word(s) read make: each row's lanes that ``keep`` (a register
    per row of the transfer) says, the others zero. With ``rd_data_b`` (pairs) the second row
    is that word, or in a wdiag layer (its tile is one word) the first word's other lane, and
    ``two`` (a register, set as ``keep`` when ``take`` and not ``start``: the tile has a row
    after the transfer's first, ``row``; ``tall`` tiles have ``array_rows`` rows)."""
    pairs = rd_data_b is not None
    rows = [Signal(weight_row_layout(config), name=f"row{r}" if pairs else "word")
            for r in range(len(keep))]
    for j in range(config.cols):
        m.d.comb += rows[0][j].eq(Mux(keep[0][j], rd_data[j], 0))
    if not pairs:
        return rows[0]
    for j in range(config.cols):
        diag = Mux(keep[1][j], rd_data[j], 0)
        m.d.comb += rows[1][j].eq(Mux(wdiag, diag, rd_data_b[j]) if config.spatial
                                  else rd_data_b[j])
    two = Signal(init=1)
    last = config.rows - 1
    if config.array_rows != config.rows:
        last = Mux(tall, config.array_rows - 1, last)
    with m.If(~start & take):
        m.d.sync += two.eq(row != last)
    word = Signal(weight_transfer_layout(config, 2))
    m.d.comb += [word.rows[0].eq(rows[0]), word.rows[1].eq(rows[1]), word.two.eq(two)]
    return word


def pair_steps(config, at_end, *, tall, wdiag):
    """Return the words a feeder of pairs moves its address (``inc_first``, ``inc_move``): to
    a tile's first transfer from its start, its first transfer's rows (one in a tile of one
    row); to the next transfer, one if that is the single last row of a tile of an odd number
    of rows (``at_end(1)``: the transfer before a tile's last), two otherwise; a wdiag layer's
    a word a tile."""
    def by_tile(short, long):
        return short if config.array_rows == config.rows else Mux(tall, long, short)
    first = by_tile(min(config.rows, 2), min(config.array_rows, 2))
    odd = by_tile(config.rows % 2, config.array_rows % 2)
    move = Mux(at_end(1) & odd, 1, 2)
    if config.spatial:
        first, move = Mux(wdiag, 1, first), Mux(wdiag, 1, move)
    return {"inc_first": first, "inc_move": move}
