"""The build flow: the tool runner's progress, a failing tool, and real builds (smoke tests on
both families, each bitstream's netlist simulated against the reference)."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import TINY_DEVICE, TINY_GOWIN_DEVICE, yowasp_missing

import hwgen
from hwgen import boards
from hwgen.boards import BOARDS, flow
from hwgen.boards.flow import run_tool
from hwgen.boards.nextpnr import LogWatch
from sim.netgen import random_input, random_network

DATA = Path(__file__).parents[1] / "data"

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


def test_run_tool_reports_router2s_overuse(tmp_path):
    """router2 (on the ECP5 designs with the most DSP blocks) reports its overuse per
    iteration: the build's output names the routing phase and each iteration's overuse."""
    lines = ["Info: Running router2...", "Info: Running main router loop..."]
    lines += [f"Info:     iter={i} wires=9 overused=9 overuse={over} archfail=NA"
              for i, over in ((1, 98076), (2, 60925), (3, 0))]
    script = tmp_path / "fake-nextpnr"
    script.write_text("#!/bin/sh\n" + "".join(f"echo '{line}' >> top.tim; sleep 1.2\n"
                                              for line in lines))
    script.chmod(0o755)
    out = []
    code = run_tool([str(script)], tmp_path, tmp_path / "out", LogWatch(tmp_path / "top.tim"),
                    lambda line, **k: out.append(line.strip()))
    assert code == 0
    assert [line.split(" (")[0] for line in out] == [
        "routing", "routing: iteration 1, overuse 98,076", "routing: iteration 2, overuse 60,925",
        "routing: iteration 3, overuse 0"]


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


# One small whole device per family (the iCEBreaker's with the preset's one requantization lane
# at 24 MHz from the PLL, the link from the 12 MHz oscillator in its own domain: the session's
# shared build; the one-domain build at the board's 12 MHz is the Dask build tier's point), and
# the iCE40's 4x4 array alone on its 8 SB_MAC16s from the PLL at 48 MHz (the whole 4x4 device,
# the preset, builds in about 5 minutes: `hwgen build`).
_ULX3S_12F = {"rows": 2, "cols": 2, "acc_bits": 20, "max_k": 16, "mult_bits": 8, "act_depth": 256,
              "weight_depth": 64, "out_depth": 64, "acc_depth": 32, "param_depth": 8,
              "clock_hz": 50_000_000}
SMOKE = {
    "icebreaker-array": ("icebreaker", "array", {"rows": 4, "cols": 4, "clock_hz": 48_000_000}),
    "icebreaker-device": TINY_DEVICE,
    # Gowin: the Tang Nano 9K at 54 MHz from its rPLL (the session's shared Gowin build).
    "tang-nano-9k-device": TINY_GOWIN_DEVICE,
    # The ECP5 device without the image walker, residual adder and bounds (dense networks only,
    # what the gate-level check runs; the build flow is the same): 5,400 LUT4 instead of 8,700,
    # about 40 % less build and check time. The preset's whole feature set is in the slow run.
    "ulx3s-12f-device": ("ulx3s-12f", "device", {**_ULX3S_12F, "spatial": False,
                                                  "residual": False, "bounds": False}),
    "ulx3s-12f-full-device": ("ulx3s-12f", "device", _ULX3S_12F),
}
# Built in the slow run only (pytest -m slow).
SLOW_SMOKE = {"icebreaker-array", "ulx3s-12f-full-device"}


# The 12F device's rate: one the 25 MHz oscillator makes exactly (25 cycles a bit), so that the
# link keeps its own domain, and fast enough that the gate-level check's bytes take few cycles.
SMOKE_BAUD = {"ulx3s-12f-device": 1_000_000, "ulx3s-12f-full-device": 1_000_000}
# The 12F device is placed and routed for 40 MHz, below its 50 MHz clock
# (``--pnr-clock-hz``): nextpnr keeps the constraints file's constraint of the PLL's output over
# the one it would derive, and the timing is judged at 50 MHz.
SMOKE_PNR_CLOCK = {"ulx3s-12f-device": 40_000_000}


# The array alone is in the slow run: benchmarks/boards.py --quick builds the iCE40's 2x2 array
# in the default run (tests/test_benchmarks.py checks its two products per SB_MAC16).
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)
                                  if n in SLOW_SMOKE else n for n in sorted(SMOKE)])
def test_build_smoke(tmp_path, name, request):
    """A small design goes from configuration to bitstream and report on each family."""
    board_name, top, options = SMOKE[name]
    board = BOARDS[board_name]
    reason = yowasp_missing(gowin=board.family == "gowin")
    if reason:
        pytest.skip(reason)
    config = boards.board_config(board, **options)
    # The session's shared builds, built once for every test that needs a build.
    shared_as = next((fixture for spec, fixture in ((TINY_DEVICE, "tiny_build"),
                                                    (TINY_GOWIN_DEVICE, "tiny_gowin"))
                      if SMOKE[name] == spec), None)
    if shared_as:
        shared = request.getfixturevalue(shared_as)
        tmp_path, report, lines = Path(shared["out"]), shared["report"], shared["lines"]
    else:
        lines = []
        report = boards.build(board, config, tmp_path, baud=SMOKE_BAUD.get(name, 115200),
                              seed=1, top=top, pnr_clock_hz=SMOKE_PNR_CLOCK.get(name),
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
    log = (tmp_path / "build" / "top.tim").read_text()
    assert "does not exist in design" not in log
    routed_for = SMOKE_PNR_CLOCK.get(name, config.clock_hz) / 1e6
    assert routed_for in targets, report["timing"]
    assert report["timing"].get("pnr_target_mhz", config.clock_hz / 1e6) == routed_for
    if name in SMOKE_PNR_CLOCK:
        assert f"constraining clock net 'clk' to {routed_for:.2f} MHz" in log
        derived = f"Derived frequency constraint of {config.clock_hz / 1e6:.1f} MHz for net clk"
        assert derived not in log
    if name == "icebreaker-device":
        assert targets == [12.0, 24.0], report["timing"]   # the link's clock and the design's
    elif name.startswith("ulx3s-12f"):
        assert targets == [25.0, routed_for], report["timing"]   # the oscillator, the PLL
        # The registers reset through the global set/reset: nextpnr placed the SGSR.
        assert re.search(r"GSR:\s+1/\s*1\b", (tmp_path / "build" / "top.tim").read_text())
    elif name == "tang-nano-9k-device":
        assert targets == [27.0, 54.0], report["timing"]   # the oscillator's, the rPLL's
        assert report["bitstream"].endswith(".fs")
        assert report["program"] == f"openFPGALoader -b tangnano9k {report['bitstream']}"
        # Memories in BSRAM (a MULT9X9 counts half a MULT18X18 in the report's DSPs).
        assert report["resources"]["bram"]["used"] > 0
    dsp = report["resources"]["dsp"]["used"]
    if board.family == "ice40":
        assert dsp == config.cols * math.ceil(config.rows / 2)   # two MACs per SB_MAC16
    elif board.family == "gowin":
        assert dsp >= math.ceil(config.rows * config.cols / 2)   # a MULT9X9 per product
    else:
        assert dsp >= config.rows * config.cols
    assert 0 < report["resources"]["lut"]["percent"] < 100
    if top == "device":
        _check_netlist_board(tmp_path, config)
        # The unoptimized gate-level board is cached beside the build, and a board started
        # without asking for a level takes it rather than building the optimized one.
        from sim.board.netlist import netlist_board_binary

        unoptimized = netlist_board_binary(tmp_path, optimize=False)
        assert unoptimized.parent.name.endswith("-O0")
        assert netlist_board_binary(tmp_path) == unoptimized


def _check_netlist_board(out_dir, config, *, skew=None):
    """The synthesized netlist of a build, simulated with the cells' models, answers the host
    driver over its UART as the reference does, run after run (what the bitstream is made of
    computes what the Amaranth design does); ``skew``: the simulated bridge's bit time off the
    build's rate (:meth:`SimulatedBoard.from_build`)."""
    from host import Accelerator
    from sim.board import SimulatedBoard
    from sim.board.netlist import netlist_board_binary

    # Its C++ unoptimized: a third of the build time, for a run of a few thousand cycles.
    netlist_board_binary(out_dir, optimize=False)
    with SimulatedBoard.from_build(out_dir, timeout=120, skew=skew) as board:
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


