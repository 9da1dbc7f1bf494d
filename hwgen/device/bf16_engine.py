"""The bf16 matrix-multiply engine: a :class:`~hwgen.device.bf16_array.BF16Array` behind the
int8 engine's streams (:class:`hwgen.device.engine.MatmulEngine`, weight-stationary), giving
fp32 tile sums for :class:`~hwgen.device.bf16_accumulators.BF16AccumulatorBank` to add up
(docs/arithmetic.md, "bfloat16")."""

from amaranth.hdl import Array, Cat, Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..latency import FIFO_LATENCY
from .bf16_array import BF16Array
from .float_formats import BF16, FP32
from .systolic import delay

__all__ = ["BF16MatmulEngine", "bf16_act_row_layout", "bf16_result_row_layout",
           "bf16_weight_row_layout"]


def bf16_weight_row_layout(rows, cols):
    """One row of a weight tile: ``cols`` bf16 bit patterns (``rows`` such rows make a tile)."""
    return data.ArrayLayout(BF16, cols)


def bf16_act_row_layout(rows, cols):
    """One activation row of ``rows`` bf16 bit patterns; ``last`` ends a batch."""
    return data.StructLayout({"data": data.ArrayLayout(BF16, rows), "last": 1})


def bf16_result_row_layout(rows, cols):
    """One result row of ``cols`` fp32 tile sums; ``last`` ends a batch."""
    return data.StructLayout({"data": data.ArrayLayout(FP32, cols), "last": 1})


