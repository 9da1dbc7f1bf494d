"""The matmul engine with DSP-block multipliers: cycle for cycle the plain engine, and the
packings it refuses.

The plain engine's own regression runs under cocotb (``tests/sim/test_tb_engine.py``).
"""

import pytest
from support import ice40_cells_sim, need_icarus_and_cells, run_icarus

from hwgen.config import AcceleratorConfig
from hwgen.device.engine import MatmulEngine
from hwgen.generate import emit_verilog, ports
from hwgen.toolchain import icarus_available
from sim import data_path


def _random_stimulus_tb(component, cycles, seed):
    """A test bench that drives two copies (``ref``, ``dut``) with the same random inputs and
    counts cycles where any output differs."""
    port_list = ports(component)
    decl, conns, drive, compare = [], [], [], []
    for p in port_list:
        w = p["width"]
        rng = f"[{w - 1}:0] " if w > 1 else ""
        if p["dir"] == "in":
            decl.append(f"  reg {rng}{p['name']};")
            words = ", ".join("$random(seed)" for _ in range((w + 31) // 32))
            drive.append(f"    {p['name']} = {{{words}}};")
            conns.append((p["name"], p["name"]))
        else:
            decl += [f"  wire {rng}ref_{p['name']};", f"  wire {rng}dut_{p['name']};"]
            compare.append(f"ref_{p['name']} !== dut_{p['name']}")
    valid = next(p["name"] for p in port_list if p["name"].endswith("valid")
                 and p["dir"] == "out")

    def inst(mod, prefix):
        pins = [f".{n}({v})" for n, v in conns]
        pins += [f".{p['name']}({prefix}_{p['name']})" for p in port_list if p["dir"] == "out"]
        return f"  {mod} u_{prefix}(.clk(clk), .rst(rst), {', '.join(pins)});"

    return "\n".join([
        "module tb;", "  reg clk = 0, rst = 1;", "  integer seed = " + str(seed) + ";",
        "  integer n, bad = 0, outs = 0;", *decl, inst("eng_ref", "ref"), inst("eng_dut", "dut"),
        "  always #5 clk = ~clk;", "  initial begin",
        *drive,
        "    @(negedge clk); @(negedge clk); rst = 0;",
        f"    for (n = 0; n < {cycles}; n = n + 1) begin",
        *["  " + d for d in drive],
        "      @(posedge clk); #1;",
        f"      if ({' || '.join(compare)}) bad = bad + 1;",
        f"      if (ref_{valid}) outs = outs + 1;",
        "      @(negedge clk);", "    end",
        '    $display("bad=%0d outs=%0d", bad, outs);', "    $finish;", "  end", "endmodule", ""])


# Yosys has no simulation model of the ECP5 MULT18X18D; this one is ours (see its header).
MULT18X18D_MODEL = data_path("mult18x18d_model.v")


@pytest.mark.parametrize("packing, rows, cols", [
    ("sb_mac16", 4, 4), ("sb_mac16", 3, 2), ("mult18x18d", 3, 2)])
def test_packed_engine_matches_inferred_engine(tmp_path, packing, rows, cols):
    """The engine with DSP-block multipliers behaves cycle for cycle like the plain one (which
    the engine regression checks against NumPy) under random traffic and stalls."""
    if packing == "sb_mac16":
        need_icarus_and_cells()
    elif not icarus_available():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed")
    cfg = AcceleratorConfig(rows=rows, cols=cols, acc_bits=20, max_k=16)
    ref = MatmulEngine(cfg)
    dut = MatmulEngine(cfg, dsp_packing=packing)
    (tmp_path / "ref.v").write_text(emit_verilog(ref, "eng_ref"))
    (tmp_path / "dut.v").write_text(emit_verilog(dut, "eng_dut"))
    (tmp_path / "tb.v").write_text(_random_stimulus_tb(ref, 3000, 11))
    model = ice40_cells_sim() if packing == "sb_mac16" else MULT18X18D_MODEL
    out = run_icarus(tmp_path, [tmp_path / n for n in ("ref.v", "dut.v", "tb.v")] + [model],
                      "tb")
    bad, outs = (int(f.split("=")[1]) for f in out.split()[-2:])
    assert bad == 0
    assert outs > 100   # the traffic really went through the array


def test_dsp_packing_refusals(refused):
    refused("in_bits and w_bits <= 8", lambda: MatmulEngine(
        AcceleratorConfig(rows=2, cols=2, in_bits=9), dsp_packing="sb_mac16"))
    refused("dataflow='ws'", lambda: MatmulEngine(
        AcceleratorConfig(rows=2, cols=2, dataflow="os"), dsp_packing="sb_mac16"))
    refused("dsp_packing='dsp48'", lambda: MatmulEngine(
        AcceleratorConfig(rows=2, cols=2), dsp_packing="dsp48"))