# Builds at each board's bridge rate: the iCEBreaker's FT2232H at 6 Mbaud (4 cycles a bit of a
# 24 MHz design clock), the ULX3S's FT231X at 3 Mbaud (17 cycles a bit of the 12F smoke
# design's 50 MHz, 1.96 % slow).
BRIDGE = {
    "icebreaker-6mbaud": ("icebreaker", {"rows": 2, "cols": 2, "clock_hz": 24_000_000},
                          6_000_000),
    "ulx3s-12f-device": ("ulx3s-12f", _ULX3S_12F, 3_000_000),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BRIDGE))
def test_netlist_at_the_bridge_rate(tmp_path, name):
    """A device built at its board's bridge rate answers the host driver from its synthesized
    netlist at that rate, from a bridge at the UART's own bit time and from one whose bit time
    is 2 % long and 2 % short of the rate (a real bridge's error, on top of the divisor's);
    a bridge 8 % off, beyond what the UART follows, is not answered (the skew reaches the
    pins)."""
    from host import Accelerator
    from host.client import DeviceError, LinkError
    from sim.board import SimulatedBoard

    reason = yowasp_missing()
    if reason:
        pytest.skip(reason)
    board_name, options, rate = BRIDGE[name]
    board = BOARDS[board_name]
    config = boards.board_config(board, **options)
    baud, _ = boards.default_baud(board, config)
    assert baud == rate
    report = boards.build(board, config, tmp_path, baud=baud, seed=1, log=lambda *a, **k: None)
    assert report["timing"]["pass"], report["timing"]
    assert report["link"]["divisor"] == round(report["link"]["clock_hz"] / baud)
    for skew in (None, 0.02, -0.02):
        _check_netlist_board(tmp_path, config, skew=skew)
    # A timeout, or a frame the device or the host finds corrupt.
    net = random_network(np.random.default_rng(1), config, layers=1, max_width=4, raw=True)
    with (SimulatedBoard.from_build(tmp_path, timeout=120, skew=0.08) as sim,
          pytest.raises((LinkError, DeviceError)),
          Accelerator(sim.url, config=config, timeout=5) as acc):
        acc.load(hwgen.compile(net, config, batch=1))


