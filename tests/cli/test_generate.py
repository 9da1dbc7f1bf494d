"""The hwgen command line: generate (deterministic output, clear errors) and verify."""

import json
import subprocess
import sys

import pytest

from hwgen.cli import main
from sim.runner import simulator_missing


def test_generate_writes_verilog_and_manifest(tmp_path, capsys):
    assert main(["generate", "--top", "engine", "--rows", "2", "--cols", "3",
                 "--out", str(tmp_path)]) == 0
    v = tmp_path / "hwgen_ws_2x3_i8w8_engine.v"
    j = tmp_path / "hwgen_ws_2x3_i8w8_engine.json"
    text = v.read_text()
    assert "module hwgen_ws_2x3_i8w8_engine(" in text
    assert text.count("hwgen_pe_ws_i8w8a32 pe_") == 6
    assert str(tmp_path) not in text and "/root" not in text
    manifest = json.loads(j.read_text())
    assert manifest["config"]["rows"] == 2 and manifest["config"]["cols"] == 3
    names = {p["name"]: p for p in manifest["ports"]}
    assert names["i_act__payload"]["width"] == 2 * 8 + 1
    assert names["o_result__payload"]["dir"] == "out"
    assert "wrote" in capsys.readouterr().out


def test_generate_accelerator_top_lists_its_enum_port(tmp_path):
    """The accelerator's host port has an enum member (the region): the manifest gives the width
    of its shape, and --post-lanes reaches the design."""
    from hwgen.memmap import Region

    assert main(["generate", "--top", "accelerator", "--rows", "2", "--cols", "2",
                 "--post-lanes", "1", "--act-depth", "64", "--weight-depth", "64",
                 "--out", str(tmp_path)]) == 0
    (j,) = tmp_path.glob("*.json")
    manifest = json.loads(j.read_text())
    assert manifest["config"]["post_lanes"] == 1
    names = {p["name"]: p for p in manifest["ports"]}
    assert names["host__region"]["width"] == Region.as_shape().width
    assert names["host__region"]["dir"] == "in"   # the frame engine drives it


def test_generate_is_byte_identical(tmp_path):
    for out in ("a", "b"):
        assert main(["generate", "--rows", "3", "--cols", "2", "--dataflow", "os",
                     "--out", str(tmp_path / out)]) == 0
    for name in ("hwgen_os_3x2_i8w8.v", "hwgen_os_3x2_i8w8.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_generate_default_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["generate", "--rows", "1", "--cols", "1"]) == 0
    assert (tmp_path / "rtl_out" / "hwgen_ws_1x1_i8w8" / "hwgen_ws_1x1_i8w8.v").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--rows", "0"], "rows=0 is out of range; allowed: 1..64"),
    (["--cols", "99"], "cols=99 is out of range; allowed: 1..64"),
    (["--in-bits", "16", "--w-bits", "16", "--acc-bits", "24"], "acc_bits >= 32"),
    (["--w-bits", "1"], "w_bits=1 is out of range; allowed: 2..16"),
])
def test_generate_bad_parameter_is_one_line(args, message, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hwgen", "generate", *args,
                           "--out", str(tmp_path)], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_verify_passes_on_small_design(tmp_path, capsys):
    if simulator_missing("verilator"):
        pytest.skip(simulator_missing("verilator"))
    # Matrix layers only: the command's path, with a third of the spatial device's Verilog
    # (the network benches run spatial designs).
    assert main(["verify", "--rows", "1", "--cols", "2", "--cases", "2", "--spatial", "0",
                 "--residual", "0", "--build-dir", str(tmp_path)]) == 0
    assert "cocotb tests passed" in capsys.readouterr().out
