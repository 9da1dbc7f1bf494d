"""The column of bf16 processing elements (its multipliers and adders) as Verilog, on Verilator
and Icarus: the cocotb bench ``sim/tb_bf16.py`` checks every tile sum and accumulator of random
accumulations against :func:`hwgen.nn.bf16.bf16_matmul`."""

import json

from hwgen.device.bf16_column import BF16Column
from hwgen.generate import emit_verilog
from sim.runner import run_cocotb_source


def test_column_on_simulator(tmp_path, simulator):
    """Three rows, the multipliers' and adders' default latencies: tile sums and accumulators
    bit for bit (the ``simulator`` fixture skips, with the reason, a missing simulator)."""
    params = {"rows": 3, "mul_latency": 3, "add_latency": 4, "seed": 52, "accumulations": 12}
    column = BF16Column(params["rows"], mul_latency=params["mul_latency"],
                        add_latency=params["add_latency"])
    src = tmp_path / "bf16_column.v"
    src.write_text(emit_verilog(column, "bf16_column"))
    ran = run_cocotb_source(src, "bf16_column", "sim.tb_bf16", tmp_path, label="bf16 column",
                            simulator=simulator, env={"HWGEN_BF16": json.dumps(params)})
    assert ran == 1
