"""The whole-network accelerator: buffers, controller, engine and post-processing.

A run executes the layer descriptors in :attr:`Region.PROGRAM` from word 0 on a batch of ``M``
rows held in :attr:`Region.ACT`. For each layer and each output tile the controller streams every
reduction tile's weights and the ``M`` activation rows through the engine; partial sums are
accumulated in the accumulator memory; after the last reduction tile a row goes through
bias → requantize → saturate → activation into the other activation area (or, for a ``raw``
layer, its accumulators into :attr:`Region.OUTPUT`). Layers chain without the host.
"""

import itertools

from amaranth.hdl import Cat, Const, EnableInserter, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import Out

from ..cycles import FIFO_LATENCY
from ..memmap import (
    HostPortSignature,
    Region,
    batch_bits,
    descriptor_layout,
    macs_from_busy_cycles,
    param_lane_layout,
    regions,
)
from .engine import MatmulEngine
from .systolic import delay

__all__ = ["SPRAM_ATTRS", "SPRAM_SUFFIX", "Accelerator", "collision_free_memories"]

#: Memory attributes that make Yosys's ``synth_ice40`` map a single-port memory onto
#: ``SB_SPRAM256KA`` blocks (16 bits x 16K each, four on an iCE40UP5K).
SPRAM_ATTRS = {"ram_style": "huge"}
#: Ends the name of every such memory, so that the build can drop their initial contents
#: (all zero; an SPRAM has none).
SPRAM_SUFFIX = "_spram"
#: Marks the memories of :func:`collision_free_memories` for readers of the netlist. Yosys heeds
#: ``no_rw_check`` only where it merges a register into an asynchronous read port, and Amaranth's
#: read ports are synchronous already, so the board build sets the read ports' mask itself.
NO_COLLISION_ATTRS = {"no_rw_check": 1}


# Signed operand width of an ECP5 MULT18X18D.
_DSP_OPERAND = 18


def collision_free_memories(config, *, spram=False, registered_reads=False):
    """Return the names of the accelerator's memories whose reads never meet a write to the same
    address in the same cycle.

    The host port reads and writes only while idle and never both at once; a layer writes its
    activations to an area the compiler keeps apart from the one it reads. So a board build may
    tell Yosys that a collision cannot happen (``COLLISION_X_MASK``): otherwise it adds a
    register and a multiplexer per bit of the word to return the old word on a collision.
    The accumulators' read-modify-write needs that bypass, unless ``registered_reads``: that
    read skips a colliding cycle and forwards the word itself.
    """
    names = ["prog", "param", "out", *(f"act{b}" for b in range(config.act_lanes))]
    if not spram:
        names.append("weight")
    if registered_reads:
        names.append("acc")
    return names


def _scaled(m, prod, shift, out_bits, name="scaled"):
    """Return ``(t, over)`` for the requantization of ``prod`` by ``shift``.

    ``t`` is ``(2 * prod) >> shift`` (arithmetic) cut to ``out_bits + 1`` bits, and ``over``
    says that the uncut value does not fit in them: the result then saturates by ``prod``'s
    sign, whatever ``t`` holds. :func:`_round_saturate` finishes the job.

    Only the bits that can reach the result are shifted, one 2:1 multiplexer stage per bit of
    ``shift``, largest first, each narrower than the one before; each stage that does not shift
    drops bits above the window, which ``over`` collects. A full-width shifter and full-width
    saturation comparators cost about twice the logic, and Yosys mapped the plain ``>>`` into
    60 or 217 wide multiplexers per lane depending on unrelated parts of the design.
    :func:`_shift_start`, :func:`_shift_stages` and :func:`_shift_end` are its parts, for a
    pipeline that registers the stages' state between two of them.
    """
    value, over = _shift_start(prod, len(shift), out_bits)
    value, over = _shift_stages(m, value, over, shift, sign=prod[-1],
                                stages=range(len(shift) - 1, -1, -1), out_bits=out_bits,
                                name=name)
    return value.as_signed(), _shift_end(value, over, prod[-1])


def _shift_start(prod, shift_bits, out_bits):
    """Return ``(value, over)`` before the stages of :func:`_scaled`: ``2 * prod`` cut (or
    sign-extended) to the bits the first stage needs, and whether the cut dropped any."""
    width = out_bits + 1
    value = Cat(Const(0, 1), prod)                  # 2 * prod
    sign = value[-1]
    n = width + (1 << shift_bits) - 1
    if len(value) > n:
        return value[:n], (value[n:] ^ sign.replicate(len(value) - n)).any()
    return Cat(value, sign.replicate(n - len(value))), Const(0, 1)


def _shift_stages(m, value, over, shift, *, sign, stages, out_bits, name):
    """Shift ``value`` by the bits of ``shift`` that ``stages`` names, largest first (as
    :func:`_scaled`), each stage narrower, and return ``(value, over)`` with the bits dropped
    above the window ORed into ``over``.

    Each stage is a signal of ``m`` (named ``name`` and the stage): an expression uses its
    operand twice per stage, and Amaranth's Verilog repeats a shared subexpression at each use,
    so without the signals the emitted Verilog grew 2**stages-fold (Yosys merges the copies,
    Verilator compiles them all).
    """
    width = out_bits + 1
    for k in stages:
        step, keep = 1 << k, width + (1 << k) - 1
        dropped = value[keep:]
        over = over | (~shift[k] & (dropped ^ sign.replicate(step)).any())
        stage = Signal(keep, name=f"{name}_s{k}")
        m.d.comb += stage.eq(Mux(shift[k], value[step:], value[:keep]))
        value = stage
    return value, over


def _shift_end(value, over, sign):
    """Return the overflow flag of :func:`_scaled` after the last stage: fits iff every bit
    from the window's top one upwards equals the sign."""
    return over | (value[-1] ^ sign)


def _round_saturate(t, over, negative, out_bits, rounded=None):
    """Return the requantized value from :func:`_scaled`'s ``(t, over)`` and ``prod < 0``.

    Contract: r = (p + 2**(shift-1)) >> shift, or p when shift == 0; that is
    ``((2p >> shift) + 1) >> 1`` for every shift, an incrementer and no decoder for
    2**(shift-1). With ``t`` in ``out_bits + 1`` bits, ``r`` lies in
    ``-2**(out_bits-1) .. 2**(out_bits-1)``, so only the top needs clamping. ``rounded``, if
    given, is ``(t + 1) >> 1`` already (a pipeline register).
    """
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    r = _rounded(t) if rounded is None else rounded
    return Mux(over, Mux(negative, lo, hi), Mux(r > hi, hi, r))


def _rounded(t):
    """Return ``(t + 1) >> 1`` in ``t``'s width, which holds it (see :func:`_round_saturate`)."""
    return ((t + 1) >> 1)[:len(t)].as_signed()


