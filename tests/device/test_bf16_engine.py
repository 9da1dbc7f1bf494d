"""The bf16 engine behind its streams against the contract's tile sums
(:func:`hwgen.nn.bf16.bf16_matmul` of one tile from a zero bias): tiles and batches back to
back with random gaps on the inputs and stalls on the output, every result row bit for bit
with its ``last``; the array's bank-rewrite rule checked on the array's own ports; the
throughput the class documents; seeded bugs that the checks must catch."""

import random

import ml_dtypes
import numpy as np
import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st
from support.float_units import (
    bf16_bits_strategy,
    bf16_moderate,
    bf16_special,
    bf16_tiny,
)
from support.gapped_streams import GappedSources

from hwgen.device.bf16_engine import BF16MatmulEngine
from hwgen.device.systolic import delay
from hwgen.generate import emit_verilog
from hwgen.nn.bf16 import bf16_matmul

# Mostly moderate values, now and then any pattern, tiny ones, zeros, Inf and NaN.
values = st.one_of(bf16_moderate, bf16_moderate, bf16_moderate, bf16_tiny, bf16_special,
                   bf16_bits_strategy)


def tile_sums(x, w, rows):
    """The contract's tile sums of activation rows ``x`` (``M x rows`` bf16 bits) by the tile
    ``w`` (``rows x cols``), as uint32 rows: the accumulator of one tile from +0.0."""
    xv, wv = (np.asarray(v, dtype=np.uint16).view(ml_dtypes.bfloat16) for v in (x, w))
    return [[int(v) for v in row] for row in bf16_matmul(xv, wv, 0.0, rows).view(np.uint32)]


def pack(words, bits, last=None):
    """``words`` packed lowest first, ``bits`` each, with ``last`` above them if given."""
    value = sum(int(v) << (bits * i) for i, v in enumerate(words))
    return value if last is None else value | (int(last) << (bits * len(words)))


class RuleCheck:
    """The array's bank-rewrite rule on its ports: a vector reads only a bank whose tile is
    whole, and a bank's write comes ``weight_settle`` cycles or more after the last vector
    that read its old tile."""

    def __init__(self, array):
        self.array = array
        self.written = [array.rows] * 2     # no tile yet: as if whole, never read
        self.last_use = [None] * 2

    def cycle(self, ctx, cycle):
        a = self.array
        # The vector first: a write in the same cycle lands at its end.
        if ctx.get(a.a_valid):
            bank = ctx.get(a.a_sel)
            assert self.written[bank] == a.rows, f"cycle {cycle}: bank {bank} read half written"
            self.last_use[bank] = cycle
        if ctx.get(a.w_valid):
            bank = ctx.get(a.w_bank)
            used = self.last_use[bank]
            assert used is None or cycle - used >= a.weight_settle, (
                f"cycle {cycle}: bank {bank} rewritten {cycle - used} cycles after its last "
                f"vector, weight_settle {a.weight_settle}")
            self.written[bank] = 1 if self.written[bank] == a.rows else self.written[bank] + 1


def run_engine(engine, tiles, batches, *, w_gaps=(), a_gaps=(), ready=None, seed=0,
               rule=True):
    """Stream ``tiles`` and ``batches`` (lists of activation rows) through ``engine``: item
    ``i`` of a stream waits ``gaps[i]`` idle cycles (0 past the end), ``o_result.ready`` is
    ``ready(cycle)`` (always by default), and a latency's worth more after the last row
    expected, for rows too many. Check the result stream's contract (a row offered stays
    until taken), that ``issue`` marks the activation transfers and, with ``rule``, the bank
    rule. Return the cycles of the weight and activation transfers and the result rows as
    ``(cycle, sums, last)``."""
    cols = engine.cols
    w_items = [pack(row, 16) for tile in tiles for row in tile]
    a_items = [pack(x, 16, i == len(batch) - 1) for batch in batches
               for i, x in enumerate(batch)]
    ready = ready or (lambda cycle: True)
    noise = random.Random(seed)     # payloads nobody may take carry noise
    check = RuleCheck(engine.array) if rule else None
    w_cycles, a_cycles, got, issues = [], [], [], []
    budget = 40 * (len(w_items) + len(a_items)) + 10 * engine.latency + 2000

    async def bench(ctx):
        sources = GappedSources([(engine.i_weight, w_items, w_gaps, w_cycles),
                                 (engine.i_act, a_items, a_gaps, a_cycles)])
        held, drain = None, engine.latency + 4
        for cycle in range(budget):
            if len(got) >= len(a_items):
                if drain == 0:
                    return
                drain -= 1
            sources.offer(ctx, lambda port: noise.getrandbits(len(port.payload.as_value())))
            take = ready(cycle) or len(got) >= len(a_items)
            ctx.set(engine.o_result.ready, take)
            out = engine.o_result
            valid, payload = ctx.get(out.valid), ctx.get(out.payload.as_value())
            if held is not None:
                assert valid and payload == held, f"cycle {cycle}: a stalled row changed"
            held = payload if valid and not take else None
            if valid and take:
                got.append((cycle, [(payload >> (32 * c)) & 0xFFFFFFFF for c in range(cols)],
                            payload >> (32 * cols)))
            if check:
                check.cycle(ctx, cycle)
            if ctx.get(engine.issue):
                issues.append(cycle)
            sources.advance(ctx, cycle)
            await ctx.tick()
        raise AssertionError(f"{len(got)} of {len(a_items)} rows in {budget} cycles")

    sim = Simulator(engine)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert issues == a_cycles
    return w_cycles, a_cycles, got


