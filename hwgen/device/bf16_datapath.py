"""The bf16 device's matrix datapath: :class:`~hwgen.device.bf16_engine.BF16MatmulEngine`,
:class:`~hwgen.device.bf16_accumulators.BF16AccumulatorBank` and a
:class:`~hwgen.device.bf16_finish.BF16Finish` per column, composed for a dense layer's passes
(docs/arithmetic.md, "bfloat16"), the accumulator bank's row rule kept inside."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .bf16_accumulators import BF16AccumulatorBank
from .bf16_engine import BF16MatmulEngine, bf16_act_row_layout, bf16_weight_row_layout
from .bf16_finish import FINISH_SETTINGS, BF16Finish
from .float_formats import FP32
from .systolic import delay

__all__ = ["BF16MatrixDatapath", "bf16_finished_row_layout"]


def bf16_finished_row_layout(cols, depth, tile_bits):
    """A finished row: its row ``m`` of the chunk, whether it is the chunk's ``last`` row, its
    output tile ``nt`` and its ``cols`` values (bf16 results as fp32 bits with the low half
    0, or the raw fp32 accumulators)."""
    return data.StructLayout({"m": range(depth), "last": 1, "nt": tile_bits,
                              "data": data.ArrayLayout(FP32, cols)})


class BF16MatrixDatapath(wiring.Component):
    """A bf16 dense layer's matrix work: weight tiles and activation rows in, finished rows out.

    The order of work is the int8 device's (:mod:`hwgen.device.accelerator`): for each chunk
    of ``M`` rows (``M <= depth``), for each output tile ``nt < n_tiles``, for each reduction
    tile ``kt < k_tiles``, the weight tile ``(kt, nt)`` on ``i_weight`` (``rows`` transfers)
    and the chunk's ``M`` activation rows on ``i_act``, ``last`` on the ``M``-th (the
    engine's streams: batch ``n`` meets tile ``n``). The datapath counts ``m``, ``kt`` and
    ``nt`` itself, from ``last``, ``k_tiles`` and ``n_tiles``; its counters come back to 0
    after a chunk's last batch, so chunks, and layers, follow each other without a start.

    The engine's tile sums enter the accumulator bank (a row's ``kt = 0`` tile from the bias,
    its ``kt = k_tiles - 1`` tile leaving) through a register; the bank's finished rows go
    through a finish per column with ``layer``'s settings and leave on ``o_row`` with their
    ``m`` and ``nt``, :attr:`latency` cycles after the row's last activation row entered.

    The row rule. A row's tile must reach the bank :attr:`row_interval` cycles or more after
    the row's previous tile; the engine's rows keep their spacing on the way (its output is
    always ready, so each row leaves ``engine.latency`` cycles after it entered). So
    ``i_act.ready`` is held low while the next row (not of a ``kt = 0`` tile) has a row of
    the same ``m`` among the last ``row_interval - 1`` transfers: the bubbles a chunk of
    ``M < row_interval`` rows needs between its reduction tiles. Any producer that waits for
    ``ready`` is safe, with or without gaps of its own; :meth:`entry_cycles` and
    :meth:`pass_cycles` give the timing of one that never waits.

    Parameters
    ----------
    rows, cols : int
        The array's shape (:class:`~hwgen.device.bf16_engine.BF16MatmulEngine`).
    depth : int
        The accumulators' rows: a chunk's most rows.
    mul_latency, add_latency : int
        The array's latencies; ``add_latency`` is the accumulators' adders' too.
    finish_latency : int
        :class:`~hwgen.device.bf16_finish.BF16Finish`'s latency, 0..3.
    tile_bits : int
        Width of ``k_tiles``, ``n_tiles`` and the output's ``nt``.
    bias_latency : int
        Cycles from ``bias_nt`` to its row on ``bias``: 1 (a synchronous read port) or 2 (a
        port with a register after it: ``bias_nt`` then names the tile of the next row the
        engine's output gives, a cycle earlier).
    checked : bool
        The bank's simulation check of the row rule (for tests).
    dw_lines : int
        With ``dw_lines >= 1``, the engine's depthwise operands and banks' state
        (:class:`~hwgen.device.bf16_engine.BF16MatmulEngine`): a depthwise unit's rows, which
        never wait, so it keeps the row rule itself.

    Members
    -------
    i_weight : In(stream.Signature(bf16_weight_row_layout(rows, cols)))
    i_act : In(stream.Signature(bf16_act_row_layout(rows, cols)))
    k_tiles, n_tiles : In(tile_bits)
        The layer's reduction and output tiles (``>= 1``), steady until its last row has
        left the engine (the counters at both of its ends read them).
    bias_nt : Out(tile_bits)
        The output tile whose bias ``bias`` must hold ``bias_latency`` cycles later: the
        address of a read port.
    bias : In(data.ArrayLayout(FP32, cols))
        The fp32 bias row of the output tile ``bias_nt`` named ``bias_latency`` cycles
        before.
    layer : In(FINISH_SETTINGS)
        The layer's finish, steady until its last row has left.
    o_valid : Out(1)
        A finished row is on ``o_row``: the consumer takes it in that cycle (the bank cannot
        wait, so neither can the rows after it).
    o_row : Out(bf16_finished_row_layout(cols, depth, tile_bits))
    issue : Out(1)
        An activation row entered the engine.
    dw, dw_lines, dw_sel, bank_full, a_ptr
        Only with ``dw_lines``: the engine's.
    """

    def __init__(self, rows, cols, depth, *, mul_latency=3, add_latency=4, finish_latency=2,
                 tile_bits=12, bias_latency=1, checked=False, dw_lines=0):
        if bias_latency not in (1, 2):
            raise ValueError(f"BF16MatrixDatapath: bias_latency={bias_latency!r}; allowed: 1, 2")
        self._bias_latency = bias_latency
        self.engine = BF16MatmulEngine(rows, cols, mul_latency=mul_latency,
                                       add_latency=add_latency, dw_lines=dw_lines)
        # The depthwise members are the engine's, passed through.
        depthwise = {name: member for name, member in self.engine.signature.members.items()
                     if name in ("dw", "dw_lines", "dw_sel", "bank_full", "a_ptr")}
        self.bank = BF16AccumulatorBank(cols, depth, add_latency=add_latency, checked=checked)
        self.finishes = [BF16Finish(finish_latency) for _ in range(cols)]
        self._tile_bits = tile_bits
        super().__init__({
            "i_weight": In(stream.Signature(bf16_weight_row_layout(rows, cols))),
            "i_act": In(stream.Signature(bf16_act_row_layout(rows, cols))),
            "k_tiles": In(tile_bits), "n_tiles": In(tile_bits),
            "bias_nt": Out(tile_bits), "bias": In(data.ArrayLayout(FP32, cols)),
            "layer": In(FINISH_SETTINGS),
            "o_valid": Out(1), "o_row": Out(bf16_finished_row_layout(cols, depth, tile_bits)),
            "issue": Out(1),
            **depthwise,
        })

    @property
    def rows(self):
        return self.engine.rows

    @property
    def cols(self):
        return self.engine.cols

    @property
    def depth(self):
        return self.bank.depth

    @property
    def row_interval(self):
        """The fewest cycles between two tiles of a row (the bank's)."""
        return self.bank.row_interval

    @property
    def latency(self):
        """Cycles from a row's final activation row on ``i_act`` to its finished row: the
        engine, the register before the bank, the bank and the finish."""
        return self.engine.latency + 1 + self.bank.latency + self.finishes[0].latency

    def _spacing(self):
        """The cycles the datapath keeps between two tiles of a row."""
        return self.row_interval

    def entry_cycles(self, chunk_rows, k_tiles, n_tiles, *, first_row=0):
        """The cycles at which each activation row enters, from a first weight row at cycle 0,
        for chunks of ``chunk_rows`` (a list) rows with both streams always valid: the
        engine's timing (its docstring's: a batch after its tile's last row and the batch
        before; tile ``n + 2`` :attr:`~BF16MatmulEngine.rewrite_wait` cycles after batch
        ``n``) and the row rule (a tile with ``kt > 0`` :attr:`row_interval` cycles after the
        one before). The activation stream's first row may come no earlier than cycle
        ``first_row`` (a feeder's staged rows, :func:`hwgen.timing.unit_latencies`)."""
        rows, wait = self.rows, self.engine.rewrite_wait
        w_end, firsts, lasts, entries = [], [], [], []
        batches = [(m_rows, kt) for m_rows in chunk_rows
                   for _ in range(n_tiles) for kt in range(k_tiles)]
        for n, (m_rows, kt) in enumerate(batches):
            start = w_end[-1] + 1 if n else 0
            if n >= 2:
                start = max(start, lasts[n - 2] + wait)
            w_end.append(start + rows - 1)
            first = max(w_end[-1] + 1, lasts[-1] + 1 if lasts else first_row)
            if kt:
                first = max(first, firsts[-1] + self.row_interval)
            firsts.append(first)
            lasts.append(first + m_rows - 1)
            entries += range(first, first + m_rows)
        return entries

    def pass_cycles(self, m_rows, k_tiles, n_tiles):
        """Cycles of a chunk of ``m_rows`` rows from idle, to the cycle after its last
        activation row; its last finished row leaves :attr:`latency` cycles after that row.

        Each batch starts after its tile's ``rows`` transfers and the batch before;
        ``kt > 0`` batches at least :attr:`row_interval` cycles after the one before. With
        ``M >= max(row_interval, rows + rewrite_wait - 1)`` the batches follow each other
        without a gap: ``rows + n_tiles * k_tiles * M``; fewer rows add the bubbles
        (:meth:`entry_cycles`)."""
        return self.entry_cycles([m_rows], k_tiles, n_tiles)[-1] + 1

    def _walk(self, m, accept, last, name):
        """Counters of the row, reduction tile and output tile that ``accept`` takes next
        (``last`` ends a batch); return ``(m, kt, nt)``."""
        row = Signal(range(self.depth), name=f"{name}_m")
        kt = Signal(self._tile_bits, name=f"{name}_kt")
        nt = Signal(self._tile_bits, name=f"{name}_nt")
        with m.If(accept):
            with m.If(~last):
                m.d.sync += row.eq(row + 1)
            with m.Else():
                m.d.sync += row.eq(0)
                with m.If(kt != self.k_tiles - 1):
                    m.d.sync += kt.eq(kt + 1)
                with m.Else():
                    m.d.sync += [kt.eq(0),
                                 nt.eq(Mux(nt == self.n_tiles - 1, 0, nt + 1))]
        return row, kt, nt

    def _admit(self, m):
        """Pass ``i_act`` to the engine, held while the next row would break the row rule;
        return the output tile of the next row in."""
        engine, act = self.engine, self.i_act
        accept = Signal()
        row, kt, nt = self._walk(m, accept, act.payload.last, "in")
        # The m of each transfer of the last _spacing() - 1 cycles.
        clash, past_valid, past_m = [], accept, row
        for k in range(1, self._spacing()):
            past_valid = delay(m, past_valid, 1, name=f"past_valid{k}")
            past_m = delay(m, past_m, 1, name=f"past_m{k}")
            clash.append(past_valid & (past_m == row))
        hold = Signal()
        m.d.comb += [
            hold.eq((kt != 0) & Cat(*clash).any()),
            engine.i_act.payload.eq(act.payload),
            engine.i_act.valid.eq(act.valid & ~hold),
            act.ready.eq(engine.i_act.ready & ~hold),
            accept.eq(act.valid & act.ready),
            self.issue.eq(engine.issue),
        ]
        return nt

    def _bias_tile(self, out_nt, in_nt):
        """The output tile whose bias the bank reads a cycle later: the engine's output row's
        (the feeders' ``in_nt`` may be tiles ahead)."""
        return out_nt

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = engine = self.engine
        m.submodules.bank = bank = self.bank
        wiring.connect(m, wiring.flipped(self.i_weight), engine.i_weight)
        if "dw" in self.signature.members:
            m.d.comb += [engine.dw.eq(self.dw), engine.dw_lines.eq(self.dw_lines),
                         engine.dw_sel.eq(self.dw_sel), self.bank_full.eq(engine.bank_full),
                         self.a_ptr.eq(engine.a_ptr)]
        in_nt = self._admit(m)

        # The bank never waits, so neither does the engine's output.
        res = engine.o_result
        m.d.comb += res.ready.eq(1)
        out_m, out_kt, out_nt = self._walk(m, res.valid, res.payload.last, "out")
        bias_nt = out_nt
        if self._bias_latency == 2:
            # The tile of the next row to leave the engine: the walk's next value.
            tile_end = res.valid & res.payload.last & (out_kt == self.k_tiles - 1)
            bias_nt = Mux(tile_end, Mux(out_nt == self.n_tiles - 1, 0, out_nt + 1), out_nt)
        m.d.comb += self.bias_nt.eq(self._bias_tile(bias_nt, in_nt))
        # A register before the bank: the bias's read port answers in that cycle.
        row = bank.i_row
        nt = Signal(self._tile_bits, name="bank_nt")
        last = Signal(name="bank_last")
        m.d.sync += [bank.i_valid.eq(res.valid), row.m.eq(out_m), nt.eq(out_nt),
                     last.eq(res.payload.last),
                     row.first.eq(out_kt == 0), row.final.eq(out_kt == self.k_tiles - 1),
                     row.sums.eq(res.payload.data)]
        m.d.comb += row.bias.eq(self.bias)

        lat = self.finishes[0].latency
        done_nt = delay(m, nt, bank.latency, name="done_nt")
        done_last = delay(m, last, bank.latency, name="done_last")
        for c, finish in enumerate(self.finishes):
            m.submodules[f"finish{c}"] = finish
            m.d.comb += [finish.acc.eq(bank.o_row.sums[c]), finish.layer.eq(self.layer),
                         self.o_row.data[c].eq(finish.y)]
        m.d.comb += [self.o_valid.eq(delay(m, bank.o_valid, lat, name="fin_valid")),
                     self.o_row.m.eq(delay(m, bank.o_row.m, lat, name="fin_m")),
                     self.o_row.nt.eq(delay(m, done_nt, lat, name="fin_nt")),
                     self.o_row.last.eq(delay(m, done_last, lat, name="fin_last"))]
        return m
