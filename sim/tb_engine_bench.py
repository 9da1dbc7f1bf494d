"""Throughput run of the matmul engine for benchmarks/engine.py (not part of the regression).

Environment: ``HWGEN_CONFIG``, ``HWGEN_SHAPE`` ("M,K,N"), ``HWGEN_BENCH_OUT`` (JSON file).
"""

import json
import os
import time

import cocotb
import numpy as np

from hwgen.cycles import matmul_timing
from sim.runner import read_config_env
from sim.tb_engine import _operands, _run_products


@cocotb.test()
async def test_throughput(dut):
    """Stream one product at full rate; record RTL cycles, model cycles and wall time."""
    cfg = read_config_env()
    m, k, n = (int(v) for v in os.environ["HWGEN_SHAPE"].split(","))
    x, w = _operands(np.random.default_rng(0), cfg, m, k, n)
    start = time.perf_counter()
    items = await _run_products(dut, [(x, w)], check_cycles=True)
    wall = time.perf_counter() - start
    timing, ideal = matmul_timing(cfg, m, k, n)
    rtl_total = items[-1][0] + 1
    with open(os.environ["HWGEN_BENCH_OUT"], "w") as f:
        json.dump({"rtl_cycles": rtl_total, "model_cycles": timing.total, "ideal": ideal,
                   "wall_s": wall}, f)
