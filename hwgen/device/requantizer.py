"""The requantizer: multiply, round-shift, saturate and bound a few channels per cycle.

Contract (docs/arithmetic.md, "A dense layer"): ``p = acc * mult`` (``acc *
mult_neg`` for ``acc < 0`` in a leaky layer); ``r = (p + 2**(shift-1)) >> shift`` (``p`` for
``shift == 0``); ``y`` is ``r`` saturated to signed ``in_bits``, then clamped to ``[act_min,
act_max]``. The helpers below build the shift from narrow stages and an overflow flag;
:class:`Requantizer` is the pipeline an implementation asks for.
"""

import itertools

from amaranth.hdl import Cat, Const, EnableInserter, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..memmap import param_lane_layout

__all__ = ["Requantizer", "round_clamp", "round_saturate", "rounded", "scaled", "shift_end",
           "shift_stages", "shift_start"]


def scaled(m, prod, shift, out_bits, name="scaled"):
    """Return ``(t, over)`` for the requantization of ``prod`` by ``shift``.

    ``t`` is ``(2 * prod) >> shift`` (arithmetic) cut to ``out_bits + 1`` bits, and ``over``
    says that the uncut value does not fit in them: the result then saturates by ``prod``'s
    sign, whatever ``t`` holds. :func:`round_saturate` finishes the job.

    Only the bits that can reach the result are shifted, one 2:1 multiplexer stage per bit of
    ``shift``, largest first, each narrower than the one before; each stage that does not shift
    drops bits above the window, which ``over`` collects. A full-width shifter and full-width
    saturation comparators cost about twice the logic, and Yosys mapped the plain ``>>`` into
    wide multiplexers per lane depending on unrelated parts of the design. :func:`shift_start`,
    :func:`shift_stages` and :func:`shift_end` are its parts, for a pipeline that registers the
    stages' state between two of them.
    """
    value, over = shift_start(prod, len(shift), out_bits)
    value, over = shift_stages(m, value, over, shift, sign=prod[-1],
                               stages=range(len(shift) - 1, -1, -1), out_bits=out_bits,
                               name=name)
    return value.as_signed(), shift_end(value, over, prod[-1])


def shift_start(prod, shift_bits, out_bits):
    """Return ``(value, over)`` before the stages of :func:`scaled`: ``2 * prod`` cut (or
    sign-extended) to the bits the first stage needs, and whether the cut dropped any."""
    width = out_bits + 1
    value = Cat(Const(0, 1), prod)                  # 2 * prod
    sign = value[-1]
    n = width + (1 << shift_bits) - 1
    if len(value) > n:
        return value[:n], (value[n:] ^ sign.replicate(len(value) - n)).any()
    return Cat(value, sign.replicate(n - len(value))), Const(0, 1)


def shift_stages(m, value, over, shift, *, sign, stages, out_bits, name):
    """Shift ``value`` by the bits of ``shift`` that ``stages`` names, largest first (as
    :func:`scaled`), each stage narrower, and return ``(value, over)`` with the bits dropped
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


def shift_end(value, over, sign):
    """Return the overflow flag of :func:`scaled` after the last stage: fits iff every bit
    from the window's top one upwards equals the sign."""
    return over | (value[-1] ^ sign)


def round_saturate(t, over, negative, out_bits, rounded_=None):
    """Return the requantized value from :func:`scaled`'s ``(t, over)`` and ``prod < 0``.

    Contract: r = (p + 2**(shift-1)) >> shift, or p when shift == 0; that is
    ``((2p >> shift) + 1) >> 1`` for every shift, an incrementer and no decoder for
    2**(shift-1). With ``t`` in ``out_bits + 1`` bits, ``r`` lies in
    ``-2**(out_bits-1) .. 2**(out_bits-1)``, so only the top needs clamping. ``rounded_``, if
    given, is ``(t + 1) >> 1`` already (a pipeline register).
    """
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1
    r = rounded(t) if rounded_ is None else rounded_
    return Mux(over, Mux(negative, lo, hi), Mux(r > hi, hi, r))


def round_clamp(over, negative, r, low, high):
    """Return :func:`round_saturate`'s value clamped to ``[low, high]``, from the rounded ``r``
    and ``over`` and ``negative`` as there.

    For bounds inside the saturation range (``-2**(out_bits-1) <= low <= high <=
    2**(out_bits-1) - 1``) saturating and then clamping is clamping alone: the saturated ends
    clamp to ``low`` and ``high``, and ``r``'s one value above the range (``2**(out_bits-1)``)
    to ``high``. So the clamp replaces the saturation's comparison with a constant, not adds
    to it.
    """
    return Mux(over, Mux(negative, low, high), Mux(r < low, low, Mux(r > high, high, r)))


