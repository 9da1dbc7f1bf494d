"""cocotb regression of the AXI4-Stream top (sim/tb_axis.py) with cocotbext-axi's source and
sink: the host driver's requests over the streams with random gaps and stalls, bit-exact with
hwgen.nn (int8 and bf16 designs), tlast on every response frame; and the sustained byte rate
each way."""

import json

import pytest
from support import need_simulator, on_simulators

from hwgen.config import AcceleratorConfig
from sim.runner import run_cocotb

SMALL = {"act_depth": 512, "weight_depth": 512, "param_depth": 32, "acc_depth": 16,
         "out_depth": 128, "prog_depth": 16, "max_k": 128}


# 4x4 (4-byte words) repeats the 2x3 checks on other widths: in the slow run. The bf16 core
# (2x2, dense) on Icarus too: the Wishbone bench runs that core on Icarus by default.
@pytest.mark.parametrize(("dtype", "shape", "simulator"), [
    *on_simulators([("int8", (2, 3)), ("int8", (4, 4))], icarus=[("int8", (2, 3))],
                   verilator=[("int8", (2, 3))]),
    *on_simulators([("bf16", (2, 2))], icarus=[])])
def test_axis(dtype, shape, simulator, tmp_path):
    need_simulator(simulator)
    rows, cols = shape
    dense = {"spatial": False, "residual": False} if dtype == "bf16" else {}
    config = AcceleratorConfig(dtype=dtype, rows=rows, cols=cols, **dense, **SMALL)
    rates = tmp_path / "rates.json"
    networks = "2" if simulator == "verilator" else "1"
    assert run_cocotb(config, "sim.tb_axis", tmp_path, top="axis", simulator=simulator,
                      env={"HWGEN_SEED": str(rows + cols), "HWGEN_NETWORKS": networks,
                           "HWGEN_RATES": str(rates)}) == 2
    measured = json.loads(rates.read_text())
    print(f"AXI4-Stream {dtype} {rows}x{cols}: {measured}")
    # Requests go in and a READ's response comes out at one byte a cycle (a cycle's pause per
    # frame at most): the frame engine fetches each next memory word while the bytes of one go
    # out. Before that prefetch a READ ran at word_bytes / (word_bytes + 2).
    assert measured["in_rate"] >= 1 - 1 / measured["in_bytes"]
    assert measured["out_rate"] >= 1 - 1 / measured["out_bytes"]
