"""The bf16 weight-stationary array against the contract's order of the sums
(:func:`hwgen.nn.bf16.bf16_matmul`): weights loaded through the write port into both banks,
hypothesis-drawn activations (zeros, flushed products, Inf and NaN among them), tiles at the
shortest interval the tile rule allows, every tile sum and accumulator bit for bit."""

import ml_dtypes
import numpy as np
import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st
from support.float_units import bf16_bits_strategy

from hwgen.device.bf16_array import BF16Array
from hwgen.nn.bf16 import bf16_matmul, flush

# Values mostly of moderate exponents (their sums round, cancel and carry), now and then any
# pattern, and tiny ones whose products flush to zero.
moderate = st.builds(lambda s, e, f: (s << 15) | (e << 7) | f, st.integers(0, 1),
                     st.integers(120, 134), st.integers(0, 127))
tiny = st.builds(lambda s, e, f: (s << 15) | (e << 7) | f, st.integers(0, 1),
                 st.integers(1, 40), st.integers(0, 127))
special = st.sampled_from([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7F81])
values = st.one_of(moderate, moderate, moderate, tiny, special, bf16_bits_strategy)


def bf16_values(bits):
    """bf16 bit patterns as an ml_dtypes array."""
    return np.asarray(bits, dtype=np.uint16).view(ml_dtypes.bfloat16)


@st.composite
def workloads(draw, rows, cols):
    """Two weight banks (``rows x cols`` bit patterns each) and one to three accumulations of
    one to three tiles: ``(bias bits per column, [(x bits, bank)])``."""
    banks = [[draw(st.lists(values, min_size=cols, max_size=cols)) for _ in range(rows)]
             for _ in range(2)]
    work = []
    for _ in range(draw(st.integers(1, 3))):
        bias = draw(st.lists(st.one_of(st.integers(0, 2 ** 32 - 1),
                                       moderate.map(lambda v: v << 16)),
                             min_size=cols, max_size=cols))
        tiles = [(draw(st.lists(values, min_size=rows, max_size=rows)), draw(st.integers(0, 1)))
                 for _ in range(draw(st.integers(1, 3)))]
        work.append((bias, tiles))
    return banks, work


def schedule(array, work):
    """Return ``{cycle: (x bits, bank, first)}``, tiles of one accumulation
    ``acc_interval`` cycles apart and an accumulation's first tile in the cycle after the
    last tile before it, and ``{cycle: bias bits}``."""
    vectors, biases, cycle = {}, {}, 0
    for bias, tiles in work:
        for index, (x, bank) in enumerate(tiles):
            vectors[cycle] = (x, bank, index == 0)
            if index == 0:
                biases[cycle + array.sum_latency] = bias
            cycle += array.acc_interval if index + 1 < len(tiles) else 1
    return vectors, biases, cycle


def run_array(array, banks, work):
    """Load ``banks`` through the write port, run ``work``; return the ``s`` and ``acc``
    rows (lists of uint32 per column) in the order they came out."""
    vectors, biases, end = schedule(array, work)
    sums, accs = [], []
    noise = np.random.default_rng(end)      # inputs nothing may use carry noise

    async def bench(ctx):
        for b in range(2):
            for r in range(array.rows):
                ctx.set(array.w_valid, 1)
                ctx.set(array.w_bank, b)
                ctx.set(array.w_row, r)
                for c in range(array.cols):
                    ctx.set(array.w_data[c].as_value(), banks[b][r][c])
                await ctx.tick()
        ctx.set(array.w_valid, 0)
        for cycle in range(end + array.latency + 1):
            x, bank, first = vectors.get(cycle, (None, 0, False))
            ctx.set(array.a_valid, x is not None)
            ctx.set(array.a_first, int(first) if x is not None else int(noise.integers(2)))
            ctx.set(array.a_sel, bank)
            for r in range(array.rows):
                ctx.set(array.a_data[r].as_value(),
                        x[r] if x is not None else int(noise.integers(1 << 16)))
            bias = biases.get(cycle)
            for c in range(array.cols):
                ctx.set(array.bias[c].as_value(),
                        bias[c] if bias is not None else int(noise.integers(1 << 32)))
            if ctx.get(array.s_valid):
                sums.append([ctx.get(array.s[c].as_value()) for c in range(array.cols)])
            if ctx.get(array.acc_valid):
                accs.append([ctx.get(array.acc[c].as_value()) for c in range(array.cols)])
            await ctx.tick()

    sim = Simulator(array)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return sums, accs