@pytest.mark.slow
def test_demo_mlp_on_the_tang_nano_9k_preset_netlist(tmp_path):
    """The Tang Nano 9K's preset meets its 27 MHz, and its synthesized netlist, at the BL702's
    3 Mbaud, answers the demo's MLP through the host driver as hwgen.nn does
    (``benchmarks/netlist.py --mlp``, which exits 0 only when every class is the reference's
    argmax)."""
    reason = yowasp_missing(gowin=True)
    if reason:
        pytest.skip(reason)
    board = BOARDS["tang-nano-9k"]
    config = boards.board_config(board)
    baud, _ = boards.default_baud(board, config)
    assert baud == 3_000_000
    report = boards.build(board, config, tmp_path, baud=baud, log=lambda *a, **k: None)
    assert report["timing"]["pass"], report["timing"]
    root = Path(__file__).parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(root), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "netlist.py"),
                           str(tmp_path), "--mlp", "16"], env=env, text=True,
                          capture_output=True, timeout=3600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_bf16_device_netlist(tmp_path):
    """A bf16 device (2x2, dense, on the 25F at its 25 MHz oscillator) builds, meets its clock,
    and its synthesized netlist runs a random bf16 MLP and the demo's MLP rounded to bf16 over
    the UART bit for bit (``benchmarks/netlist.py``, which exits 0 only when every output has
    the reference's bits and every class is the reference's argmax)."""
    reason = yowasp_missing()
    if reason:
        pytest.skip(reason)
    board = BOARDS["ulx3s-25f"]
    # WEIGHT holds the demo MLP in 2x2 tiles: 1,184 words.
    config = boards.board_config(board, dtype="bf16", rows=2, cols=2, spatial=False,
                                 residual=False, weight_depth=2048, clock_hz=25_000_000)
    report = boards.build(board, config, tmp_path, baud=1_000_000, seed=1,
                          log=lambda *a, **k: None)
    assert report["timing"]["pass"], report["timing"]
    root = Path(__file__).parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(root), os.environ.get("PYTHONPATH")) if p)}
    for more in ([], ["--mlp", "8"]):
        done = subprocess.run([sys.executable, str(root / "benchmarks" / "netlist.py"),
                               str(tmp_path), *more], env=env, text=True,
                              capture_output=True, timeout=3600, check=False)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
