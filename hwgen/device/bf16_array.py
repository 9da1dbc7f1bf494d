"""A weight-stationary array of bf16 processing elements: :class:`BF16Column`\\ s side by side,
sharing the activations, each with its own stationary weights (docs/arithmetic.md,
"bfloat16")."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .bf16_column import BF16Column
from .float_formats import BF16, FP32
from .systolic import delay

__all__ = ["BF16Array"]


def _count(name, value):
    """Refuse ``value`` unless it is an int >= 1, naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"BF16Array: {name}={value!r}; allowed: an int >= 1")


class BF16Array(wiring.Component):
    """``rows x cols`` weight-stationary bf16 array: column ``c`` gives, for an activation
    vector ``x`` (a tile of ``rows`` values), the tile sum ``s[c] = fl32(... fl32(fl32(+0 +
    p[0]) + p[1]) ... + p[rows - 1])`` with ``p[r] = fl32(x[r] * W[r][c])`` and the zero rule,
    and its fp32 accumulation ``acc[c] = fl32(acc[c] + s[c])`` from the bias, as
    :func:`hwgen.nn.bf16.bf16_matmul` with ``R = rows``.

    Each column is a :class:`~hwgen.device.bf16_column.BF16Column`. The activations are
    broadcast to every column (all columns see a row's value in the same cycle, so their
    outputs come out together, without a deskew); the array skews them itself: a vector
    presented unskewed on ``a_data`` in cycle ``t`` (with ``a_valid``) reaches row ``r`` in
    cycle ``t + r *`` :attr:`skew`, where row ``r`` reads its weight from bank ``a_sel`` of
    the same vector.

    Timing. The tile sums show on ``s`` (with ``s_valid``) in cycle ``t +``
    :attr:`sum_latency`, the accumulators on ``acc`` (with ``acc_valid``) in cycle ``t +``
    :attr:`latency`. Successive tiles (the tile rule): a vector with ``a_first`` starts an
    accumulation (``acc = bias + s``) and may be presented in any cycle; a vector without it
    adds to what the last tile left in the accumulators, so it must be presented
    :attr:`acc_interval` cycles or more after that tile. Tile sums alone (``s``) may be taken
    from a vector in every cycle. ``bias`` is read in the cycle the first tile's sum shows on
    ``s`` (``t + sum_latency``).

    Weights. ``w_valid`` in cycle ``t`` writes ``w_data[c]`` into row ``w_row``, column ``c``
    of bank ``w_bank`` at the end of the cycle. Row ``r`` of a vector presented in cycle
    ``t'`` reads its weights in cycle ``t' + r * skew``, so writes of a bank in cycles ``t0 ..
    t1`` are seen whole by every vector presented after ``t1``, and by none presented in cycle
    ``t0 -`` :attr:`weight_settle` or before. Two banks let one tile's weights load while the
    other's are used.

    Parameters
    ----------
    rows, cols : int
        The processing elements per column (``rows >= 1``: the length of a tile) and the
        columns (``cols >= 1``: the outputs).
    mul_latency, add_latency : int
        The latencies of the multipliers and adders (:class:`BF16Column`).
    dw_lines : int
        With ``dw_lines >= 1``, the depthwise operands (a depthwise pass, see
        :class:`~hwgen.device.depthwise_feeder.DepthwiseFeeder`): while ``dw`` is high, row
        ``r``, column ``c`` of a vector presented in cycle ``t`` multiplies lane ``c`` of line
        ``d_sel[r]`` (of ``dw_lines + 1``; a code past them +0.0) as ``d_lines`` shows it in
        cycle ``t + r``, the int8 array's timing with its lanes unskewed; ``a_data`` is unused.

    Members
    -------
    a_data : In(ArrayLayout(BF16, rows))
        A vector's activations, bf16 bit patterns, unskewed.
    a_valid, a_first, a_sel : In(1)
        A vector is presented; it starts an accumulation; the weight bank it is multiplied
        with.
    bias : In(ArrayLayout(FP32, cols))
        Each column's accumulation start, read as above.
    w_data : In(ArrayLayout(BF16, cols))
    w_row : In(range(rows))
    w_valid, w_bank : In(1)
    s : Out(ArrayLayout(FP32, cols))
        The tile sums (meaningful with ``s_valid``).
    s_valid : Out(1)
    acc : Out(ArrayLayout(FP32, cols))
        The accumulators after the tile (meaningful with ``acc_valid``).
    acc_valid : Out(1)
    dw : In(1)
        Only with ``dw_lines``.
    d_lines : In(ArrayLayout(ArrayLayout(BF16, cols), dw_lines + 1))
        Only with ``dw_lines``.
    d_sel : In(ArrayLayout(unsigned((dw_lines + 1).bit_length()), rows))
        Only with ``dw_lines``.
    """

    def __init__(self, rows, cols, *, mul_latency=3, add_latency=4, dw_lines=0):
        _count("rows", rows)
        _count("cols", cols)
        self._rows, self._cols = rows, cols
        self._dw_lines = dw_lines
        depthwise = {}
        if dw_lines:
            depthwise = {"dw": In(1),
                         "d_lines": In(data.ArrayLayout(data.ArrayLayout(BF16, cols),
                                                        dw_lines + 1)),
                         "d_sel": In(data.ArrayLayout(unsigned((dw_lines + 1).bit_length()),
                                                      rows))}
        # Made here, so that their own checks refuse a bad latency at construction.
        self._columns = [BF16Column(rows, mul_latency=mul_latency, add_latency=add_latency)
                         for _ in range(cols)]
        super().__init__({
            "a_data": In(data.ArrayLayout(BF16, rows)),
            "a_valid": In(1), "a_first": In(1), "a_sel": In(1),
            "bias": In(data.ArrayLayout(FP32, cols)),
            "w_data": In(data.ArrayLayout(BF16, cols)), "w_row": In(range(rows)),
            "w_valid": In(1), "w_bank": In(1),
            "s": Out(data.ArrayLayout(FP32, cols)), "s_valid": Out(1),
            "acc": Out(data.ArrayLayout(FP32, cols)), "acc_valid": Out(1),
            **depthwise,
        })

    @property
    def rows(self):
        return self._rows

    @property
    def cols(self):
        return self._cols

    @property
    def skew(self):
        """Cycles between the entries of a vector's consecutive rows."""
        return self._columns[0].skew

    @property
    def sum_latency(self):
        """Cycles from a vector's ``a_valid`` to its tile sums on ``s``."""
        return self._columns[0].sum_latency

    @property
    def latency(self):
        """Cycles from a vector's ``a_valid`` to its accumulators on ``acc``."""
        return self._columns[0].latency

    @property
    def acc_interval(self):
        """The fewest cycles between two tiles of one accumulation."""
        return self._columns[0].acc_interval

    @property
    def weight_settle(self):
        """Cycles a bank's old weights are still read after the vector that last uses them
        was presented (its last row's entry)."""
        return (self._rows - 1) * self.skew

    def elaborate(self, platform):
        m = Module()
        rows, cols = self._rows, self._cols
        banks = [[Signal(data.ArrayLayout(BF16, cols), name=f"bank{b}_row{r}")
                  for r in range(rows)] for b in range(2)]
        with m.If(self.w_valid):
            for b in range(2):
                for r in range(rows):
                    with m.If((self.w_bank == b) & (self.w_row == r)):
                        m.d.sync += banks[b][r].eq(self.w_data)
        for r in range(rows):
            # Row r's activation and bank select, delayed to the cycle the column adds row
            # r's product; one delay line serves every column.
            x = delay(m, self.a_data[r], r * self.skew, name=f"askew{r}")
            sel = delay(m, self.a_sel, r * self.skew, name=f"sel{r}")
            operands = self._depthwise_operands(m, r) if self._dw_lines else None
            for c, column in enumerate(self._columns):
                weight = Mux(sel, banks[1][r][c].as_value(), banks[0][r][c].as_value())
                own = x if operands is None else Mux(self.dw, operands[c].as_value(),
                                                     x.as_value())
                m.d.comb += [column.x[r].eq(own), column.w[r].eq(weight)]
        for c, column in enumerate(self._columns):
            m.submodules[f"col{c}"] = column
            m.d.comb += [column.valid.eq(self.a_valid), column.first.eq(self.a_first),
                         column.bias.eq(self.bias[c]),
                         self.s[c].eq(column.s), self.acc[c].eq(column.acc)]
        # Every column's flags are the same: show the first's.
        m.d.comb += [self.s_valid.eq(self._columns[0].s_valid),
                     self.acc_valid.eq(self._columns[0].acc_valid)]
        return m

    def _depthwise_operands(self, m, r):
        """Row ``r``'s depthwise operand of each column: the lane its select names ``r``
        cycles after the vector (the feeder's timing), then delayed to the row's turn."""
        sel = delay(m, self.d_sel[r], r, name=f"dsel{r}")
        operands = []
        for c in range(self._cols):
            lane = Signal(BF16, name=f"dop{r}_{c}")
            with m.Switch(sel):
                for line in range(self._dw_lines + 1):
                    with m.Case(line):
                        m.d.comb += lane.eq(self.d_lines[line][c])
            operands.append(delay(m, lane, r * (self.skew - 1), name=f"dskew{r}_{c}"))
        return operands
