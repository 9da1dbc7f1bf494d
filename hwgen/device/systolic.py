"""Processing elements and systolic arrays, without handshakes.

The arrays are fixed-latency pipelines: what enters in a cycle leaves a known number of cycles
later. :class:`hwgen.device.engine.MatmulEngine` wraps them with streams, weight-bank
bookkeeping and backpressure.

Both arrays take a weight tile as ``rows`` writes of ``cols`` weights, into one of two banks, so a
tile loads while the previous one computes. Weight lane ``j`` and activation lane ``i`` are delayed
by ``j`` and ``i`` cycles (the triangular skew), so the load wavefront follows the data wavefront
and a bank may be rewritten right after its last activation has been presented.
"""

from amaranth.hdl import (
    Cat,
    ClockSignal,
    Const,
    EnableInserter,
    Instance,
    Module,
    Mux,
    ResetSignal,
    Signal,
    signed,
)
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..config import Dataflow
from ..implementation import DspPacking, Registers
from ..latency import late_weight_rows, ws_latency
from ..memmap import has_depthwise
from .layouts import dw_lines_layout, dw_sel_layout

__all__ = ["OSProcessingElement", "OutputStationaryArray", "ProcessingElement",
           "WeightStationaryArray", "delay", "pe_module_name"]


def delay(m, value, cycles, *, name="dly"):
    """Return ``value`` delayed by ``cycles`` registers (``value`` itself for 0)."""
    for stage in range(cycles):
        reg = Signal.like(value, name=f"{name}_{stage}")
        m.d.sync += reg.eq(value)
        value = reg
    return value


def ws_pe_signature(in_bits, w_bits, acc_bits, external_mul=False, depthwise=False):
    """Signature of :class:`ProcessingElement`."""
    mul = {}
    if depthwise:
        mul = {"d_in": In(signed(in_bits)), "dw": In(1)}
    if external_mul:
        mul |= {"mul_a": Out(signed(in_bits)), "mul_w": Out(signed(w_bits)),
                "mul_p": In(signed(in_bits + w_bits))}
    return wiring.Signature({
        "a_in": In(signed(in_bits)),
        "sel_in": In(1),
        "a_out": Out(signed(in_bits)),
        "sel_out": Out(1),
        "psum_in": In(signed(acc_bits)),
        "psum_out": Out(signed(acc_bits)),
        "w_in": In(signed(w_bits)),
        "w_we": In(1),
        "w_bank": In(1),
        "en": In(1, init=1),
        **mul,
    })


def os_pe_signature(in_bits, w_bits, acc_bits):
    """Signature of :class:`OSProcessingElement`."""
    return wiring.Signature({
        "a_in": In(signed(in_bits)),
        "a_out": Out(signed(in_bits)),
        "w_in": In(signed(w_bits)),
        "w_out": Out(signed(w_bits)),
        "first_in": In(1),
        "last_in": In(1),
        "first_out": Out(1),
        "last_out": Out(1),
        "result": Out(signed(acc_bits)),
        "en": In(1, init=1),
    })


