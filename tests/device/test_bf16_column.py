"""A column of bf16 processing elements against the contract's order of the sums
(:func:`hwgen.nn.bf16.bf16_matmul`): hypothesis-drawn tiles, weights, biases, latencies and
spacings of the vectors, each tile sum and each accumulator bit for bit."""

import ml_dtypes
import numpy as np
import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st
from support.bf16_draws import accumulations

from hwgen.device.bf16_column import BF16Column
from hwgen.nn.bf16 import bf16_matmul, flush


def bf16_values(bits):
    """bf16 bit patterns as an ml_dtypes array."""
    return np.asarray(bits, dtype=np.uint16).view(ml_dtypes.bfloat16)


def schedule(column, accumulations, gap):
    """Return ``{cycle: [(row, x, w, valid, first, bias or None)]}``: the vectors of every
    tile, skewed, a tile ``acc_interval + gap`` cycles after the last; the bias in the cycle
    its first tile's sum reaches the accumulator."""
    plan, start = {}, 0
    for x, w, bias in accumulations:
        for tile in range(len(x) // column._rows):
            for r in range(column._rows):
                k = tile * column._rows + r
                entry = (r, int(x[k]), int(w[k]), r == 0, tile == 0,
                         bias if tile == 0 and r == 0 else None)
                plan.setdefault(start + r * column.skew, []).append(entry)
            start += column.acc_interval + gap
    return plan, start


def run_column(column, accumulations, gap):
    """The column's tile sums and accumulators (uint32 lists) for ``accumulations``, each
    ``(x bits, w bits, bias bits)`` of K a multiple of the rows."""
    plan, end = schedule(column, accumulations, gap)
    sums, accs = [], []
    # Rows without a vector, and ``first`` without ``valid``, carry noise: nothing may use it.
    noise = np.random.default_rng(len(plan))

    async def bench(ctx):
        biases = {}
        for cycle in range(end + column.latency + 1):
            ctx.set(column.valid, 0)
            ctx.set(column.first, int(noise.integers(2)))
            for r in range(column._rows):
                ctx.set(column.x[r].as_value(), int(noise.integers(1 << 16)))
                ctx.set(column.w[r].as_value(), int(noise.integers(1 << 16)))
            for r, x, w, valid, first, bias in plan.get(cycle, []):
                ctx.set(column.x[r].as_value(), x)
                ctx.set(column.w[r].as_value(), w)
                if valid:
                    ctx.set(column.valid, 1)
                    ctx.set(column.first, int(first))
                if bias is not None:
                    biases[cycle + column.sum_latency] = bias
            ctx.set(column.bias.as_value(), biases.get(cycle, 0xDEADBEEF))
            if ctx.get(column.s_valid):
                sums.append(ctx.get(column.s.as_value()))
            if ctx.get(column.acc_valid):
                accs.append(ctx.get(column.acc.as_value()))
            await ctx.tick()

    sim = Simulator(column)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return sums, accs


def reference(accumulations, rows):
    """The contract's tile sums and accumulators, as uint32 lists."""
    sums, accs = [], []
    for x, w, bias in accumulations:
        xv, wv = bf16_values(x), bf16_values(w)
        for tile in range(len(x) // rows):
            part = slice(0, (tile + 1) * rows)
            one = slice(tile * rows, (tile + 1) * rows)
            sums.append(bf16_matmul(xv[None, one], wv[one, None], 0.0, rows))
            b = flush(np.array([bias], dtype=np.uint32).view(np.float32))
            accs.append(bf16_matmul(xv[None, part], wv[part, None], b, rows))
    return ([int(np.asarray(v).view(np.uint32).item()) for v in vals]
            for vals in (sums, accs))


@settings(max_examples=50, deadline=None)
@given(data=st.data(), rows=st.integers(1, 4), mul_latency=st.integers(0, 3),
       add_latency=st.integers(0, 4), gap=st.sampled_from([0, 1, 3]))
def test_tile_sums_and_accumulators(data, rows, mul_latency, add_latency, gap):
    """Each tile sum is the contract's ``s`` in row order, each accumulator the contract's
    ``acc`` after the tile, with tiles at the shortest interval or later."""
    work = data.draw(accumulations(rows))
    # Made after the draws: an example hypothesis drops leaves no unused component behind.
    column = BF16Column(rows, mul_latency=mul_latency, add_latency=add_latency)
    got = run_column(column, work, gap)
    want = reference(work, rows)
    for name, have, should in zip(("s", "acc"), got, want, strict=True):
        assert [hex(v) for v in have] == [hex(v) for v in should], name


def test_row_order():
    """The order matters and is the rows': ``(2**24 + 1) + (-2**24) + 1`` in fp32 gives 1
    summed from row 0 down (``2**24 + 1`` rounds to ``2**24`` first), 2 the other way."""
    one, big, neg = 0x3F80, 0x4B80, 0xCB80      # 1.0, 2**24, -2**24 in bf16
    column = BF16Column(3, mul_latency=1, add_latency=2)
    sums, _ = run_column(column, [([big, neg, one], [one, one, one], 0)], gap=0)
    assert sums == [0x3F800000]
    sums, _ = run_column(column, [([one, big, neg], [one, one, one], 0)], gap=0)
    assert sums == [0]      # 1 + 2**24 rounds to 2**24 (a tie to even), then cancels


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rows": 0}, r"rows=0; allowed: an int >= 1"),
    ({"rows": True}, r"rows=True; allowed"),
    ({"rows": 2, "add_latency": 6}, r"FP32Adder: latency=6; allowed: an int in 0\.\.5"),
    ({"rows": 2, "mul_latency": -1}, r"BF16Multiplier: latency=-1; allowed"),
])
def test_refused(refused, kwargs, match):
    """Bad rows or latencies are refused, naming the parameter and what is allowed."""
    refused(match, lambda: BF16Column(**kwargs))
