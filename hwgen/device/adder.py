"""The adder: a residual ``Add`` of two tensors, as a pass of its own over the activation banks.

Contract (docs/arithmetic.md, "Residual add"): per channel ``c``,
``p = a * mult_a[c] + b * mult_b[c]``, ``r = (p + 2**(shift-1)) >> shift`` (``p`` for
``shift == 0``), saturated to signed ``in_bits``, clamped to ``[act_min, act_max]`` (or ReLU
or identity on a design without ``bounds``). The shift, rounding, saturation and clamp are the
requantizer's own functions (:mod:`hwgen.device.requantizer`).
"""

import math

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..memmap import (
    act_addr_bits,
    batch_bits,
    descriptor_layout,
    geometry_layout,
    param_lane_layout,
)
from .last_flag import LastFlag
from .requantizer import round_clamp, round_saturate, rounded, shift_end, shift_stages, shift_start
from .systolic import delay

__all__ = ["AddWalk", "Adder", "logic_product", "param_words", "sum_bits"]

#: Registers from a word's arrival (the cycle ``rd_data`` holds it) to its write: operand and
#: multiplier (x), product (m), sum (s), the shifter's larger stages (u), its smaller ones and
#: the rounding (t), the clamped word (the write).
PIPELINE = 6


def sum_bits(config):
    """Return the signed width that holds any ``a * mult_a + b * mult_b``: each product's
    magnitude is below ``2**(in_bits + mult_bits - 1)``. A shift by this many bits or more
    rounds every such sum to 0, so the adder keeps shifts up to it (a narrower shifter)."""
    return config.in_bits + config.mult_bits + 1


def logic_product(value, mult):
    """Return ``value * mult`` (``value`` signed, ``mult`` unsigned) in ``len(value) +
    len(mult)`` signed bits, as a sum of shifted copies of ``mult``, one per bit of ``value``
    (the sign bit's subtracted), added as a balanced tree: no ``$mul`` cell, so Yosys builds
    it from logic cells instead of a DSP block."""
    width = len(value) + len(mult)
    top = len(value) - 1

    def term(i):
        # mult << i when bit i is set, as a non-negative signed value.
        return Cat(Mux(value[i], mult, 0), Const(0, 1)).as_signed() << i

    # The sign bit's term is subtracted from the first term: no negation of its own.
    terms = ([term(0) - term(top), *(term(i) for i in range(1, top))] if top
             else [-term(0)])
    while len(terms) > 1:
        pairs = zip(terms[::2], terms[1::2], strict=False)   # an odd one out waits
        merged = [a + b for a, b in pairs]
        terms = merged + terms[len(merged) * 2:]
    return terms[0][:width].as_signed()


def param_words(config):
    """Return ``P``, the PARAM words that hold one parameter of a channel word's
    ``act_lanes`` channels (``cols`` lanes per PARAM word): an ADD pass reads ``2 * P`` per
    channel word, ``mult_a`` and the shift first, then ``mult_b``."""
    return math.ceil(config.act_lanes / config.cols)


