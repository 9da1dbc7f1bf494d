"""cocotb regression of the Wishbone top (sim/tb_wishbone.py) with cocotbext-wishbone's master:
random networks loaded and run by a CPU's accesses, bit-exact with hwgen.nn; irq, STATUS,
ERROR_CAUSE and the bus errors."""

import pytest
from support import need_simulator

from hwgen.config import AcceleratorConfig
from sim.runner import run_cocotb

# Small memories: small windows, a short build.
SMALL = {"act_depth": 512, "weight_depth": 512, "param_depth": 32, "acc_depth": 16,
         "out_depth": 128, "prog_depth": 16, "max_k": 128}


# 4x4 (4-byte words) repeats the 2x3 checks on other widths: in the slow run.
@pytest.mark.parametrize("shape", [(2, 3), pytest.param((4, 4), marks=pytest.mark.slow)])
def test_wishbone(shape, simulator, tmp_path):
    rows, cols = shape
    config = AcceleratorConfig(rows=rows, cols=cols, **SMALL)
    networks = "2" if simulator == "verilator" else "1"
    assert run_cocotb(config, "sim.tb_wishbone", tmp_path, top="wishbone", simulator=simulator,
                      env={"HWGEN_SEED": str(rows * cols), "HWGEN_NETWORKS": networks}) == 2


# The bf16 core behind the same bus, on both simulators (Icarus about 30 s).
@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_wishbone_bf16(simulator, tmp_path):
    """A CPU runs bf16 MLPs (fp32 scores, bf16 values) through the registers and windows,
    bit for bit with Bf16Network.forward; the bus errors and the interrupt as for int8."""
    need_simulator(simulator)
    config = AcceleratorConfig(dtype="bf16", rows=2, cols=2, spatial=False, residual=False,
                               **SMALL)
    assert run_cocotb(config, "sim.tb_wishbone", tmp_path, top="wishbone", simulator=simulator,
                      env={"HWGEN_SEED": "52", "HWGEN_NETWORKS": "2"}) == 2
