"""The bf16 accelerator: the int8 core's controller, feeders, memories and host port around
the bf16 matrix datapath (docs/arithmetic.md, "bfloat16"; issue 52).

So far it runs matrix passes, dense layers and, with ``spatial``, convolutions whose rows are
the patch walker's output pixels, chunk after chunk, and max pools on the int8 core's
:class:`~hwgen.device.pooler.Pooler` with a bf16 maximum, with ``residual`` adds on a
:class:`~hwgen.device.bf16_add.BF16Adder`, and with ``depthwise`` depthwise convolutions and
average pools on the int8 core's :class:`~hwgen.device.depthwise_feeder.DepthwiseFeeder`.

::

    host port ─ HostAccess ─┬─ prog ─── Controller ── descriptor, loop bounds to all
                            ├─ weight ─ WeightFeeder ────── o_weight ──┐
                            │                                          ▼
                            ├─ act* ─ BankArbiter ─┬─ ActivationFeeder ─► BF16MatrixDatapath
                            │ (matrix, pool, add)  │     o_act          (engine, accumulators,
                            ├─ param ──────────────┼──── bias ───────►   finish) │ o_row
                            │                      ├─ BF16WriteBack ◄────────────┤
                            │                      ├─ Pooler (BF16Max)           │
                            │                      └─ BF16Adder                  │
                            └─ out ◄─────────────────────── raw rows ────────────┘
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..implementation import Implementation
from ..latency import FIFO_LATENCY
from ..memmap import HostPortSignature, PassKind, Region, descriptor_layout, has_depthwise
from .activation_feeder import ActivationFeeder
from .bank_arbiter import BankArbiter
from .bf16_add import BF16Adder
from .bf16_datapath import BF16MatrixDatapath
from .bf16_max import BF16Max
from .bf16_writeback import BF16WriteBack
from .clock_gate import run_clock
from .controller import Controller
from .core_ports import count_work, program_port, start_pool_and_add, weight_port
from .counters import CounterBlock
from .depthwise_feeder import DepthwiseFeeder
from .host_access import (
    HostAccess,
    act_banks,
    host_read,
    host_read_latency,
    host_stages,
    host_write,
    same_word_port,
    share_read,
    share_write,
    stage_host,
)
from .memories import make_memories, read_latency
from .pass_starts import PassStarts
from .pooler import Pooler
from .shared_ports import out_param_ports
from .systolic import delay
from .weight_feeder import WeightFeeder

__all__ = ["BF16AcceleratorCore", "bf16_datapath"]

# The blocks that hold still between runs (``gate_idle``), as in the int8 core.
_RUN_UNITS = ("datapath", "weight_feeder", "activation_feeder", "writeback", "pooler",
              "adder", "depthwise")


def check_bf16_core(config):
    """Refuse a design that is not bf16 (the bf16 core builds every layer kind the int8 core
    does)."""
    if config.dtype != "bf16":
        raise ValueError(f"BF16AcceleratorCore: dtype={config.dtype!r}; the int8 device is "
                         "hwgen.device.accelerator.AcceleratorCore")


#: The registers of the datapath's fp32 adders (the columns' and the accumulators'): five,
#: the alignment's compare apart from its shift, whose one stage set the 85F's clock (an
#: adder of four met 50 MHz with no margin, docs/performance.md).
ADD_LATENCY = 5


def bf16_datapath(config, implementation):
    """Return the core's :class:`BF16MatrixDatapath` for ``config`` built with
    ``implementation`` (its bias read's latency the memories'): the core's, and the one whose
    timing the cycle model reads (:mod:`hwgen.bf16_cycles`)."""
    tiles = descriptor_layout(config).members["n_tiles"].width
    return BF16MatrixDatapath(config.rows, config.cols, config.acc_depth, tile_bits=tiles,
                              add_latency=ADD_LATENCY, bias_latency=read_latency(implementation),
                              dw_lines=config.dw_lines if has_depthwise(config) else 0)


class BF16AcceleratorCore(wiring.Component):
    """Run bf16 dense, convolution, max-pooling, add and depthwise layers:
    :class:`~hwgen.device.accelerator.AcceleratorCore`'s host port, memories, program and
    descriptors, with the matrix work on
    :class:`~hwgen.device.bf16_datapath.BF16MatrixDatapath`.

    For each layer (each chunk of a spatial layer's output pixels) the feeders stream the
    weight tiles and the chunk's rows into the datapath as for int8 (its ``ready`` holds the
    rows back where the accumulators' row rule needs a bubble); each output tile's fp32
    biases come from PARAM word ``p_base + nt``; the
    finished rows go through :class:`~hwgen.device.bf16_writeback.BF16WriteBack`: bf16 lanes
    back into the activation banks, or a raw layer's fp32 accumulators into OUTPUT, pixel
    after pixel. The chunk ends :attr:`LAYER_END` cycles after its last write. A max-pooling
    layer runs on :attr:`pooler` (with ``spatial``), each lane's maximum a
    :class:`~hwgen.device.bf16_max.BF16Max`, and ends as the int8 core's does; an add
    (with ``residual``) on :attr:`adder`, and ends so too. A depthwise pass's rows come from
    :attr:`depthwise` (with ``depthwise``), each array cell its own channel's tap
    (:class:`~hwgen.device.bf16_array.BF16Array`'s depthwise operands), and go on as a
    chunk's rows.

    Parameters
    ----------
    config : AcceleratorConfig
        With ``dtype="bf16"`` (:func:`check_bf16_core`).
    implementation : Implementation
        Its memories' reads (plain or registered), host port stages, SPRAM and shared OUTPUT
        and PARAM memory, as the int8 core's; the DSP options do not apply (the bf16 units
        are logic).
    pe_instances : bool
        Unused (the int8 core's processing elements); taken for the same call.
    gate_idle : bool
        As the int8 core's: the run's blocks are clocked only while a program runs.
    host_in_registers : bool
        As the int8 core's.

    Members
    -------
    host : Out(HostPortSignature(config))

    Attributes
    ----------
    memories : dict
        The memories the host reaches, by name, once elaborated.
    host_read_latency : int
        Cycles from the host port's ``re`` to its ``rvalid``.
    pooler : Pooler or None
        The max-pooling unit, with ``config.spatial``.
    adder : BF16Adder or None
        The add unit, with ``config.residual``.
    depthwise : DepthwiseFeeder or None
        The depthwise unit, with ``config.depthwise``: its lanes unskewed, its passes
        ``row_interval`` cycles apart (its rows never wait).
    """

    #: Cycles from the write of a chunk's last row to the controller's ``layer_done``; the
    #: cycle model (:mod:`hwgen.bf16_cycles`) reads it.
    LAYER_END = FIFO_LATENCY

    def __init__(self, config, implementation=None, *, pe_instances=False, gate_idle=False,
                 host_in_registers=False):
        implementation = Implementation() if implementation is None else implementation
        if not isinstance(implementation, Implementation):
            raise TypeError(f"implementation must be an Implementation, not {implementation!r}")
        check_bf16_core(config)
        self.config = config
        self.gate_idle = bool(gate_idle)
        self.implementation = implementation.check(config)
        self.memories = {}
        reads = read_latency(implementation)
        self.host_stages = 0 if host_in_registers else host_stages(implementation)
        self.host_read_latency = host_read_latency(reads, self.host_stages)
        self.datapath = bf16_datapath(config, implementation)
        self.controller = Controller(config, registered_bounds=implementation.post_pipeline)
        self.weight_feeder = WeightFeeder.for_memories(config, implementation)
        self.activation_feeder = ActivationFeeder(config, implementation)
        addr_width = Signal(range(config.act_depth)).shape().width
        self.writeback = BF16WriteBack(config, config.acc_depth, addr_width)
        self.counters = CounterBlock(config)
        # Max pools (with the spatial walk) on the int8 pooler, its maximum bf16's.
        self.pooler = (Pooler(config, read_latency=reads, max_unit=BF16Max) if config.spatial
                       else None)
        # Residual adds on the int8 adder's walk, fp32 sums in its lanes.
        self.adder = BF16Adder(config, read_latency=reads) if config.residual else None
        # Depthwise passes stream through the int8 core's depthwise unit into the datapath, its
        # lanes together (the columns add in step) and its passes far enough apart for the
        # accumulators' row rule (its rows never wait).
        self.depthwise = (DepthwiseFeeder(config, read_latency=reads, lane_skew=False,
                                          pass_gap=self.datapath.row_interval)
                          if has_depthwise(config) else None)
        units = {"matrix": (PassKind.MATRIX,)}
        for name, unit, kind in (("pool", self.pooler, PassKind.MAXPOOL),
                                 ("add", self.adder, PassKind.ADD),
                                 ("depthwise", self.depthwise, PassKind.DEPTHWISE)):
            if unit is not None:
                units[name] = (kind,)
        self.banks = BankArbiter(config, units, registered=True)
        super().__init__({"host": Out(HostPortSignature(config))})

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        host, host_we = stage_host(m, self.host, cfg, self.host_stages)
        ctrl, wf, af = self.controller, self.weight_feeder, self.activation_feeder
        dp, wb = self.datapath, self.writeback
        in_run = run_clock(m, ctrl.busy) if self.gate_idle else (lambda unit: unit)
        for name in ("datapath", "controller", "weight_feeder", "activation_feeder",
                     "writeback", "pooler", "adder", "depthwise", "banks", "counters"):
            if (unit := getattr(self, name)) is not None:
                m.submodules[name] = in_run(unit) if name in _RUN_UNITS else unit
        self.memories = mems = make_memories(m, cfg, self.implementation)
        busy = ctrl.busy
        m.d.comb += host.busy.eq(busy)
        reg = self.weight_feeder.registered_reads
        access = HostAccess(m, host, busy, registered=reg, we=host_we)

        program_port(m, mems, access, host, ctrl, registered=reg)
        self._start_units(m)
        weight_port(m, mems, access, host, wf, implementation=self.implementation)
        # The feeders' lanes hold the bf16 patterns: the same bits, other layouts.
        m.d.comb += [dp.i_weight.valid.eq(wf.o_weight.valid),
                     dp.i_weight.payload.eq(wf.o_weight.payload.as_value()),
                     wf.o_weight.ready.eq(dp.i_weight.ready)]
        self._rows_in(m)

        # The activation banks: the feeder reads, the write-back writes.
        port = self.banks.port("matrix")
        m.d.comb += [port.rd_addr.eq(af.rd_addr), port.rd_en.eq(af.rd_en),
                     port.rd_take.eq(af.rd_take), af.rd_data.eq(port.rd_data),
                     port.wr_addr.eq(wb.wr_addr), port.wr_data.eq(wb.wr_data),
                     port.wr_en.eq(wb.wr_en)]
        if self.depthwise is not None:
            # The depthwise unit reads the same word of every bank; its pass writes with the
            # write-back.
            port = self.banks.port("depthwise")
            same_word_port(m, port, cfg, read=self.depthwise)
            m.d.comb += [port.wr_addr.eq(wb.wr_addr), port.wr_data.eq(wb.wr_data),
                         port.wr_en.eq(wb.wr_en)]
        for name, unit in (("pool", self.pooler), ("add", self.adder)):
            # The pooler and the adder read and write the same word of every bank.
            if unit is not None:
                same_word_port(m, self.banks.port(name), cfg, read=unit, write=unit)
        act_banks(m, mems, access, self.banks.banks, cfg)

        # The finished rows into the write-back; the output tile's biases from PARAM.
        m.d.comb += [wb.i_valid.eq(dp.o_valid), wb.i_row.eq(dp.o_row)]
        self._params_and_output(m, mems, access)
        done = delay(m, wb.end, self.LAYER_END, name="layer_done")
        if self.pooler is not None:
            # The int8 core's pool end, which hwgen.cycles counts: its reads' stage less.
            pool_end = FIFO_LATENCY - (read_latency(self.implementation) > 1)
            done = Mux(self.banks.grant.pool,
                       delay(m, self.pooler.done, pool_end, name="pool_done"), done)
        if self.adder is not None:
            # The int8 core's add end, as the pool's.
            add_end = FIFO_LATENCY - (read_latency(self.implementation) > 1)
            done = Mux(self.banks.grant.add,
                       delay(m, self.adder.done, add_end, name="add_done"), done)
        m.d.comb += ctrl.layer_done.eq(done)

        access.drive_read_data(m)
        count_work(m, self.counters, host, busy, dp.issue)
        return m

    def _rows_in(self, m):
        """The datapath's rows: the activation feeder's, or in a depthwise pass the depthwise
        unit's (their data unused: the array takes the unit's lines)."""
        af, dw, dp = self.activation_feeder, self.depthwise, self.datapath
        act = dp.i_act
        if dw is None:
            m.d.comb += [act.valid.eq(af.o_act.valid),
                         act.payload.data.eq(af.o_act.payload.data.as_value()),
                         act.payload.last.eq(af.o_act.payload.last),
                         af.o_act.ready.eq(act.ready)]
            return
        grant = self.banks.grant.depthwise
        m.d.comb += [act.valid.eq(Mux(grant, dw.o_act.valid, af.o_act.valid)),
                     act.payload.data.eq(af.o_act.payload.data.as_value()),
                     act.payload.last.eq(Mux(grant, dw.o_act.payload.last,
                                             af.o_act.payload.last)),
                     af.o_act.ready.eq(act.ready & ~grant), dw.o_act.ready.eq(act.ready & grant),
                     dp.dw.eq(grant), dp.dw_lines.eq(dw.dw_lines.as_value()),
                     dp.dw_sel.eq(dw.dw_sel)]

    def _params_and_output(self, m, mems, access):
        """PARAM's read port gives the datapath its biases (``p_base + bias_nt``, read every
        cycle of a run; with registered reads the register takes every word); OUTPUT's write
        port takes the raw rows."""
        dp, wb, desc = self.datapath, self.writeback, self.controller.desc
        addr = Signal.like(desc.p_base, name="bias_addr")
        m.d.comb += addr.eq(desc.p_base + dp.bias_nt)
        if "out_param" in mems:
            word = out_param_ports(m, mems["out_param"], access, self.config, param_addr=addr,
                                   param_en=1, raw_addr=wb.raw_addr, raw_data=wb.raw_data,
                                   raw_we=wb.raw_we)
        else:
            par_rd, par_wr = mems["param"].read_port(), mems["param"].write_port()
            word = share_read(m, par_rd, access, Region.PARAM, addr=addr, en=1, name="param")
            host_write(m, par_wr, access, Region.PARAM)
            out_rd, out_wr = mems["out"].read_port(), mems["out"].write_port()
            share_write(m, out_wr, access, Region.OUTPUT, addr=wb.raw_addr, data=wb.raw_data,
                        en=wb.raw_we)
            host_read(m, out_rd, access, Region.OUTPUT, name="out")
        m.d.comb += dp.bias.eq(word)

    def _start_units(self, m):
        """Give the descriptor and the loop bounds to the feeders, the datapath and the
        write-back, and start them (:class:`PassStarts`, the matrix unit alone)."""
        ctrl, desc = self.controller, self.controller.desc
        wf, af, dp, wb = (self.weight_feeder, self.activation_feeder, self.datapath,
                          self.writeback)
        dw = self.depthwise
        m.submodules.starts = go = PassStarts(self.banks, {"array": (
            "matrix", *(("depthwise",) if dw is not None else ()))})
        m.d.comb += [go.kind_next.eq(ctrl.kind_next), go.prime_next.eq(ctrl.prime_next),
                     go.start_layer_next.eq(ctrl.start_layer_next),
                     go.start_chunk_next.eq(ctrl.start_chunk_next)]
        layer = dp.layer
        m.d.comb += [
            self.banks.kind.eq(desc.kind),
            wf.start.eq(go.prime_array), wf.desc.eq(desc),
            wf.k_end.eq(ctrl.k_end), wf.n_end.eq(ctrl.n_end), wf.wrep.eq(ctrl.geom.wrep),
            wf.wdiag.eq(ctrl.geom.wdiag),
            af.start_layer.eq(go.start_matrix), af.begin_chunk.eq(go.begin_matrix),
            af.prime.eq(go.prime_matrix), af.desc.eq(desc), af.geom.eq(ctrl.geom),
            *([af.prime_next.eq(ctrl.prime_next & go.now_matrix)] if af.registered_reads else []),
            af.last_row.eq(ctrl.last_row),
            dp.k_tiles.eq(desc.k_tiles), dp.n_tiles.eq(desc.n_tiles),
            # The bounds are bf16 patterns: the fp32 value is the pattern over 16 zero bits.
            layer.raw.eq(desc.raw), layer.min_en.eq(1), layer.max_en.eq(1),
            layer.act_min.eq(desc.act_min[:16] << 16),
            layer.act_max.eq(desc.act_max[:16] << 16),
            wb.start.eq(go.start_array), wb.desc.eq(desc),
        ]
        more = af.more_chunks & self.banks.grant.matrix
        if dw is not None:
            more = more | (dw.more_chunks & self.banks.grant.depthwise)
            m.d.comb += [dw.start_layer.eq(go.start_depthwise),
                         dw.begin_chunk.eq(go.begin_depthwise),
                         dw.prime.eq(go.prime_depthwise), dw.desc.eq(desc),
                         dw.geom.eq(ctrl.geom), dw.last_row.eq(ctrl.last_row),
                         dw.k_end.eq(ctrl.k_end), dw.n_end.eq(ctrl.n_end),
                         dw.bank_full.eq(dp.bank_full), dw.a_ptr.eq(dp.a_ptr)]
        m.d.comb += ctrl.more_chunks.eq(more)
        start_pool_and_add(m, go, ctrl, self.pooler, self.adder)