class AddWalk(wiring.Component):
    """The addressing of an add pass, for the units that add two areas of the activation
    banks into a third word by word (:class:`Adder`, and bf16's
    :class:`~hwgen.device.bf16_add.BF16Adder`): the reads of the inputs' words, a channel
    word's ``param_reads`` PARAM words first, and the written words' addresses.

    Its members are :class:`Adder`'s; without ``param_reads`` it has no ``p_*`` ports.
    """

    def __init__(self, config, *, read_latency=1, param_reads=0):
        self.config = config
        self.read_latency = read_latency
        self.param_reads = param_reads
        lanes, value = config.act_lanes, signed(config.in_bits)
        addr = unsigned(act_addr_bits(config))
        params = {"p_addr": Out(range(config.param_depth)), "p_en": Out(1),
                  "p_data": In(data.ArrayLayout(param_lane_layout(config), config.cols))}
        super().__init__({
            "start": In(1), "go": In(1),
            "desc": In(descriptor_layout(config)),
            "src2_base": In(addr),
            "geom": In(geometry_layout(config)),
            "last_row": In(batch_bits(config)),
            "rd_addr": Out(addr), "rd_en": Out(1),
            "rd_data": In(data.ArrayLayout(value, lanes)),
            **(params if param_reads else {}),
            "wr_addr": Out(addr), "wr_data": Out(data.ArrayLayout(value, lanes)),
            "wr_en": Out(1),
            "done": Out(1),
        })

    def _walk(self, m):
        """Drive the reads; return the arrivals' flags ``{name: signal}``: ``param`` (a PARAM
        word arrives) with ``j`` (its index), ``word`` (an activation word arrives) with
        ``b`` (of input b), ``next`` (the channel word's last row) and ``end`` (the pass's
        last word)."""
        cfg, d, g = self.config, self.desc, self.geom
        n_par = self.param_reads
        side = max(1, cfg.act_depth.bit_length())
        active, loading, half = Signal(), Signal(), Signal()
        j = Signal(range(max(n_par, 1)), name="j")
        ox, oy = Signal(side, name="ox"), Signal(side, name="oy")
        img = Signal.like(self.last_row, name="img")
        cw = Signal.like(self.rd_addr, name="cw")        # the channel word
        off = Signal.like(self.rd_addr, name="off")      # the row's words from the area's base
        # The address's terms take their next values (`*_n`) and the address is their sum in
        # a register, and each counter's "last" flag is a register set a step early
        # (:class:`LastFlag`): the banks' address and a step's decisions leave flip-flops
        # (with registered reads on a large ECP5, the sum through the bank arbiter into every
        # bank and the comparisons with the geometry ahead of the decisions were long paths).
        cur = {"half": half, "cw": cw, "off": off}
        n = {name: Signal.like(sig, name=f"{name}_n") for name, sig in cur.items()}
        for name, sig in cur.items():
            m.d.comb += n[name].eq(sig)
            m.d.sync += sig.eq(n[name])
        flag = {name: LastFlag(m, name, bound, load=self.start) for name, bound in
                (("ox", g.ow - 1), ("oy", g.oh - 1), ("img", self.last_row),
                 ("cw", d.src_stride - 1))}
        row_last = flag["ox"].last & flag["oy"].last & flag["img"].last
        word_last = flag["cw"].last
        addr = Signal.like(self.rd_addr, name="addr")
        m.d.sync += addr.eq(Mux(n["half"], self.src2_base, d.src_base) + n["cw"] + n["off"])
        m.d.comb += [self.rd_addr.eq(addr), self.rd_en.eq(active & ~loading)]
        if n_par:
            m.d.comb += self.p_en.eq(active & loading & ~self.go)

        counters = {"ox": ox, "oy": oy, "img": img}     # cw is an address term: `n` above

        def restart(*names, at_load=False):
            for name in names:
                if name in counters:
                    m.d.sync += counters[name].eq(0)
                flag[name].reset(m, at_load=at_load)

        with m.If(self.start):
            m.d.sync += active.eq(0)
            if n_par:
                m.d.sync += [loading.eq(1), j.eq(0), self.p_addr.eq(d.p_base)]
            m.d.comb += [n[name].eq(0) for name in cur]
            restart("ox", "oy", "img", "cw", at_load=True)
        with m.Elif(self.go):
            m.d.sync += active.eq(1)
        if n_par:
            with m.Elif(active & loading):  # the channel word's parameters
                m.d.sync += [self.p_addr.eq(self.p_addr + 1), j.eq(j + 1)]
                with m.If(j == n_par - 1):
                    m.d.sync += [j.eq(0), loading.eq(0)]
        with m.Elif(active & ~half):        # input a's word, then b's
            m.d.comb += n["half"].eq(1)
        with m.Elif(active):
            m.d.comb += n["half"].eq(0)
            with m.If(~row_last):
                m.d.comb += n["off"].eq(off + d.src_stride)
                with m.If(~flag["ox"].last):
                    m.d.sync += ox.eq(ox + 1)
                    flag["ox"].step(m, ox)
                with m.Elif(~flag["oy"].last):
                    m.d.sync += oy.eq(oy + 1)
                    flag["oy"].step(m, oy)
                    restart("ox")
                with m.Else():
                    m.d.sync += img.eq(img + 1)
                    flag["img"].step(m, img)
                    restart("ox", "oy")
            with m.Else():                  # the next channel word, or the end
                if n_par:
                    m.d.sync += loading.eq(1)
                m.d.comb += [n["off"].eq(0), n["cw"].eq(cw + 1)]
                flag["cw"].step(m, cw)
                restart("ox", "oy", "img")
                with m.If(word_last):
                    m.d.sync += active.eq(0)
        # The words arrive `read_latency` cycles after their reads, with what they close.
        # `go` lasts two cycles: nothing is read in its second one.
        lat = self.read_latency
        walking = active & ~self.go
        reading = walking & ~loading
        return {
            "param": delay(m, walking & loading, lat, name="got_param"),
            "j": delay(m, j, lat, name="got_j"),
            "word": delay(m, reading, lat, name="got_word"),
            "b": delay(m, half, lat, name="got_b"),
            "next": delay(m, reading & half & row_last, lat, name="got_next"),
            "end": delay(m, reading & half & row_last & word_last, lat, name="got_end"),
        }

    def _write_addresses(self, m, t_next):
        """Count the written words' addresses: a row's stride apart, the next channel word
        from the area's base again; ``t_next`` (the channel word's last row) comes the cycle
        before its word's ``wr_en``."""
        d = self.desc
        out, nxt = self.wr_addr, Signal.like(self.wr_addr, name="wr_next")
        w_next = delay(m, t_next, 1, name="w_next")
        with m.If(self.start):
            m.d.sync += [out.eq(d.dst_base), nxt.eq(d.dst_base + 1)]
        with m.Elif(self.wr_en):
            with m.If(w_next):
                m.d.sync += [out.eq(nxt), nxt.eq(nxt + 1)]
            with m.Else():
                m.d.sync += out.eq(out + d.src_stride)


