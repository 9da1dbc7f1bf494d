"""The bf16 accumulator bank against the contract's order of the sums
(:func:`hwgen.nn.bf16.bf16_matmul`): chunks of rows whose tile sums are the reference's own
(each tile of real bf16 products summed from +0.0), delivered at the tightest schedule the
row rule allows or with bubbles, several chunks back to back; every finished row bit for bit
and on time; the row rule's check and seeded bugs that the checks must catch."""

import ml_dtypes
import numpy as np
import pytest
from amaranth.hdl import Const, Mux
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st
from support.float_units import (
    bf16_bits_strategy,
    bf16_moderate,
    bf16_special,
    bf16_tiny,
    fp32_bias_strategy,
)

from hwgen.device.bf16_accumulators import BF16AccumulatorBank
from hwgen.generate import emit_verilog
from hwgen.nn.bf16 import bf16_matmul

# Mostly moderate values, now and then any pattern, tiny ones, zeros, Inf and NaN.
values = st.one_of(bf16_moderate, bf16_moderate, bf16_moderate, bf16_moderate, bf16_tiny,
                   bf16_special, bf16_bits_strategy)
biases = fp32_bias_strategy


def bf16_values(bits):
    """bf16 bit patterns as an ml_dtypes array."""
    return np.asarray(bits, dtype=np.uint16).view(ml_dtypes.bfloat16)


class Chunk:
    """A chunk's work for one output tile: ``x`` (``M x k`` bf16 bits), ``w`` (``k x cols``),
    ``bias`` (``cols`` fp32 bits), cut into tiles of ``rows`` consecutive ``k``.

    ``sums[kt]`` is the tile sums the array gives for tile ``kt`` (``M x cols`` uint32): the
    reference's sum of the tile's products alone (its accumulator from +0.0, which is ``s``
    itself: ``s`` is never -0.0 or subnormal); ``want`` the reference's accumulators of the
    whole chunk."""

    def __init__(self, x, w, bias, rows):
        x, w = bf16_values(x), bf16_values(w)
        self.m_rows, k_total = x.shape
        self.tiles = -(-k_total // rows)
        self.bias = [int(b) for b in bias]
        self.sums = [bf16_matmul(x[:, k:k + rows], w[k:k + rows], 0.0, rows).view(np.uint32)
                     for k in range(0, k_total, rows)]
        fp32_bias = np.array(bias, dtype=np.uint32).view(np.float32)
        self.want = bf16_matmul(x, w, fp32_bias, rows).view(np.uint32)


def schedule(bank, chunks, gaps=None, interval=None):
    """Return ``{cycle: (chunk, kt, m)}``: the chunks' rows in order, tile after tile, each as
    early as the row rule allows (``interval``, ``bank.row_interval`` unless given), and the
    cycle after the last. ``gaps`` (an iterator of ints), if given, adds bubbles before each
    row."""
    interval = bank.row_interval if interval is None else interval
    entries, cycle = {}, 0
    for chunk in chunks:
        last = {}
        for kt in range(chunk.tiles):
            for m in range(chunk.m_rows):
                cycle += next(gaps) if gaps is not None else 0
                if kt:
                    cycle = max(cycle, last[m] + interval)
                entries[cycle] = (chunk, kt, m)
                last[m] = cycle
                cycle += 1
    return entries, cycle


def check_rule(bank, entries):
    """The test's own check of the row rule on a schedule: each tile of a row after its first
    comes ``row_interval`` cycles or more after the row's previous tile."""
    last = {}
    for cycle, (chunk, kt, m) in sorted(entries.items()):
        if kt:
            assert cycle - last[id(chunk), m] >= bank.row_interval, (cycle, kt, m)
        last[id(chunk), m] = cycle


def run_bank(bank, entries, end, seed=0):
    """Drive ``entries`` into ``bank``; return the finished rows as ``(cycle, m, sums)``.
    The cycles without a row, and the bias of rows that are not a first tile, carry noise."""
    noise = np.random.default_rng(seed)
    got = []
    row, out, cols = bank.i_row, bank.o_row, bank.cols

    async def bench(ctx):
        for cycle in range(end + bank.latency + 1):
            chunk, kt, m = entries.get(cycle, (None, 0, 0))
            first, final = (kt == 0, kt == chunk.tiles - 1) if chunk else noise.integers(2, size=2)
            ctx.set(bank.i_valid, chunk is not None)
            ctx.set(row.m, m if chunk else int(noise.integers(bank.depth)))
            ctx.set(row.first, int(first))
            ctx.set(row.final, int(final))
            for c in range(cols):
                ctx.set(row.sums[c].as_value(),
                        int(chunk.sums[kt][m, c]) if chunk else int(noise.integers(1 << 32)))
                ctx.set(row.bias[c].as_value(),
                        chunk.bias[c] if chunk and first else int(noise.integers(1 << 32)))
            if ctx.get(bank.o_valid):
                got.append((cycle, ctx.get(out.m),
                            [ctx.get(out.sums[c].as_value()) for c in range(cols)]))
            await ctx.tick()

    sim = Simulator(bank)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


def expected(bank, entries):
    """The reference's finished rows, each ``latency`` cycles after its final tile."""
    return [(cycle + bank.latency, m, [int(v) for v in chunk.want[m]])
            for cycle, (chunk, kt, m) in sorted(entries.items()) if kt == chunk.tiles - 1]


def check(bank, chunks, gaps=None, seed=0):
    """Run ``chunks`` through ``bank`` at the tightest legal schedule (or with ``gaps``);
    compare every finished row, its ``m`` and its cycle with the reference, in hex."""
    entries, end = schedule(bank, chunks, gaps)
    check_rule(bank, entries)
    got = run_bank(bank, entries, end, seed)
    want = expected(bank, entries)
    assert [(t, m, [hex(v) for v in s]) for t, m, s in got] \
        == [(t, m, [hex(v) for v in s]) for t, m, s in want]
    return entries, end


# (cols, depth, add_latency, row_interval) of the banks under test.
BANKS = [(2, 8, 4, 7), (3, 4, 1, 4), (1, 12, 0, 3)]


@st.composite
def chunk_strategy(draw, cols, depth, interval):
    """A chunk of 1..depth rows (often 1 or around ``interval``), 1..4 tiles of 1..3 rows (the
    last tile now and then shorter), its values and bias."""
    m_rows = draw(st.one_of(st.integers(1, depth), st.sampled_from(
        [1, *(r for r in (interval - 1, interval, interval + 1) if 1 <= r <= depth)])))
    rows = draw(st.integers(1, 3))
    k_total = draw(st.integers(1, 4)) * rows - draw(st.integers(0, rows - 1))
    x = draw(st.lists(st.lists(values, min_size=k_total, max_size=k_total),
                      min_size=m_rows, max_size=m_rows))
    w = draw(st.lists(st.lists(values, min_size=cols, max_size=cols),
                      min_size=k_total, max_size=k_total))
    bias = draw(st.lists(biases, min_size=cols, max_size=cols))
    return Chunk(x, w, bias, rows)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), shape=st.sampled_from(BANKS), bubbles=st.booleans())