def rounded(t):
    """Return ``(t + 1) >> 1`` in ``t``'s width, which holds it (see :func:`round_saturate`)."""
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


def _stage(m, prefix, stage):
    """Register ``(valid, end, values, extra, pos)``, one pipeline stage."""
    regs = []
    for name, v in zip(("valid", "end", "values", "extra", "pos"), stage, strict=True):
        reg = Signal(v.shape(), name=f"{prefix}_{name}")
        m.d.sync += reg.eq(v)
        regs.append(reg)
    return tuple(regs)


class Requantizer(wiring.Component):
    """Requantize ``lanes`` channels per cycle: ``y = bound(sat(round(acc * mult >> shift)))``.

    A pipeline: a step (``valid``, its ``values``, ``params`` and ``pos``) enters in a cycle
    and leaves :attr:`latency` cycles later as ``o_y`` with the same ``pos``; ``end`` travels
    with it. ``leaky`` applies to the step entering: a lane whose value is negative is
    multiplied by its ``mult_neg``. ``act_min`` and ``act_max`` (a layer's, constant while its
    steps are in flight) are registered before they are compared: a change applies to the
    steps leaving from the second cycle on. A design without ``bounds`` has ``relu`` instead of
    the three (ReLU or identity, as said of the step leaving) and no ``mult_neg``.

    Parameters
    ----------
    config : AcceleratorConfig
        ``acc_bits``, ``mult_bits``, ``in_bits`` (the outputs) and ``requant_lanes`` (the lanes).
    implementation : Implementation
        ``post_pipeline``, ``split_multiplier``, ``split_operand`` (:meth:`stages_for`), and
        whether the slice products are MULT18X18Ds.
    pos_shape : shape-like
        Of ``pos``, which the requantizer only carries.

    Members
    -------
    en : In(1)
        Clock enable of every stage (low only while no step is in flight).
    valid, end : In(1)
    values : In(ArrayLayout(signed(acc_bits), lanes))
        The biased accumulators.
    params : In(ArrayLayout(param_lane_layout(config), lanes))
        Their multipliers and shifts (the biases are not used).
    pos : In(pos_shape)
    leaky : In(1)
    act_min, act_max : In(signed(in_bits))
        Inside the saturation range, ``act_min <= act_max``.
    relu : In(1)
        Instead of the three, on a design without ``bounds``.
    o_valid, o_end : Out(1)
    o_y : Out(ArrayLayout(signed(in_bits), lanes))
    o_pos : Out(pos_shape)
    """

    def __init__(self, config, implementation, *, pos_shape):
        self.config = config
        self.implementation = implementation
        lanes = config.requant_lanes
        activation = ({"leaky": In(1), "act_min": In(signed(config.in_bits)),
                       "act_max": In(signed(config.in_bits))} if config.bounds
                      else {"relu": In(1)})
        super().__init__({
            "en": In(1),
            "valid": In(1),
            "end": In(1),
            "values": In(data.ArrayLayout(signed(config.acc_bits), lanes)),
            "params": In(data.ArrayLayout(param_lane_layout(config), lanes)),
            "pos": In(pos_shape),
            **activation,
            "o_valid": Out(1),
            "o_end": Out(1),
            "o_y": Out(data.ArrayLayout(signed(config.in_bits), lanes)),
            "o_pos": Out(pos_shape),
        })

    @staticmethod
    def stages_for(implementation):
        """Return the pipeline stages ``implementation`` adds to the requantizer (a cycle
        each per chunk of a requantized layer, which :mod:`hwgen.cycles` counts): three for
        ``post_pipeline``, one for ``split_multiplier``, two for ``split_operand``."""
        impl = implementation
        return (3 * impl.post_pipeline + (impl.split_multiplier > 1)
                + 2 * (impl.split_operand is not None))

    @property
    def latency(self):
        """Cycles from a step's ``valid`` to its ``o_valid``."""
        return 2 + self.stages_for(self.implementation)

    def elaborate(self, platform):
        m = Module()
        dp = Module()
        m.submodules.datapath = EnableInserter({"sync": self.en})(dp)
        cfg, impl = self.config, self.implementation
        n_req = cfg.requant_lanes
        stage = (self.valid, self.end, self.values, self._selected(m), self.pos)
        if impl.post_pipeline:
            stage = _stage(dp, "q", stage)
        products, stage = self._products(m, dp, stage)
        valid, end, _, shifts, pos = stage
        p2_valid, p2_end = Signal(name="p2_valid"), Signal(name="p2_end")
        p2_pos = Signal.like(self.pos, name="p2_pos")
        p2_prod = Signal(data.ArrayLayout(signed(cfg.acc_bits + cfg.mult_bits + 1), n_req))
        p2_shift = Signal(data.ArrayLayout(unsigned(cfg.shift_bits), n_req))
        dp.d.sync += [p2_valid.eq(valid), p2_end.eq(end), p2_shift.eq(shifts), p2_pos.eq(pos)]
        for j in range(n_req):
            dp.d.sync += p2_prod[j].eq(products[j])
        stage = (p2_valid, p2_end, p2_prod, p2_shift, p2_pos)
        if not cfg.bounds:
            ys = self._shift_round_saturate(m, dp, stage, None, None)
            for j in range(n_req):
                dp.d.sync += self.o_y[j].eq(Mux(self.relu & (ys[j] < 0), 0, ys[j]))
            return m
        # The bounds from registers next to the comparators, not from the descriptor.
        low = Signal.like(self.act_min, name="bound_low")
        high = Signal.like(self.act_max, name="bound_high")
        m.d.sync += [low.eq(self.act_min), high.eq(self.act_max)]
        ys = self._shift_round_saturate(m, dp, stage, low, high)
        for j in range(n_req):
            dp.d.sync += self.o_y[j].eq(ys[j])
        return m

    def _selected(self, m):
        """Return each lane's multiplier (``mult_neg`` for a negative value of a leaky
        layer) and shift: chosen before the first register that holds the multiplier's
        operand (stage q, or the product's register), so that no multiplexer comes between
        a register and a multiplier."""
        cfg = self.config
        sel = Signal(data.ArrayLayout(data.StructLayout({
            "mult": unsigned(cfg.mult_bits), "shift": unsigned(cfg.shift_bits),
        }), cfg.requant_lanes), name="rq_sel")
        for j in range(cfg.requant_lanes):
            par = self.params[j]
            mult = par.mult
            if cfg.bounds:
                mult = Mux(self.leaky & self.values[j][-1], par.mult_neg, par.mult)
            m.d.comb += [sel[j].mult.eq(mult), sel[j].shift.eq(par.shift)]
        return sel

    def _products(self, m, dp, stage):
        """Return each lane's ``value * mult`` and the stage that goes with them, the shifts
        in its ``extra``: products whole (in the next stage's register), or from slices of the
        multiplier or of the operand, registered, then added."""
        cfg, impl = self.config, self.implementation
        n_req = cfg.requant_lanes
        valid, end, values, params, pos = stage
        shifts = Cat(*(p.shift for p in params))
        if impl.split_multiplier == 1 and impl.split_operand is None:
            return ([values[j] * params[j].mult for j in range(n_req)],
                    (valid, end, values, shifts, pos))
        in_dsp = impl.requant_in_dsp(cfg)
        if impl.split_operand:
            # a * m = sum(a_i * m << offset_i) over slices a_i of a, unsigned but the top
            # one: each product fits one block multiplier, registered after it. Stage d
            # holds the operands once more (in the block multipliers' own input registers
            # when they are used): nothing but routing comes before a multiplier, nothing
            # but routing after its output register.
            pieces = _chunks(cfg.acc_bits, impl.split_operand)
            d_a = values
            d_mult = [params[j].mult for j in range(n_req)]
            if not in_dsp:
                d_a = Signal(values.shape(), name="d_a")
                d_mult = [Signal(len(v), name=f"d_mult{j}") for j, v in enumerate(d_mult)]
                dp.d.sync += [d_a.eq(values),
                              *(reg.eq(params[j].mult) for j, reg in enumerate(d_mult))]
            valid, end, shifts, _, pos = _stage(dp, "d", (valid, end, shifts, Const(0, 1), pos))

            def term(j, lo, hi):
                a = d_a[j]
                return (a[lo:].as_signed() if hi == len(a) else a[lo:hi]) * d_mult[j]

            width = cfg.mult_bits
        else:
            # a * m = sum(a * m_i << offset_i) over slices m_i of m: short carry chains,
            # whose products are registered, then a balanced adder tree.
            pieces = _slices(cfg.mult_bits, impl.split_multiplier)

            def term(j, lo, hi):
                return values[j] * params[j].mult[lo:hi]

            width = cfg.acc_bits
        partial = []
        for i, (lo, hi) in enumerate(pieces):
            prod = Signal(data.ArrayLayout(signed(width + hi - lo + 1), n_req), name=f"m_{i}")
            for j in range(n_req):
                if in_dsp:
                    self._dsp_term(m, f"rq_mul{i}_{j}", d_a[j], d_mult[j], lo=lo, hi=hi,
                                   out=prod[j])
                else:
                    dp.d.sync += prod[j].eq(term(j, lo, hi))
            partial.append(prod)
        stage = _stage(dp, "m", (valid, end, shifts, Const(0, 1), pos))
        products = [_sum_tree([(prod[j], lo) for prod, (lo, _) in zip(partial, pieces,
                                                                      strict=True)])
                    for j in range(n_req)]
        valid, end, shifts, _, pos = stage
        return products, (valid, end, None, shifts, pos)

    def _dsp_term(self, m, name, a, mult, *, lo, hi, out):
        """Drive ``out`` with ``a[lo:hi] * mult`` (the top slice signed) from a MULT18X18D whose
        input registers are stage d and whose output register is stage m: the same two cycles
        as the fabric's registers, and no fabric path through the multiplier or the routing
        to it, wherever the placer puts it."""
        from .dsp import ECP5Mul

        top = hi == len(a)
        piece = a[lo:].as_signed() if top else a[lo:hi]
        mul = ECP5Mul(len(piece) + (not top), len(mult) + 1)
        m.submodules[name] = mul
        m.d.comb += [mul.a.eq(piece), mul.b.eq(mult), mul.ce.eq(self.en), out.eq(mul.p)]

    def _shift_round_saturate(self, m, dp, stage, low, high):
        """Return each lane's value of ``stage`` (``valid, end, products, shifts, pos``),
        saturated and clamped to ``[low, high]`` (saturated only if they are None), for the
        output registers; drive ``o_valid``, ``o_end`` and ``o_pos``. With
        ``post_pipeline`` the shifter's larger stages, then its smaller ones and the rounding,
        each end at a register (stages s and t)."""
        valid, end, prod, shift, pos = stage
        cfg = self.config
        n_req, out_bits = cfg.requant_lanes, cfg.in_bits
        if not self.implementation.post_pipeline:
            dp.d.sync += [self.o_valid.eq(valid), self.o_end.eq(end), self.o_pos.eq(pos)]
            ys = []
            for j in range(n_req):
                t, over = scaled(m, prod[j], shift[j], out_bits, name=f"scaled{j}")
                ys.append(round_saturate(t, over, prod[j][-1], out_bits) if low is None else
                          round_clamp(over, prod[j][-1], rounded(t), low, high))
            return ys
        # The shifter's larger stages, registered with their overflow flags and the shift's
        # remaining bits; the smaller stages and the rounding incrementer in the next stage.
        # One register after the whole shifter left its flag 8 LUTs deep (on an iCE40).
        split = cfg.shift_bits // 2
        upper = range(cfg.shift_bits - 1, split - 1, -1)
        s_lanes = Signal(data.ArrayLayout(data.StructLayout({
            "value": out_bits + (1 << split), "over": 1, "negative": 1, "shift": split,
        }), n_req), name="s_lanes")
        for j in range(n_req):
            value, over = shift_start(prod[j], cfg.shift_bits, out_bits)
            value, over = shift_stages(m, value, over, shift[j], sign=prod[j][-1],
                                       stages=upper, out_bits=out_bits, name=f"scaled{j}")
            m.d.comb += [s_lanes[j].value.eq(value), s_lanes[j].over.eq(over),
                         s_lanes[j].negative.eq(prod[j][-1]),
                         s_lanes[j].shift.eq(shift[j][:split])]
        s_valid, s_end, s_vals, _, s_pos = _stage(dp, "s", (valid, end, s_lanes, Const(0, 1),
                                                            pos))
        rs = Signal(data.ArrayLayout(signed(out_bits + 1), n_req), name="rs")
        t_flags = Signal(data.ArrayLayout(data.StructLayout({"over": 1, "negative": 1}),
                                          n_req), name="t_flags")
        for j in range(n_req):
            lane = s_vals[j]
            value, o = shift_stages(m, lane.value, lane.over, lane.shift, sign=lane.negative,
                                    stages=range(split - 1, -1, -1), out_bits=out_bits,
                                    name=f"scaled{j}")
            m.d.comb += [t_flags[j].over.eq(shift_end(value, o, lane.negative)),
                         t_flags[j].negative.eq(lane.negative)]
            # The rounded values, registered: saturation starts from a register.
            m.d.comb += rs[j].eq(rounded(value.as_signed()))
        t_valid, t_end, t_rs, t_fl, t_pos = _stage(dp, "t", (s_valid, s_end, rs, t_flags,
                                                             s_pos))
        dp.d.sync += [self.o_valid.eq(t_valid), self.o_end.eq(t_end), self.o_pos.eq(t_pos)]
        if low is None:
            return [round_saturate(None, t_fl[j].over, t_fl[j].negative, out_bits,
                                   rounded_=t_rs[j]) for j in range(n_req)]
        return [round_clamp(t_fl[j].over, t_fl[j].negative, t_rs[j], low, high)
                for j in range(n_req)]
