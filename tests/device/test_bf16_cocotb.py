"""The column of bf16 processing elements (its multipliers and adders) as Verilog, on Verilator
and Icarus: the cocotb bench ``sim/tb_bf16.py`` checks every tile sum and accumulator of
hypothesis-drawn accumulations (:func:`support.bf16_draws.accumulations`: zeros, subnormals,
Inf, NaN, huge and tiny values among moderate ones) against
:func:`hwgen.nn.bf16.bf16_matmul`."""

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from support.bf16_draws import accumulations
from support.cocotb_builds import SharedBuilds
from support.simulators import need_simulator

from hwgen.device.bf16_column import BF16Column
from hwgen.generate import emit_verilog
from sim.runner import SIMULATORS

# Three rows, the multipliers' and adders' default latencies.
ROWS, MUL_LATENCY, ADD_LATENCY = 3, 3, 4


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The column, built once per simulator."""
    return SharedBuilds(tmp_path_factory.mktemp("bf16_column"))


def _column():
    return emit_verilog(BF16Column(ROWS, mul_latency=MUL_LATENCY, add_latency=ADD_LATENCY),
                        "bf16_column")


@pytest.mark.parametrize("simulator", SIMULATORS)
# Each example is a simulator run: few of them, derandomized, no shrinking (see
# tests/sim/test_tb_bf16_network.py).
@settings(max_examples=3, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.generate))
@given(work=st.lists(accumulations(ROWS), min_size=2, max_size=5),
       gaps=st.lists(st.integers(0, 3), min_size=1, max_size=6))
def test_column_on_simulator(builds, simulator, work, gaps):
    """Tile sums and accumulators bit for bit, tiles at the shortest interval or later."""
    need_simulator(simulator)
    params = {"rows": ROWS, "mul_latency": MUL_LATENCY, "add_latency": ADD_LATENCY,
              "accumulations": [a for drawn in work for a in drawn], "gaps": gaps}
    ran = builds.run("column", _column, simulator, "sim.tb_bf16", top="bf16_column",
                     cases=params, cases_env="HWGEN_BF16_COLUMN")
    assert ran == 1