class ProcessingElement(wiring.Component):
    """Weight-stationary multiply-accumulate cell with two weight banks.

    In every cycle the cell registers the activation arriving from the left, multiplies the
    previous one by the weight of the bank it selects (registered product, so that the multiply
    maps onto a DSP block) and adds the product to the partial sum arriving from above::

        a_out  <= a_in          sel_out <= sel_in
        prod   <= a_out * bank[sel_out]
        psum_out <= psum_in + prod

    Parameters
    ----------
    in_bits, w_bits, acc_bits : int
        Signed widths of activation, weight and partial sum.
    external_mul : bool
        Leave the multiply to a pipelined multiplier outside the cell (a DSP block shared by
        two cells, see :mod:`hwgen.device.dsp`): the cell presents the activation and the weight it
        selects on ``mul_a``/``mul_w`` in the cycle the activation arrives, and adds ``mul_p``,
        which must show their product two cycles later. The cycle behaviour is unchanged.
    depthwise : bool
        While ``dw`` is high, multiply ``d_in`` instead of the activation from the left (a
        depthwise pass: each cell's own operand, see :class:`WeightStationaryArray`); it
        travels as the activation would (``a_out`` still passes ``a_in`` on).

    Members
    -------
    a_in : In(signed(in_bits))
    sel_in : In(1)
        Weight bank the activation is to be multiplied with; it travels with the activation.
    a_out : Out(signed(in_bits))
    sel_out : Out(1)
    psum_in : In(signed(acc_bits))
    psum_out : Out(signed(acc_bits))
    w_in : In(signed(w_bits))
    w_we : In(1)
        Write ``w_in`` into bank ``w_bank`` at the end of this cycle.
    w_bank : In(1)
    en : In(1, init=1)
        Clock enable: while low the cell holds every register (see :class:`WeightStationaryArray`).
    mul_a : Out(signed(in_bits))
        Only with ``external_mul``.
    mul_w : Out(signed(w_bits))
        Only with ``external_mul``.
    mul_p : In(signed(in_bits + w_bits))
        Only with ``external_mul``.
    d_in : In(signed(in_bits))
        Only with ``depthwise``.
    dw : In(1)
        Only with ``depthwise``.
    """

    def __init__(self, in_bits, w_bits, acc_bits, *, external_mul=False, depthwise=False):
        self.external_mul = external_mul
        self.depthwise = depthwise
        super().__init__(ws_pe_signature(in_bits, w_bits, acc_bits, external_mul, depthwise))

    def elaborate(self, platform):
        m = Module()
        banks = [Signal.like(self.w_in, name=f"bank{b}") for b in range(2)]
        with m.If(self.w_we):
            with m.If(self.w_bank):
                m.d.sync += banks[1].eq(self.w_in)
            with m.Else():
                m.d.sync += banks[0].eq(self.w_in)
        if self.external_mul:
            # The multiplier registers its operands one cycle earlier than `prod` would read
            # them. The bank it reads is the same: a bank is written only after the last
            # activation that uses its old contents has passed the cell (WeightStationaryArray).
            operand = Mux(self.dw, self.d_in, self.a_in) if self.depthwise else self.a_in
            m.d.comb += [self.mul_a.eq(operand),
                         self.mul_w.eq(Mux(self.sel_in, banks[1], banks[0]))]
            m.d.sync += [
                self.a_out.eq(self.a_in),
                self.sel_out.eq(self.sel_in),
                self.psum_out.eq(self.psum_in + self.mul_p),
            ]
            return EnableInserter({"sync": self.en})(m)
        prod = Signal(signed(len(self.a_in) + len(self.w_in)))
        operand = self.a_out
        if self.depthwise:
            d_q = Signal.like(self.d_in, name="d_q")
            m.d.sync += d_q.eq(self.d_in)
            operand = Mux(self.dw, d_q, self.a_out)
        m.d.sync += [
            self.a_out.eq(self.a_in),
            self.sel_out.eq(self.sel_in),
            prod.eq(operand * Mux(self.sel_out, banks[1], banks[0])),
            self.psum_out.eq(self.psum_in + prod),
        ]
        return EnableInserter({"sync": self.en})(m)


class OSProcessingElement(wiring.Component):
    """Output-stationary multiply-accumulate cell.

    Activations pass to the right and weights downwards, one cell per cycle; the cell keeps the
    sum of its products. ``first`` and ``last`` travel with the activation and mark the first and
    last step of a reduction: on ``first`` the sum restarts, on ``last`` it is copied to
    ``result``, which holds it while the next reduction runs::

        a_out <= a_in    w_out <= w_in    flags_out <= flags_in
        prod  <= a_out * w_out
        acc   <= (first ? 0 : acc) + prod          (first/last delayed with prod)
        result <= acc + prod                        when last

    Members
    -------
    a_in : In(signed(in_bits))
    a_out : Out(signed(in_bits))
    w_in : In(signed(w_bits))
    w_out : Out(signed(w_bits))
    first_in, last_in : In(1)
    first_out, last_out : Out(1)
    result : Out(signed(acc_bits))
    en : In(1, init=1)
        Clock enable, as for :class:`ProcessingElement`.
    """

    def __init__(self, in_bits, w_bits, acc_bits):
        super().__init__(os_pe_signature(in_bits, w_bits, acc_bits))

    def elaborate(self, platform):
        m = Module()
        prod = Signal(signed(len(self.a_in) + len(self.w_in)))
        first = Signal()
        last = Signal()
        acc = Signal.like(self.result)
        total = Signal.like(self.result)
        m.d.comb += total.eq(Mux(first, 0, acc) + prod)
        m.d.sync += [
            self.a_out.eq(self.a_in),
            self.w_out.eq(self.w_in),
            self.first_out.eq(self.first_in),
            self.last_out.eq(self.last_in),
            prod.eq(self.a_out * self.w_out),
            first.eq(self.first_out),
            last.eq(self.last_out),
            acc.eq(total),
        ]
        with m.If(last):
            m.d.sync += self.result.eq(total)
        return EnableInserter({"sync": self.en})(m)


