"""The bf16 device's accumulator bank: the fp32 accumulators of each row of a chunk in block
RAM, ``acc = fl32(acc + s)`` tile after tile from the bias (docs/arithmetic.md, "bfloat16")."""

from amaranth.hdl import Assert, Cat, Module, Mux, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from ..memattrs import NO_COLLISION_ATTRS
from .float_formats import FP32
from .fp32_adder import FP32Adder
from .systolic import delay

__all__ = ["BF16AccumulatorBank", "bf16_acc_out_layout", "bf16_acc_row_layout"]


def _count(name, value):
    """Refuse ``value`` unless it is an int >= 1, naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"BF16AccumulatorBank: {name}={value!r}; allowed: an int >= 1")


def bf16_acc_row_layout(cols, depth):
    """A row of tile sums into :class:`BF16AccumulatorBank`: its row ``m`` of the chunk,
    whether its tile is the row's ``first`` and ``final`` reduction tile, the ``cols`` fp32
    tile sums and the output tile's fp32 ``bias`` (read only with ``first``)."""
    return data.StructLayout({"m": range(depth), "first": 1, "final": 1,
                              "sums": data.ArrayLayout(FP32, cols),
                              "bias": data.ArrayLayout(FP32, cols)})


def bf16_acc_out_layout(cols, depth):
    """A finished row out of :class:`BF16AccumulatorBank`: its row ``m`` and its ``cols``
    fp32 accumulators."""
    return data.StructLayout({"m": range(depth), "sums": data.ArrayLayout(FP32, cols)})


