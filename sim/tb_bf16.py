"""cocotb test bench of a column of bf16 processing elements (:class:`hwgen.device.bf16_column.
BF16Column`): the given accumulations of tiles, their vectors skewed as the column's docstring
says, every tile sum and accumulator bit for bit against :func:`hwgen.nn.bf16.bf16_matmul`.

Environment: ``HWGEN_BF16_COLUMN``, the path of a JSON file ``{"rows", "mul_latency",
"add_latency", "accumulations", "gaps"}``: each accumulation ``[x, w, bias]`` (bf16 patterns,
a whole number of tiles of ``rows``, and an fp32 bias pattern), the idle cycles after each
tile beyond the shortest interval taken from ``gaps`` in turn.
"""

import itertools
import json
import os
from pathlib import Path

import cocotb
import ml_dtypes
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from hwgen.nn.bf16 import bf16_matmul, flush
from sim.streams import Clocked, pack


def _expected(x, w, bias, rows):
    """The contract's tile sums and accumulators of one accumulation (uint32 bit patterns)."""
    xv, wv = (np.array(v, dtype=np.uint16).view(ml_dtypes.bfloat16) for v in (x, w))
    b = flush(np.array([bias], dtype=np.uint32).view(np.float32))
    sums, accs = [], []
    for end in range(rows, len(x) + 1, rows):
        one, part = slice(end - rows, end), slice(0, end)
        sums.append(bf16_matmul(xv[None, one], wv[one, None], 0.0, rows))
        accs.append(bf16_matmul(xv[None, part], wv[part, None], b, rows))
    return [int(np.asarray(v).view(np.uint32).item()) for v in sums], \
        [int(np.asarray(v).view(np.uint32).item()) for v in accs]


def _plan(params):
    """The vectors' entries by cycle, the biases by the cycle they are read, the expected
    sums and accumulators, and the last cycle of an entry."""
    rows, mul, add = params["rows"], params["mul_latency"], params["add_latency"]
    skew, sum_latency = add, mul + rows * add
    entries, biases, sums, accs, start = {}, {}, [], [], 0
    gaps = itertools.cycle(params["gaps"])
    for x, w, bias in params["accumulations"]:
        got = _expected(x, w, bias, rows)
        sums += got[0]
        accs += got[1]
        biases[start + sum_latency] = bias
        for tile in range(len(x) // rows):
            for r in range(rows):
                k = tile * rows + r
                entries.setdefault(start + r * skew, []).append(
                    (r, int(x[k]), int(w[k]), tile == 0))
            start += skew + 1 + next(gaps)   # acc_interval, then a gap
    return entries, biases, sums, accs, start


@cocotb.test()
async def test_column_against_reference(dut):
    """Every tile sum and accumulator of the accumulations, bit for bit."""
    params = json.loads(Path(os.environ["HWGEN_BF16_COLUMN"]).read_text())
    rows = params["rows"]
    entries, biases, sums, accs, end = _plan(params)
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