def check_results(engine, tiles, batches, got):
    """Every result row is the reference's tile sum of its batch's tile, in order, ``last``
    on each batch's final row; compared in hex."""
    want = [(sums, int(i == len(batch) - 1))
            for tile, batch in zip(tiles, batches, strict=True)
            for i, sums in enumerate(tile_sums(batch, tile, engine.rows))]
    assert [([hex(v) for v in sums], last) for _, sums, last in got] \
        == [([hex(v) for v in sums], last) for sums, last in want]


@st.composite
def workloads(draw):
    """An engine's shape and latencies, one to four tiles and their batches (one to seven
    rows, now and then more than the output FIFO holds), how often the inputs idle and the
    output stalls, and the seed of those gaps and stalls."""
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    mul_latency, add_latency = draw(st.integers(0, 3)), draw(st.integers(0, 4))
    count = draw(st.integers(1, 4))
    tiles = [draw(st.lists(st.lists(values, min_size=cols, max_size=cols),
                           min_size=rows, max_size=rows)) for _ in range(count)]
    batches = [draw(st.lists(st.lists(values, min_size=rows, max_size=rows), min_size=1,
                             max_size=draw(st.sampled_from([3, 7, 24]))))
               for _ in range(count)]
    rates = st.sampled_from([0.0, 0.3, 0.7])
    return ((rows, cols, mul_latency, add_latency), tiles, batches,
            (draw(rates), draw(rates), draw(rates)), draw(st.integers(0, 2 ** 16)))


@settings(max_examples=40, deadline=None)
@given(work=workloads())
def test_random_traffic(work):
    """Random shapes, latencies, tiles and batches back to back, idle cycles on the inputs
    (runs of up to 4) and stalls on the output: every result row is the contract's tile sum,
    with its ``last``; the bank rule holds."""
    (rows, cols, mul_latency, add_latency), tiles, batches, rates, seed = work
    # Made after the draws: an example hypothesis drops leaves no unused component behind.
    engine = BF16MatmulEngine(rows, cols, mul_latency=mul_latency, add_latency=add_latency)
    rng = np.random.default_rng(seed)
    w_gaps, a_gaps = ([int(g) for g in (rng.random(200) < rate) * rng.integers(1, 5, 200)]
                      for rate in rates[:2])
    stalls = rng.random(100000) < rates[2]
    _, _, got = run_engine(engine, tiles, batches, w_gaps=w_gaps, a_gaps=a_gaps,
                           ready=lambda cycle: not stalls[cycle], seed=seed)
    check_results(engine, tiles, batches, got)


ONE, TWO, INF, NAN = 0x3F80, 0x4000, 0x7F80, 0x7FC0


def distinct_tiles(rows, cols, count):
    """``count`` tiles whose weights differ in every place (so a read of the wrong tile
    shows), with zeros, Inf and NaN in them."""
    tiles = []
    for n in range(count):
        tile = [[0x3F80 + ((n * 37 + r * 5 + c) % 64) for c in range(cols)]
                for r in range(rows)]
        tile[n % rows][n % cols] = [0, INF, NAN, 0x8000][n % 4]
        tiles.append(tile)
    return tiles


def batch(length, rows, start=0):
    """``length`` activation rows of distinct values, a flushing one among them."""
    return [[0x3F00 + ((start + i) * 3 + k) % 128 if (i + k) % 5 else 0x0400
             for k in range(rows)] for i in range(length)]


def long_stall_case(engine):
    """Four tiles; batch 0 longer than the output FIFO holds, so the credits stop it halfway
    while the consumer stalls for 150 cycles; the batches after it short."""
    rows, cols = engine.rows, engine.cols
    tiles = distinct_tiles(rows, cols, 4)
    batches = [batch(engine.fifo_depth + 4, rows), batch(2, rows, 50), batch(3, rows, 60),
               batch(1, rows, 70)]
    return tiles, batches, (lambda cycle: cycle >= 150)


