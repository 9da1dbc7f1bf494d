"""cocotb test bench of the bf16 finish (:class:`hwgen.device.bf16_finish.BF16Finish`): one case
a cycle, every result bit for bit against the expected bits the test computed from the
reference (:meth:`hwgen.nn.bf16_layers._Finish.finish`).

Environment: ``HWGEN_BF16_FINISH``, the path of a JSON file ``{"latency", "cases"}``, each case
``{"acc", "layer", "want"}`` (the accumulator's fp32 bits, the packed layer settings, the
expected fp32 bits).
"""

import json
import os
from pathlib import Path

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from sim.streams import Clocked


@cocotb.test()
async def test_finish_against_reference(dut):
    """Every case's result, ``latency`` cycles after it enters, bit for bit."""
    params = json.loads(Path(os.environ["HWGEN_BF16_FINISH"]).read_text())
    latency, cases = params["latency"], params["cases"]
    clocked = Clocked(dut)
    dut.acc.value = 0
    dut.layer.value = 0
    await clocked.start()
    got = []
    for cycle in range(len(cases) + latency):
        # Inputs in the middle of the cycle, the output in its read-only phase.
        if cycle < len(cases):
            dut.acc.value = cases[cycle]["acc"]
            dut.layer.value = cases[cycle]["layer"]
        await ReadOnly()
        if cycle >= latency:
            got.append(int(dut.y.value))
        await FallingEdge(dut.clk)
    want = [case["want"] for case in cases]
    bad = [(i, hex(cases[i]["acc"]), hex(cases[i]["layer"]), hex(g), hex(w))
           for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    assert not bad, bad[:5]