def reference(rows, banks, work):
    """The contract's tile sums and accumulators, rows of uint32 per column."""
    sums, accs = [], []
    for bias, tiles in work:
        b = flush(np.array(bias, dtype=np.uint32).view(np.float32))
        xs, ws = [], []
        for x, bank in tiles:
            xv, wv = bf16_values(x)[None, :], bf16_values(banks[bank])
            sums.append(bf16_matmul(xv, wv, 0.0, rows)[0])
            xs.append(xv)
            ws.append(wv)
            accs.append(bf16_matmul(np.concatenate(xs, 1), np.concatenate(ws, 0), b, rows)[0])
    return ([[int(v) for v in row.view(np.uint32)] for row in vals] for vals in (sums, accs))


@settings(max_examples=15, deadline=None)
@given(data=st.data(), shape=st.sampled_from([(2, 3), (4, 4), (1, 2), (3, 1)]))
def test_tile_sums_and_accumulators(data, shape):
    """Each column's tile sum is the contract's ``s`` in row order with that column's weights
    of the bank the vector names, each accumulator the contract's ``acc``."""
    rows, cols = shape
    banks, work = data.draw(workloads(rows, cols))
    # Made after the draws: an example hypothesis drops leaves no unused component behind.
    array = BF16Array(rows, cols, mul_latency=2, add_latency=2)
    got = run_array(array, banks, work)
    want = reference(rows, banks, work)
    for name, have, should in zip(("s", "acc"), got, want, strict=True):
        assert [[hex(v) for v in row] for row in have] \
            == [[hex(v) for v in row] for row in should], name


def test_default_latencies_and_row_order():
    """With the default latencies: ``(2**24 + 1) + (-2**24) + 1`` is summed from row 0 down
    (1 in fp32, where ``2**24 + 1`` rounds to ``2**24`` first); column 1's weights leave the
    last row out."""
    one, big, neg, zero = 0x3F80, 0x4B80, 0xCB80, 0x0000     # 1.0, 2**24, -2**24, +0.0
    array = BF16Array(3, 2)
    banks = [[[one, one], [one, one], [one, zero]], [[zero] * 2] * 3]
    sums, accs = run_array(array, banks, [([0, 0], [([big, neg, one], 0)]),
                                          ([0, 0], [([one, big, neg], 0)])])
    assert sums == [[0x3F800000, 0], [0, 0x4B800000]]
    assert accs == sums
    assert (array.skew, array.sum_latency, array.latency, array.acc_interval,
            array.weight_settle) == (4, 3 + 3 * 4, 3 + 4 * 4, 5, 8)


def bank_rewrite_sums(early):
    """Tile sums of a 3x2 array (adder latency 2) for two vectors around a rewrite of bank 0:
    the old vector presented in cycle 0, rows 2, 1, 0 rewritten from cycle ``weight_settle``
    (``early`` cycles sooner), the new vector in the cycle after the last write."""
    array = BF16Array(3, 2, mul_latency=1, add_latency=2)
    one, two = 0x3F80, 0x4000
    start = array.weight_settle - early
    got = []

    async def bench(ctx):
        for r in range(3):      # bank 0: every weight 1.0
            ctx.set(array.w_valid, 1)
            ctx.set(array.w_row, r)
            for c in range(2):
                ctx.set(array.w_data[c].as_value(), one)
            await ctx.tick()
        ctx.set(array.w_valid, 0)
        for cycle in range(start + 4 + array.sum_latency):
            ctx.set(array.a_valid, cycle in (0, start + 3))
            for r in range(3):
                ctx.set(array.a_data[r].as_value(), one)
            writing = start <= cycle < start + 3
            ctx.set(array.w_valid, writing)
            ctx.set(array.w_row, 2 - (cycle - start) if writing else 0)
            for c in range(2):
                ctx.set(array.w_data[c].as_value(), two)
            if ctx.get(array.s_valid):
                got.append([ctx.get(array.s[c].as_value()) for c in range(2)])
            await ctx.tick()

    sim = Simulator(array)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


def test_bank_rewrite_rule():
    """A bank rewritten from ``weight_settle`` cycles after the last vector that uses its old
    weights, last row first: that vector sums 1 + 1 + 1, the one after the writes 2 + 2 + 2;
    a cycle sooner and the old vector's last row reads a new weight."""
    three, six, four = 0x40400000, 0x40C00000, 0x40800000
    assert bank_rewrite_sums(early=0) == [[three, three], [six, six]]
    assert bank_rewrite_sums(early=1)[0] == [four, four]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rows": 0, "cols": 2}, r"BF16Array: rows=0; allowed: an int >= 1"),
    ({"rows": 2, "cols": True}, r"BF16Array: cols=True; allowed: an int >= 1"),
    ({"rows": 2, "cols": 2, "add_latency": 6}, r"FP32Adder: latency=6; allowed"),
])
def test_refused(refused, kwargs, match):
    """Bad shapes or latencies are refused, naming the parameter and what is allowed."""
    refused(match, lambda: BF16Array(**kwargs))
