"""cocotb test bench of a column of bf16 processing elements (:class:`hwgen.device.bf16_column.
BF16Column`): random accumulations of random tiles, their vectors skewed as the column's
docstring says, every tile sum and accumulator bit for bit against
:func:`hwgen.nn.bf16.bf16_matmul`.

Environment: ``HWGEN_BF16``, JSON ``{"rows", "mul_latency", "add_latency", "seed",
"accumulations"}``.
"""

import json
import os

import cocotb
import ml_dtypes
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from hwgen.nn.bf16 import bf16_matmul, flush
from sim.streams import Clocked, pack

# Edge values among the random ones: zeros of both signs, a subnormal, Inf, NaN, the largest
# finite bf16, 1 and -1.
_EDGES = (0x0000, 0x8000, 0x0001, 0x7F80, 0xFF80, 0x7FC1, 0x7F7F, 0x3F80, 0xBF80)


def _random_bf16(rng, count):
    """Mostly values of moderate exponents (sums that round, cancel and carry), some edges."""
    bits = ((rng.integers(0, 2, count) << 15) | (rng.integers(120, 135, count) << 7)
            | rng.integers(0, 128, count))
    edges = rng.random(count) < 0.08
    return np.where(edges, rng.choice(_EDGES, count), bits).astype(np.uint16)


def _expected(x, w, bias, rows):
    """The contract's tile sums and accumulators of one accumulation (uint32 bit patterns)."""
    xv, wv = (v.view(ml_dtypes.bfloat16) for v in (x, w))
    b = flush(np.array([bias], dtype=np.uint32).view(np.float32))
    sums, accs = [], []
    for end in range(rows, len(x) + 1, rows):
        one, part = slice(end - rows, end), slice(0, end)
        sums.append(bf16_matmul(xv[None, one], wv[one, None], 0.0, rows))
        accs.append(bf16_matmul(xv[None, part], wv[part, None], b, rows))
    return [int(np.asarray(v).view(np.uint32).item()) for v in sums], \
        [int(np.asarray(v).view(np.uint32).item()) for v in accs]


def _plan(params, rng):
    """The vectors' entries by cycle, the biases by the cycle they are read, the expected
    sums and accumulators, and the last cycle of an entry."""
    rows, mul, add = params["rows"], params["mul_latency"], params["add_latency"]
    skew, sum_latency = add, mul + rows * add
    entries, biases, sums, accs, start = {}, {}, [], [], 0
    for _ in range(params["accumulations"]):
        tiles = int(rng.integers(1, 4))
        x, w = _random_bf16(rng, rows * tiles), _random_bf16(rng, rows * tiles)
        bias = int(rng.integers(0, 2 ** 32)) if rng.random() < 0.2 \
            else int(_random_bf16(rng, 1)[0]) << 16
        got = _expected(x, w, bias, rows)
        sums += got[0]
        accs += got[1]
        biases[start + sum_latency] = bias
        for tile in range(tiles):
            for r in range(rows):
                k = tile * rows + r
                entries.setdefault(start + r * skew, []).append(
                    (r, int(x[k]), int(w[k]), tile == 0))
            start += skew + 1 + int(rng.integers(0, 3))   # acc_interval, then a gap
    return entries, biases, sums, accs, start


@cocotb.test()
async def test_column_against_reference(dut):
    """Every tile sum and accumulator of random accumulations, bit for bit."""
    params = json.loads(os.environ["HWGEN_BF16"])
    rng = np.random.default_rng(params["seed"])
    rows = params["rows"]
    entries, biases, sums, accs, end = _plan(params, rng)
    latency = params["mul_latency"] + (rows + 1) * params["add_latency"]
    clocked = Clocked(dut)
    dut.valid.value = 0
    dut.first.value = 0
    dut.x.value = 0
    dut.w.value = 0
    dut.bias.value = 0
    await clocked.start()
    x, w = [0] * rows, [0] * rows
    got_sums, got_accs = [], []
    for cycle in range(end + latency + 1):
        # Inputs in the middle of the cycle, outputs in its read-only phase.
        valid, first = 0, 0
        for r, xr, wr, is_first in entries.get(cycle, []):
            x[r], w[r] = xr, wr
            if r == 0:
                valid, first = 1, int(is_first)
        dut.x.value = pack(x, 16)
        dut.w.value = pack(w, 16)
        dut.valid.value = valid
        dut.first.value = first
        dut.bias.value = biases.get(cycle, 0xDEADBEEF)
        await ReadOnly()
        if dut.s_valid.value:
            got_sums.append(int(dut.s.value))
        if dut.acc_valid.value:
            got_accs.append(int(dut.acc.value))
        await FallingEdge(dut.clk)
    assert [hex(v) for v in got_sums] == [hex(v) for v in sums]
    assert [hex(v) for v in got_accs] == [hex(v) for v in accs]
