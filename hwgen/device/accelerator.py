"""The whole-network accelerator: its blocks, composed.

A run executes the layer descriptors in :attr:`Region.PROGRAM` from word 0 on a batch of ``M``
rows held in :attr:`Region.ACT`. For each layer and each output tile the feeders stream every
reduction tile's weights and the ``M`` activation rows through the engine; the accumulator bank
sums the tiles; after the last reduction tile a row goes through bias, requantization,
saturation and activation into the other activation area (or, for a ``raw`` layer, its
accumulators into :attr:`Region.OUTPUT`). A pooling layer runs the pooler instead, between
two activation areas, and a residual add the adder, from two areas into a third (with its
parameters from PARAM). Layers chain without the host.

::

    host port ─ HostAccess ─┬─ prog ─── Controller ── descriptor, geometry, loop bounds to all
                            ├─ weight ─ WeightFeeder ──────── o_weight ─────────────────┐
                            │                                                           ▼
                            ├─ act* ─ BankArbiter ─┬─ matrix ─┬─ ActivationFeeder ─► MatmulEngine
                            │  (granted by the     │          │  (PatchWalker) o_act    │ o_result
                            │   running pass kind) │          │                         ▼
                            │                      │          │                  AccumulatorBank
                            │                      │          │                         │ o_row
                            ├─ param ──────────────┼──────────┼─────────────────► PostProcessor
                            │                      │          │                  (Requantizer)
                            │                      │          └─ WriteBack ◄─ o_step ───┤
                            │                      ├─ pool ──── Pooler                  │
                            │                      └─ add ───── Adder ◄── param         │
                            └─ out ◄──────────────────────────────────────── raw rows ──┘
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ..implementation import Implementation
from ..latency import FIFO_LATENCY
from ..memmap import HostPortSignature, PassKind, Region, fuses_pool, has_depthwise
from .accumulators import AccumulatorBank
from .activation_feeder import ActivationFeeder
from .adder import Adder
from .bank_arbiter import BankArbiter
from .clock_gate import run_clock
from .controller import Controller
from .core_ports import count_work, program_port, start_pool_and_add, weight_port
from .counters import CounterBlock
from .depthwise_feeder import DepthwiseFeeder
from .engine import MatmulEngine
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
from .postprocess import PostProcessor
from .shared_ports import out_param_ports
from .systolic import WeightStationaryArray, delay
from .weight_feeder import WeightFeeder
from .window_max import WindowMax
from .writeback import WriteBack

__all__ = ["AcceleratorCore"]

# The blocks that hold still between runs (``gate_idle``: clocked only while one runs); the
# controller, the bank arbiter and the counters also answer the host.
_RUN_UNITS = ("engine", "weight_feeder", "activation_feeder", "accumulators", "postprocess",
              "pooler", "adder")


class AcceleratorCore(wiring.Component):
    """Run quantized multi-layer networks on a systolic array.

    Parameters
    ----------
    config : AcceleratorConfig
    implementation : Implementation
        How the blocks are built (DSP blocks, registers, SPRAM): the same results, and the
        cycles but for the stages its units add, which :mod:`hwgen.cycles` reads from them.
    pe_instances : bool
        Instantiate the processing elements by Verilog module name (see
        :func:`hwgen.generate.emit_design`).
    gate_idle : bool
        For the simulated board (:class:`hwgen.device.Device`'s ``gate_idle``): the blocks
        that only a run moves (the feeders, the engine, the accumulators, the
        post-processing, the pooler, the adder) are clocked from a clock that stops while no
        program runs (:func:`hwgen.device.clock_gate.gate_clock`), so that a simulator skips
        them while the host reads and writes memory.
    host_in_registers : bool
        The host port's driver registers its requests (a bus top's): the port is never staged.

    Members
    -------
    host : Out(HostPortSignature(config))
        Memory access while idle, start, counters; see :class:`hwgen.memmap.HostPortSignature`.

    Attributes
    ----------
    memories : dict
        Each :class:`amaranth.lib.memory.Memory` by name, once elaborated (the tests watch
        their ports for collisions).
    host_read_latency : int
        Cycles from the host port's ``re`` to its ``rvalid``.
    banks : BankArbiter
        Which pass unit uses the activation banks: ``matrix`` (the feeders, the engine, the
        accumulators, the post-processing and the write-back), with ``config.spatial``
        ``pool`` (the pooler) and with ``config.residual`` ``add`` (the adder).
    """

    def __init__(self, config, implementation=None, *, pe_instances=False, gate_idle=False,
                 host_in_registers=False):
        implementation = Implementation() if implementation is None else implementation
        if not isinstance(implementation, Implementation):
            raise TypeError(f"implementation must be an Implementation, not {implementation!r}")
        if config.dtype != "int8":   # hwgen.device.cores.accelerator_core chooses by dtype
            raise ValueError(f"dtype={config.dtype!r}: AcceleratorCore is the 'int8' device; a "
                             "bf16 design's is hwgen.device.bf16_core.BF16AcceleratorCore")
        self.config = config
        self.gate_idle = bool(gate_idle)
        self.implementation = implementation.check(config)
        self._memories = {}
        reads = read_latency(implementation)
        self.host_stages = 0 if host_in_registers else host_stages(implementation)
        self.host_read_latency = host_read_latency(reads, self.host_stages)
        # The controller takes every result row as it comes (`o_result.ready` is tied high).
        self.weight_feeder = WeightFeeder.for_memories(config, implementation)
        self.engine = MatmulEngine(config, pe_instances=pe_instances,
                                   dsp_packing=implementation.packing_for(config), gated=True,
                                   always_ready=True, input_register=bool(
                                       WeightStationaryArray.input_stages_for(implementation)),
                                   weight_rows=1 + self.weight_feeder.pairs)
        self.controller = Controller(config, registered_bounds=implementation.post_pipeline)
        self.activation_feeder = ActivationFeeder(config, implementation)
        self.accumulators = AccumulatorBank(config, registered_reads=reads > 1)
        self.postprocess = PostProcessor(config, implementation)
        self.writeback = WriteBack(config, self.postprocess.addr_width,
                                   stages=WriteBack.stages_for(implementation))
        self.window_max = (WindowMax(config, self.postprocess.addr_width)
                           if fuses_pool(config) else None)
        # Pooling layers need the spatial walk too; without it there is no pooler.
        self.pooler = Pooler(config, read_latency=reads) if config.spatial else None
        # Residual adds (images or rows) run on the adder; a design without them has none.
        self.adder = (Adder(config, read_latency=reads,
                            logic_products=not implementation.adder_dsp)
                      if config.residual else None)
        # Depthwise passes stream through the depthwise unit into the matrix datapath's array.
        self.depthwise = (DepthwiseFeeder(config, read_latency=reads)
                          if has_depthwise(config) else None)
        self.counters = CounterBlock(config)
        # The pass units that use the activation banks, by the kinds they run: the one place
        # a unit is registered (the first, the matrix datapath, runs every other kind).
        units = {"matrix": (PassKind.MATRIX,)}
        if self.pooler is not None:
            units["pool"] = (PassKind.MAXPOOL,)
        if self.adder is not None:
            units["add"] = (PassKind.ADD,)
        if self.depthwise is not None:
            units["depthwise"] = (PassKind.DEPTHWISE,)
        # The grant in a register: the descriptor's kind is loaded a cycle before `start_layer`
        # and three before `prime`, so only the starts need this cycle's decode (PassStarts'
        # `now`, itself a register of the next kind's decode).
        self.banks = BankArbiter(config, units, registered=True)
        super().__init__({"host": Out(HostPortSignature(config))})

    @property
    def memories(self):
        return {**self._memories, "acc": self.accumulators.memory}

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        reg = self.weight_feeder.registered_reads
        host, host_we = stage_host(m, self.host, cfg, self.host_stages)
        engine, ctrl, wf, af = (self.engine, self.controller, self.weight_feeder,
                                self.activation_feeder)
        acc, pp, wb = self.accumulators, self.postprocess, self.writeback
        in_run = run_clock(m, self.controller.busy) if self.gate_idle else (lambda unit: unit)
        for name in ("engine", "controller", "weight_feeder", "activation_feeder",
                     "accumulators", "postprocess", "writeback", "pooler", "adder", "depthwise",
                     "banks", "counters"):
            if (unit := getattr(self, name)) is not None:
                m.submodules[name] = in_run(unit) if name in _RUN_UNITS else unit
        self._memories = mems = make_memories(m, cfg, self.implementation)

        busy = ctrl.busy
        # The array runs only during runs: it is empty between them (a run ends after its last
        # result row), and its first input comes several cycles after `busy` rises (FETCH,
        # DECODE, a memory read), so the enable may follow `busy` a cycle late. The registers
        # after the array (accumulate, bias, requantize) hold still between runs too.
        array_en = Signal()
        m.d.sync += array_en.eq(busy)
        m.d.comb += [host.busy.eq(busy), engine.en.eq(array_en), acc.en.eq(array_en),
                     pp.en.eq(array_en)]
        access = HostAccess(m, host, busy, registered=reg, we=host_we)

        program_port(m, mems, access, host, ctrl, registered=reg)
        desc = ctrl.desc
        self._start_units(m)

        weight_port(m, mems, access, host, wf, implementation=self.implementation)
        wiring.connect(m, wf.o_weight, engine.i_weight)

        # The activation feeder and the write-back (or the pooler) use the banks.
        self._act_banks(m, mems, access)
        if self.depthwise is None:
            wiring.connect(m, af.o_act, engine.i_act)
        else:
            self._depthwise_rows(m)

        # The engine's rows into the accumulators, the sums into the post-processing.
        wiring.connect(m, engine.o_result, acc.i_result)
        wiring.connect(m, acc.o_row, pp.i_row)
        self._params(m, mems, access)

        # Raw rows into the output memory; requantized ones back into the banks.
        if "out" in mems:
            out_rd, out_wr = mems["out"].read_port(), mems["out"].write_port()
            share_write(m, out_wr, access, Region.OUTPUT, addr=pp.raw_addr, data=pp.raw_data,
                        en=pp.raw_we)
            host_read(m, out_rd, access, Region.OUTPUT, name="out")
        if self.window_max is not None:
            # A fused pool's windows: only each window's maximum reaches the banks.
            m.submodules.window_max = in_run(self.window_max)
            wiring.connect(m, pp.o_step, self.window_max.i_step)
            wiring.connect(m, self.window_max.o_step, wb.i_step)
        else:
            wiring.connect(m, pp.o_step, wb.i_step)
        # The engine's results come FIFO_LATENCY cycles before hwgen.cycles counts them (it has
        # no output FIFO here); the layer ends as counted, so the counters match the model.
        # (Registered reads pass the rows through a register first: a cycle of it.)
        # (A pooling layer's end takes the same delay: its reads take the same cycle more.)
        # (A registered write-back writes a cycle later: the layer ends a cycle later too.)
        done = Mux(desc.raw, pp.raw_end, delay(m, pp.o_step.p.end, wb.stages, name="wb_end"))
        if self.pooler is not None:
            done = Mux(self.banks.grant.pool, self.pooler.done, done)
        if self.adder is not None:
            done = Mux(self.banks.grant.add, self.adder.done, done)
        m.d.comb += ctrl.layer_done.eq(delay(m, done, FIFO_LATENCY - reg, name="layer_done"))

        access.drive_read_data(m)
        count_work(m, self.counters, host, busy, engine.issue)
        return m

    def _params(self, m, mems, access):
        """The PARAM memory's one read port: the post-processing's, or the adder's while it
        runs (it reads like the banks: with registered reads the register takes every word)."""
        acc, pp, adder = self.accumulators, self.postprocess, self.adder
        # The parameters are read in stage B, so that the memory's output holds them in P1.
        addr, en = acc.param_addr, ~pp.param_hold
        if adder is not None:
            grant = self.banks.grant.add
            addr = Mux(grant, adder.p_addr, addr)
            en = Mux(grant, 1 if access.registered else adder.p_en, en)
        if "out_param" in mems:
            word = out_param_ports(m, mems["out_param"], access, self.config, param_addr=addr,
                                   param_en=en, raw_addr=pp.raw_addr, raw_data=pp.raw_data,
                                   raw_we=pp.raw_we)
        else:
            par_rd, par_wr = mems["param"].read_port(), mems["param"].write_port()
            word = share_read(m, par_rd, access, Region.PARAM, addr=addr, en=en, name="param")
            host_write(m, par_wr, access, Region.PARAM)
        m.d.comb += pp.params.eq(word)
        if adder is not None:
            m.d.comb += adder.p_data.eq(word)

    def _start_units(self, m):
        """Give the running pass's descriptor and loop bounds to the pass units, and start the
        one the bank arbiter grants (:class:`PassStarts`): the matrix datapath (the feeders,
        the accumulators, the post-processing), the depthwise unit into it, the pooler or the
        adder."""
        ctrl, desc = self.controller, self.controller.desc
        wf, af, acc = self.weight_feeder, self.activation_feeder, self.accumulators
        m.submodules.starts = go = PassStarts(self.banks, {"array": (
            "matrix", *(("depthwise",) if self.depthwise is not None else ()))})
        m.d.comb += [go.kind_next.eq(ctrl.kind_next), go.prime_next.eq(ctrl.prime_next),
                     go.start_layer_next.eq(ctrl.start_layer_next),
                     go.start_chunk_next.eq(ctrl.start_chunk_next)]
        grant = self.banks.grant
        m.d.comb += [
            self.banks.kind.eq(desc.kind),
            wf.start.eq(go.prime_array), wf.desc.eq(desc),
            wf.k_end.eq(ctrl.k_end), wf.n_end.eq(ctrl.n_end), wf.wrep.eq(ctrl.geom.wrep),
            wf.wdiag.eq(ctrl.geom.wdiag),
            af.start_layer.eq(go.start_matrix), af.begin_chunk.eq(go.begin_matrix),
            af.prime.eq(go.prime_matrix), af.desc.eq(desc), af.geom.eq(ctrl.geom),
            *([af.prime_next.eq(ctrl.prime_next & go.now_matrix)] if af.registered_reads else []),
            af.last_row.eq(ctrl.last_row),
            acc.start_layer.eq(go.start_array), acc.begin_chunk.eq(go.begin_array),
            acc.desc.eq(desc), acc.k_end.eq(ctrl.k_end), acc.n_end.eq(ctrl.n_end),
            self.postprocess.desc.eq(desc),
        ]
        more = af.more_chunks & grant.matrix
        dw = self.depthwise
        if dw is not None:
            more = more | (dw.more_chunks & grant.depthwise)
            m.d.comb += wf.tall.eq(grant.depthwise)
            m.d.comb += [dw.start_layer.eq(go.start_depthwise),
                         dw.begin_chunk.eq(go.begin_depthwise),
                         dw.prime.eq(go.prime_depthwise), dw.desc.eq(desc),
                         dw.geom.eq(ctrl.geom), dw.last_row.eq(ctrl.last_row),
                         dw.k_end.eq(ctrl.k_end), dw.n_end.eq(ctrl.n_end),
                         dw.bank_full.eq(self.engine.bank_full),
                         dw.a_ptr.eq(self.engine.a_ptr)]
        m.d.comb += ctrl.more_chunks.eq(more)
        if self.window_max is not None:
            m.d.comb += acc.pool.eq(ctrl.geom.pool)
        start_pool_and_add(m, go, ctrl, self.pooler, self.adder)

    def _depthwise_rows(self, m):
        """The engine's rows: the activation feeder's, or in a depthwise pass the depthwise
        unit's (their data unused: the cells take the unit's lines)."""
        af, dw, engine = self.activation_feeder, self.depthwise, self.engine
        grant = self.banks.grant.depthwise
        act = engine.i_act
        m.d.comb += [
            act.valid.eq(Mux(grant, dw.o_act.valid, af.o_act.valid)),
            act.payload.eq(Mux(grant, dw.o_act.payload, af.o_act.payload)),
            af.o_act.ready.eq(act.ready & ~grant), dw.o_act.ready.eq(act.ready & grant),
            engine.dw.eq(grant), engine.dw_lines.eq(dw.dw_lines), engine.dw_sel.eq(dw.dw_sel),
        ]

    def _act_banks(self, m, mems, access):
        """Join each pass unit to its bank arbiter port, and the arbiter to the activation
        banks, which the host shares while idle."""
        cfg = self.config
        af, wb = self.activation_feeder, self.writeback
        arb = self.banks
        # The matrix datapath reads with the activation feeder and writes with the write-back.
        port = arb.port("matrix")
        m.d.comb += [port.rd_addr.eq(af.rd_addr), port.rd_en.eq(af.rd_en),
                     port.rd_take.eq(af.rd_take), af.rd_data.eq(port.rd_data),
                     port.wr_addr.eq(wb.wr_addr), port.wr_data.eq(wb.wr_data),
                     port.wr_en.eq(wb.wr_en)]
        if self.depthwise is not None:
            # The depthwise unit reads the same word of every bank; its pass writes with the
            # write-back.
            port = arb.port("depthwise")
            same_word_port(m, port, cfg, read=self.depthwise)
            m.d.comb += [port.wr_addr.eq(wb.wr_addr), port.wr_data.eq(wb.wr_data),
                         port.wr_en.eq(wb.wr_en)]
        for name, unit in (("pool", self.pooler), ("add", self.adder)):
            # The pooler and the adder read and write the same word of every bank, and take
            # every read.
            if unit is not None:
                same_word_port(m, arb.port(name), cfg, read=unit, write=unit)
        act_banks(m, mems, access, arb.banks, cfg)
