"""Every script under benchmarks/ runs, in its quick mode, and records its figures.

Each benchmark is run as a user runs it (``python benchmarks/<name>.py --quick``), with
``--record`` pointed at an empty record in a temporary folder; it must exit 0 (each checks its
device's answers against hwgen.nn and its cycles against the cycle model, and fails otherwise)
and write an entry of numbers under its command line. The benchmarks that talk to a simulated
board take the tests' small board design, whose build the other tests share; ``netlist.py``
takes the session's shared build (``tiny_build``).
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import BOARD_WS, yowasp_missing

ROOT = Path(__file__).parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))
#: The benchmarks that take design options: the tests' small board (its Verilator build shared).
DESIGN_OPTIONS = [f"--{f.name.replace('_', '-')}={getattr(BOARD_WS, f.name)}"
                  for f in dataclasses.fields(BOARD_WS)
                  if f.name in ("rows", "cols", "clock_hz", "act_depth", "weight_depth",
                                "param_depth", "acc_depth", "out_depth", "prog_depth")]
TAKE_DESIGN = {"board_callgrind.py", "link.py", "lossy_link.py", "pool.py", "soak.py", "train.py"}
#: What a benchmark needs beyond the default install: (module, reason to skip without it).
NEEDS = {"mlperf_tiny.py": ("torch", "PyTorch is not installed (the zoo's models are torch's)")}
#: What a benchmark needs on PATH: (program, reason to skip without it).
NEEDS_PROGRAM = {"board_callgrind.py": ("valgrind", "valgrind is not installed")}
#: The benchmarks that build bitstreams (the `[boards]` extra).
BUILDS = {"boards.py", "netlist.py"}


def test_every_benchmark_is_run():
    assert len(SCRIPTS) >= 12
    assert {"mlperf_tiny.py", "netlist.py", "boards.py", "dse.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_runs_quick_and_records(script, tmp_path, request):
    if script in NEEDS:
        module, reason = NEEDS[script]
        pytest.importorskip(module, reason=reason)
    if script in NEEDS_PROGRAM and shutil.which(NEEDS_PROGRAM[script][0]) is None:
        pytest.skip(NEEDS_PROGRAM[script][1])
    if script in BUILDS and yowasp_missing():
        pytest.skip(yowasp_missing())
    args = ["--quick"]
    if script in TAKE_DESIGN:
        args += DESIGN_OPTIONS
    if script == "netlist.py":
        args.append(request.getfixturevalue("tiny_build")["out"])
    record = tmp_path / "docs" / "figures.json"
    record.parent.mkdir()
    record.write_text("{}\n")
    (record.parent / "performance.md").write_text("<!-- figures: begin -->\n"
                                                  "<!-- figures: end -->\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args,
                           "--record", str(record)], cwd=tmp_path, env=env, text=True,
                          capture_output=True, timeout=1800, check=False)
    output = done.stdout[-4000:] + done.stderr[-4000:]
    assert done.returncode == 0, output
    entry = json.loads(record.read_text())[" ".join([f"python benchmarks/{script}", *args])]
    assert entry["figures"], output
    if script == "boards.py":   # the iCE40's 2x2 array: two products per SB_MAC16, timing met
        figures = entry["figures"]
        assert (figures["ice40-array-2x2_dsp"], figures["ice40-array-2x2_pass"]) == (2, 1)
    assert f"`python benchmarks/{script} --quick" in (record.parent / "performance.md").read_text()


def test_mlperf_tiny_names_why_a_design_refuses_a_model():
    """A zoo model the design cannot hold is a missed target with the compiler's reason, cut
    at a word to fit the table's line."""
    pytest.importorskip("torch", reason=NEEDS["mlperf_tiny.py"][1])
    proc = subprocess.run([sys.executable, "benchmarks/mlperf_tiny.py", "--no-board", "--models",
                           "ad", "--designs", "icebreaker"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [line for line in proc.stdout.splitlines()
               if line.startswith("AD autoencoder latency")]
    reason = line.split("missed: the design refuses it (", 1)[1]
    assert reason.endswith(" ...)") and len(reason) <= 81, reason
    assert reason.startswith("CompileError: layer 0: K=640 inputs exceed the largest "), reason