def test_random_chunks(data, shape, bubbles):
    """One to three chunks back to back, at the tightest schedule the row rule allows or with
    random bubbles: every finished row is the contract's accumulator, ``latency`` cycles
    after its final tile; the row rule's check stays quiet."""
    cols, depth, add_latency, interval = shape
    chunks = data.draw(st.lists(chunk_strategy(cols, depth, interval), min_size=1,
                                max_size=3))
    gaps = iter(data.draw(st.lists(st.integers(0, 3), min_size=400, max_size=400))) \
        if bubbles else None
    # Made after the draws: an example hypothesis drops leaves no unused component behind.
    bank = BF16AccumulatorBank(cols, depth, add_latency=add_latency, checked=True)
    assert bank.row_interval == interval
    check(bank, chunks, gaps)


ONE, MINUS_ONE, TINY = 0x3F80, 0xBF80, 0x0800     # 1.0, -1.0, 2**-111
MAX, INF, NINF, NAN = 0x7F7F, 0x7F80, 0xFF80, 0x7FC1
WEIGHTS = [[ONE, MINUS_ONE, TINY]] * 3     # the weights of each column, in each tile
# Rows of x (three tiles of one value) and a bias that exercises each: with the weights 1.0,
# -1.0 and 2**-111, column 0 accumulates x itself, column 1 -x, column 2 x scaled down.
EDGE_ROWS = [
    ([MAX, MAX, 0], [0, 0, 0]),                                 # overflow to +Inf (-Inf)
    ([INF, NINF, ONE], [0, 0, 0]),                              # Inf - Inf
    ([NAN, ONE, ONE], [0, 0, 0]),                               # a NaN payload
    ([0x0001, 0x8000, 0], [0x80000000, 0x80000000, 1]),         # zeros and subnormals
    ([0x8080, 0, 0], [0x00C00000, 0x80C00000, 0]),              # a sum below 2**-126
    ([MINUS_ONE, 0x3F81, 0xBF81], [0x3F800000, 0xBF800000, 0x3F800000]),  # cancellations
    ([NINF, ONE, ONE], [0x7F800000, 0x7F800000, 0xFF800000]),  # Inf bias
    ([0x3080] * 3, [0, 0, 0]),                                  # 2**-141: column 2 flushes
]


def edge_chunk(m_rows=None, bias=(0, 0, 0)):
    """The first ``m_rows`` edge rows (all of them by default) as a chunk of three one-row
    tiles, with ``bias``."""
    return Chunk([row for row, _ in EDGE_ROWS[:m_rows]], WEIGHTS, bias, 1)


