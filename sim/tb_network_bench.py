"""One timed run of a saved program for benchmarks/network.py (not part of the regression).

Environment: ``HWGEN_CONFIG``, ``HWGEN_PROGRAM`` (.npz), ``HWGEN_INPUT`` and ``HWGEN_EXPECTED``
(.npy), ``HWGEN_BENCH_OUT`` (JSON written with the counters and wall times).
"""

import json
import os
import time

import cocotb
import numpy as np

from host.plan import execute_load_async, run_plans
from hwgen.compiler import Program
from hwgen.cycles import program_cycles
from sim.streams import Clocked
from sim.tb_network import HostPort


@cocotb.test()
async def test_run_program(dut):
    """Load, run and check one program; record device counters and simulation speed."""
    prog = Program.load(os.environ["HWGEN_PROGRAM"])
    x = np.load(os.environ["HWGEN_INPUT"])
    want = np.load(os.environ["HWGEN_EXPECTED"])
    clocked = Clocked(dut)
    await clocked.start()
    host = HostPort(clocked)
    await execute_load_async(host, prog)
    (plan,) = run_plans(prog, x)
    await host.write(*plan.write)
    start = time.perf_counter()
    counters = await host.run(plan.batch)
    wall = time.perf_counter() - start  # the run alone
    (got,) = plan.unpack([await host.read(*read) for read in plan.reads])
    assert np.array_equal(got, want), "device output differs from hwgen.nn"
    with open(os.environ["HWGEN_BENCH_OUT"], "w") as f:
        json.dump({**counters, "model_cycles": program_cycles(prog, len(x)), "run_wall_s": wall},
                  f)