class Adder(AddWalk):
    """Add two tensors of the activation banks word by word into a third, scaled per channel.

    The walk (SPEC32 section 3): for each channel word ``cw`` in ``0 .. src_stride - 1``, the
    adder reads its ``2P`` PARAM words from ``p_base + 2P * cw`` (:func:`param_words`) into a
    register per lane (word ``j < P``, lane ``l``: bank ``j * cols + l``'s ``mult_a`` and
    ``shift``; word ``P + j``: its ``mult_b``), one a cycle; then, for each row ``r`` in
    ``0 .. R - 1`` (``R = batch * oh * ow``: the images' pixels, or the batch's rows of a pass
    over rows, whose geometry is 1x1), it reads word ``src_base + r * src_stride + cw`` (input
    ``a``) and word ``src2_base + r * src_stride + cw`` (input ``b``), one a cycle through the
    banks' one read port, and writes lane ``l``'s result to word ``dst_base + r * src_stride
    + cw``: ``src_stride * (2P + 2R)`` reads from the cycle after ``go`` ends, every lane (a
    lane past the channels has zero parameters, and writes ``clamp(0)``). Addresses wrap at
    the banks' address width.

    One multiplier per lane serves both reads: the read port delivers one word a cycle, so
    a second multiplier would idle every other cycle. Each word's multiplier and shift are
    taken with the word, so the next channel word's parameters load while the last rows of
    this one are still in the pipeline (no gap between channel words).

    Parameters
    ----------
    config : AcceleratorConfig
    read_latency : int
        Cycles from a read's address to its word, of the banks and of PARAM alike (1, or 2 with
        registered reads).
    logic_products : bool
        Build each lane's multiplier from logic cells (:func:`logic_product`) instead of
        leaving it to synthesis, which maps it onto a DSP block: for designs whose array
        takes most of the chip's DSP blocks. Same results, same cycles.

    Members
    -------
    start : In(1)
        An ADD pass is loaded (``desc``, ``geom``, ``src2_base``, ``last_row`` are valid from
        here on).
    go : In(1)
        Start reading (the cycle after ``start`` at the earliest; two cycles, PRIME and PRIME2).
    desc : In(descriptor_layout(config))
    src2_base : In(unsigned(act_addr_bits))
        The second input's first word (the descriptor's ``src2_base``).
    geom : In(geometry_layout(config))
    last_row : In(batch_bits(config))
    rd_addr : Out(unsigned(act_addr_bits))
    rd_en : Out(1)
        Every bank reads this word.
    rd_data : In(ArrayLayout(signed(in_bits), act_lanes))
    p_addr : Out(range(param_depth))
    p_en : Out(1)
        A PARAM read.
    p_data : In(ArrayLayout(param_lane_layout(config), cols))
    wr_addr : Out(unsigned(act_addr_bits))
    wr_data : Out(ArrayLayout(signed(in_bits), act_lanes))
    wr_en : Out(1)
        Every bank writes its lane of the word.
    done : Out(1)
        The pass's last word is written (with its ``wr_en``), :data:`PIPELINE` cycles after
        the last read's word arrives.
    """

    def __init__(self, config, *, read_latency=1, logic_products=False):
        self.logic_products = logic_products
        super().__init__(config, read_latency=read_latency,
                         param_reads=2 * param_words(config))

    def elaborate(self, platform):
        m = Module()
        walk = self._walk(m)
        params = self._params(m, walk)
        self._finish(m, self._sum(m, walk, params))
        return m

    def _params(self, m, walk):
        """Load each lane's ``mult_a``, ``mult_b`` and ``shift`` from the PARAM words as they
        arrive; return them ``(mult_a, mult_b, shift)``, one signal per lane each."""
        cfg = self.config
        n_words, top = param_words(cfg), sum_bits(cfg)
        mult_a, mult_b, shift = [], [], []
        for lane in range(cfg.act_lanes):
            word, col = divmod(lane, cfg.cols)
            ma = Signal(cfg.mult_bits, name=f"mult_a{lane}")
            mb = Signal(cfg.mult_bits, name=f"mult_b{lane}")
            sh = Signal(range(top + 1), name=f"shift{lane}")
            par = self.p_data[col]
            with m.If(walk["param"] & (walk["j"] == word)):
                m.d.sync += [ma.eq(par.mult), sh.eq(Mux(par.shift > top, top, par.shift))]
            with m.If(walk["param"] & (walk["j"] == n_words + word)):
                m.d.sync += mb.eq(par.mult)
            mult_a.append(ma)
            mult_b.append(mb)
            shift.append(sh)
        return mult_a, mult_b, shift

    def _sum(self, m, walk, params):
        """Multiply each word by its lane's multiplier (a's or b's: one multiplier, two
        uses) and add a's product to b's; return the sum stage ``(valid, end, next, sums,
        shifts)``: valid the cycle after b's product."""
        cfg = self.config
        lanes, n_sum = cfg.act_lanes, sum_bits(cfg)
        mult_a, mult_b, shift = params
        # Stage x: the operand and its multiplier, chosen before the register.
        x_val = Signal.like(self.rd_data, name="x_val")
        x_mult = Signal(data.ArrayLayout(unsigned(cfg.mult_bits), lanes), name="x_mult")
        x_shift = Signal(data.ArrayLayout(len(shift[0]), lanes), name="x_shift")
        b = walk["b"]
        for lane in range(lanes):
            m.d.sync += [x_val[lane].eq(self.rd_data[lane]),
                         x_mult[lane].eq(Mux(b, mult_b[lane], mult_a[lane])),
                         x_shift[lane].eq(shift[lane])]
        x_flags = [delay(m, walk[k], 1, name=f"x_{k}") for k in ("word", "b", "next", "end")]
        # Stage m: the products.
        m_prod = Signal(data.ArrayLayout(signed(n_sum - 1), lanes), name="m_prod")
        m_shift = Signal.like(x_shift, name="m_shift")
        for lane in range(lanes):
            prod = (logic_product(x_val[lane], x_mult[lane]) if self.logic_products
                    else x_val[lane] * x_mult[lane])
            m.d.sync += [m_prod[lane].eq(prod),
                         m_shift[lane].eq(x_shift[lane])]
        m_word, m_b, m_next, m_end = (delay(m, f, 1, name=f"m_{k}") for f, k in
                                      zip(x_flags, ("word", "b", "next", "end"), strict=True))
        # Stage s: a's product waits in `held`; b's is added to it.
        held = Signal.like(m_prod, name="held")
        s_sum = Signal(data.ArrayLayout(signed(n_sum), lanes), name="s_sum")
        s_shift = Signal.like(x_shift, name="s_shift")
        with m.If(m_word & ~m_b):
            m.d.sync += held.eq(m_prod)
        for lane in range(lanes):
            m.d.sync += [s_sum[lane].eq(held[lane] + m_prod[lane]),
                         s_shift[lane].eq(m_shift[lane])]
        s_valid = delay(m, m_word & m_b, 1, name="s_valid")
        s_end = delay(m, m_end, 1, name="s_end")
        s_next = delay(m, m_next, 1, name="s_next")
        return s_valid, s_end, s_next, s_sum, s_shift

    def _finish(self, m, stage):
        """Round-shift, saturate and bound the sums (the shifter's larger stages, then its
        smaller ones and the rounding, each ending at a register, as the requantizer's
        pipelined form), write them and count the written words' addresses."""
        cfg, d = self.config, self.desc
        valid, end, next_, sums, shifts = stage
        lanes, out_bits = cfg.act_lanes, cfg.in_bits
        shift_bits = len(shifts[0])
        split = shift_bits // 2
        u_lanes = Signal(data.ArrayLayout(data.StructLayout({
            "value": out_bits + (1 << split), "over": 1, "negative": 1, "shift": split,
        }), lanes), name="u_lanes")
        for lane in range(lanes):
            prod, sh = sums[lane], shifts[lane]
            value, over = shift_start(prod, shift_bits, out_bits)
            value, over = shift_stages(m, value, over, sh, sign=prod[-1],
                                       stages=range(shift_bits - 1, split - 1, -1),
                                       out_bits=out_bits, name=f"add{lane}")
            m.d.sync += [u_lanes[lane].value.eq(value), u_lanes[lane].over.eq(over),
                         u_lanes[lane].negative.eq(prod[-1]),
                         u_lanes[lane].shift.eq(sh[:split])]
        t_rs = Signal(data.ArrayLayout(signed(out_bits + 1), lanes), name="t_rs")
        t_flags = Signal(data.ArrayLayout(data.StructLayout({"over": 1, "negative": 1}),
                                          lanes), name="t_flags")
        for lane in range(lanes):
            u = u_lanes[lane]
            value, over = shift_stages(m, u.value, u.over, u.shift, sign=u.negative,
                                       stages=range(split - 1, -1, -1), out_bits=out_bits,
                                       name=f"add{lane}")
            m.d.sync += [t_rs[lane].eq(rounded(value.as_signed())),
                         t_flags[lane].over.eq(shift_end(value, over, u.negative)),
                         t_flags[lane].negative.eq(u.negative)]
        t_valid, t_end, t_next = (delay(m, f, 2, name=f"t_{k}") for f, k in
                                  zip((valid, end, next_), ("valid", "end", "next"), strict=True))
        if cfg.bounds:
            # The bounds from registers next to the comparators, not from the descriptor.
            low = Signal(signed(out_bits), name="bound_low")
            high = Signal(signed(out_bits), name="bound_high")
            m.d.sync += [low.eq(d.act_min), high.eq(d.act_max)]
        for lane in range(lanes):
            fl = t_flags[lane]
            if cfg.bounds:
                y = round_clamp(fl.over, fl.negative, t_rs[lane], low, high)
            else:
                y = round_saturate(None, fl.over, fl.negative, out_bits, rounded_=t_rs[lane])
                y = Mux(d.relu & (y < 0), 0, y)
            m.d.sync += self.wr_data[lane].eq(y)
        m.d.sync += [self.wr_en.eq(t_valid), self.done.eq(t_end)]
        self._write_addresses(m, t_next)
