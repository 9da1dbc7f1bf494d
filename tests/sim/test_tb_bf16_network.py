"""cocotb regression of the bf16 accelerator core (sim/tb_bf16_network.py): random bf16 MLPs
and random bf16 graphs of every layer kind (convolutions, max pools, a residual add, a
depthwise convolution, average pools), the last of each run overflowing to Inf and NaN, loaded
through the host port of the emitted Verilog and checked against Bf16Network.forward bit for
bit, the device's counters against the cycle model's after each run."""

import pytest
from support import need_simulator, on_simulators

from hwgen.config import AcceleratorConfig
from sim.runner import run_cocotb

SMALL = {"act_depth": 600, "weight_depth": 512, "param_depth": 32, "acc_depth": 16,
         "out_depth": 128, "prog_depth": 8, "spatial": False, "residual": False}
# Every layer kind: the patch walker, the adder and the depthwise unit.
GRAPHS = {**SMALL, "act_depth": 1024, "prog_depth": 32, "spatial": True, "residual": True,
          "depthwise": True, "dw_lines": 4}

# name: (design, config, seed, networks, max width, max batch, bench environment)
CASES = {
    "4x4": (SMALL, {"rows": 4, "cols": 4}, 44, 4, 20, 12, {}),
    "2x4": (SMALL, {"rows": 2, "cols": 4}, 24, 3, 12, 6, {}),
    "4x2": (SMALL, {"rows": 4, "cols": 2}, 42, 3, 12, 6, {}),
    "8x8": (SMALL, {"rows": 8, "cols": 8}, 88, 4, 40, 16, {}),
    "cnn4x4": (GRAPHS, {"rows": 4, "cols": 4}, 52, 10, 0, 3,
               {"HWGEN_KIND": "cnn", "HWGEN_IMAGE": "6x6x4"}),
}


# On Icarus only with -m slow: the float units' logic leaves it no network in ten minutes.
@pytest.mark.parametrize(("name", "simulator"), on_simulators(
    [(name,) for name in CASES], icarus=set()))
def test_bf16_network(name, simulator, tmp_path):
    need_simulator(simulator)
    design, params, seed, networks, width, batch, env = CASES[name]
    config = AcceleratorConfig(dtype="bf16", **design, **params)
    ran = run_cocotb(config, "sim.tb_bf16_network", tmp_path, top="accelerator",
                     simulator=simulator,
                     env={"HWGEN_SEED": str(seed),
                          "HWGEN_NETWORKS": str(networks), "HWGEN_MAX_WIDTH": str(width),
                          "HWGEN_MAX_BATCH": str(batch), **env})
    assert ran == 1