def _slices(width, pieces):
    """Return ``pieces`` near-equal ``(lo, hi)`` bit ranges that cover ``width`` bits."""
    bounds = [width * i // pieces for i in range(pieces + 1)]
    return list(itertools.pairwise(bounds))


def _chunks(width, size):
    """Return the ``(lo, hi)`` bit ranges of ``size`` bits (the last one narrower) that cover
    ``width`` bits."""
    return [(lo, min(lo + size, width)) for lo in range(0, width, size)]


def _sum_tree(terms):
    """Return the sum of ``(value, shift)`` terms, each ``value << shift``, as a balanced tree:
    the adders in series grow with the log of the number of terms."""
    while len(terms) > 1:
        pairs = zip(terms[::2], terms[1::2], strict=False)   # an odd one out waits
        merged = [(a + (b << (sb - sa)), sa) for (a, sa), (b, sb) in pairs]
        terms = merged + terms[len(merged) * 2:]
    value, shift = terms[0]
    return value << shift


def _skid(m, port, valid, row, name):
    """Drive stream ``port`` from a feeder's ``valid``/``row`` through a skid register and
    return the feeder's "take" (move on): the skid is empty. The feeder then moves on whenever
    the skid is empty (a register), not when ``port`` is ready, so that its next read address
    does not wait for the consumer's decision; ``port`` sees the same rows in the same cycles.
    """
    full = Signal(name=f"{name}_skid_full")
    held = Signal.like(row, name=f"{name}_skid_row", reset_less=True)
    m.d.comb += [port.valid.eq(full | valid), port.payload.eq(Mux(full, held, row))]
    with m.If(full & port.ready):
        m.d.sync += full.eq(0)
    with m.Elif(~full & valid & ~port.ready):
        m.d.sync += [full.eq(1), held.eq(row)]
    return ~full


def _count(m, out, inc, clear, name):
    """Drive ``out`` from a counter of its width that adds ``inc`` and resets on ``clear``.

    Two halves, the upper one enabled when the lower is all ones: two short carry chains
    instead of a 64-bit one, which was the iCE40's longest path (64 carries, 18 ns). Both
    halves change in the same cycle, so the count is exact at every cycle. (Written as a
    comparison: with ``lo.all()`` Yosys 0.70's ABC9 pass failed an assertion on a 2x2 ECP5
    device.)
    """
    half = (len(out) + 1) // 2
    lo = Signal(half, name=f"{name}_lo")
    hi = Signal(len(out) - half, name=f"{name}_hi")
    m.d.comb += out.eq(Cat(lo, hi))
    with m.If(clear):
        m.d.sync += [lo.eq(0), hi.eq(0)]
    with m.Elif(inc):
        m.d.sync += lo.eq(lo + 1)
        with m.If(lo == (1 << half) - 1):
            m.d.sync += hi.eq(hi + 1)


def _advance(m, word, rem, step, lanes, *, frm=None, domain="sync"):
    """Add ``step`` (<= ``lanes``) to the element position ``word * lanes + rem``, registered
    (or, with ``domain="comb"``, as the next values of registers).

    Positions are kept as (word, lane) pairs so no division is needed in hardware. ``frm``, a
    ``(word, rem)`` pair of values, is the position to advance from, if not ``(word, rem)``.
    """
    d = getattr(m.d, domain)
    src_word, src_rem = (word, rem) if frm is None else frm
    if step == lanes:
        d += word.eq(src_word + 1)
        if frm is not None:
            d += rem.eq(src_rem)
        return
    with m.If(src_rem + step >= lanes):
        d += [rem.eq(src_rem + step - lanes), word.eq(src_word + 1)]
    with m.Else():
        d += rem.eq(src_rem + step)
        if frm is not None:
            d += word.eq(src_word)


def _registered(m, values, prefix):
    """Return registered copies of ``values``: one pipeline stage."""
    regs = []
    for v in values:
        reg = Signal.like(v, name=f"{prefix}_{v.name}")
        m.d.sync += reg.eq(v)
        regs.append(reg)
    return regs


class Accelerator(wiring.Component):
    """Run quantized multi-layer networks on a systolic array.

    Parameters
    ----------
    config : AcceleratorConfig
    pe_instances : bool
        Instantiate the processing elements by Verilog module name (see
        :func:`hwgen.generate.emit_design`).
    dsp_packing : str or None
        How the array maps its multipliers (see :class:`hwgen.device.engine.MatmulEngine`). With
        ``"mult18x18d"``, ``post_pipeline`` and ``split_operand`` (at most 17, and
        ``mult_bits`` at most 17), each requantization slice product is a MULT18X18D too, whose
        input and output registers stand in for the fabric's (same cycles).
    post_pipeline : bool
        Shorten the longest paths for a faster clock: three pipeline stages in the
        requantization (before the multipliers, between the rounding shifter's larger and
        smaller stages, and before saturation) and the controller's loop bounds held in
        registers. Results are the same; a requantized layer then takes 3 cycles more than
        :mod:`hwgen.cycles` counts (raw layers are unchanged).
    split_multiplier : bool or int
        Build each requantization product from this many narrower products (``True``: two),
        registered and added a cycle later: for multipliers built from logic cells (iCE40),
        whose carry chains are the longest path otherwise. Results are the same; a requantized
        layer takes one cycle more.
    split_operand : int or None
        Build each requantization product from slices of this many bits of the biased
        accumulator (unsigned, but the top one), from operands registered once more, and add
        the registered products a cycle later: 17 makes every product one ECP5 MULT18X18D with
        only routing before and after it. Results are the same; a requantized layer takes two
        cycles more. Not together with ``split_multiplier``.
    registered_reads : bool
        Put a register (without reset) right after every memory's read port, so that no path
        starts at a block RAM's output but to that register (which an ECP5 build then folds into
        the DP16KD's output register). The feeders, the program and the parameters address
        their memories a cycle ahead; the engine's rows pass a register, and the accumulators
        are read three cycles before their sum (their word crosses into the fabric in a cycle
        of its own), written from a register, and forward the four sums the read misses; raw
        layers write their output from registers; skid registers between the feeders and the
        engine let the feeders' addresses ignore the engine's ``ready``.
        Results and cycle counts are the same; host reads take two cycles.
    spram : bool
        Ask Yosys to put the weight memory into iCE40UP ``SB_SPRAM256KA`` blocks. It has one
        address for both ports anyway: the host writes only while idle, the feeder reads only
        while busy.

    Members
    -------
    host : Out(HostPortSignature(config))
        Memory access while idle, start, counters; see :class:`hwgen.memmap.HostPortSignature`.

    Attributes
    ----------
    memories : dict
        Each :class:`amaranth.lib.memory.Memory` by name, filled in by ``elaborate`` (the tests
        watch their ports for collisions).
    """

    def __init__(self, config, *, pe_instances=False, dsp_packing=None, post_pipeline=False,
                 split_multiplier=False, split_operand=None, registered_reads=False,
                 spram=False):
        self.config = config
        self.post_pipeline = post_pipeline
        self.registered_reads = registered_reads
        # A bool is the historical spelling of two pieces (True) or one (False).
        pieces = (1 + split_multiplier if isinstance(split_multiplier, bool)
                  else split_multiplier)
        if not isinstance(pieces, int) or not 1 <= pieces <= config.mult_bits:
            raise ValueError(f"split_multiplier must cut the {config.mult_bits}-bit multiplier "
                             f"into 1..{config.mult_bits} pieces, not {split_multiplier!r}")
        self.split_multiplier = pieces
        if split_operand is not None and (isinstance(split_operand, bool)
                                          or not isinstance(split_operand, int)
                                          or split_operand < 2
                                          or pieces > 1):
            raise ValueError(f"split_operand must be None or an int >= 2 (bits per slice of the "
                             f"accumulator), and goes without split_multiplier; got "
                             f"split_operand={split_operand!r}, split_multiplier={pieces}")
        self.split_operand = split_operand
        self.dsp_packing = dsp_packing
        self.spram = spram
        self.geometry = regions(config)
        # The controller takes every result row as it comes (`o_result.ready` is tied high).
        self.engine = MatmulEngine(config, pe_instances=pe_instances, dsp_packing=dsp_packing,
                                   gated=True, always_ready=True)
        super().__init__({"host": Out(HostPortSignature(config))})

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        rows, cols, lanes = cfg.rows, cfg.cols, cfg.act_lanes
        geo = self.geometry
        host = self.host
        m.submodules.engine = engine = self.engine

        # -- memories ----------------------------------------------------------------------------
        # One list names the collision-free memories, for their attributes here and the build.
        apart = collision_free_memories(cfg, spram=self.spram,
                                        registered_reads=self.registered_reads)
        self.memories = {}

        def mem(name, region_or_shape, depth=None, attrs=None):
            if isinstance(region_or_shape, Region):
                g = geo[region_or_shape]
                shape, depth = unsigned(g.word_bits), g.depth
            else:
                shape = region_or_shape
            if name in apart:
                attrs = NO_COLLISION_ATTRS
            mem_ = memory.Memory(shape=shape, depth=depth, init=[], attrs=attrs)
            m.submodules[name] = mem_
            self.memories[name] = mem_
            return mem_

        prog_mem = mem("prog", Region.PROGRAM)
        if self.spram:
            weight_mem = mem("weight" + SPRAM_SUFFIX, Region.WEIGHT, attrs=SPRAM_ATTRS)
        else:
            weight_mem = mem("weight", Region.WEIGHT)
        param_mem = mem("param", Region.PARAM)
        out_mem = mem("out", Region.OUTPUT)
        act_mems = [mem(f"act{b}", signed(cfg.in_bits), cfg.act_depth) for b in range(lanes)]
        acc_layout = data.ArrayLayout(signed(cfg.acc_bits), cols)
        acc_mem = mem("acc", acc_layout, cfg.acc_depth)

        prog_rd = prog_mem.read_port()
        prog_wr = prog_mem.write_port()
        weight_rd = weight_mem.read_port()
        weight_wr = weight_mem.write_port()
        param_rd = param_mem.read_port()
        param_wr = param_mem.write_port()
        out_wr = out_mem.write_port()
        out_rd = out_mem.read_port()
        act_wr = [a.write_port() for a in act_mems]
        act_rd = [a.read_port() for a in act_mems]
        acc_wr = acc_mem.write_port()
        # Registered reads forward the sums themselves (see _registered_acc_read).
        acc_rd = acc_mem.read_port(transparent_for=() if self.registered_reads else (acc_wr,))

        busy = Signal()
        m.d.comb += host.busy.eq(busy)
        # The array runs only during runs: it is empty between them (a run ends after its last
        # result row), and its first input comes several cycles after `busy` rises (FETCH,
        # DECODE, a memory read), so the enable may follow `busy` a cycle late.
        array_en = Signal()
        m.d.sync += array_en.eq(busy)
        m.d.comb += engine.en.eq(array_en)
        # The registers after the array (accumulate, bias, requantize) hold still between runs
        # too: they are empty then for the same reason.
        dp = Module()
        m.submodules.datapath = EnableInserter({"sync": array_en})(dp)

        # -- host access (only while idle) -------------------------------------------------------
        # (Memories read every cycle for registered_reads skip the cycles the host writes them:
        # a block RAM's read of the word written in the same cycle is undefined.)
        idle = ~busy
        hwe = {r: Signal(name=f"host_we_{r.name.lower()}") for r in Region}
        for r in Region:
            m.d.comb += hwe[r].eq(idle & host.we & (host.region == r))
        m.d.comb += [
            prog_wr.addr.eq(host.addr), prog_wr.data.eq(host.wdata),
            prog_wr.en.eq(hwe[Region.PROGRAM]),
            weight_wr.addr.eq(weight_rd.addr), weight_wr.data.eq(host.wdata),
            weight_wr.en.eq(hwe[Region.WEIGHT]),
            param_wr.addr.eq(host.addr), param_wr.data.eq(host.wdata),
            param_wr.en.eq(hwe[Region.PARAM]),
        ]
        host_rd = Signal()
        m.d.comb += host_rd.eq(idle & host.re)
        # The word each region's read returns (see the end of elaborate).
        host_words = {}
        if self.registered_reads:
            # A cycle more: every memory's output ends at a register of its own, which takes the
            # word the cycle after the memory does.
            host_rd_q = Signal(name="host_rd_q")
            m.d.sync += host_rd_q.eq(host_rd)
            out_q = Signal.like(out_rd.data, name="out_q", reset_less=True)
            with m.If(host_rd_q):
                m.d.sync += out_q.eq(out_rd.data)
            host_words[Region.OUTPUT] = out_q
        else:
            host_rd_q = Const(0, 1)
            host_words[Region.OUTPUT] = out_rd.data
        m.d.comb += [out_rd.addr.eq(host.addr), out_rd.en.eq(host_rd)]

        # -- controller ---------------------------------------------------------------------------
        desc_layout = descriptor_layout(cfg)
        desc = Signal(desc_layout)
        # The descriptor being loaded: read at `start_layer`, the cycle before `desc` holds it.
        if self.registered_reads:
            prog_q = Signal.like(prog_rd.data, name="prog_q", reset_less=True)
            next_desc = desc_layout(prog_q)
        else:
            next_desc = desc_layout(prog_rd.data)
        batch = Signal(batch_bits(cfg))
        pc = Signal(range(cfg.prog_depth))    # the next descriptor's word
        layer_done = Signal()
        # High in DECODE: a register (FETCH always leads to DECODE), not a decode of the state,
        # for the activation banks' addresses that it chooses.
        start_layer = Signal()
        m.d.sync += start_layer.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                m.d.sync += pc.eq(0)
                with m.If(host.start):
                    m.d.sync += [busy.eq(1), batch.eq(host.batch)]
                    m.next = "FETCH"
            with m.State("FETCH"):
                m.d.sync += start_layer.eq(1)
                m.next = "DECODE"
            with m.State("DECODE"):
                m.d.sync += [desc.eq(next_desc), pc.eq(pc + 1)]
                m.next = "RUN"
            with m.State("RUN"), m.If(layer_done):
                with m.If(desc.last):
                    m.d.sync += busy.eq(0)
                    m.next = "IDLE"
                with m.Else():
                    m.next = "FETCH"
        if self.registered_reads:
            # `pc` holds still from DECODE to the next FETCH, so the register holds the
            # descriptor by DECODE. Idle, the memory reads word 0 but for the host's reads: the
            # first descriptor is there as a run starts, without `start` in the address's path.
            m.d.comb += [prog_rd.addr.eq(Mux(busy, pc, Mux(host.re, host.addr, 0))),
                         prog_rd.en.eq(~hwe[Region.PROGRAM])]
            m.d.sync += prog_q.eq(prog_rd.data)
            host_words[Region.PROGRAM] = prog_q
        else:
            m.d.comb += [
                prog_rd.addr.eq(Mux(busy, pc, host.addr)),
                prog_rd.en.eq(Mux(busy, 1, host_rd)),
            ]
            host_words[Region.PROGRAM] = prog_rd.data
        # Descriptor fields as seen by the feeders: valid from the cycle after DECODE.
        k_tiles = desc.k_tiles
        n_tiles = desc.n_tiles
        if self.post_pipeline:
            # The loop bounds, registered once per run/layer instead of subtracted every cycle
            # (they feed the enables of many counters).
            last_row = Signal.like(batch, name="last_row")
            k_last = Signal.like(desc.k_tiles, name="k_last")
            n_last = Signal.like(desc.n_tiles, name="n_last")
            # last_row - 1, for the registered "last row" flags (`m + 1 == last_row` puts an
            # adder before the comparator).
            before_last_row = Signal.like(batch, name="before_last_row")
            m.d.sync += [last_row.eq(batch - 1),   # valid from FETCH on
                         before_last_row.eq(batch - 2)]
            with m.If(start_layer):
                m.d.sync += [k_last.eq(next_desc.k_tiles - 1), n_last.eq(next_desc.n_tiles - 1)]

            def k_end():
                return k_last

            def n_end():
                return n_last
        else:
            last_row, before_last_row = batch - 1, batch - 2

            def k_end():
                return k_tiles - 1

            def n_end():
                return n_tiles - 1

        # -- weight feeder: tiles are stored in the order they are used --------------------------
        w_addr = Signal(range(cfg.weight_depth + 1))
        # Position (tile row, kt, nt) of the next word rather than k_tiles * n_tiles * rows words
        # left: counters cost far fewer logic cells than that multiplier.
        w_row = Signal(range(rows))
        w_kt = Signal.like(desc.k_tiles, name="w_kt")
        w_nt = Signal.like(desc.n_tiles, name="w_nt")
        w_more = Signal()
        w_valid = Signal()
        w_take = Signal()
        w_addr_n = Signal.like(w_addr, name="w_addr_n")     # its next value
        m.d.comb += w_addr_n.eq(w_addr)
        m.d.sync += w_addr.eq(w_addr_n)
        if self.registered_reads:
            # Addressed a cycle ahead, the register takes the word when the port did.
            w_q = Signal.like(weight_rd.data, name="weight_q", reset_less=True)
            # Through a skid register, the port's address does not wait for the engine's
            # `ready` (the 85F's longest path, 9.5 ns, 7.5 of them routing to the DP16KDs).
            m.d.comb += [w_take.eq(_skid(m, engine.i_weight, w_valid, w_q, "w")),
                         weight_rd.en.eq(~weight_wr.en),
                         weight_rd.addr.eq(Mux(busy, w_addr_n, host.addr))]
            with m.If(Mux(busy, w_take, host_rd_q)):
                m.d.sync += w_q.eq(weight_rd.data)
            host_words[Region.WEIGHT] = w_q
        else:
            m.d.comb += [
                w_take.eq(~w_valid | engine.i_weight.ready),
                engine.i_weight.valid.eq(w_valid),
                # Never together with a write, as a single-port RAM needs.
                weight_rd.en.eq(Mux(busy, w_take, host_rd) & ~weight_wr.en),
                weight_rd.addr.eq(Mux(busy, w_addr, host.addr)),
                engine.i_weight.payload.eq(weight_rd.data),
            ]
            host_words[Region.WEIGHT] = weight_rd.data
        if self.registered_reads:
            # w_addr + 1 in a register: the port's address is a multiplexer of registers.
            w_addr_p1 = Signal(range(cfg.weight_depth + 2), name="w_addr_p1")
            with m.If(start_layer):
                m.d.sync += w_addr_p1.eq(next_desc.w_base + 1)
            with m.Elif(w_take & w_more):
                m.d.sync += w_addr_p1.eq(w_addr_p1 + 1)
        else:
            w_addr_p1 = w_addr + 1
        with m.If(start_layer):
            m.d.sync += [w_row.eq(0), w_kt.eq(0), w_nt.eq(0),
                         w_more.eq((next_desc.k_tiles != 0) & (next_desc.n_tiles != 0)),
                         w_valid.eq(0)]
            m.d.comb += w_addr_n.eq(next_desc.w_base)
        # Not gated by `busy` (many loads, slow on the 85F): outside a run w_more and w_valid
        # are 0 (a layer's weights are all taken before it ends), so taking changes nothing.
        with m.Elif(w_take):
            m.d.sync += w_valid.eq(w_more)
            with m.If(w_more):
                m.d.sync += w_row.eq(w_row + 1)
                m.d.comb += w_addr_n.eq(w_addr_p1)
                with m.If(w_row == rows - 1):
                    m.d.sync += w_row.eq(0)
                    with m.If(w_kt != k_end()):
                        m.d.sync += w_kt.eq(w_kt + 1)
                    with m.Else():
                        m.d.sync += [w_kt.eq(0), w_nt.eq(w_nt + 1)]
                        with m.If(w_nt == n_end()):
                            m.d.sync += w_more.eq(0)

        # -- activation feeder: M rows per tile, each row `rows` lanes read across the banks ----
        a_m = Signal.like(batch, name="a_m")
        a_kt = Signal.like(desc.k_tiles, name="a_kt")
        a_nt = Signal.like(desc.n_tiles, name="a_nt")
        a_row = Signal(range(cfg.act_depth * 2))       # src_base + m * src_stride
        a_kword = Signal(range(cfg.act_depth * 2))     # k0 // lanes
        a_krem = Signal(range(lanes))                   # k0 % lanes
        a_active = Signal()
        a_valid = Signal()
        a_last = Signal()
        a_rem_q = Signal.like(a_krem)
        a_take = Signal()
        feed = Signal(engine.i_act.payload.shape(), name="a_feed")   # the row in `a_valid`
        steps = cfg.requant_steps
        skid = self.registered_reads and steps == 1
        if skid:
            # The activation banks' next addresses waited for the engine's `ready` (the 85F's
            # longest path).
            m.d.comb += a_take.eq(_skid(m, engine.i_act, a_valid, feed, "a"))
        elif steps == 1:
            m.d.comb += [a_take.eq(~a_valid | engine.i_act.ready),
                         engine.i_act.valid.eq(a_valid), engine.i_act.payload.eq(feed)]
        else:
            m.d.comb += engine.i_act.payload.eq(feed)
            # Rows whose results are requantized enter `steps` cycles apart: the requantization
            # takes that long per row (it has `requant_lanes` of the `cols` lanes).
            a_final = Signal()    # the row in `a_valid` is of a requantized last k-tile
            gap = Signal(range(steps))
            gate = gap == 0
            m.d.comb += [a_take.eq(~a_valid | (engine.i_act.ready & gate)),
                         engine.i_act.valid.eq(a_valid & gate)]
            with m.If(a_valid & gate & engine.i_act.ready & a_final):
                m.d.sync += gap.eq(steps - 1)
            with m.Elif(~gate):
                m.d.sync += gap.eq(gap - 1)
            with m.If(busy & a_take):
                m.d.sync += a_final.eq(~desc.raw & (a_kt == k_end()))
        # Words past the end of a row belong to the next row (or lie past the memory): their
        # lanes meet zero weights, but must read as zero, not as whatever (or X) is there.
        a_inrow = Signal(lanes)
        a_inrow_q = Signal(lanes)
        # The address registers' next values: a registered read addresses the memory with them.
        a_row_n, a_kword_n, a_krem_n = (Signal.like(v, name=f"{v.name}_n")
                                        for v in (a_row, a_kword, a_krem))
        m.d.comb += [a_row_n.eq(a_row), a_kword_n.eq(a_kword), a_krem_n.eq(a_krem)]
        m.d.sync += [a_row.eq(a_row_n), a_kword.eq(a_kword_n), a_krem.eq(a_krem_n)]
        for b in range(lanes):
            m.d.comb += a_inrow[b].eq(a_kword + (Const(b) < a_krem) < desc.src_stride)
        if self.registered_reads:
            # a_active is set only while busy, and never in DECODE (start_layer): neither needs
            # to be in the address's path (busy's many loads make it slow on the 85F).
            lane_next, lane_inrow = self._act_lane_addresses(
                m, advance=a_take & a_active, start_layer=start_layer,
                a_m=a_m, last_row=last_row, before_last_row=before_last_row, a_kt=a_kt,
                k_end=k_end(),
                next_desc=next_desc, desc=desc, inrow=a_inrow, width=len(act_rd[0].addr))
        act_data = []
        # A word past the row's end is not read: it may be the first word of the output
        # area, which the layer may be writing (the build says activations never collide).
        for b in range(lanes):
            if self.registered_reads:
                q = Signal.like(act_rd[b].data, name=f"act{b}_q", reset_less=True)
                m.d.comb += [act_rd[b].addr.eq(Mux(busy, lane_next[b], host.addr)),
                             act_rd[b].en.eq(~hwe[Region.ACT] & (~busy | lane_inrow[b]))]
                with m.If(Mux(busy, a_take, host_rd_q)):
                    m.d.sync += q.eq(act_rd[b].data)
                act_data.append(q)
            else:
                word = a_kword + (Const(b) < a_krem)
                m.d.comb += [act_rd[b].addr.eq(Mux(busy, a_row + word, host.addr)),
                             act_rd[b].en.eq(Mux(busy, a_take & a_inrow[b], host_rd))]
                act_data.append(act_rd[b].data)
        host_words[Region.ACT] = Cat(*act_data)
        lane_data = [Mux(a_inrow_q[b], act_data[b], 0) for b in range(lanes)]
        if rows < lanes:
            # Rotate so that engine lane i is element k0 + i.
            for i in range(rows):
                with m.Switch(a_rem_q):
                    for r in range(lanes):
                        with m.Case(r):
                            m.d.comb += feed.data[i].eq(lane_data[(r + i) % lanes])
        else:
            for i in range(rows):
                m.d.comb += feed.data[i].eq(lane_data[i])
        m.d.comb += feed.last.eq(a_last)
        with m.If(start_layer):
            m.d.sync += [a_m.eq(0), a_kt.eq(0), a_nt.eq(0), a_active.eq(1), a_valid.eq(0)]
            m.d.comb += [a_row_n.eq(next_desc.src_base), a_kword_n.eq(0), a_krem_n.eq(0)]
        with m.Elif(busy & a_take):
            m.d.sync += [a_valid.eq(a_active), a_last.eq(a_m == last_row), a_rem_q.eq(a_krem),
                         a_inrow_q.eq(a_inrow)]
            with m.If(a_active):
                with m.If(a_m != last_row):
                    m.d.sync += a_m.eq(a_m + 1)
                    m.d.comb += a_row_n.eq(a_row + desc.src_stride)
                with m.Else():
                    m.d.sync += a_m.eq(0)
                    m.d.comb += a_row_n.eq(desc.src_base)
                    with m.If(a_kt != k_end()):
                        m.d.sync += a_kt.eq(a_kt + 1)
                        _advance(m, a_kword_n, a_krem_n, rows, lanes, frm=(a_kword, a_krem),
                                 domain="comb")
                    with m.Else():
                        m.d.sync += a_kt.eq(0)
                        m.d.comb += [a_kword_n.eq(0), a_krem_n.eq(0)]
                        with m.If(a_nt != n_end()):
                            m.d.sync += a_nt.eq(a_nt + 1)
                        with m.Else():
                            m.d.sync += a_active.eq(0)

        # -- accumulate: stage A (result arrives) → stage B (sum with the accumulator memory) ---
        r_m = Signal.like(batch, name="r_m")
        r_kt = Signal.like(desc.k_tiles, name="r_kt")
        r_nt = Signal.like(desc.n_tiles, name="r_nt")
        r_dst = Signal(range(cfg.act_depth + cfg.out_depth + 1))  # dst_base + m * dst_stride
        # Output tile position: first channel nt * cols, and where it lands in the lanes.
        r_n0 = Signal(range((1 << len(r_nt)) * cols))   # r_nt * cols
        r_oword = Signal(range(cfg.act_depth * 2))   # (nt * cols) // lanes
        r_orem = Signal(range(lanes))                 # (nt * cols) % lanes
        res = engine.o_result
        m.d.comb += res.ready.eq(1)
        r_wrap, r_step = Signal(name="r_wrap"), Signal(name="r_step")
        if self.registered_reads:
            # The engine's rows pass a register before stage A: the accumulators' row counter
            # (e_m, r_m a cycle ahead) counts the engine's own valid, so the memory is addressed
            # two cycles before stage A and its word reaches the fabric a cycle before stage B
            # (see _registered_acc_read). The layer ends a cycle earlier after its last row
            # (layer_done), so the cycles are the same.
            a_stage = Signal(name="res_q_valid")
            res_row = Signal.like(res.payload.data, name="res_q_data")
            dp.d.sync += [a_stage.eq(res.valid), res_row.eq(res.payload.data)]
            e_m = Signal.like(r_m, name="acc_e_m")
            e_m1 = Signal(len(r_m) + 1, name="acc_e_m1")     # e_m + 1
            e_m_n = Signal.like(r_m, name="acc_e_m_n")
            e_wrap, e_step = Signal(name="acc_e_wrap"), Signal(name="acc_e_step")
            m.d.comb += e_m_n.eq(Mux(e_wrap, 0, Mux(e_step, e_m1, e_m)))
            # "The row is the batch's last" in registers too, for e_m and (a cycle later) r_m:
            # comparators before the memory's address and stage A's enables otherwise. (Set
            # anew by every layer's start, after the run's batch is.)
            e_last = Signal(name="acc_e_last")
            r_last = Signal(name="r_m_last")
            m.d.sync += [e_m.eq(e_m_n), e_m1.eq(e_m_n + 1), r_m.eq(e_m), r_last.eq(e_last),
                         e_last.eq(Mux(e_wrap, last_row == 0,
                                       Mux(e_step, e_m == before_last_row, e_last)))]
            with m.If(start_layer):
                m.d.comb += e_wrap.eq(1)
            with m.Elif(res.valid):
                with m.If(~e_last):
                    m.d.comb += e_step.eq(1)
                with m.Else():
                    m.d.comb += e_wrap.eq(1)
        else:
            a_stage, res_row = res.valid, res.payload.data
            m.d.sync += r_m.eq(Mux(r_wrap, 0, Mux(r_step, r_m + 1, r_m)))
            r_last = r_m == last_row
        if self.registered_reads:
            # "Last tile" flags in registers, as r_last (comparators before stage A's enables
            # otherwise): r_kt == k_end and r_nt == n_end, compared with the bound less one.
            r_kt_last, r_nt_last = Signal(name="r_kt_last"), Signal(name="r_nt_last")
            kt_before = Signal.like(desc.k_tiles, name="r_kt_before")     # k_end - 1
            nt_before = Signal.like(desc.n_tiles, name="r_nt_before")     # n_end - 1
            with m.If(start_layer):
                m.d.sync += [r_kt_last.eq(next_desc.k_tiles == 1),
                             r_nt_last.eq(next_desc.n_tiles == 1),
                             kt_before.eq(next_desc.k_tiles - 2),
                             nt_before.eq(next_desc.n_tiles - 2)]
            with m.Elif(a_stage & r_last):
                with m.If(~r_kt_last):
                    m.d.sync += r_kt_last.eq(r_kt == kt_before)
                with m.Else():
                    m.d.sync += [r_kt_last.eq(k_end() == 0),
                                 r_nt_last.eq(Mux(r_nt_last, n_end() == 0, r_nt == nt_before))]
        else:
            r_kt_last, r_nt_last = r_kt == k_end(), r_nt == n_end()
        with m.If(start_layer):
            m.d.sync += [r_kt.eq(0), r_nt.eq(0), r_n0.eq(0), r_oword.eq(0), r_orem.eq(0),
                         r_dst.eq(next_desc.dst_base)]
            m.d.comb += r_wrap.eq(1)
        with m.Elif(a_stage):
            with m.If(~r_last):
                m.d.sync += r_dst.eq(r_dst + desc.dst_stride)
                m.d.comb += r_step.eq(1)
            with m.Else():
                m.d.sync += r_dst.eq(desc.dst_base)
                m.d.comb += r_wrap.eq(1)
                with m.If(~r_kt_last):
                    m.d.sync += r_kt.eq(r_kt + 1)
                with m.Else():
                    m.d.sync += [r_kt.eq(0), r_nt.eq(r_nt + 1), r_n0.eq(r_n0 + cols)]
                    _advance(m, r_oword, r_orem, cols, lanes)
        b_valid = Signal()
        b_row = Signal(acc_layout)
        b_first = Signal()
        b_final = Signal()
        b_m = Signal.like(r_m)
        pos = [r_nt, r_n0, r_oword, r_orem, r_dst]   # travels with the row to the writes
        b_pos = _registered(dp, pos, "b")
        param_hold = Signal()   # keep the parameters read out while a row is requantized
        b_end = Signal()
        # The parameters are read in stage B, so that the memory's own output register holds
        # them in P1: no second register for the whole word.
        if self.registered_reads:
            # Read every cycle a cycle ahead (b_pos[0]'s next value; the layer's p_base is
            # settled long before its first row), and held in a register as the port was.
            par_q = Signal(param_rd.data.shape(), name="param_q", reset_less=True)
            b_nt_next = Mux(array_en, pos[0], b_pos[0])
            m.d.comb += [param_rd.addr.eq(Mux(busy, desc.p_base + b_nt_next, host.addr)),
                         param_rd.en.eq(~hwe[Region.PARAM])]
            with m.If(Mux(busy, ~param_hold, host_rd_q)):
                m.d.sync += par_q.eq(param_rd.data)
            par_data = par_q
        else:
            m.d.comb += [
                param_rd.addr.eq(Mux(busy, desc.p_base + b_pos[0], host.addr)),
                param_rd.en.eq(Mux(busy, ~param_hold, host_rd)),
            ]
            par_data = param_rd.data
        host_words[Region.PARAM] = par_data
        dp.d.sync += [
            b_valid.eq(a_stage), b_row.eq(res_row), b_first.eq(r_kt == 0),
            b_final.eq(r_kt_last), b_m.eq(r_m),

            b_end.eq(a_stage & r_last & r_kt_last & r_nt_last),
        ]
        b_sum = Signal(acc_layout)
        acc_we = Signal()
        m.d.comb += acc_we.eq(b_valid & ~b_final)
        if self.registered_reads:
            acc_old = self._registered_acc_read(m, acc_rd, acc_wr, r_m=r_m, e_m=e_m, e_m1=e_m1,
                                                e_next=e_m_n, e_wrap=e_wrap, e_step=e_step,
                                                b_m=b_m, b_sum=b_sum, we=acc_we)
        else:
            m.d.comb += [acc_rd.addr.eq(r_m), acc_rd.en.eq(1),
                         acc_wr.addr.eq(b_m), acc_wr.data.eq(b_sum), acc_wr.en.eq(acc_we)]
            acc_old = acc_rd.data
        # A row's first tile adds to zero: the choice before the adder, where it joins the
        # forwarding multiplexer's last LUT, not after it (a LUT more on the accumulate path).
        for j in range(cols):
            m.d.comb += b_sum[j].eq(Mux(b_first, 0, acc_old[j]) + b_row[j])

        # -- post-processing: P1 bias (and raw write), P2 requantize, P3 write activations ------
        n_req = cfg.requant_lanes
        lane_layout = param_lane_layout(cfg)
        params = data.ArrayLayout(lane_layout, cols)
        p1_valid, p1_end = Signal(), Signal()
        p1_sum = Signal(acc_layout)
        p1_par = Signal(params)
        m.d.comb += p1_par.eq(par_data)
        p1_load = b_valid & b_final
        if steps == 1:
            p1_pos = _registered(dp, b_pos, "p1")
            dp.d.sync += p1_sum.eq(b_sum)
        else:
            # Held while the row is requantized (requantized rows come `steps` cycles apart).
            p1_pos = [Signal.like(v, name=f"p1_{v.name}") for v in b_pos]
            with dp.If(p1_load):
                dp.d.sync += [reg.eq(v) for reg, v in zip(p1_pos, b_pos, strict=True)]
                dp.d.sync += p1_sum.eq(b_sum)
        dp.d.sync += [p1_valid.eq(p1_load), p1_end.eq(b_end)]
        p1_nt, p1_dst = p1_pos[0], p1_pos[4]
        biased = Signal(acc_layout)
        for j in range(cols):
            m.d.comb += biased[j].eq(p1_sum[j] + p1_par[j].bias)
        raw_addr = Signal.like(out_wr.addr, name="raw_addr")
        raw_data = Signal.like(out_wr.data, name="raw_data")
        raw_we = Signal(name="raw_we")
        raw = [raw_addr.eq(p1_dst + p1_nt), raw_data.eq(biased), raw_we.eq(p1_valid & desc.raw)]
        if self.registered_reads:
            # The raw write from registers: the bias adder, behind the parameter memory (placed
            # far off on the 85F), ends at a register, not at the output memory. A cycle later
            # is still in time: the layer ends FIFO_LATENCY cycles after its last row.
            dp.d.sync += raw
        else:
            m.d.comb += raw
        m.d.comb += [
            out_wr.addr.eq(Mux(busy, raw_addr, host.addr)),
            out_wr.data.eq(Mux(busy, raw_data, host.wdata)),
            out_wr.en.eq(Mux(busy, raw_we, hwe[Region.OUTPUT])),
        ]
        prod_shape = signed(cfg.acc_bits + cfg.mult_bits + 1)
        if steps == 1:
            # A raw layer's end must not enter the pipeline: the run ends on it before it
            # leaves, the datapath's enable then freezes it in a stage, and the next run would
            # end its first layer on it.
            mul_in = (p1_valid & ~desc.raw, p1_end & ~desc.raw, biased, p1_par, p1_pos)
        else:
            mul_in = self._requant_steps(m, dp, start=p1_valid & ~desc.raw, load=p1_load,
                                         b_end=b_end, biased=biased, par=p1_par, pos=p1_pos,
                                         param_hold=param_hold)
        # From here on a row (step) needs only where its values go: the activation word of its
        # first channel, that channel's bank and which of its channels exist. Fewer bits
        # travel down the pipeline, and P3 adds one term less to form its addresses.
        _, pos_n0, pos_word, pos_rem, pos_dst = mul_in[4]
        pos_base = Signal.like(act_wr[0].addr, name="pos_base")   # addresses wrap alike
        pos_ok = Signal(n_req, name="pos_ok")
        m.d.comb += [pos_base.eq(pos_dst + pos_word),
                     pos_ok.eq(Cat(pos_n0 + j < desc.n for j in range(n_req)))]
        mul_in = (*mul_in[:4], [pos_base, pos_rem, pos_ok])
        if self.post_pipeline:
            mul_in = self._stage(dp, "q", mul_in)
        mul_valid, mul_end, mul_a, mul_par, mul_pos = mul_in
        p2_valid, p2_end = Signal(), Signal()
        p2_prod = Signal(data.ArrayLayout(prod_shape, n_req))
        p2_shift = Signal(data.ArrayLayout(unsigned(cfg.shift_bits), n_req))
        if self.split_multiplier > 1 or self.split_operand:
            shifts = Cat(*(p.shift for p in mul_par))
            if self.split_operand:
                # a * m = sum(a_i * m << offset_i) over slices a_i of a, unsigned but the top
                # one: each product fits one block multiplier, registered after it. Stage d
                # holds the operands once more (in the block multipliers' own input registers
                # when they are used): nothing but routing comes before a multiplier, nothing
                # but routing after its output register.
                pieces = _chunks(cfg.acc_bits, self.split_operand)
                d_a = mul_a
                d_mult = [mul_par[j].mult for j in range(n_req)]
                if not self._requant_in_dsp:
                    d_a = Signal(mul_a.shape(), name="d_a")
                    d_mult = [Signal(len(v), name=f"d_mult{j}") for j, v in enumerate(d_mult)]
                    dp.d.sync += [d_a.eq(mul_a),
                                  *(reg.eq(mul_par[j].mult) for j, reg in enumerate(d_mult))]
                mul_valid, mul_end, shifts, _, mul_pos = self._stage(
                    dp, "d", (mul_valid, mul_end, shifts, Const(0, 1), mul_pos))

                def term(j, lo, hi):
                    a = d_a[j]
                    return (a[lo:].as_signed() if hi == len(a) else a[lo:hi]) * d_mult[j]

                width = cfg.mult_bits
            else:
                # a * m = sum(a * m_i << offset_i) over slices m_i of m: short carry chains,
                # whose products are registered, then a balanced adder tree.
                pieces = _slices(cfg.mult_bits, self.split_multiplier)

                def term(j, lo, hi):
                    return mul_a[j] * mul_par[j].mult[lo:hi]

                width = cfg.acc_bits
            partial = []
            for i, (lo, hi) in enumerate(pieces):
                prod = Signal(data.ArrayLayout(signed(width + hi - lo + 1), n_req),
                              name=f"m_{i}")
                for j in range(n_req):
                    if self._requant_in_dsp:
                        self._dsp_term(m, f"rq_mul{i}_{j}", d_a[j], d_mult[j],
                                       lo=lo, hi=hi, out=prod[j], en=array_en)
                    else:
                        dp.d.sync += prod[j].eq(term(j, lo, hi))
                partial.append(prod)
            mul_valid, mul_end, shifts, _, mul_pos = self._stage(
                dp, "m", (mul_valid, mul_end, shifts, Const(0, 1), mul_pos))
            products = [_sum_tree([(prod[j], lo) for prod, (lo, _) in zip(partial, pieces,
                                                                          strict=True)])
                        for j in range(n_req)]
        else:
            products = [mul_a[j] * mul_par[j].mult for j in range(n_req)]
            shifts = Cat(*(p.shift for p in mul_par))
        p2_pos = _registered(dp, mul_pos, "p2")
        dp.d.sync += [p2_valid.eq(mul_valid), p2_end.eq(mul_end), p2_shift.eq(shifts)]
        for j in range(n_req):
            dp.d.sync += p2_prod[j].eq(products[j])
        t_shape = data.ArrayLayout(signed(cfg.in_bits + 1), n_req)
        flags = None     # (over, negative) per lane, once registered
        if self.post_pipeline:
            # The shifter's larger stages, registered with their overflow flags and the shift's
            # remaining bits; the smaller stages and the rounding incrementer in the next stage.
            # One register after the whole shifter left its flag 8 LUTs deep (iCE40, 40 MHz).
            split = cfg.shift_bits // 2
            upper = range(cfg.shift_bits - 1, split - 1, -1)
            parts = []
            for j in range(n_req):
                value, over = _shift_start(p2_prod[j], cfg.shift_bits, cfg.in_bits)
                parts.append(_shift_stages(m, value, over, p2_shift[j], sign=p2_prod[j][-1],
                                           stages=upper, out_bits=cfg.in_bits,
                                           name=f"scaled{j}"))
            s_lanes = Signal(data.ArrayLayout(data.StructLayout({
                "value": len(parts[0][0]), "over": 1, "negative": 1, "shift": split,
            }), n_req), name="s_lanes")
            for j, (value, over) in enumerate(parts):
                m.d.comb += [s_lanes[j].value.eq(value), s_lanes[j].over.eq(over),
                             s_lanes[j].negative.eq(p2_prod[j][-1]),
                             s_lanes[j].shift.eq(p2_shift[j][:split])]
            staged = self._stage(dp, "s", (p2_valid, p2_end, s_lanes, Const(0, 1), p2_pos))
            rs = Signal(t_shape, name="rs")
            t_flags = Signal(data.ArrayLayout(data.StructLayout({"over": 1, "negative": 1}),
                                              n_req), name="t_flags")
            for j in range(n_req):
                lane = staged[2][j]
                value, o = _shift_stages(m, lane.value, lane.over, lane.shift,
                                         sign=lane.negative, stages=range(split - 1, -1, -1),
                                         out_bits=cfg.in_bits, name=f"scaled{j}")
                m.d.comb += [t_flags[j].over.eq(_shift_end(value, o, lane.negative)),
                             t_flags[j].negative.eq(lane.negative)]
                # The rounded values, registered: saturation starts from a register.
                m.d.comb += rs[j].eq(_rounded(value.as_signed()))
            staged = self._stage(dp, "t", (staged[0], staged[1], rs, t_flags, staged[4]))
            flags = staged[3]
        else:
            scaled = [_scaled(m, p2_prod[j], p2_shift[j], cfg.in_bits, name=f"scaled{j}")
                      for j in range(n_req)]
        p3_valid, p3_end = Signal(), Signal()
        p3_y = Signal(data.ArrayLayout(signed(cfg.in_bits), n_req))
        p3_pos = _registered(dp, p2_pos if flags is None else staged[4], "p3")
        if flags is None:
            dp.d.sync += [p3_valid.eq(p2_valid), p3_end.eq(p2_end)]
        else:
            dp.d.sync += [p3_valid.eq(staged[0]), p3_end.eq(staged[1])]
        p3_base, cur_rem, p3_ok = p3_pos
        for j in range(n_req):
            if flags is None:
                y = _round_saturate(*scaled[j], p2_prod[j][-1], cfg.in_bits)
            else:
                y = _round_saturate(None, flags[j].over, flags[j].negative,
                                    cfg.in_bits, rounded=staged[2][j])
            dp.d.sync += p3_y[j].eq(Mux(desc.relu & (y < 0), 0, y))

        # P3: element n = n0 + j (n0: the step's first channel) goes to bank n % lanes, word
        # dst + n // lanes.
        for b in range(lanes):
            # Lane j that lands in bank b: j = (b - rem) mod lanes.
            j = Signal(range(lanes), name=f"wlane{b}")
            m.d.comb += j.eq(Mux(Const(b) >= cur_rem, b - cur_rem, b + lanes - cur_rem))
            value = Signal(signed(cfg.in_bits), name=f"wval{b}")
            with m.Switch(j):
                for jj in range(n_req):
                    with m.Case(jj):
                        m.d.comb += value.eq(p3_y[jj])
            write = p3_valid & (j < n_req) & p3_ok.bit_select(j, 1)
            addr = p3_base + (Const(b) < cur_rem)
            m.d.comb += [
                act_wr[b].addr.eq(Mux(busy, addr, host.addr)),
                act_wr[b].data.eq(Mux(busy, value,
                                      host.wdata[b * cfg.in_bits:(b + 1) * cfg.in_bits])),
                act_wr[b].en.eq(Mux(busy, write, hwe[Region.ACT])),
            ]
        # The engine's results come FIFO_LATENCY cycles before hwgen.cycles counts them (it has
        # no output FIFO here); the layer ends as counted, so the counters match the model.
        # (Registered reads pass the rows through a register first: a cycle of it.)
        m.d.comb += layer_done.eq(delay(m, Mux(desc.raw, p1_end, p3_end),
                                        FIFO_LATENCY - self.registered_reads, name="layer_done"))

        # -- host reads ----------------------------------------------------------------------------
        region_q = Signal(Region)
        m.d.sync += region_q.eq(host.region)
        if self.registered_reads:
            region_qq = Signal(Region)
            m.d.sync += [region_qq.eq(region_q), host.rvalid.eq(host_rd_q)]
            region_q = region_qq
        else:
            m.d.sync += host.rvalid.eq(host_rd)
        # Narrower words are zero-extended: the port promises zeros above a region's word.
        with m.Switch(region_q):
            for region, word in host_words.items():
                with m.Case(region):
                    m.d.comb += host.rdata.eq(word)

        # -- counters ------------------------------------------------------------------------------
        _count(m, host.cycles, busy, host.clear, "cycles")
        _count(m, host.busy_cycles, engine.issue, host.clear, "busy_cycles")
        # Every issue is rows * cols MACs: a product, not a third 64-bit counter.
        m.d.comb += host.macs.eq(macs_from_busy_cycles(host.busy_cycles, cfg))
        return m

    def _registered_acc_read(self, m, port, write, *, r_m, e_m, e_m1, e_next, e_wrap, e_step,
                             b_m, b_sum, we):
        """Return the accumulators of stage B's row (the caller starts a row's first tile from
        zero) from a read port with a register after it, and drive ``write`` from a registered
        copy of stage B's sum.

        The memory's output (5.8 ns after the clock on an ECP5 DP16KD) ends at its register,
        and that register's route into the fabric (up to 3.9 ns on the 85F) at another: the
        port is addressed three cycles before stage B, with the row ``e_m`` (stage A's row a
        cycle ahead) will hold next (``e_next``), and its word joins the sums written since
        the read a cycle before stage B, in ``base``. Stage B then adds only ``base`` or its
        own last sum (a batch of one row): one LUT before the adder. The sums the read misses
        (one not yet written, three written since, the oldest in the read's own cycle, whose
        read is skipped so that the block RAM never sees a collision) come from the write's
        register and copies of it; every select is a register, from comparisons of registers.
        (The collision test compares, a cycle early, the row to be written with each of
        ``e_next``'s three candidates (``e_m1`` is ``e_m + 1``) and chooses with
        ``e_wrap``/``e_step``.)
        """
        acc_shape = b_sum.shape()
        # Copies k of stage B's row, sum and write enable, k cycles old; copy 1 is written.
        ws = [Signal(acc_shape, name=f"acc_w{k}") for k in (1, 2, 3)]
        wm = [Signal.like(b_m, name=f"acc_w{k}_m") for k in (1, 2, 3)]
        wwe = [Signal(name=f"acc_w{k}_we") for k in (1, 2, 3)]
        m.d.sync += [ws[0].eq(b_sum), wm[0].eq(b_m), wwe[0].eq(we)]
        for k in (1, 2):
            m.d.sync += [ws[k].eq(ws[k - 1]), wm[k].eq(wm[k - 1]), wwe[k].eq(wwe[k - 1])]
        # Whether copy 1's row equals each candidate, compared a cycle early into registers
        # (e_m2 is e_m + 2, for e_m1's next value).
        e_m2 = Signal(len(e_m1) + 1, name="acc_e_m2")
        m.d.sync += e_m2.eq(e_next + 2)
        e_m1_next = Mux(e_wrap, 1, Mux(e_step, e_m2, e_m1))
        is_zero, is_m1, is_m = (Signal(name=f"acc_meets_{n}") for n in ("0", "m1", "m"))
        m.d.sync += [is_zero.eq(b_m == 0), is_m1.eq(b_m == e_m1_next), is_m.eq(b_m == e_next)]
        meets = Mux(e_wrap, is_zero, Mux(e_step, is_m1, is_m))
        m.d.comb += [write.addr.eq(wm[0]), write.data.eq(ws[0]), write.en.eq(wwe[0]),
                     port.addr.eq(e_next), port.en.eq(~(wwe[0] & meets))]
        # Cycle t: stage B holds row b_m (= r_m of t-1 = e_m of t-2). The memory's register
        # holds that row's word in cycle t-1, as read at edge t-2 (addressed in t-3), before
        # the writes of edges t-2, t-1 and t (stage B's sums of t-4, t-3 and t-2: copies 3, 2
        # and 1 in t-1) and the one of copy 1 in t (stage B's sum of t-1).
        q = Signal(acc_shape, name="acc_q", reset_less=True)
        m.d.sync += q.eq(port.data)
        # Selects for cycle t-1 (copies 1, 2, 3 or the memory), compared in t-2 (e_m = row).
        sel = [Signal(name=f"acc_sel{k}") for k in (1, 2, 3)]
        sel_q = Signal(name="acc_sel_q")
        hit = [we & (b_m == e_m), wwe[0] & (wm[0] == e_m), wwe[1] & (wm[1] == e_m)]
        m.d.sync += [sel[0].eq(hit[0]), sel[1].eq(~hit[0] & hit[1]),
                     sel[2].eq(~hit[0] & ~hit[1] & hit[2]), sel_q.eq(~(hit[0] | hit[1] | hit[2]))]
        base = Signal(acc_shape, name="acc_base")
        # The memory's word enters at the last multiplexer, one LUT before the register.
        m.d.sync += base.eq(Mux(sel_q, q, Mux(sel[0], ws[0], Mux(sel[1], ws[1], ws[2]))))
        # Stage B's own sum of the last cycle, if it was of the same row (selected in t-1).
        last = Signal(name="acc_last")
        m.d.sync += last.eq(we & (b_m == r_m))
        old = Signal(acc_shape, name="acc_old")
        m.d.comb += old.eq(Mux(last, ws[0], base))
        return old

    def _act_lane_addresses(self, m, *, advance, start_layer, a_m, last_row, before_last_row,
                            a_kt, k_end, next_desc, desc, inrow, width):
        """Return the next address of each activation bank, for reads a cycle ahead, and
        whether that word lies within its row (``inrow``: the same for the current position).

        Bank ``b`` reads word ``a_row + a_kword + (b < a_krem)``. Computed from the feeder's
        next values, that is two adders behind the decisions of the cycle (the engine's
        ``ready`` among them), the address missed the clock. Here every candidate is a
        register: the bank's address now, the address of the next row (``+ src_stride``), of
        the next reduction tile's first row (kept a tile ahead) and the layer's base, chosen by
        registered "last row" and "last tile" flags.
        """
        cfg = self.config
        rows, lanes = cfg.rows, cfg.act_lanes

        def step(r):
            # Words bank b moves on by when the tile's first element moves from r to r + rows.
            end = r + rows
            return [end // lanes + (b < end % lanes) - (b < r) for b in range(lanes)]

        steps = [step(r) for r in range(lanes)]
        m_last = Signal(name="a_m_last")       # a_m == last_row
        kt_last = Signal(name="a_kt_last")     # a_kt == k_end
        with m.If(start_layer):
            m.d.sync += [m_last.eq(last_row == 0), kt_last.eq(next_desc.k_tiles == 1)]
        with m.Elif(advance):
            m.d.sync += m_last.eq(Mux(m_last, last_row == 0, a_m == before_last_row))
            with m.If(m_last):
                m.d.sync += kt_last.eq(Mux(kt_last, k_end == 0, a_kt + 1 == k_end))
        # The next reduction tile's position and which banks' words lie within its rows, kept a
        # tile ahead like `tile_next` (computed when needed, they put an adder and a comparator
        # before the banks' read enables).
        tile_word = Signal(range(cfg.act_depth * 2), name="act_tile_word")   # as a_kword
        tile_rem = Signal(range(lanes), name="act_tile_rem")
        tile_inrow = Signal(lanes, name="act_tile_inrow")
        after_word = Signal.like(tile_word, name="act_after_word")
        after_rem = Signal.like(tile_rem, name="act_after_rem")
        _advance(m, after_word, after_rem, rows, lanes, frm=(tile_word, tile_rem), domain="comb")
        first_word, first_rem = divmod(rows, lanes)     # the second tile of a layer

        def inrows_at(word, rem, stride):
            return Cat(word + (Const(b) < rem) < stride for b in range(lanes))

        with m.If(start_layer):
            m.d.sync += [tile_word.eq(first_word), tile_rem.eq(first_rem),
                         tile_inrow.eq(inrows_at(first_word, first_rem, next_desc.src_stride))]
        with m.Elif(advance & m_last):
            with m.If(~kt_last):
                m.d.sync += [tile_word.eq(after_word), tile_rem.eq(after_rem),
                             tile_inrow.eq(inrows_at(after_word, after_rem, desc.src_stride))]
            with m.Else():
                m.d.sync += [tile_word.eq(first_word), tile_rem.eq(first_rem),
                             tile_inrow.eq(inrows_at(first_word, first_rem, desc.src_stride))]
        nexts, inrows = [], []
        for b in range(lanes):
            inrow_n = Signal(name=f"act{b}_inrow_n")
            m.d.comb += inrow_n.eq(inrow[b])
            addr = Signal(width, name=f"act{b}_addr")
            # addr + src_stride, the next row's word, kept in a register (an adder before the
            # block RAM's address otherwise, the 85F's longest path).
            row_next = Signal(width, name=f"act{b}_row_next")
            tile_next = Signal(width, name=f"act{b}_tile_next")
            nxt = Signal(width, name=f"act{b}_addr_n")
            # The words bank b moves on by from this tile's first row to the next tile's,
            # by the next tile's first element's bank (a register: tile_rem).
            delta = Signal(range(rows // lanes + 3), name=f"act{b}_delta")
            with m.Switch(tile_rem):
                for r in range(lanes):
                    with m.Case(r):
                        m.d.comb += delta.eq(steps[r][b])
            m.d.comb += nxt.eq(addr)
            # A row's first word is always in it (every stride is at least one word).
            with m.If(start_layer):
                m.d.comb += [nxt.eq(next_desc.src_base), inrow_n.eq(1)]
                m.d.sync += tile_next.eq(next_desc.src_base + steps[0][b])
            with m.Elif(advance):
                with m.If(~m_last):
                    m.d.comb += nxt.eq(row_next)
                with m.Elif(~kt_last):
                    m.d.comb += [nxt.eq(tile_next), inrow_n.eq(tile_inrow[b])]
                    m.d.sync += tile_next.eq(tile_next + delta)
                with m.Else():
                    m.d.comb += [nxt.eq(desc.src_base), inrow_n.eq(1)]
                    m.d.sync += tile_next.eq(desc.src_base + steps[0][b])
            # (`desc` takes the next descriptor at the end of `start_layer`.)
            m.d.sync += [addr.eq(nxt), row_next.eq(
                nxt + Mux(start_layer, next_desc.src_stride, desc.src_stride))]
            nexts.append(nxt)
            inrows.append(inrow_n)
        return nexts, inrows

    def _requant_steps(self, m, dp, *, start, load, b_end, biased, par, pos, param_hold):
        """Feed a held result row to ``requant_lanes`` requantizers, one step per cycle.

        Step ``c`` takes channels ``c * lanes .. (c + 1) * lanes - 1`` of the row. Returns the
        requantizers' inputs ``(valid, end, values, params, pos)``, with ``pos`` describing the
        step's first channel.
        """
        cfg = self.config
        steps, n_req, lanes = cfg.requant_steps, cfg.requant_lanes, cfg.act_lanes
        step = Signal(range(steps), name="rq_step")
        active = Signal(name="rq_active")
        end = Signal(name="rq_end")
        m.d.comb += [active.eq(start | (step != 0)),
                     # The parameter memory's output holds the row's parameters until its last
                     # step; the next requantized row is read in that step at the earliest.
                     param_hold.eq(active & (step != steps - 1))]
        with dp.If(load):
            dp.d.sync += end.eq(b_end)
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
        nt, n0, oword, orem, dst = pos
        next_n0 = Signal.like(n0, name="rq_next_n0")
        next_word = Signal.like(oword, name="rq_next_word")
        next_rem = Signal.like(orem, name="rq_next_rem")
        first = step == 0
        cur = [Signal.like(v, name=f"rq_{v.name}") for v in (n0, oword, orem)]
        m.d.comb += [cur[0].eq(Mux(first, n0, next_n0)), cur[1].eq(Mux(first, oword, next_word)),
                     cur[2].eq(Mux(first, orem, next_rem))]
        with dp.If(active):
            dp.d.sync += next_n0.eq(cur[0] + n_req)
            _advance(dp, next_word, next_rem, n_req, lanes, frm=(cur[1], cur[2]))
        return active, active & (step == steps - 1) & end, values, params, [nt, *cur, dst]

    @property
    def _requant_in_dsp(self):
        """Whether the requantization's slice products are MULT18X18Ds with their registers."""
        cfg = self.config
        return (self.dsp_packing == "mult18x18d" and self.post_pipeline
                and self.split_operand is not None and self.split_operand < _DSP_OPERAND
                and cfg.mult_bits < _DSP_OPERAND)

    @staticmethod
    def _dsp_term(m, name, a, mult, *, lo, hi, out, en):
        """Drive ``out`` with ``a[lo:hi] * mult`` (the top slice signed) from a MULT18X18D whose
        input registers are stage d and whose output register is stage m: the same two cycles
        as the fabric's registers, and no fabric path through the multiplier or the routing
        to it, wherever the placer puts it."""
        from .dsp import ECP5Mul

        top = hi == len(a)
        piece = a[lo:].as_signed() if top else a[lo:hi]
        mul = ECP5Mul(len(piece) + (not top), len(mult) + 1)
        m.submodules[name] = mul
        m.d.comb += [mul.a.eq(piece), mul.b.eq(mult), mul.ce.eq(en), out.eq(mul.p)]

    @staticmethod
    def _stage(m, prefix, stage):
        """Register ``(valid, end, values, extra, pos)``, one post-processing pipeline stage."""
        *fields, pos = stage
        regs = []
        for name, v in zip(("valid", "end", "values", "extra"), fields, strict=True):
            reg = Signal(v.shape(), name=f"{prefix}_{name}")
            m.d.sync += reg.eq(v)
            regs.append(reg)
        return (*regs, _registered(m, pos, prefix))