def pe_module_name(config, *, external_mul=False):
    """Verilog module name of the processing element of ``config``'s array.

    ``external_mul`` names the weight-stationary cell whose multiplier is a shared DSP block;
    a design with the depthwise unit names its cells with their second operand.
    """
    return (f"hwgen_pe_{config.dataflow}_i{config.in_bits}w{config.w_bits}"
            f"a{config.acc_bits}" + ("_xmul" if external_mul else "")
            + ("_dw" if has_depthwise(config) else ""))


def pe_component(config, *, external_mul=False):
    """Return the processing element of ``config``'s array (see :func:`pe_module_name`)."""
    if config.dataflow is Dataflow.WS:
        return ProcessingElement(config.in_bits, config.w_bits, config.acc_bits,
                                 external_mul=external_mul, depthwise=has_depthwise(config))
    return OSProcessingElement(config.in_bits, config.w_bits, config.acc_bits)


class _PEInstance:
    """Stand-in for a processing element that the Verilog instantiates by module name.

    Emitting the cell once and instantiating it ``rows * cols`` times keeps generation fast
    and the Verilog readable; its ports are plain signals named like the component's.
    """

    def __init__(self, config, external_mul=False):
        self._config = config
        self._external_mul = external_mul
        self._ports = {}
        if config.dataflow is Dataflow.WS:
            sig = ws_pe_signature(config.in_bits, config.w_bits, config.acc_bits, external_mul,
                                  has_depthwise(config))
        else:
            sig = os_pe_signature(config.in_bits, config.w_bits, config.acc_bits)
        for name, member in sig.members.items():
            sig = Signal(member.shape, name=name)
            self._ports[name] = (member.flow, sig)
            setattr(self, name, sig)

    def instance(self):
        kwargs = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for name, (flow, sig) in self._ports.items():
            kwargs[("i_" if flow == In else "o_") + name] = sig
        return Instance(pe_module_name(self._config, external_mul=self._external_mul),
                        **kwargs)


def _make_pes(m, config, pe_instances, en, *, external_mul=False):
    pes = []
    for i in range(config.array_rows):
        row = []
        for j in range(config.cols):
            if pe_instances:
                pe = _PEInstance(config, external_mul)
                m.submodules[f"pe_{i}_{j}"] = pe.instance()
            else:
                pe = pe_component(config, external_mul=external_mul)
                m.submodules[f"pe_{i}_{j}"] = pe
            m.d.comb += pe.en.eq(en)
            row.append(pe)
        pes.append(row)
    return pes


def _tile_signature(config, weight_rows=1):
    pair = {}
    if weight_rows == 2:
        pair = {"w_data2": In(data.ArrayLayout(signed(config.w_bits), config.cols)),
                "w_two": In(1)}
    return {
        "w_data": In(data.ArrayLayout(signed(config.w_bits), config.cols)),
        **pair,
        "w_row": In(range(config.array_rows)),
        "w_valid": In(1),
        "w_bank": In(1),
        "o_data": Out(data.ArrayLayout(signed(config.acc_bits), config.cols)),
        "o_valid": Out(1),
        "o_last": Out(1),
        "en": In(1, init=1),
    }


def _depthwise_signature(config):
    """The depthwise operands of a weight-stationary array with the depthwise unit."""
    if not has_depthwise(config):
        return {}
    return {"dw": In(1), "d_lines": In(dw_lines_layout(config)),
            "d_sel": In(dw_sel_layout(config))}


