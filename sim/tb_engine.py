"""cocotb test bench of the matmul engine (``hwgen.device.engine.MatmulEngine``).

Scoreboard shape: a driver per input stream, a monitor on the output, a NumPy model (``x @ W``
in int64) and an in-order checker. The test bench tiles products larger than the array itself,
as the network controller does, and checks every partial product and every full product.

Environment: ``HWGEN_CONFIG`` (JSON), ``HWGEN_SEED``, ``HWGEN_CASES`` (random products per test).
"""

import os

import cocotb
import numpy as np
from cocotb.triggers import Combine

from hwgen.cycles import engine_timing
from sim.runner import read_config_env
from sim.streams import Clocked, StreamSink, StreamSource, pack, unpack


def _operands(rng, cfg, m, k, n, *, extreme=False):
    lo_x, lo_w = -(1 << (cfg.in_bits - 1)), -(1 << (cfg.w_bits - 1))
    if extreme:
        return np.full((m, k), lo_x, np.int64), np.full((k, n), lo_w, np.int64)
    x = rng.integers(lo_x, -lo_x, size=(m, k), dtype=np.int64)
    w = rng.integers(lo_w, -lo_w, size=(k, n), dtype=np.int64)
    # Hit the corners of the operand ranges on purpose.
    x.flat[rng.integers(0, x.size, size=max(1, x.size // 8))] = lo_x
    w.flat[rng.integers(0, w.size, size=max(1, w.size // 8))] = lo_w
    return x, w


def _tiles(cfg, x, w):
    """Yield ``(nt, kt, x_tile [M, rows], w_tile [rows, cols])``, zero padded, n-tile major."""
    k, n = w.shape
    kt_count, nt_count = cfg.tiles(k, n)
    xp = np.zeros((x.shape[0], kt_count * cfg.rows), np.int64)
    xp[:, :k] = x
    wp = np.zeros((kt_count * cfg.rows, nt_count * cfg.cols), np.int64)
    wp[:k, :n] = w
    for nt in range(nt_count):
        for kt in range(kt_count):
            yield (nt, kt, xp[:, kt * cfg.rows:(kt + 1) * cfg.rows],
                   wp[kt * cfg.rows:(kt + 1) * cfg.rows, nt * cfg.cols:(nt + 1) * cfg.cols])


async def _run_products(dut, products, *, idle=0.0, stall=0.0, seed=0, check_cycles=False):
    """Stream every product through the engine and check it; return the sink's records."""
    cfg = read_config_env()
    clocked = Clocked(dut)
    await clocked.start()
    weights, acts, expected, batches = [], [], [], []
    for x, w in products:
        for _nt, _kt, xt, wt in _tiles(cfg, x, w):
            weights.extend(pack(row, cfg.w_bits) for row in wt)
            m = xt.shape[0]
            acts.extend(pack(row, cfg.in_bits, [(i == m - 1, 1)]) for i, row in enumerate(xt))
            expected.append(xt @ wt)
            batches.append(m)
    total = sum(batches)
    w_src = StreamSource(clocked, "i_weight", idle=idle, seed=seed)
    a_src = StreamSource(clocked, "i_act", idle=idle, seed=seed + 1)
    sink = StreamSink(clocked, "o_result", stall=stall, seed=seed + 2)
    budget = 50 * (total + len(batches) * (cfg.rows + cfg.cols + 8)) + 1000
    recv = cocotb.start_soon(sink.receive(total, budget))
    await Combine(cocotb.start_soon(w_src.send(weights)), cocotb.start_soon(a_src.send(acts)))
    items = await recv
    dut._log.info("%d batches, %d rows, idle %.2f stall %.2f, done in cycle %d",
                  len(batches), total, idle, stall, items[-1][0])

    # In-order checker: every partial product row, with `last` on each batch's final row.
    got = iter(items)
    for b, want in enumerate(expected):
        for r, want_row in enumerate(want):
            _cycle, word = next(got)
            row = unpack(word, cfg.acc_bits, cfg.cols)
            last = (word >> (cfg.acc_bits * cfg.cols)) & 1
            assert row == [int(v) for v in want_row], (
                f"batch {b} row {r}: got {row}, expected {want_row.tolist()}")
            assert last == (r == len(want) - 1), f"batch {b} row {r}: last={last}"

    # Full products: the partial sums of each output tile add up to x @ W.
    pos = 0
    for x, w in products:
        k, n = w.shape
        kt_count, nt_count = cfg.tiles(k, n)
        full = np.zeros((x.shape[0], nt_count * cfg.cols), np.int64)
        for nt in range(nt_count):
            for _ in range(kt_count):
                rows = [unpack(word, cfg.acc_bits, cfg.cols)
                        for _c, word in items[pos:pos + x.shape[0]]]
                full[:, nt * cfg.cols:(nt + 1) * cfg.cols] += np.array(rows, np.int64)
                pos += x.shape[0]
        np.testing.assert_array_equal(full[:, :n], x @ w)

    if check_cycles:
        model = engine_timing(cfg, batches)
        cycles = [c for c, _ in items]
        if cycles != model.out:
            row = next(i for i, (a, b) in enumerate(zip(cycles, model.out, strict=True))
                       if a != b)
            raise AssertionError(
                f"cycle model mismatch from row {row}: RTL {cycles[row]}, model "
                f"{model.out[row]}; last RTL {cycles[-1]}, model {model.last}")
        dut._log.info("cycles: first %d last %d total %d (model agrees)",
                      model.first, model.last, model.total)
    return items


def _random_shapes(cfg, rng, cases):
    """Shapes around the array size: M = 1, K and N smaller and larger than the array."""
    limit_k = min(cfg.max_k, 3 * cfg.rows + 1)
    shapes = [(1, min(cfg.max_k, cfg.rows), cfg.cols)]
    while len(shapes) < cases:
        m = int(rng.choice([1, 2, int(rng.integers(1, 4 * cfg.rows + 3))]))
        k = int(rng.integers(1, limit_k + 1))
        n = int(rng.integers(1, 3 * cfg.cols + 2))
        shapes.append((m, k, n))
    return shapes


def _setup():
    cfg = read_config_env()
    seed = int(os.environ.get("HWGEN_SEED", "0"))
    cases = int(os.environ.get("HWGEN_CASES", "4"))
    return cfg, np.random.default_rng(seed), seed, cases


@cocotb.test()
async def test_cycle_model(dut):
    """With no idle cycles or backpressure, each result leaves in the cycle the model says."""
    cfg, rng, seed, cases = _setup()
    products = [_operands(rng, cfg, m, k, n) for m, k, n in _random_shapes(cfg, rng, cases)]
    await _run_products(dut, products, seed=seed, check_cycles=True)


@cocotb.test()
@cocotb.parametrize(flow=[(0.0, 0.0), (0.3, 0.0), (0.0, 0.4), (0.25, 0.5)])
async def test_random_products(dut, flow):
    """Random shapes and operands with idle cycles on the inputs and backpressure."""
    cfg, rng, seed, cases = _setup()
    idle, stall = flow
    products = [_operands(rng, cfg, m, k, n) for m, k, n in _random_shapes(cfg, rng, cases)]
    await _run_products(dut, products, idle=idle, stall=stall, seed=seed)


@cocotb.test()
async def test_extreme_operands(dut):
    """All operands at -2**(b-1): the largest products, summed over the longest tiles."""
    cfg, rng, seed, _ = _setup()
    k = min(cfg.max_k, 2 * cfg.rows)
    products = [_operands(rng, cfg, 2 * cfg.rows + 1, k, 2 * cfg.cols, extreme=True),
                _operands(rng, cfg, 1, min(cfg.max_k, cfg.rows), cfg.cols, extreme=True)]
    await _run_products(dut, products, idle=0.2, stall=0.2, seed=seed, check_cycles=False)
