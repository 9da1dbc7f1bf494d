"""cocotb regression of the matmul engine (sim/tb_engine.py) over generator parameters: every
configuration on Verilator in one dataflow and a few on Icarus by default, with the other
dataflow of each configuration on one of the two, and all of them with ``-m slow``
(:func:`support.on_simulators`)."""

import pytest
from support import need_simulator, on_simulators

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


@pytest.mark.parametrize(("name", "dataflow", "simulator"), on_simulators(
    [(name, dataflow) for name in CONFIGS for dataflow in ("ws", "os")],
    icarus={("2x3", "ws"), ("4x4", "os"), ("3x2_w4", "os"), ("3x2_w16", "ws")},
    verilator={("1x1", "os"), ("2x3", "os"), ("4x4", "ws"), ("8x8", "os"), ("16x16", "ws"),
               ("3x2_w4", "ws"), ("3x2_w16", "os")}))
def test_engine(name, dataflow, simulator, tmp_path):
    need_simulator(simulator)
    config = AcceleratorConfig(dataflow=dataflow, **CONFIGS[name])
    cases = "6" if config.rows <= 8 else "3"
    ran = run_cocotb(config, "sim.tb_engine", tmp_path, simulator=simulator,
                     env={"HWGEN_SEED": "7", "HWGEN_CASES": cases})
    assert ran == 6


SWEEP = [(r, c, df, bits) for r, c in [(1, 7), (5, 1), (7, 5), (32, 32)] for df in ("ws", "os")
         for bits in (2, 6, 12)]


@pytest.mark.slow
@pytest.mark.parametrize(("rows", "cols", "dataflow", "bits"), SWEEP)
def test_engine_sweep(rows, cols, dataflow, bits, tmp_path):
    """A wider sweep of shapes and operand widths (python -m pytest -m slow)."""
    acc = AcceleratorConfig.min_acc_bits(bits, bits, 256)
    config = AcceleratorConfig(rows=rows, cols=cols, dataflow=dataflow, in_bits=bits,
                               w_bits=bits, acc_bits=acc, max_k=256)
    ran = run_cocotb(config, "sim.tb_engine", tmp_path, env={"HWGEN_SEED": str(rows + bits),
                                                              "HWGEN_CASES": "4"})
    assert ran == 6
