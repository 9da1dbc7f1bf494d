"""The gate-level board (sim.board.netlist): refusals of folders that hold no finished device
build, and the block RAM model (Yosys ships only a black box) against word-level memory
semantics under Icarus."""

import json
import subprocess

import numpy as np
import pytest
from support import run_icarus as _run_icarus

from hwgen.boards.catalog import Family
from hwgen.config import AcceleratorConfig
from hwgen.toolchain import icarus_available
from sim.board import NetlistError, SimulatedBoard
from sim.board.netlist import _stand_ins


def test_netlist_board_needs_a_finished_device_build(tmp_path):
    with pytest.raises(NetlistError, match=r"report\.json does not exist: give the --out folder"):
        SimulatedBoard.from_build(tmp_path)
    report = {"config": AcceleratorConfig(rows=2, cols=2).to_dict(), "board": "ulx3s-12f",
              "baud": 115200, "top": "array"}
    (tmp_path / "report.json").write_text(json.dumps(report))
    with pytest.raises(NetlistError, match="'array' top, which has no UART"):
        SimulatedBoard.from_build(tmp_path)
    report["top"] = "device"
    (tmp_path / "report.json").write_text(json.dumps({**report, "board": "nope"}))
    with pytest.raises(NetlistError, match="unknown board 'nope'; known: icebreaker, "):
        SimulatedBoard.from_build(tmp_path)
    (tmp_path / "report.json").write_text(json.dumps(report))
    with pytest.raises(NetlistError, match=r"build/top\.json \(the synthesized netlist\) is "
                                           "missing"):
        SimulatedBoard.from_build(tmp_path)
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "top.json").write_text("[]")
    with pytest.raises(NetlistError, match=r"top\.json is not a Yosys JSON netlist"):
        SimulatedBoard.from_build(tmp_path).start()
    (tmp_path / "report.json").write_text("{not json")
    with pytest.raises(NetlistError, match="is not a report of `hwgen build`"):
        SimulatedBoard.from_build(tmp_path)


# -- the gate-level board's block RAM model ------------------------------------------------------

def _dp16kd_expected(width, mode, ops):
    """Return what port A's and B's outputs show after each of ``ops``, from word-level
    memory semantics (independent of how the model lays the words out in its bytes)."""
    lanes = {36: 4, 18: 2}.get(width, 1)
    lane_bits = 9 if width >= 9 else width
    mem, out_a, out_b, shown = {}, 0, 0, []
    for we, addr, data, be, raddr in ops:
        old = mem.get(addr, 0)
        new = old
        if we:
            for k in range(lanes):
                if be >> k & 1:
                    mask = ((1 << lane_bits) - 1) << (k * lane_bits)
                    new = (new & ~mask) | (data & mask)
        if width == 36:                       # A writes, B reads (36 bits on DOB, DOA)
            out_b = mem.get(raddr, 0)
        else:
            if not we:
                out_a = old
            elif mode == "WRITETHROUGH":
                out_a = new
            elif mode == "READBEFOREWRITE":
                out_a = old
            out_b = mem.get(raddr, 0)
        mem[addr] = new
        shown.append((out_a, out_b))
    return shown


