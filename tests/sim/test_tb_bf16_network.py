"""cocotb regression of the bf16 accelerator core (sim/tb_bf16_network.py): random bf16 MLPs,
one of them overflowing to Inf and NaN, loaded through the host port of the emitted Verilog
and checked against Bf16Network.forward bit for bit, the device's counters against the cycle
model's after each run."""

import pytest
from support import need_simulator, on_simulators

from hwgen.config import AcceleratorConfig
from sim.runner import run_cocotb

SMALL = {"act_depth": 600, "weight_depth": 512, "param_depth": 32, "acc_depth": 16,
         "out_depth": 128, "prog_depth": 8, "spatial": False, "residual": False}

# name: (config, seed, networks, max width, max batch)
CASES = {
    "4x4": ({"rows": 4, "cols": 4}, 44, 4, 20, 12),
    "2x4": ({"rows": 2, "cols": 4}, 24, 3, 12, 6),
    "4x2": ({"rows": 4, "cols": 2}, 42, 3, 12, 6),
    "8x8": ({"rows": 8, "cols": 8}, 88, 4, 40, 16),
}


# On Icarus only with -m slow: the float units' logic leaves it no network in ten minutes.
@pytest.mark.parametrize(("name", "simulator"), on_simulators(
    [(name,) for name in CASES], icarus=set()))
def test_bf16_network(name, simulator, tmp_path):
    need_simulator(simulator)
    params, seed, networks, width, batch = CASES[name]
    config = AcceleratorConfig(dtype="bf16", **SMALL, **params)
    ran = run_cocotb(config, "sim.tb_bf16_network", tmp_path, top="accelerator",
                     simulator=simulator,
                     env={"HWGEN_SEED": str(seed),
                          "HWGEN_NETWORKS": str(networks), "HWGEN_MAX_WIDTH": str(width),
                          "HWGEN_MAX_BATCH": str(batch)})
    assert ran == 1