@pytest.mark.parametrize("add_latency", [4, 1])
def test_edge_cases(add_latency):
    """Overflow to Inf, Inf - Inf, NaN payloads, zeros of either sign, subnormal values and
    sums, cancellation, an Inf bias and flushed products: chunks of 8 rows (more than
    ``row_interval`` at latency 1, more than its 7 at latency 4), one per edge row's bias,
    back to back; the reference's bits, which are the ones the edge cases expect."""
    bank = BF16AccumulatorBank(3, 8, add_latency=add_latency, checked=True)
    chunks = [edge_chunk(bias=bias) for _, bias in EDGE_ROWS]
    check(bank, chunks)
    # Row r of the chunk with row r's bias.
    want = [[int(v) for v in chunks[r].want[r]] for r in range(len(EDGE_ROWS))]
    nan = 0x7FC00000
    assert want[0][:2] == [0x7F800000, 0xFF800000]
    assert want[1] == [nan] * 3
    assert want[2] == [nan] * 3
    assert want[3] == [0, 0, 0]
    assert want[4] == [0, 0, 0]
    assert want[5] == [0, 0, 0x3F800000]
    assert want[6] == [nan, 0x7F800000, 0xFF800000]
    assert want[7][2] == 0


@pytest.mark.parametrize("m_rows", [1, 6, 7, 8])
def test_chunk_cycles(m_rows):
    """Chunks of 1 row (the hazard: each tile waits for the last), ``row_interval - 1``,
    ``row_interval`` and more rows back to back: the tightest legal schedule takes
    :meth:`~BF16AccumulatorBank.chunk_cycles` per chunk, and gives the reference's sums."""
    bank = BF16AccumulatorBank(3, 8, add_latency=4, checked=True)
    assert bank.row_interval == 7
    _, end = check(bank, [edge_chunk(m_rows), edge_chunk(m_rows, [0x3F800000] * 3)])
    assert end == 2 * bank.chunk_cycles(m_rows, 3)
    assert bank.chunk_cycles(m_rows, 3) == 2 * max(m_rows, 7) + m_rows


def test_single_tile():
    """Chunks of one reduction tile (each row ``first`` and ``final``: the bias plus the tile
    sum, nothing written), back to back with different biases, and one of two tiles."""
    bank = BF16AccumulatorBank(3, 8, add_latency=2, checked=True)
    x = [[0x3FC0, 0xC000, 0x4040], [0x3F80, 0x7F80, 0], [0xBF80, 0x3F80, 0x4000]]
    w = [[0x3F80, 0xBF80, 0x4000]] * 3
    chunks = [Chunk(x, w, [0x3F800000, 0x40000000, 0xC0400000], 3),
              Chunk(x, w, [0xC0000000, 0x7F800000, 0], 3),
              Chunk(x, w, [0, 0, 0x3F800000], 2)]
    assert [chunk.tiles for chunk in chunks] == [1, 1, 2]
    check(bank, chunks)


def test_rule_check_fires():
    """A row's tile a cycle sooner than the row rule allows trips the simulation check."""
    bank = BF16AccumulatorBank(3, 8, add_latency=2, checked=True)
    entries, end = schedule(bank, [edge_chunk(1)], interval=bank.row_interval - 1)
    with pytest.raises(AssertionError, match="row_interval"):
        run_bank(bank, entries, end)


class _NoBias(BF16AccumulatorBank):
    """Seeded bug: a row's first tile starts from +0.0, not the bias."""

    @staticmethod
    def _start(first, bias, old):
        return Mux(first, Const(0, 32), old.as_value())


class _EarlyRow(BF16AccumulatorBank):
    """Seeded bug: the row rule a cycle short (the read misses the previous tile's write)."""

    @property
    def row_interval(self):
        return self.latency


@pytest.mark.parametrize("bug", [_NoBias, _EarlyRow])
def test_seeded_bugs_caught(bug):
    """A bank with a seeded bug fails the comparison with the reference: the checks can see
    it (a chunk of two rows, whose tiles come as early as the bank's rule says)."""
    ones = Chunk([[ONE] * 3] * 2, WEIGHTS, [0x3F800000] * 3, 1)
    with pytest.raises(AssertionError):
        check(bug(3, 8, add_latency=1), [ones])


def test_verilog_deterministic():
    """The same parameters give the same Verilog, its accumulators one memory."""
    texts = [emit_verilog(BF16AccumulatorBank(2, 16, add_latency=2), "bf16_acc")
             for _ in range(2)]
    assert texts[0] == texts[1]
    assert "reg [63:0] acc [15:0]" in texts[0]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"cols": 0, "depth": 4}, r"BF16AccumulatorBank: cols=0; allowed: an int >= 1"),
    ({"cols": 2, "depth": True}, r"BF16AccumulatorBank: depth=True; allowed: an int >= 1"),
    ({"cols": 2, "depth": 4, "add_latency": 6}, r"FP32Adder: latency=6; allowed"),
])
def test_refused(refused, kwargs, match):
    """Bad shapes or latencies are refused, naming the parameter and what is allowed."""
    refused(match, lambda: BF16AccumulatorBank(**kwargs))