def _skewed_weights(m, array, rows, cols, extra=0):
    """Yield ``(j, data, write_row, we, bank)`` for weight lane ``j``, delayed by ``j`` cycles
    (and ``extra`` more); with a second row a transfer (``w_data2``), ``data`` is the pair
    ``(w_data[j], w_data2[j])`` and ``we`` ``(w_valid, w_valid & w_two)``."""
    pair = getattr(array, "weight_rows", 1) == 2
    for j in range(cols):
        w = delay(m, array.w_data[j], j + extra, name=f"wskew{j}")
        if pair:
            w = (w, delay(m, array.w_data2[j], j + extra, name=f"wskew2_{j}"))
        row = delay(m, array.w_row, j + extra, name=f"wrow{j}")
        valid = delay(m, array.w_valid, j + extra, name=f"wvalid{j}")
        if pair:
            valid = (valid, valid & delay(m, array.w_two, j + extra, name=f"wtwo{j}"))
        yield j, w, row, valid, delay(m, array.w_bank, j + extra, name=f"wbank{j}")


class WeightStationaryArray(wiring.Component):
    """``rows x cols`` weight-stationary array with input skew and output deskew.

    An activation row presented in cycle ``t`` (``a_valid``, ``rows`` lanes, multiplied with bank
    ``a_sel``) leaves as a result row of ``cols`` sums in cycle ``t + LATENCY`` with ``o_valid``
    and its ``a_last`` copied to ``o_last``. Writing weight row ``r`` of bank ``b`` in cycle ``t``
    is safe when the last activation that uses the old contents of bank ``b`` was presented before
    cycle ``t``, and is seen by activations presented after ``t``.

    With the depthwise unit's ``dw_extra_rows`` the array has ``array_rows`` rows of cells: the
    extra ones below, their activations zero, so that only a depthwise pass's operands reach
    them; their weights are rows ``rows ..`` of a tile, and every sum passes them (``LATENCY``
    counts them, :func:`hwgen.latency.ws_latency`).

    Parameters
    ----------
    config : AcceleratorConfig
    pe_instances : bool
        Instantiate the cells by Verilog module name (:func:`pe_module_name`).
    dsp_packing : DspPacking, str or None
        ``None``: each cell multiplies (inferred multipliers). ``"sb_mac16"``: the cells of rows
        ``2r`` and ``2r + 1`` of a column share one iCE40 SB_MAC16 in its two-8x8 mode
        (:class:`hwgen.device.dsp.ICE40MulPair`; ``in_bits`` and ``w_bits`` at most 8), so the array
        uses ``cols * ceil(rows / 2)`` blocks. ``"mult18x18d"``: every cell gets an ECP5
        MULT18X18D with its input and output registers (:class:`hwgen.device.dsp.ECP5Mul`; widths at
        most 18). The cycle behaviour is the same.
    input_register : bool
        Every input (activation and weight rows with what travels with them) passes a register
        before the skew: ``LATENCY`` is a cycle more, and the write rule below holds with the
        same cycles (:meth:`input_stages_for`).
    weight_rows : int
        2: a weight write carries rows ``w_row`` (even) and ``w_row + 1`` (``w_data2``, written
        when ``w_two``): the even rows' cells take ``w_data``, the odd rows' ``w_data2``, so
        that no cell has a multiplexer more.

    Members
    -------
    a_data : In(ArrayLayout(signed(in_bits), rows))
    a_valid, a_last, a_sel : In(1)
    w_data : In(ArrayLayout(signed(w_bits), cols))
    w_data2 : In(ArrayLayout(signed(w_bits), cols))
    w_two : In(1)
        Only with ``weight_rows`` 2.
    w_row : In(range(rows))
    w_valid, w_bank : In(1)
    o_data : Out(ArrayLayout(signed(acc_bits), cols))
    o_valid, o_last : Out(1)
    en : In(1, init=1)
        Clock enable of every register of the array. It may be low only while nothing valid is
        inside (no activation or weight row presented within the last ``latency`` cycles);
        then nothing changes and nothing is lost. The accelerator lowers it between runs: a
        frozen array costs nothing in simulation and switches no flip-flop on the board.
    """

    def __init__(self, config, *, pe_instances=False, dsp_packing=None, input_register=False,
                 weight_rows=1):
        from .dsp import DSP_PACKINGS

        if dsp_packing not in DSP_PACKINGS:
            raise ValueError(f"dsp_packing={dsp_packing!r} is not supported; allowed: "
                             + ", ".join(repr(p) for p in DSP_PACKINGS))
        if dsp_packing is not None:
            dsp_packing = DspPacking(dsp_packing)
            limit = dsp_packing.operand_bits
            if max(config.in_bits, config.w_bits) > limit:
                raise ValueError(
                    f"dsp_packing={dsp_packing.value!r} needs in_bits and w_bits <= {limit}, "
                    f"not in_bits={config.in_bits}, w_bits={config.w_bits}")
        self.config = config
        self.pe_instances = pe_instances
        self.dsp_packing = dsp_packing
        self.input_register = input_register
        self.weight_rows = weight_rows
        super().__init__({
            "a_data": In(data.ArrayLayout(signed(config.in_bits), config.rows)),
            "a_valid": In(1),
            "a_last": In(1),
            "a_sel": In(1),
            **_tile_signature(config, weight_rows),
            **_depthwise_signature(config),
        })

    @staticmethod
    def input_stages_for(implementation):
        """Return the registers before the skew on a device built with ``implementation``: one
        from ``Registers.ARRAY`` on (a cycle more from a row's admission to its result, which
        :func:`hwgen.latency.ws_latency` and so :mod:`hwgen.cycles` count), none before."""
        return int(implementation.registers >= Registers.ARRAY)

    @property
    def latency(self):
        return ws_latency(self.config, registered=self.input_register)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        # The depthwise unit's extra rows are the last: their activations are zero (a matrix
        # pass's products there are 0), their sums the columns' way out.
        rows, cols = cfg.array_rows, cfg.cols
        extra = int(self.input_register)
        packed = self.dsp_packing is not None
        pes = _make_pes(m, cfg, self.pe_instances, self.en, external_mul=packed)
        if packed:
            self._pair_multipliers(m, pes)
        for i in range(rows):
            a = delay(m, self.a_data[i], i + extra, name=f"askew{i}") if i < cfg.rows else 0
            m.d.comb += [
                pes[i][0].a_in.eq(a),
                pes[i][0].sel_in.eq(delay(m, self.a_sel, i + extra, name=f"sel{i}")),
            ]
            for j in range(1, cols):
                m.d.comb += [pes[i][j].a_in.eq(pes[i][j - 1].a_out),
                             pes[i][j].sel_in.eq(pes[i][j - 1].sel_out)]
        if has_depthwise(cfg):
            self._depthwise_operands(m, pes, extra)
        late = late_weight_rows(cfg, self.weight_rows)
        for j, w, row, valid, bank in _skewed_weights(m, self, rows, cols, extra):
            for i in range(rows):
                if self.weight_rows == 2:   # rows 2r and 2r + 1 from one transfer
                    data_i, we_i, first = w[i % 2], valid[i % 2], i - i % 2
                else:
                    data_i, we_i, first = w, valid, i
                write = (data_i, we_i & (row == first), bank)
                if i in late:
                    write = delay(m, Cat(*write), 1, name=f"wlate{i}_{j}")
                    write = (write[:cfg.w_bits].as_signed(), write[cfg.w_bits],
                             write[cfg.w_bits + 1])
                m.d.comb += [
                    pes[i][j].w_in.eq(write[0]),
                    pes[i][j].w_we.eq(write[1]),
                    pes[i][j].w_bank.eq(write[2]),
                ]
            m.d.comb += pes[0][j].psum_in.eq(0)
            for i in range(1, rows):
                m.d.comb += pes[i][j].psum_in.eq(pes[i - 1][j].psum_out)
            m.d.comb += self.o_data[j].eq(
                delay(m, pes[rows - 1][j].psum_out, cols - 1 - j, name=f"deskew{j}"))
        m.d.comb += [
            self.o_valid.eq(delay(m, self.a_valid, self.latency, name="valid")),
            self.o_last.eq(delay(m, self.a_last, self.latency, name="last")),
        ]
        return EnableInserter({"sync": self.en})(m)

    def _depthwise_operands(self, m, pes, extra):
        """Give every cell its depthwise operand: cell ``(i, j)`` of the row presented in cycle
        ``t`` takes lane ``j`` of line ``d_sel[i]`` as presented in cycle ``t + i + j`` (the
        lines' lanes come skewed); the row's selects travel down and along as its activation
        would."""
        cfg = self.config
        lines = delay(m, self.d_lines, extra, name="dlines")
        zero = cfg.dw_lines + 1
        for i in range(cfg.array_rows):
            sel = delay(m, self.d_sel[i], i + extra, name=f"dsel{i}")
            for j in range(cfg.cols):
                if j:
                    moved = Signal.like(sel, name=f"dsel{i}_{j}")
                    m.d.sync += moved.eq(sel)
                    sel = moved
                operand = Signal(signed(cfg.in_bits), name=f"dop{i}_{j}")
                with m.Switch(sel):
                    for line in range(zero):
                        with m.Case(line):
                            m.d.comb += operand.eq(lines[line][j])
                m.d.comb += [pes[i][j].d_in.eq(operand), pes[i][j].dw.eq(self.dw)]

    def _pair_multipliers(self, m, pes):
        """Give rows ``2r`` and ``2r + 1`` of every column one shared SB_MAC16, or every cell
        its own registered MULT18X18D."""
        from .dsp import ECP5Mul, ICE40MulPair

        cfg = self.config
        if self.dsp_packing is DspPacking.MULT18X18D:
            for i in range(cfg.array_rows):
                for j in range(cfg.cols):
                    mul = ECP5Mul(cfg.in_bits, cfg.w_bits)
                    m.submodules[f"mul_{i}_{j}"] = mul
                    m.d.comb += [mul.a.eq(pes[i][j].mul_a), mul.b.eq(pes[i][j].mul_w),
                                 pes[i][j].mul_p.eq(mul.p)]
            return
        for j in range(cfg.cols):
            for i in range(0, cfg.array_rows, 2):
                pair = ICE40MulPair(cfg.in_bits, cfg.w_bits)
                m.submodules[f"mac_{i}_{j}"] = pair
                m.d.comb += [pair.a0.eq(pes[i][j].mul_a), pair.b0.eq(pes[i][j].mul_w),
                             pes[i][j].mul_p.eq(pair.p0)]
                if i + 1 < cfg.array_rows:
                    m.d.comb += [pair.a1.eq(pes[i + 1][j].mul_a),
                                 pair.b1.eq(pes[i + 1][j].mul_w),
                                 pes[i + 1][j].mul_p.eq(pair.p1)]