@pytest.mark.parametrize(("width", "mode"), [
    (1, "NORMAL"), (2, "READBEFOREWRITE"), (4, "WRITETHROUGH"), (9, "NORMAL"),
    (9, "READBEFOREWRITE"), (9, "WRITETHROUGH"), (18, "NORMAL"), (18, "READBEFOREWRITE"),
    (36, "NORMAL"),
])
def test_dp16kd_model_reads_back_what_was_written(tmp_path, width, mode):
    """The gate-level boards' DP16KD model (Yosys ships only a black box) is a memory: every
    width reads back what it wrote, byte enables keep the other bytes, the write modes show
    the new word, the old one or nothing, and the second port reads at the same time."""
    if not icarus_available():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed")
    rng = np.random.default_rng(width * 10 + len(mode))
    depth = {36: 512, 18: 1024, 9: 2048}.get(width, 16384 // width)
    shift = {36: 5, 18: 4, 9: 3, 4: 2, 2: 1, 1: 0}[width]
    addrs = rng.choice(depth, size=6, replace=False)    # few addresses: many hits
    ops = []
    for _ in range(300):
        we = int(rng.integers(2))
        addr, raddr = (int(a) for a in rng.choice(addrs, size=2, replace=False))
        data = int(rng.integers(1 << width))
        be = (1 << {36: 4, 18: 2}.get(width, 1)) - 1
        if width >= 18 and mode != "WRITETHROUGH" and rng.integers(3) == 0:
            be = int(rng.integers(be + 1))
        ops.append((we, addr, data, be, raddr))
    conn = []
    for p in ("A", "B"):
        conn += [f".DI{p}{i}(di{p.lower()}[{i}])" for i in range(18)]
        conn += [f".DO{p}{i}(do{p.lower()}[{i}])" for i in range(18)]
        conn += [f".AD{p}{i}(ad{p.lower()}[{i}])" for i in range(14)]
        conn += [f".CS{p}{i}(1'b0)" for i in range(3)]
        conn += [f".CLK{p}(clk)", f".CE{p}(1'b1)", f".OCE{p}(1'b1)", f".RST{p}(1'b0)"]
    conn += [".WEA(we)", ".WEB(1'b0)"]
    steps = []
    for we, addr, data, be, raddr in ops:
        low = be if width >= 18 else 0
        din = data if width < 36 else data & (1 << 18) - 1
        steps.append(f"    we = {we}; ada = {(addr << shift) | low}; adb = {raddr << shift}; "
                     f"dia = {din}; dib = {data >> 18 if width == 36 else 0}; "
                     f"@(posedge clk); #1 $fwrite(f, \"%0d %0d\\n\", "
                     f"{'{dob, doa}' if width == 36 else 'doa'}, dob);")
    (tmp_path / "model.v").write_text(_stand_ins(Family.ECP5))
    (tmp_path / "tb.v").write_text(f"""
module tb;
  reg clk = 0, we = 0;
  reg [13:0] ada = 0, adb = 0;
  reg [17:0] dia = 0, dib = 0;
  wire [17:0] doa, dob;
  integer f;
  always #5 clk = ~clk;
  HWGEN_SIM_DP16KD #(.DATA_WIDTH_A({width}), .DATA_WIDTH_B({width}), .WRITEMODE_A("{mode}"),
                     .WRITEMODE_B("{mode}")) dut({", ".join(conn)});
  initial begin
    f = $fopen("out.txt", "w");
{chr(10).join(steps)}
    $fclose(f);
    $finish;
  end
endmodule
""")
    _run_icarus(tmp_path, [tmp_path / "model.v", tmp_path / "tb.v"], "tb")
    got = [tuple(int(v) for v in line.split())
           for line in (tmp_path / "out.txt").read_text().split("\n") if line]
    want = _dp16kd_expected(width, mode, ops)
    if width == 36:
        got = [(0, a) for a, _ in got]            # the 36-bit word is {DOB, DOA}
        want = [(0, b) for _, b in want]
    assert got == want


@pytest.mark.parametrize("same_address", [True, False])
def test_dp16kd_model_reports_a_collision(tmp_path, same_address):
    """A read of a byte that the other port writes in the same cycle (undefined on hardware)
    is reported once on stderr: what lets the gate-level smoke test check the build's claim to
    Yosys that none happens."""
    if not icarus_available():
        pytest.skip("Icarus Verilog (iverilog, vvp) is not installed")
    conn = [f".DIA{i}(1'b1)" for i in range(18)] + [f".DIB{i}(1'b0)" for i in range(18)]
    conn += [f".ADA{i}(ada[{i}])" for i in range(14)] + [f".ADB{i}(adb[{i}])" for i in range(14)]
    conn += [f".CS{p}{i}(1'b0)" for p in "AB" for i in range(3)]
    conn += [f".{pin}{p}({value})" for p in "AB" for pin, value in
             (("CLK", "clk"), ("CE", "1'b1"), ("OCE", "1'b1"), ("RST", "1'b0"))]
    conn += [".WEA(1'b1)", ".WEB(1'b0)"]
    (tmp_path / "model.v").write_text(_stand_ins(Family.ECP5))
    (tmp_path / "tb.v").write_text(f"""
module tb;
  reg clk = 0;
  reg [13:0] ada = 14'd40, adb = 14'd{40 if same_address else 48};
  HWGEN_SIM_DP16KD #(.DATA_WIDTH_A(9), .DATA_WIDTH_B(9)) dut({", ".join(conn)});
  initial begin
    repeat (3) begin #5 clk = 1; #5 clk = 0; end
    $finish;
  end
endmodule
""")
    exe = tmp_path / "sim.vvp"
    subprocess.run(["iverilog", "-g2012", "-s", "tb", "-o", str(exe), str(tmp_path / "model.v"),
                    str(tmp_path / "tb.v")], check=True, capture_output=True)
    proc = subprocess.run(["vvp", "-n", str(exe)], check=True, capture_output=True, text=True)
    reports = [line for line in proc.stderr.splitlines() if line.startswith("hwgen-sim:")]
    assert len(reports) == (1 if same_address else 0), proc.stderr

