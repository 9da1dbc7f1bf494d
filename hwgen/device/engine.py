"""The matrix-multiply engine: a systolic array behind streams.

Both dataflows share one interface, so the network controller and the test benches do not care
which one they drive.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..config import Dataflow
from ..latency import bank_rest, fifo_depth
from ..memmap import has_depthwise
from .layouts import dw_lines_layout, dw_sel_layout
from .systolic import OutputStationaryArray, WeightStationaryArray

__all__ = ["MatmulEngine", "act_row_layout", "result_row_layout", "weight_row_layout",
           "weight_transfer_layout"]


def weight_row_layout(config):
    """One row of a weight tile: ``cols`` signed ``w_bits`` weights."""
    return data.ArrayLayout(signed(config.w_bits), config.cols)


def weight_transfer_layout(config, rows=1):
    """What one transfer of a weight tile carries: a row (``rows`` 1, :func:`weight_row_layout`),
    or two consecutive rows (``rows`` 2) and ``two``, low when the tile ends after the first."""
    if rows == 1:
        return weight_row_layout(config)
    if rows != 2:
        raise ValueError(f"weight_transfer_layout: rows={rows!r}; allowed: 1, 2")
    return data.StructLayout({"rows": data.ArrayLayout(weight_row_layout(config), 2), "two": 1})


def act_row_layout(config):
    """One activation row of ``rows`` signed ``in_bits`` values; ``last`` ends a batch."""
    return data.StructLayout({
        "data": data.ArrayLayout(signed(config.in_bits), config.rows),
        "last": 1,
    })


def result_row_layout(config):
    """One result row of ``cols`` signed ``acc_bits`` sums; ``last`` ends a batch."""
    return data.StructLayout({
        "data": data.ArrayLayout(signed(config.acc_bits), config.cols),
        "last": 1,
    })


class MatmulEngine(wiring.Component):
    """Multiply batches of activation rows by weight tiles on a systolic array.

    The engine takes weight tiles on ``i_weight``, each as ``rows`` consecutive transfers (tile
    row ``k`` holds ``W[k, 0..cols-1]``; ``array_rows`` while ``dw`` is high; with
    ``weight_rows`` 2, two rows a transfer), and batches of
    activation rows on ``i_act``, each batch ended by ``last``. Batch ``n`` is multiplied by tile
    ``n``: for every activation row ``x`` the engine emits one result row ``y[j] = sum_k x[k] *
    W[k, j]`` on ``o_result``, in order, with ``last`` copied. Tile ``n + 1`` loads while batch
    ``n`` computes (two weight banks); tile ``n + 2`` waits until batch ``n`` has entered the
    array. ``o_result`` may stall at any time: activations are only admitted while the output
    FIFO has room for every row in flight.

    Parameters
    ----------
    config : AcceleratorConfig
        ``rows``, ``cols``, ``dataflow`` and the widths are used.
    pe_instances : bool
        Instantiate the processing elements by Verilog module name (see
        :func:`hwgen.generate.emit_design`) instead of inlining them; for emission only.
    gated : bool
        Add the ``en`` input, the array's clock enable.
    dsp_packing : DspPacking, str or None
        How the weight-stationary array maps its multipliers; see
        :class:`hwgen.device.systolic.WeightStationaryArray`. Only ``None`` for ``dataflow="os"``.
    always_ready : bool
        The consumer holds ``o_result.ready`` high: no output FIFO (the credits then never run
        out); result rows leave as the array delivers them, ``FIFO_LATENCY`` cycles earlier
        than :mod:`hwgen.cycles` counts for the engine.
    input_register : bool
        The weight-stationary array's inputs pass a register
        (:meth:`hwgen.device.systolic.WeightStationaryArray.input_stages_for`): a cycle more
        per row. An output-stationary array ignores it.
    weight_rows : int
        Rows of a tile a weight transfer carries (:func:`weight_transfer_layout`): 2 loads a
        tile in half the cycles (weight-stationary only;
        :meth:`hwgen.device.weight_feeder.WeightFeeder.rows_per_cycle_for`).

    Members
    -------
    i_weight : In(stream.Signature(weight_transfer_layout(config, weight_rows)))
    i_act : In(stream.Signature(act_row_layout(config)))
    o_result : Out(stream.Signature(result_row_layout(config)))
    issue : Out(1)
        An activation row entered the engine this cycle (``rows * cols`` multiply-accumulates).
    en : In(1)
        Only with ``gated``: clock enable of the array (see
        :class:`hwgen.device.systolic.WeightStationaryArray`), which may be low only while no
        weight or activation row has been accepted for the array's latency.
    dw : In(1)
        Only with the depthwise unit (``config.depthwise``): a depthwise pass runs; each
        activation row's data is unused, its cells take ``dw_lines`` as ``dw_sel`` says (see
        :class:`hwgen.device.systolic.WeightStationaryArray`). Held while a pass runs; its
        weight tiles have ``array_rows`` rows (the unit's extra rows too).
    dw_lines : In(dw_lines_layout(config))
    dw_sel : In(dw_sel_layout(config))
    bank_full : Out(2)
        Only with the depthwise unit: which weight banks hold a whole tile not yet used up.
    a_ptr : Out(1)
        Only with the depthwise unit: the bank the next activation row is multiplied with.
    """

    def __init__(self, config, *, pe_instances=False, dsp_packing=None, gated=False,
                 always_ready=False, input_register=False, weight_rows=1):
        if weight_rows not in (1, 2) or (weight_rows == 2 and config.dataflow is not Dataflow.WS):
            raise ValueError(f"MatmulEngine: weight_rows={weight_rows!r}; allowed: 1, and 2 "
                             "with dataflow='ws'")
        self.config = config
        self.weight_rows = weight_rows
        self.gated = gated
        self.always_ready = always_ready
        if dsp_packing is not None and config.dataflow is not Dataflow.WS:
            raise ValueError(f"dsp_packing={str(dsp_packing)!r} needs dataflow='ws', not "
                             f"{config.dataflow.value!r}")
        if config.dataflow is Dataflow.WS:
            self.array = WeightStationaryArray(config, pe_instances=pe_instances,
                                               dsp_packing=dsp_packing,
                                               input_register=input_register,
                                               weight_rows=weight_rows)
        else:
            self.array = OutputStationaryArray(config, pe_instances=pe_instances)
        # The cycle model needs the depth too (credits bound the rows in flight).
        self.fifo_depth = fifo_depth(config, registered=input_register)  # WS only
        depthwise = {}
        if has_depthwise(config):
            depthwise = {"dw": In(1), "dw_lines": In(dw_lines_layout(config)),
                         "dw_sel": In(dw_sel_layout(config)), "bank_full": Out(2),
                         "a_ptr": Out(1)}
        super().__init__({
            "i_weight": In(stream.Signature(weight_transfer_layout(config, weight_rows))),
            "i_act": In(stream.Signature(act_row_layout(config))),
            "o_result": Out(stream.Signature(result_row_layout(config))),
            "issue": Out(1),
            **({"en": In(1)} if gated else {}),
            **depthwise,
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        m.submodules.array = array = self.array
        if self.gated:
            m.d.comb += array.en.eq(self.en)
        layout = result_row_layout(cfg)
        if not self.always_ready:
            m.submodules.fifo = fifo = SyncFIFOBuffered(width=layout.size, depth=self.fifo_depth)

        # Weight banks: `full[b]` from the cycle after its last row is written until the cycle
        # after the last activation row (WS) or block launch (OS) that uses it.
        full = [Signal(name=f"full{b}") for b in range(2)]
        w_ptr = Signal()
        w_row = Signal(range(cfg.array_rows))
        # A depthwise pass's tiles have the unit's extra rows too (held while the layer runs;
        # its tiles all load within it). The tile's last transfer starts at row w_last.
        step = self.weight_rows
        w_last = step * ((cfg.rows - 1) // step)
        if cfg.array_rows != cfg.rows:
            w_last = Mux(self.dw, step * ((cfg.array_rows - 1) // step), w_last)
        a_ptr = Signal()
        set_full = Signal(2)
        clear_full = Signal(2)
        w_ptr_full = Signal()
        a_ptr_full = Signal()
        m.d.comb += [w_ptr_full.eq((full[0] & ~w_ptr) | (full[1] & w_ptr)),
                     a_ptr_full.eq((full[0] & ~a_ptr) | (full[1] & a_ptr))]
        # A tile of pairs waits until the bank has rested (hwgen.latency.bank_rest): a register
        # per cycle of rest, the bank's releases shifting through them.
        ready = ~w_ptr_full
        if rest := bank_rest(cfg, step):
            hold = [Signal(rest, name=f"rest{b}") for b in range(2)]
            m.d.sync += [hold[b].eq(Cat(clear_full[b], hold[b][:-1])) for b in range(2)]
            ready = ready & ~Mux(w_ptr, hold[1].any(), hold[0].any())
        weight = self.i_weight.payload
        if step == 2:
            m.d.comb += [array.w_data2.eq(weight.rows[1]), array.w_two.eq(weight.two)]
            weight = weight.rows[0]
        m.d.comb += [
            self.i_weight.ready.eq(ready),
            array.w_data.eq(weight),
            array.w_row.eq(w_row),
            array.w_bank.eq(w_ptr),
            array.w_valid.eq(self.i_weight.valid & self.i_weight.ready),
        ]
        with m.If(self.i_weight.valid & self.i_weight.ready):
            with m.If(w_row == w_last):
                m.d.sync += [w_row.eq(0), w_ptr.eq(~w_ptr)]
                m.d.comb += set_full.bit_select(w_ptr, 1).eq(1)
            with m.Else():
                m.d.sync += w_row.eq(w_row + step)
        for b in range(2):
            with m.If(set_full[b]):
                m.d.sync += full[b].eq(1)
            with m.Elif(clear_full[b]):
                m.d.sync += full[b].eq(0)
        if has_depthwise(cfg):
            m.d.comb += [self.bank_full.eq(Cat(*full)), self.a_ptr.eq(a_ptr),
                         array.dw.eq(self.dw), array.d_lines.eq(self.dw_lines),
                         array.d_sel.eq(self.dw_sel)]

        # Credits: free FIFO entries not yet promised to a row in flight. With `always_ready`
        # no FIFO fills: at most a latency's worth of rows is in flight, fewer than the FIFO
        # depth, so there are no credits to count (on the iCE40 the credit test fed the
        # activation feeder's enables, its longest path).
        taken = Signal(range(cfg.rows + 1))
        returned = Signal()
        credits = None
        if not self.always_ready:
            credits = Signal(range(self.fifo_depth + 1), init=self.fifo_depth)
            m.d.sync += credits.eq(credits - taken + returned)
        has_credit = Const(1, 1) if credits is None else credits != 0

        accept = Signal()
        m.d.comb += [accept.eq(self.i_act.valid & self.i_act.ready), self.issue.eq(accept)]
        if cfg.dataflow is Dataflow.WS:
            m.d.comb += [
                self.i_act.ready.eq(a_ptr_full & has_credit),
                array.a_data.eq(self.i_act.payload.data),
                array.a_last.eq(self.i_act.payload.last),
                array.a_valid.eq(accept),
                array.a_sel.eq(a_ptr),
                taken.eq(accept),
            ]
            with m.If(accept & self.i_act.payload.last):
                m.d.sync += a_ptr.eq(~a_ptr)
                m.d.comb += clear_full.bit_select(a_ptr, 1).eq(1)
        else:
            self._os_staging(m, array, a_ptr=a_ptr, a_ptr_full=a_ptr_full, credits=credits,
                             taken=taken, clear_full=clear_full, accept=accept)

        row = array.o_data.as_value() | (array.o_last << (layout.size - 1))
        if self.always_ready:
            # Straight from the array's output registers: a delay line here would cost a
            # logic cell per bit for nothing.
            m.d.comb += [
                self.o_result.payload.eq(row),
                self.o_result.valid.eq(array.o_valid),
            ]
            return m
        # Through the FIFO's streams; its write side never waits (the credits keep room), and
        # its payload is the row's bits (the result stream's is the row's layout).
        w, r = fifo.w_stream, fifo.r_stream
        m.d.comb += [
            w.payload.eq(row),
            w.valid.eq(array.o_valid),
            self.o_result.payload.eq(r.payload),
            self.o_result.valid.eq(r.valid),
            r.ready.eq(self.o_result.ready),
            returned.eq(r.valid & self.o_result.ready),
        ]
        return m

    def _os_staging(self, m, array, *, a_ptr, a_ptr_full, credits, taken, clear_full, accept):
        """Collect up to ``rows`` activation rows into a block, then launch it."""
        cfg = self.config
        staged = Signal.like(array.b_data)
        count = Signal(range(cfg.rows + 1))
        st_last = Signal()
        complete = (count == cfg.rows) | st_last
        cooldown = Signal(range(array.period + 1))
        launch = Signal()
        m.d.comb += [
            # A row may arrive in the launch cycle: it starts the next block.
            self.i_act.ready.eq(~complete | launch),
            launch.eq(complete & a_ptr_full & (cooldown == 0)
                      & (Const(1, 1) if credits is None else credits >= count)),
            array.launch.eq(launch),
            array.b_data.eq(staged),
            array.b_count.eq(count),
            array.b_last.eq(st_last),
            array.b_sel.eq(a_ptr),
        ]
        with m.If(launch):
            m.d.comb += taken.eq(count)
            m.d.sync += [count.eq(accept), st_last.eq(accept & self.i_act.payload.last),
                         cooldown.eq(array.period - 1)]
            with m.If(accept):
                m.d.sync += staged[0].eq(self.i_act.payload.data)
            with m.If(st_last):
                m.d.sync += a_ptr.eq(~a_ptr)
                m.d.comb += clear_full.bit_select(a_ptr, 1).eq(1)
        with m.Elif(accept):
            with m.Switch(count):
                for r in range(cfg.rows):
                    with m.Case(r):
                        m.d.sync += staged[r].eq(self.i_act.payload.data)
            m.d.sync += [count.eq(count + 1), st_last.eq(self.i_act.payload.last)]
        with m.If(~launch & (cooldown != 0)):
            m.d.sync += cooldown.eq(cooldown - 1)
