"""The cocotb runner's cache of Verilator's runtime (sim/runner.py): the objects it keeps are
the ones this Verilator builds, and a build after the first links them instead of compiling
them again (every bench would otherwise pay for them)."""

import subprocess

import pytest

from hwgen.toolchain import setup_verilator
from sim import runner


@pytest.fixture
def verilated(tmp_path):
    """A tiny design verilated as the runner's builds are (no C++ compiled): its folder."""
    try:
        setup_verilator()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    (tmp_path / "t.v").write_text(
        "module t(input clk, output reg q);\nalways @(posedge clk) q <= ~q;\nendmodule\n")
    subprocess.run(["verilator", "--cc", "--vpi", "--prefix", "Vtop", "-Mdir", "obj", "t.v"],
                   cwd=tmp_path, check=True, capture_output=True)
    return tmp_path / "obj"


def test_the_cached_objects_are_this_verilators_runtime(verilated):
    """Each object named is one of the runtime's sources that this Verilator ships (an object
    no longer built, as verilated_dpi.o in 5.048, would leave the cache never whole)."""
    names = runner._runtime_objects(verilated)
    assert "verilated.o" in names
    include = setup_verilator() / "include"
    assert all((include / name.replace(".o", ".cpp")).is_file() for name in names), names


def test_a_saved_runtime_is_linked_and_a_partial_one_is_not(verilated, tmp_path, monkeypatch):
    monkeypatch.setenv("HWGEN_CACHE_DIR", str(tmp_path / "cache"))
    assert runner._runtime_makeflags(False, False) == ""
    names = runner._runtime_objects(verilated)
    for name in names[1:]:
        (verilated / name).write_bytes(b"object")
    runner._save_runtime(verilated, False, False)   # the build made only some: nothing saved
    assert runner._runtime_makeflags(False, False) == ""
    (verilated / names[0]).write_bytes(b"object")
    runner._save_runtime(verilated, False, False)
    flags = runner._runtime_makeflags(False, False)
    cache = runner._runtime_cache(False, False)
    assert flags.startswith("VM_GLOBAL_FAST= VM_GLOBAL_SLOW= LOADLIBES=")
    assert all(str(cache / name) in flags for name in names)
    # Another level of optimization is another runtime.
    assert runner._runtime_makeflags(False, True) == ""
    (cache / names[-1]).unlink()
    assert runner._runtime_makeflags(False, False) == ""
