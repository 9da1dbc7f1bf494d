"""The cache of simulated boards (sim.board.cache): its folder, its keys (an edit of hwgen is
never missed, an unchanged tree hits), and builds, index hits and pruning with a stand-in for
the Verilator build."""

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from support import BOARD_WS as WS

import hwgen
from hwgen.config import AcceleratorConfig
from sim.board import board_binary, board_cache_root
from sim.board import cache as board_cache


def test_cache_root_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HWGEN_CACHE_DIR", str(tmp_path))
    assert board_cache_root() == tmp_path / "boards"
    monkeypatch.delenv("HWGEN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert board_cache_root() == tmp_path / "xdg" / "hwgen" / "boards"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert board_cache_root() == Path.home() / ".cache" / "hwgen" / "boards"


def test_source_key_follows_the_content_of_hwgen(tmp_path, monkeypatch):
    key = board_cache._source_key(WS, "stream")
    assert board_cache._source_key(WS, "stream") == key
    assert board_cache._source_key(WS, "uart") != key
    assert board_cache._source_key(AcceleratorConfig(**{**WS.to_dict(), "rows": 3}),
                                   "stream") != key
    # The same sources somewhere else give the same key; an edit of any of them another one.
    copy = tmp_path / "hwgen"
    shutil.copytree(Path(hwgen.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(hwgen, "__file__", str(copy / "__init__.py"))
    assert board_cache._source_key(WS, "stream") == key
    with open(copy / "compiler" / "report.py", "a") as f:
        f.write("\n# an edit\n")
    assert board_cache._source_key(WS, "stream") != key


@pytest.fixture
def fake_build(monkeypatch):
    """Stand in for the Verilator build: write the files a build leaves; return the list of
    the folders built (the cache keys on the build function's source, so a function)."""
    built = []

    def build(config, link, *, verilog, wrapper, run, folder, jobs):
        built.append(folder)
        (folder / "board").write_text(verilog)
        (folder / "board.json").write_text(json.dumps({"run": run}))

    monkeypatch.setattr(board_cache, "_build", build)
    return built


def test_a_board_is_built_once_then_found(tmp_path, fake_build, monkeypatch):
    binary = board_binary(WS, cache_dir=tmp_path)
    assert len(fake_build) == 1 and binary.read_text().startswith("/*")  # the Verilog
    assert binary.parent.name.startswith(f"{WS.name}-stream-")
    assert [p.name for p in tmp_path.glob(".*") if p.is_dir()] == []  # no temporary left
    (index,) = (tmp_path / "index").iterdir()
    assert index.read_text() == binary.parent.name + "\n"
    # An index hit needs no Verilog at all.
    monkeypatch.setattr(board_cache, "emit_design", None)
    assert board_binary(WS, cache_dir=tmp_path) == binary
    assert len(fake_build) == 1


def test_an_edit_that_does_not_change_the_device_costs_no_build(tmp_path, fake_build,
                                                                monkeypatch):
    binary = board_binary(WS, cache_dir=tmp_path)
    monkeypatch.setattr(board_cache, "_source_key", lambda config, link: "edited")
    assert board_binary(WS, cache_dir=tmp_path) == binary
    assert len(fake_build) == 1
    index = tmp_path / "index" / f"{WS.name}-stream-edited"
    assert index.read_text() == binary.parent.name + "\n"


def test_old_boards_of_the_same_design_are_pruned(tmp_path, fake_build):
    week = 7 * 24 * 3600
    old = tmp_path / f"{WS.name}-stream-0123456789abcdef"
    recent = tmp_path / f"{WS.name}-stream-fedcba9876543210"
    other = tmp_path / f"{WS.name}-uart-0123456789abcdef"
    for folder in (old, recent, other):
        folder.mkdir()
    then = time.time() - week - 60
    for folder in (old, other):
        os.utime(folder, (then, then))
    binary = board_binary(WS, cache_dir=tmp_path)
    assert not old.exists() and recent.exists() and other.exists() and binary.exists()
