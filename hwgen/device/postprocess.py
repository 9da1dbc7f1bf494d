"""Post-processing: bias, then the raw write or the requantization, a few channels per cycle."""

from amaranth.hdl import Cat, EnableInserter, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..memmap import descriptor_layout, fuses_pool
from .layouts import (
    acc_row_layout,
    lane_position_layout,
    param_row_layout,
    position_layout,
    step_layout,
    summed_row_layout,
)
from .memories import read_latency
from .positions import advance
from .requantizer import Requantizer

__all__ = ["PostProcessor"]


class PostProcessor(wiring.Component):
    """Finish each summed row: add the biases (P1), then write the row's accumulators to the
    output memory (a ``raw`` layer) or requantize it, ``requant_lanes`` channels per step.

    Parameters
    ----------
    config : AcceleratorConfig
        With ``requant_steps > 1`` a row is requantized over that many cycles (rows then come
        that many cycles apart, as the activation feeder spaces them).
    implementation : Implementation
        The requantizer's pipeline; with registered reads
        (:func:`~hwgen.device.memories.read_latency`) the raw write leaves registers.

    Members
    -------
    en : In(1)
        Clock enable of the datapath registers.
    desc : In(descriptor_layout(config))
        The running layer's (``raw``, ``leaky``, ``act_min``, ``act_max`` or, without
        ``bounds``, ``relu``, and ``n``).
    i_row : In(stream.Signature(summed_row_layout(config), always_ready=True))
        The summed rows, from the accumulators
        (:class:`~hwgen.device.accumulators.AccumulatorBank`); the rows of a last reduction
        tile (``final``) are post-processed. Every row is taken in its cycle: the datapath
        runs on the accumulators' enable and starts a row's requantization only when the
        previous one is done (the activation feeder spaces rows ``requant_steps`` apart).
    params : In(param_row_layout(config))
        The row's output tile's parameters, from the parameter memory, read in the row's
        cycle in the accumulators and held until ``param_hold`` falls.
    param_hold : Out(1)
        Keep the parameters read out: the row's later steps need them.
    raw_addr, raw_data, raw_we : Out
        The write of a raw layer's row to the output memory.
    raw_end : Out(1)
        The raw write of the layer's last row.
    o_step : Out(stream.Signature(step_layout(config, addr_width), always_ready=True))
        The requantized steps and where their channels go, for the write-back (which writes
        each in its cycle: no ``ready``); ``end`` marks the layer's (or chunk's) last.
    """

    def __init__(self, config, implementation):
        self.config = config
        self.implementation = implementation
        self.addr_width = Signal(range(config.act_depth)).shape().width
        self.requantizer = Requantizer(
            config, implementation, pos_shape=lane_position_layout(config, self.addr_width))
        super().__init__({
            "en": In(1),
            "desc": In(descriptor_layout(config)),
            "i_row": In(stream.Signature(summed_row_layout(config), always_ready=True)),
            "params": In(param_row_layout(config)),
            "param_hold": Out(1),
            "raw_addr": Out(range(config.out_depth)),
            "raw_data": Out(acc_row_layout(config)),
            "raw_we": Out(1),
            "raw_end": Out(1),
            "o_step": Out(stream.Signature(step_layout(config, self.addr_width),
                                           always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        dp = Module()
        m.submodules.datapath = EnableInserter({"sync": self.en})(dp)
        cfg = self.config
        desc = self.desc
        steps, n_req = cfg.requant_steps, cfg.requant_lanes
        p1_valid, p1_end = Signal(name="p1_valid"), Signal(name="p1_end")
        p1_sum = Signal(acc_row_layout(cfg), name="p1_sum")
        p1_pos = Signal(position_layout(cfg), name="p1_pos")
        par = self.params
        row = self.i_row.payload
        load = self.i_row.valid & row.final
        if steps == 1:
            dp.d.sync += [p1_pos.eq(row.pos), p1_sum.eq(row.sum)]
        else:
            # Held while the row is requantized (requantized rows come `steps` cycles apart).
            with dp.If(load):
                dp.d.sync += [p1_pos.eq(row.pos), p1_sum.eq(row.sum)]
        dp.d.sync += [p1_valid.eq(load), p1_end.eq(row.end)]
        m.d.comb += self.raw_end.eq(p1_end)
        biased = Signal(acc_row_layout(cfg), name="biased")
        for j in range(cfg.cols):
            m.d.comb += biased[j].eq(p1_sum[j] + par[j].bias)
        raw = [self.raw_addr.eq(p1_pos.dst + p1_pos.nt), self.raw_data.eq(biased),
               self.raw_we.eq(p1_valid & desc.raw)]
        if read_latency(self.implementation) > 1:
            # The raw write from registers: the bias adder, behind the parameter memory, ends
            # at a register, not at the output memory. A cycle later is still in time: the
            # layer ends FIFO_LATENCY cycles after its last row.
            dp.d.sync += raw
        else:
            m.d.comb += raw
        if steps == 1:
            # A raw layer's end must not enter the pipeline: the run ends on it before it
            # leaves, the datapath's enable then freezes it in a stage, and the next run would
            # end its first layer on it.
            valid, end = p1_valid & ~desc.raw, p1_end & ~desc.raw
            values = biased
            params = par
            pos = p1_pos
        else:
            valid, end, values, params, pos = self._steps(
                m, dp, start=p1_valid & ~desc.raw, load=load, biased=biased, pos=p1_pos)
        # From here on a step needs only where its values go: the activation word of its first
        # channel, that channel's bank and which of its channels exist. Fewer bits travel down
        # the pipeline, and the write-back adds one term less to form its addresses.
        rq = self.requantizer
        m.submodules.requantizer = rq
        if cfg.bounds:
            m.d.comb += [rq.leaky.eq(desc.leaky), rq.act_min.eq(desc.act_min),
                         rq.act_max.eq(desc.act_max)]
        else:
            m.d.comb += rq.relu.eq(desc.relu)
        m.d.comb += [rq.en.eq(self.en), rq.valid.eq(valid), rq.end.eq(end),
                     rq.pos.base.eq(pos.dst + pos.oword), rq.pos.rem.eq(pos.orem),
                     rq.pos.ok.eq(Cat(pos.n0 + j < desc.n for j in range(n_req)))]
        if fuses_pool(cfg):
            m.d.comb += [rq.pos.wfirst.eq(pos.wfirst), rq.pos.wlast.eq(pos.wlast)]
        for j in range(n_req):
            m.d.comb += [rq.values[j].eq(values[j]), rq.params[j].eq(params[j])]
        o = self.o_step
        m.d.comb += [o.valid.eq(rq.o_valid), o.p.end.eq(rq.o_end), o.p.y.eq(rq.o_y),
                     o.p.pos.eq(rq.o_pos)]
        return m

    def _steps(self, m, dp, *, start, load, biased, pos):
        """Feed a held row to the ``requant_lanes`` requantizers, one step per cycle.

        Step ``c`` takes channels ``c * lanes .. (c + 1) * lanes - 1`` of the row. Returns the
        requantizer's inputs ``(valid, end, values, params, pos)``, with ``pos`` describing the
        step's first channel.
        """
        cfg = self.config
        steps, n_req, lanes = cfg.requant_steps, cfg.requant_lanes, cfg.act_lanes
        par = self.params
        step = Signal(range(steps), name="rq_step")
        active = Signal(name="rq_active")
        end = Signal(name="rq_end")
        m.d.comb += [active.eq(start | (step != 0)),
                     # The parameter memory's output holds the row's parameters until its last
                     # step; the next requantized row is read in that step at the earliest.
                     self.param_hold.eq(active & (step != steps - 1))]
        with dp.If(load):
            dp.d.sync += end.eq(self.i_row.payload.end)
        with dp.If(active):
            dp.d.sync += step.eq(Mux(step == steps - 1, 0, step + 1))
        values = Signal(data.ArrayLayout(biased.shape().elem_shape, n_req), name="rq_values")
        params = Signal(data.ArrayLayout(par.shape().elem_shape, n_req), name="rq_params")
        with m.Switch(step):
            for c in range(steps):
                with m.Case(c):
                    for j in range(n_req):
                        m.d.comb += [values[j].eq(biased[c * n_req + j]),
                                     params[j].eq(par[c * n_req + j])]
        # The step's first channel: the row's at step 0, then `n_req` further on each step.
        nxt = Signal(position_layout(cfg), name="rq_next")
        cur = Signal(position_layout(cfg), name="rq_pos")
        first = step == 0
        m.d.comb += [cur.eq(pos), cur.n0.eq(Mux(first, pos.n0, nxt.n0)),
                     cur.oword.eq(Mux(first, pos.oword, nxt.oword)),
                     cur.orem.eq(Mux(first, pos.orem, nxt.orem))]
        with dp.If(active):
            dp.d.sync += nxt.n0.eq(cur.n0 + n_req)
            advance(dp, nxt.oword, nxt.orem, n_req, lanes, frm=(cur.oword, cur.orem))
        return active, active & (step == steps - 1) & end, values, params, cur