class BF16MatmulEngine(wiring.Component):
    """Multiply batches of bf16 activation rows by bf16 weight tiles, giving fp32 tile sums.

    The streams are :class:`~hwgen.device.engine.MatmulEngine`'s (weight-stationary): weight
    tiles on ``i_weight``, each as ``rows`` consecutive transfers (tile row ``k`` holds
    ``W[k, 0..cols-1]``); batches of activation rows on ``i_act``, each ended by ``last``;
    batch ``n`` is multiplied by tile ``n``, and every activation row ``x`` gives one result
    row on ``o_result``, in order, with ``last`` copied: the tile sums ``s[j] = fl32(...
    fl32(+0 + p[0]) ... + p[rows - 1])``, ``p[k] = fl32(x[k] * W[k, j])`` with the zero rule
    (:func:`hwgen.nn.bf16.bf16_matmul` of one tile from a zero bias). The sums across the
    reduction tiles are left to :class:`~hwgen.device.bf16_accumulators.BF16AccumulatorBank`.

    Weight banks. Tile ``n + 1`` loads while batch ``n`` computes. A bank is rewritten only
    :attr:`rewrite_wait` cycles after the last row that reads it entered the array (the
    array's ``weight_settle``: its rows read their weights that long after the entry), so
    tile ``n + 2`` waits that long after batch ``n``'s last row.

    Timing, with the inputs always valid and ``o_result`` always ready: tile 0's rows load in
    cycles ``0 .. rows - 1``; batch ``n``'s rows enter one a cycle from the later of the
    cycle after batch ``n - 1``'s last row and the cycle after tile ``n``'s last row; tile
    ``n + 2`` loads from the later of the cycle after tile ``n + 1``'s last row and
    :attr:`rewrite_wait` cycles after batch ``n``'s last row. So batches of
    ``rows + rewrite_wait - 1`` rows or more follow each other without a gap. A row's result
    leaves :attr:`latency` cycles after it entered. ``o_result`` may stall at any time:
    activations are only admitted while the output FIFO (:attr:`fifo_depth` rows) has room
    for every row in flight.

    Parameters
    ----------
    rows, cols : int
        The array's shape: the length of a tile and the outputs (each ``>= 1``).
    mul_latency, add_latency : int
        The latencies of the array's multipliers and adders (:class:`BF16Array`).
    dw_lines : int
        With ``dw_lines >= 1``, the array's depthwise operands (:class:`BF16Array`), and the
        weight banks' state for the depthwise unit to wait on.

    Members
    -------
    i_weight : In(stream.Signature(bf16_weight_row_layout(rows, cols)))
    i_act : In(stream.Signature(bf16_act_row_layout(rows, cols)))
    o_result : Out(stream.Signature(bf16_result_row_layout(rows, cols)))
    issue : Out(1)
        An activation row entered the engine this cycle (``rows * cols`` multiplies).
    dw, dw_lines, dw_sel : In
        Only with ``dw_lines``: the array's ``dw``, ``d_lines`` and ``d_sel``, with the rows.
    bank_full : Out(2)
        Only with ``dw_lines``: the weight banks that hold a tile.
    a_ptr : Out(1)
        Only with ``dw_lines``: the bank the next activation row uses.
    """

    def __init__(self, rows, cols, *, mul_latency=3, add_latency=4, dw_lines=0):
        # The array checks the shape and the latencies.
        self.array = BF16Array(rows, cols, mul_latency=mul_latency, add_latency=add_latency,
                               dw_lines=dw_lines)
        depthwise = {}
        if dw_lines:
            depthwise = {"dw": In(1), "dw_lines": In(self.array.d_lines.shape()),
                         "dw_sel": In(self.array.d_sel.shape()), "bank_full": Out(2),
                         "a_ptr": Out(1)}
        # A credit comes back FIFO_LATENCY + 1 cycles after its row's result is written (the
        # read, then the count's register): that many more than the rows the array holds keep
        # one row a cycle going; one spare, as the int8 engine has. The cycle model reads it.
        self.fifo_depth = self.array.sum_latency + FIFO_LATENCY + 2
        super().__init__({
            "i_weight": In(stream.Signature(bf16_weight_row_layout(rows, cols))),
            "i_act": In(stream.Signature(bf16_act_row_layout(rows, cols))),
            "o_result": Out(stream.Signature(bf16_result_row_layout(rows, cols))),
            "issue": Out(1),
            **depthwise,
        })

    @property
    def rows(self):
        return self.array.rows

    @property
    def cols(self):
        return self.array.cols

    @property
    def latency(self):
        """Cycles from an activation row's entry to its result row on ``o_result`` (ready)."""
        return self.array.sum_latency + FIFO_LATENCY

    @property
    def rewrite_wait(self):
        """Cycles from the entry of the last row that uses a bank to the first write of the
        bank's next tile: the array's ``weight_settle``, and at least the cycle the bank's
        ``full`` flag takes to clear."""
        return max(1, self.array.weight_settle)

    def _delay_last(self, m, last):
        """``last`` in step with the array's tile sums."""
        return delay(m, last, self.array.sum_latency, name="last")

    def elaborate(self, platform):
        m = Module()
        m.submodules.array = array = self.array
        layout = bf16_result_row_layout(self.rows, self.cols)
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=layout.size, depth=self.fifo_depth)
        w_accept = Signal()
        a_accept = Signal()
        m.d.comb += [w_accept.eq(self.i_weight.valid & self.i_weight.ready),
                     a_accept.eq(self.i_act.valid & self.i_act.ready),
                     self.issue.eq(a_accept)]

        # Weight banks: `full[b]` from the cycle after its tile's last row is written until
        # the cycle after the last activation row that uses it enters; then `wait[b]` counts
        # down the cycles the array's rows still read it.
        full = Array(Signal(name=f"full{b}") for b in range(2))
        wait = Array(Signal(range(self.rewrite_wait), name=f"wait{b}") for b in range(2))
        w_ptr = Signal()
        w_row = Signal(range(self.rows))
        a_ptr = Signal()
        m.d.comb += [
            self.i_weight.ready.eq(~full[w_ptr] & (wait[w_ptr] == 0)),
            array.w_data.eq(self.i_weight.payload),
            array.w_row.eq(w_row),
            array.w_bank.eq(w_ptr),
            array.w_valid.eq(w_accept),
        ]
        with m.If(w_accept):
            with m.If(w_row == self.rows - 1):
                m.d.sync += [w_row.eq(0), w_ptr.eq(~w_ptr), full[w_ptr].eq(1)]
            with m.Else():
                m.d.sync += w_row.eq(w_row + 1)
        for b in range(2):
            with m.If(wait[b] != 0):
                m.d.sync += wait[b].eq(wait[b] - 1)
        # Batch and tile never share a bank in a cycle: a batch reads only a full bank.
        with m.If(a_accept & self.i_act.payload.last):
            m.d.sync += [a_ptr.eq(~a_ptr), full[a_ptr].eq(0),
                         wait[a_ptr].eq(self.rewrite_wait - 1)]

        if "dw" in self.signature.members:
            m.d.comb += [array.dw.eq(self.dw), array.d_lines.eq(self.dw_lines),
                         array.d_sel.eq(self.dw_sel), self.bank_full.eq(Cat(*full)),
                         self.a_ptr.eq(a_ptr)]

        # Credits: free FIFO entries not yet promised to a row in flight, so the FIFO's write
        # side never waits.
        credits = Signal(range(self.fifo_depth + 1), init=self.fifo_depth)
        returned = Signal()
        m.d.sync += credits.eq(credits - a_accept + returned)
        m.d.comb += [
            self.i_act.ready.eq(full[a_ptr] & (credits != 0)),
            array.a_data.eq(self.i_act.payload.data),
            array.a_valid.eq(a_accept),
            array.a_sel.eq(a_ptr),
            # Only the tile sums are used: the accumulators start from a zero bias, unread.
            array.a_first.eq(1),
        ]

        last = self._delay_last(m, self.i_act.payload.last)
        w, r = fifo.w_stream, fifo.r_stream
        m.d.comb += [
            w.payload.eq(Cat(array.s, last)),
            w.valid.eq(array.s_valid),
            self.o_result.payload.eq(r.payload),
            self.o_result.valid.eq(r.valid),
            r.ready.eq(self.o_result.ready),
            returned.eq(r.valid & self.o_result.ready),
        ]
        return m