def test_bank_rule_under_a_long_stall():
    """Tile 2, offered from the start, is taken exactly ``rewrite_wait`` cycles after batch
    0's last row enters (long after the stall began) and never disturbs batch 0."""
    engine = BF16MatmulEngine(3, 2, mul_latency=1, add_latency=2)
    assert engine.rewrite_wait == engine.array.weight_settle == 4
    tiles, batches, ready = long_stall_case(engine)
    w_cycles, a_cycles, got = run_engine(engine, tiles, batches, ready=ready)
    check_results(engine, tiles, batches, got)
    batch0_last = a_cycles[len(batches[0]) - 1]
    assert batch0_last > 150        # the credits held batch 0 up
    assert w_cycles[2 * engine.rows] == batch0_last + engine.rewrite_wait


def model_cycles(engine, batches):
    """The class's timing with no gaps and no stalls: the cycle each weight row and each
    activation row enters."""
    rows, w_cycles, a_cycles, lasts = engine.rows, [], [], []
    for n, length in enumerate(batches):
        start = 0 if n == 0 else w_cycles[-1] + 1
        if n >= 2:
            start = max(start, lasts[n - 2] + engine.rewrite_wait)
        w_cycles += range(start, start + rows)
        first = max(w_cycles[-1] + 1, lasts[-1] + 1 if lasts else 0)
        a_cycles += range(first, first + length)
        lasts.append(a_cycles[-1])
    return w_cycles, a_cycles


@pytest.mark.parametrize(("shape", "latencies"), [((3, 2), (1, 2)), ((4, 1), (3, 4)),
                                                  ((1, 3), (0, 0))])
def test_throughput(shape, latencies):
    """With no gaps and no stalls: batches of ``rows + rewrite_wait - 1`` rows enter one row
    a cycle from cycle ``rows`` without a gap, tile ``n + 1`` loading during batch ``n``;
    shorter and uneven batches enter when the documented timing says; each result leaves
    ``latency`` cycles after its row."""
    rows, cols = shape
    engine = BF16MatmulEngine(rows, cols, mul_latency=latencies[0], add_latency=latencies[1])
    length = rows + engine.rewrite_wait - 1
    for lengths in ([length] * 4, [1, 2 * length, 1, 1, length + 3, 2]):
        tiles = distinct_tiles(rows, cols, len(lengths))
        batches = [batch(n, rows, 10 * i) for i, n in enumerate(lengths)]
        w_cycles, a_cycles, got = run_engine(engine, tiles, batches)
        check_results(engine, tiles, batches, got)
        assert (w_cycles, a_cycles) == model_cycles(engine, lengths)
        assert [cycle for cycle, _, _ in got] == [c + engine.latency for c in a_cycles]
    assert model_cycles(engine, [length] * 4)[1] == list(range(rows, rows + 4 * length))
    # Tile n + 1's rows load while batch n's rows enter.
    w_cycles, a_cycles = model_cycles(engine, [length] * 4)
    for n in range(3):
        assert a_cycles[n * length] <= w_cycles[(n + 1) * rows] \
            <= w_cycles[(n + 2) * rows - 1] <= a_cycles[(n + 1) * length - 1]


class _EarlyRewrite(BF16MatmulEngine):
    """Seeded bug: a bank rewritten a cycle before the array's rule allows."""

    @property
    def rewrite_wait(self):
        return self.array.weight_settle - 1


class _NoWait(BF16MatmulEngine):
    """Seeded bug: the int8 engine's rule (a bank free the cycle after its last row)."""

    @property
    def rewrite_wait(self):
        return 1


class _ShortLast(BF16MatmulEngine):
    """Seeded bug: ``last`` a cycle ahead of its row."""

    def _delay_last(self, m, last):
        return delay(m, last, self.array.sum_latency - 1, name="last")


@pytest.mark.parametrize(("bug", "rule", "match"), [(_EarlyRewrite, True, "rewritten"),
                                                    (_NoWait, False, None),
                                                    (_ShortLast, False, None)])
def test_seeded_bugs_caught(bug, rule, match):
    """An engine with a seeded bug fails the checks on the long-stall case: the rule check
    sees a bank freed a cycle early (its data come out right: the rows are written first to
    last, ahead of the reads), the comparison with the reference sees the int8 rule's
    corrupted sums and a misplaced ``last``."""
    engine = bug(3, 2, mul_latency=1, add_latency=2)
    tiles, batches, ready = long_stall_case(engine)
    with pytest.raises(AssertionError, match=match):
        _, _, got = run_engine(engine, tiles, batches, ready=ready, rule=rule)
        check_results(engine, tiles, batches, got)


def test_verilog_deterministic():
    """The same parameters give the same Verilog."""
    texts = [emit_verilog(BF16MatmulEngine(2, 2, mul_latency=1, add_latency=1), "bf16_engine")
             for _ in range(2)]
    assert texts[0] == texts[1]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rows": 0, "cols": 2}, r"BF16Array: rows=0; allowed: an int >= 1"),
    ({"rows": 2, "cols": 2, "add_latency": 6}, r"FP32Adder: latency=6; allowed"),
])
def test_refused(refused, kwargs, match):
    """Bad shapes or latencies are refused, naming the parameter and what is allowed."""
    refused(match, lambda: BF16MatmulEngine(**kwargs))