class OutputStationaryArray(wiring.Component):
    """``rows x cols`` output-stationary array computing blocks of up to ``rows`` result rows.

    A block of ``rows`` activation rows (``b_data``, of which ``b_count`` are real) is launched
    with ``launch`` in cycle ``T`` against weight bank ``b_sel``: the array reduces over the tile's
    ``rows`` inputs in the cells (array row ``i`` computes activation row ``i``) and emits result
    row ``i`` in cycle ``T + LATENCY + i`` with ``o_valid``; the block's last real row carries
    ``b_last`` as ``o_last``. The next launch may come ``max(rows, cols)`` cycles later. Weight
    row ``k`` of the bank is read in cycle ``T + 1 + k``, so a bank may be rewritten from cycle
    ``T + 1`` after its last block's launch.

    Members
    -------
    b_data : In(ArrayLayout(ArrayLayout(signed(in_bits), rows), rows))
    b_count : In(range(rows + 1))
    b_last, b_sel, launch : In(1)
    w_data, w_row, w_valid, w_bank :
        As for :class:`WeightStationaryArray`.
    o_data : Out(ArrayLayout(signed(acc_bits), cols))
    o_valid, o_last : Out(1)
    en : In(1, init=1)
        Clock enable, as for :class:`WeightStationaryArray`.
    """

    def __init__(self, config, *, pe_instances=False):
        self.config = config
        self.pe_instances = pe_instances
        row = data.ArrayLayout(signed(config.in_bits), config.rows)
        super().__init__({
            "b_data": In(data.ArrayLayout(row, config.rows)),
            "b_count": In(range(config.rows + 1)),
            "b_last": In(1),
            "b_sel": In(1),
            "launch": In(1),
            **_tile_signature(config),
        })

    @property
    def latency(self):
        return self.config.rows + self.config.cols + 2

    @property
    def period(self):
        return max(self.config.rows, self.config.cols)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        rows, cols = cfg.rows, cfg.cols

        # Weight banks: rows x cols registers each, one row read per step.
        bank = [[Signal(data.ArrayLayout(signed(cfg.w_bits), cols), name=f"bank{b}_row{r}")
                 for r in range(rows)] for b in range(2)]
        with m.If(self.w_valid):
            for b in range(2):
                for r in range(rows):
                    with m.If((self.w_bank == b) & (self.w_row == r)):
                        m.d.sync += bank[b][r].eq(self.w_data)

        # Block sequencer: step k = 0..rows-1 in cycles T+1 .. T+rows.
        block = Signal.like(self.b_data)
        step = Signal(range(rows + 1), init=rows)
        sel = Signal()
        running = Signal()
        m.d.comb += running.eq(step != rows)
        with m.If(self.launch):
            m.d.sync += [block.eq(self.b_data), step.eq(0), sel.eq(self.b_sel)]
        with m.Elif(running):
            m.d.sync += step.eq(step + 1)
        k = step[:max(1, (rows - 1).bit_length())] if rows > 1 else Const(0, 1)
        w_row = Signal(data.ArrayLayout(signed(cfg.w_bits), cols))
        with m.Switch(Mux(sel, rows, 0) + k):
            for b in range(2):
                for r in range(rows):
                    with m.Case(b * rows + r):
                        m.d.comb += w_row.eq(bank[b][r])
        first = running & (step == 0)
        last = running & (step == rows - 1)

        pes = _make_pes(m, cfg, self.pe_instances, self.en)
        for i in range(rows):
            a = Signal(signed(cfg.in_bits), name=f"a{i}")
            with m.Switch(k):
                for kk in range(rows):
                    with m.Case(kk):
                        m.d.comb += a.eq(block[i][kk])
            m.d.comb += [
                pes[i][0].a_in.eq(delay(m, Mux(running, a, 0), i, name=f"askew{i}")),
                pes[i][0].first_in.eq(delay(m, first, i, name=f"first{i}")),
                pes[i][0].last_in.eq(delay(m, last, i, name=f"last{i}")),
            ]
            for j in range(1, cols):
                m.d.comb += [pes[i][j].a_in.eq(pes[i][j - 1].a_out),
                             pes[i][j].first_in.eq(pes[i][j - 1].first_out),
                             pes[i][j].last_in.eq(pes[i][j - 1].last_out)]
        for j in range(cols):
            m.d.comb += pes[0][j].w_in.eq(delay(m, w_row[j], j, name=f"wskew{j}"))
            for i in range(1, rows):
                m.d.comb += pes[i][j].w_in.eq(pes[i - 1][j].w_out)

        # Drain: result row i is complete in cycle T + LATENCY + i; read it then.
        launched = delay(m, self.launch, self.latency, name="drain")
        count = delay(m, self.b_count, self.latency, name="count")
        blast = delay(m, self.b_last, self.latency, name="blast")
        out_row = Signal(range(rows + 1), init=rows)
        out_count = Signal(range(rows + 1))
        out_last = Signal()
        row_now = Mux(launched, 0, out_row)
        count_now = Mux(launched, count, out_count)
        last_now = Mux(launched, blast, out_last)
        with m.If(launched):
            m.d.sync += [out_count.eq(count), out_last.eq(blast), out_row.eq(1)]
        with m.Elif(out_row != rows):
            m.d.sync += out_row.eq(out_row + 1)
        m.d.comb += [
            self.o_valid.eq(row_now < count_now),
            self.o_last.eq(last_now & (row_now == count_now - 1)),
        ]
        with m.Switch(row_now):
            for i in range(rows):
                with m.Case(i):
                    for j in range(cols):
                        m.d.comb += self.o_data[j].eq(pes[i][j].result)
        return EnableInserter({"sync": self.en})(m)
