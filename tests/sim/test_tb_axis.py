"""cocotb regression of the AXI4-Stream top (sim/tb_axis.py) with cocotbext-axi's source and
sink: the host driver's requests over the streams with random gaps and stalls, bit-exact with
hwgen.nn, tlast on every response frame; and the sustained byte rate each way."""

import json

import pytest

from hwgen.config import AcceleratorConfig
from sim.runner import run_cocotb

SMALL = {"act_depth": 512, "weight_depth": 512, "param_depth": 32, "acc_depth": 16,
         "out_depth": 128, "prog_depth": 16, "max_k": 128}


# 4x4 (4-byte words) repeats the 2x3 checks on other widths: in the slow run.
@pytest.mark.parametrize("shape", [(2, 3), pytest.param((4, 4), marks=pytest.mark.slow)])
def test_axis(shape, simulator, tmp_path):
    rows, cols = shape
    config = AcceleratorConfig(rows=rows, cols=cols, **SMALL)
    rates = tmp_path / "rates.json"
    networks = "2" if simulator == "verilator" else "1"
    assert run_cocotb(config, "sim.tb_axis", tmp_path, top="axis", simulator=simulator,
                      env={"HWGEN_SEED": str(rows + cols), "HWGEN_NETWORKS": networks,
                           "HWGEN_RATES": str(rates)}) == 2
    measured = json.loads(rates.read_text())
    print(f"AXI4-Stream {rows}x{cols}: {measured}")
    # Requests go in at one byte a cycle (a cycle's pause per frame at most). A READ's
    # response pauses two cycles after each memory word (the frame engine fetches the next
    # word when the last byte of one has gone): word_bytes / (word_bytes + 2) at least.
    assert measured["in_rate"] >= 1 - 1 / measured["in_bytes"]
    wb = measured["word_bytes"]
    assert measured["out_rate"] >= wb / (wb + 2)
