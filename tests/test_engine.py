"""cocotb regression of the matmul engine (sim/tb_engine.py) over generator parameters."""

import pytest

from hwgen.config import AcceleratorConfig
from sim.runner import run_cocotb

WIDE = {"in_bits": 16, "w_bits": 16, "acc_bits": 48, "max_k": 256}
NARROW = {"in_bits": 4, "w_bits": 4, "acc_bits": 16, "max_k": 256}

CONFIGS = {
    "1x1": {"rows": 1, "cols": 1},
    "2x3": {"rows": 2, "cols": 3},
    "4x4": {"rows": 4, "cols": 4},
    "8x8": {"rows": 8, "cols": 8},
    "16x16": {"rows": 16, "cols": 16},
    "3x2_w4": {"rows": 3, "cols": 2, **NARROW},
    "3x2_w16": {"rows": 3, "cols": 2, **WIDE},
}


@pytest.mark.parametrize("dataflow", ["ws", "os"])
@pytest.mark.parametrize("name", CONFIGS)
def test_engine(name, dataflow, simulator, tmp_path):
    config = AcceleratorConfig(dataflow=dataflow, **CONFIGS[name])
    cases = "6" if config.rows <= 8 else "3"
    ran = run_cocotb(config, "sim.tb_engine", tmp_path, simulator=simulator,
                     env={"HWGEN_SEED": "7", "HWGEN_CASES": cases})
    assert ran == 6
