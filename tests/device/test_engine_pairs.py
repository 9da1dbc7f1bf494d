"""The matmul engine loading its weight tiles two rows a transfer (``weight_rows=2``): every
result row is ``x @ W`` of its batch's tile (NumPy), with one-row batches back to back (the
case in which a tile's write comes closest to the last row that uses the bank's old one), and
the rows leave in the cycles :func:`hwgen.cycles.engine_timing` counts for pairs."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hwgen.config import AcceleratorConfig
from hwgen.cycles import engine_timing
from hwgen.device.engine import MatmulEngine
from hwgen.latency import bank_rest, late_weight_rows


def _transfers(tile):
    """The pair transfers of a tile: ``(row, second row or None)``."""
    return [(tile[r], tile[r + 1] if r + 1 < len(tile) else None)
            for r in range(0, len(tile), 2)]


def run_engine(config, batches, *, seed, always=True):
    """Stream a random tile per batch and the batches' rows through the engine (both streams
    always valid with ``always``, else valid at random); return the result rows with their
    cycles, the tiles and the activations."""
    rng = np.random.default_rng(seed)
    lo_w, lo_x = -(1 << (config.w_bits - 1)), -(1 << (config.in_bits - 1))
    tiles = [rng.integers(lo_w, -lo_w, (config.rows, config.cols)) for _ in batches]
    acts = [rng.integers(lo_x, -lo_x, (m, config.rows)) for m in batches]
    dut = MatmulEngine(config, weight_rows=2)
    weights = [t for tile in tiles for t in _transfers(tile)]
    rows = [(row, i == len(x) - 1) for x in acts for i, row in enumerate(x)]
    out = []

    async def bench(ctx):
        w = a = 0
        ctx.set(dut.o_result.ready, 1)
        for cycle in range(40 * (len(rows) + len(weights)) + 200):
            w_on = w < len(weights) and (always or rng.random() < 0.6)
            a_on = a < len(rows) and (always or rng.random() < 0.6)
            if w_on:
                first, second = weights[w]
                payload = dut.i_weight.payload
                ctx.set(payload.rows[0], [int(v) for v in first])
                ctx.set(payload.rows[1], [int(v) for v in (second if second is not None
                                                           else first * 0)])
                ctx.set(payload.two, second is not None)
            ctx.set(dut.i_weight.valid, w_on)
            if a_on:
                ctx.set(dut.i_act.payload.data, [int(v) for v in rows[a][0]])
                ctx.set(dut.i_act.payload.last, rows[a][1])
            ctx.set(dut.i_act.valid, a_on)
            w_taken = w_on and ctx.get(dut.i_weight.ready)
            a_taken = a_on and ctx.get(dut.i_act.ready)
            if ctx.get(dut.o_result.valid):
                out.append((cycle, [ctx.get(dut.o_result.payload.data[j])
                                    for j in range(config.cols)]))
            await ctx.tick()
            w += w_taken
            a += a_taken
            if len(out) == len(rows):
                break

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out, tiles, acts


@pytest.mark.parametrize("always", [True, False], ids=["streaming", "random-valid"])
@pytest.mark.parametrize(("rows", "cols"), [(2, 3), (5, 2), (8, 3), (9, 2)])
def test_pairs_give_every_product(rows, cols, always):
    """One-row batches and longer ones, results exact; streaming, in the model's cycles."""
    config = AcceleratorConfig(rows=rows, cols=cols, in_bits=8, w_bits=8, acc_bits=32)
    rng = np.random.default_rng(rows * 10 + cols)
    batches = [1] * 8 + [int(v) for v in rng.integers(1, 2 * rows, 6)] + [1] * 4
    out, tiles, acts = run_engine(config, batches, seed=rows + cols, always=always)
    want = [row for x, tile in zip(acts, tiles, strict=True) for row in x @ tile]
    assert len(out) == len(want)
    for (_, got), row in zip(out, want, strict=True):
        assert got == [int(v) for v in row]
    if always:
        model = engine_timing(config, batches, weight_rows=2)
        first = out[0][0] - model.out[0]
        assert [c - first for c, _ in out] == model.out


def test_one_row_batches_take_a_load_a_tile():
    """On 8 rows, one-row batches back to back take four cycles a tile (a load of four pairs):
    the banks' rest (three cycles) and the last row's later write are hidden."""
    config = AcceleratorConfig(rows=8, cols=2)
    assert bank_rest(config, 2) == 3 and late_weight_rows(config, 2) == (7,)
    timing = engine_timing(config, [1] * 12, weight_rows=2)
    steps = {b - a for a, b in zip(timing.admit, timing.admit[1:], strict=False)}
    assert steps == {4}
    assert {b - a for a, b in zip(engine_timing(config, [1] * 12).admit,
                                  engine_timing(config, [1] * 12).admit[1:],
                                  strict=False)} == {8}


def test_pairs_need_a_weight_stationary_array():
    config = AcceleratorConfig(rows=2, cols=2, dataflow="os")
    with pytest.raises(ValueError, match="weight_rows=2; allowed: 1, and 2 with dataflow='ws'"):
        MatmulEngine(config, weight_rows=2)