class BF16AccumulatorBank(wiring.Component):
    """Accumulate each row's tile sums in block RAM, in the order of the contract.

    The bf16 array gives, for each chunk of a layer's output pixels, each output tile and each
    reduction tile, a row of ``cols`` tile sums per activation row ``m`` of the chunk. For each
    row and column the bank keeps the contract's accumulator
    (:func:`hwgen.nn.bf16.bf16_matmul`): a row's ``first`` tile gives ``acc = fl32(bias + s)``,
    each later tile ``acc = fl32(acc + s)``, every addition an
    :class:`~hwgen.device.fp32_adder.FP32Adder` (one per column; the zero rule and the
    canonical NaN included). After the row's ``final`` tile the accumulators leave on
    ``o_row`` with ``m`` instead of being written back. A tile may be both ``first`` and
    ``final`` (one reduction tile).

    The pipeline: the row enters (the memory is addressed with ``m`` unless the tile is
    ``first``); a cycle later the memory's word (or the bias) is registered beside the row's
    sums, so that the block RAM's slow output drives a register, not the adders' alignment
    (on the ECP5 that path set the bf16 device's clock: 39 MHz); a cycle after that both enter
    the adders; :attr:`add_latency` cycles later the sums are written back, or leave. So the
    output follows its input by :attr:`latency` cycles.

    The read-modify-write rule. A row's tile reads what its previous tile wrote, and that
    write lands ``add_latency + 2`` cycles after the previous tile entered. The bank does not
    forward sums: a sum cannot be forwarded before the adders give it, so forwarding would
    save one cycle of the interval only, for a ``cols x 32``-bit
    multiplexer and a comparator before the adders; without it no read meets a write of its
    own row, and the memory has no collision to resolve. Instead the producer must meet the
    row rule: a tile of row ``m`` that is not ``first`` enters :attr:`row_interval`
    (``add_latency + 3``) cycles or more after the previous tile of row ``m``. A ``first``
    tile reads nothing, and a ``final`` one writes nothing, so the next output tile or chunk
    may follow a chunk's last row at once.

    The cost of a chunk (:meth:`chunk_cycles`): ``M`` rows (``M <= depth``) delivered one a
    cycle, tile after tile, need ``max(M, row_interval)`` cycles per tile: a tile of fewer
    than :attr:`row_interval` rows is followed by ``row_interval - M`` bubbles before the
    chunk's next tile. Its ``K`` tiles take ``(K - 1) * max(M, row_interval) + M`` cycles, its
    last row leaving :attr:`latency` cycles after it entered.

    The flows are plain valid signals, not :mod:`amaranth.lib.stream` streams: neither end
    may stall (as the int8 bank's always-ready streams), and an always-ready stream's
    constant ``ready`` could not be a port of the bank built alone (as for measurements).

    Parameters
    ----------
    cols : int
        The columns (``>= 1``): the sums of a row.
    depth : int
        The memory's rows (``>= 1``): a chunk's most rows.
    add_latency : int
        The adders' latency (:class:`~hwgen.device.fp32_adder.FP32Adder`, 0..4).
    checked : bool
        Add a simulation check (an :class:`~amaranth.hdl.Assert`) that every row meets the row
        rule: the simulator raises ``AssertionError`` at the first row that does not. For
        tests; leave it off in a design.

    Members
    -------
    i_valid : In(1)
        A row of tile sums comes on ``i_row``; the bank takes it in that cycle (it never
        stalls: the array's rows cannot wait).
    i_row : In(bf16_acc_row_layout(cols, depth))
        The row. ``bias`` is read with ``first`` only: it may change from one output tile to
        the next.
    o_valid : Out(1)
        A finished row leaves on ``o_row``: the consumer takes it in that cycle.
    o_row : Out(bf16_acc_out_layout(cols, depth))

    Attributes
    ----------
    memory : amaranth.lib.memory.Memory
        The accumulators, ``depth`` words of ``cols`` fp32 values, set by ``elaborate``.
    """

    def __init__(self, cols, depth, *, add_latency=4, checked=False):
        _count("cols", cols)
        _count("depth", depth)
        self._cols, self._depth, self._checked = cols, depth, checked
        # Made here, so that their own check refuses a bad latency at construction.
        self._adders = [FP32Adder(add_latency) for _ in range(cols)]
        self.memory = None
        super().__init__({
            "i_valid": In(1), "i_row": In(bf16_acc_row_layout(cols, depth)),
            "o_valid": Out(1), "o_row": Out(bf16_acc_out_layout(cols, depth)),
        })

    @property
    def cols(self):
        return self._cols

    @property
    def depth(self):
        return self._depth

    @property
    def add_latency(self):
        """The adders' latency."""
        return self._adders[0].latency

    #: Cycles from a row's input to its operands at the adders: the memory's read, then the
    #: register of its word (or the bias).
    OPERAND_STAGES = 2

    @property
    def latency(self):
        """Cycles from a ``final`` row's input to its accumulators on ``o_row``."""
        return self.add_latency + self.OPERAND_STAGES

    @property
    def row_interval(self):
        """The fewest cycles from a tile of a row to the row's next tile (not ``first``): the
        previous write lands :attr:`latency` cycles after its tile, the read is addressed a
        cycle after that."""
        return self.latency + 1

    def chunk_cycles(self, rows, tiles):
        """Input cycles of a chunk of ``rows`` rows and ``tiles`` reduction tiles delivered
        one row a cycle, each tile but the last padded to :attr:`row_interval` cycles."""
        return (tiles - 1) * max(rows, self.row_interval) + rows

    def elaborate(self, platform):
        m = Module()
        cols = self._cols
        row = self.i_row
        self.memory = mem = memory.Memory(shape=data.ArrayLayout(FP32, cols),
                                          depth=self._depth, init=[], attrs=NO_COLLISION_ATTRS)
        m.submodules.acc = mem
        wr = mem.write_port()
        # Not transparent: under the row rule no read meets a write of its own row.
        rd = mem.read_port(transparent_for=())
        m.d.comb += [rd.addr.eq(row.m), rd.en.eq(self.i_valid & ~row.first)]

        # Stage 1, beside the memory's read: the row's sums, bias and flags.
        s_first = Signal(name="s1_first")
        s_sums = Signal.like(row.sums, name="s1_sums")
        s_bias = Signal.like(row.bias, name="s1_bias")
        m.d.sync += [s_first.eq(row.first), s_sums.eq(row.sums), s_bias.eq(row.bias)]
        # Stage 2: the adders' operands in registers, the memory's word or the bias first.
        operand = Signal(data.ArrayLayout(FP32, cols), name="s2_operand")
        o_sums = Signal.like(row.sums, name="s2_sums")
        m.d.sync += o_sums.eq(s_sums)
        total = Signal(data.ArrayLayout(FP32, cols), name="acc_sum")
        for c, adder in enumerate(self._adders):
            m.submodules[f"add{c}"] = adder
            m.d.sync += operand[c].eq(self._start(s_first, s_bias[c], rd.data[c]))
            m.d.comb += [adder.a.eq(operand[c]), adder.b.eq(o_sums[c]), total[c].eq(adder.s)]

        # The flags and row travel beside the operand stages and the adders.
        lat = self.latency
        a_valid = delay(m, self.i_valid, lat, name="add_valid")
        a_final = delay(m, row.final, lat, name="add_final")
        a_m = delay(m, row.m, lat, name="add_m")
        m.d.comb += [wr.addr.eq(a_m), wr.data.eq(total), wr.en.eq(a_valid & ~a_final),
                     self.o_valid.eq(a_valid & a_final),
                     self.o_row.m.eq(a_m), self.o_row.sums.eq(total)]
        if self._checked:
            self._check_rule(m)
        return m

    @staticmethod
    def _start(first, bias, old):
        """The adder's first operand: the bias for a row's first tile, else the memory's
        word."""
        return Mux(first, bias.as_value(), old.as_value())

    def _check_rule(self, m):
        """Assert the row rule: no row that is not ``first`` comes within
        ``row_interval - 1`` cycles of a row with the same ``m`` (``row_interval >= 2``)."""
        valid, row = self.i_valid, self.i_row
        past_valid, past_m, hits = valid, row.m, []
        for k in range(1, self.row_interval):
            # The row of k cycles ago.
            past_valid = delay(m, past_valid, 1, name=f"chk_valid{k}")
            past_m = delay(m, past_m, 1, name=f"chk_m{k}")
            hits.append(past_valid & (past_m == row.m))
        clash = valid & ~row.first & Cat(*hits).any()
        m.d.sync += Assert(~clash, "BF16AccumulatorBank: a row's tile came within "
                           "row_interval cycles of the row's previous tile")
