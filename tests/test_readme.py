"""Every shell and Python block of README.md runs as written, so that the guide cannot drift.

The blocks are the fences marked ``sh`` or ``python`` (the others, such as ``text``, are
output). They run in order, in one temporary folder, whatever blocks the README has:

- Python blocks share one namespace, as a reader's session does when every block is pasted in
  order, the optional ones included;
- shell blocks run a command (a line, with its ``\\`` continuations) at a time with bash; a
  command ending in ``&`` is started in the background and the block goes on once it prints
  ``serving`` (the line a reader waits for), and it is stopped when the block ends. A
  ``pip install ... &&`` is left out (the tests run in the installed package), and so is
  ``python -m pytest`` (the suite this test is part of).

An HTML comment on the line before a fence marks it, ``<!-- readme-test: WORD ... -->``:

- ``slow``: runs with ``pytest -m slow`` only (builds, long runs);
- ``board``: needs a real board (a serial port, a programmer) and never runs here;
- ``soc``: needs the LiteX SoC's tools (``pip install '.[soc]'``, Debian's RISC-V GCC); runs
  with the slow ones where they are installed, else is skipped with :data:`NO_SOC_TOOLS`;
- ``aside``: an optional side example, which the README says in visible text (the paragraph
  before it says "Optional"); it runs in the session like any block, so it must not rebind the
  tour's names.

A block that imports an optional package that is not installed (torch, onnx) is skipped with
the asides after it.
"""

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"
MARKS = {"slow", "board", "aside", "soc"}
NO_SOC_TOOLS = "the LiteX SoC's tools are not installed"
OPTIONAL = {"torch", "onnx", "onnxscript"}
# A background server builds its simulation first (about a minute for a netlist).
SERVING_TIMEOUT_S = 600
COMMAND_TIMEOUT_S = 1800

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_MARK = re.compile(r"<!--\s*readme-test:\s*([\w\s]*?)\s*-->\s*\n\s*$")


def readme_blocks(text):
    """Return ``[(line, language, code, marks)]`` of the ``sh`` and ``python`` blocks."""
    blocks = []
    for found in _FENCE.finditer(text):
        language = found.group(1)
        if language not in ("sh", "python"):
            continue
        mark = _MARK.search(text[:found.start()])
        marks = set(mark.group(1).split()) if mark else set()
        unknown = marks - MARKS
        assert not unknown, f"README.md: unknown readme-test marks {unknown}; allowed: {MARKS}"
        line = text.count("\n", 0, found.start()) + 1
        blocks.append((line, language, found.group(2), marks))
    return blocks


def shell_commands(code):
    """Return the commands of a shell block: lines joined at ``\\``, without comments-only
    lines, ``pip install ... &&`` prefixes and ``python -m pytest`` (see the module)."""
    commands = []
    for line in re.sub(r"\s*\\\n\s*", " ", code).splitlines():
        # A comment after the command (the README's have no '#' inside quotes).
        command = re.sub(r"(^|\s+)#.*$", "", line).strip()
        command = re.sub(r"^pip install \S+( \S+)*? && ", "", command)
        if not command or command.startswith(("pip install", "python -m pytest")):
            continue
        commands.append(command)
    return commands


def _environment():
    env = dict(os.environ)
    # The `hwgen` of this Python (its scripts' folder first) and this checkout's packages.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    root = str(README.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _start(command, cwd, env, line):
    """Start a background command; return it once it prints ``serving``."""
    process = subprocess.Popen(["bash", "-c", f"exec {command.rstrip('&').strip()}"],
                               cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    deadline = time.monotonic() + SERVING_TIMEOUT_S
    while time.monotonic() < deadline:
        out = process.stdout.readline()
        if not out and process.poll() is not None:
            break
        seen.append(out)
        if out.startswith("serving "):
            return process
    _stop(process)
    pytest.fail(f"README.md line {line}: `{command}` did not start serving:\n{''.join(seen)}")


def _stop(process):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_shell(code, cwd, line):
    env = _environment()
    background = []
    try:
        for command in shell_commands(code):
            if command.endswith("&"):
                background.append(_start(command, cwd, env, line))
                continue
            done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, text=True,
                                  capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False)
            assert done.returncode == 0, (f"README.md line {line}: `{command}` exited "
                                          f"{done.returncode}:\n{done.stdout}\n{done.stderr}")
    finally:
        for process in background:
            _stop(process)


def run_python(code, namespace, line):
    exec(compile(code, f"README.md block at line {line}", "exec"), namespace)


def _soc_tools():
    return (importlib.util.find_spec("litex") is not None
            and shutil.which("riscv64-unknown-elf-gcc") is not None)


def run_readme(tmp_path, monkeypatch, *, slow):
    """Run the README's blocks (the slow ones too if ``slow``); return the skipped ones."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["README"])
    namespace, skipped, missing = {"__name__": "__readme__"}, [], None
    for line, language, code, marks in readme_blocks(README.read_text()):
        if "aside" not in marks:
            missing = None
        if "board" in marks or ("slow" in marks and not slow) or missing:
            skipped.append((line, missing or ("board" if "board" in marks else "slow")))
            continue
        if "soc" in marks and not _soc_tools():
            skipped.append((line, NO_SOC_TOOLS))
            continue
        if language == "sh":
            run_shell(code, tmp_path, line)
            continue
        try:
            run_python(code, namespace, line)
        except ModuleNotFoundError as exc:
            if exc.name not in OPTIONAL:
                raise
            missing = f"{exc.name} is not installed"
            skipped.append((line, missing))
    return skipped


def test_optional_blocks_say_so():
    """A reader sees which blocks are optional: the paragraph before each aside says so."""
    text = README.read_text()
    for line, _, _, marks in readme_blocks(text):
        if "aside" in marks:
            before = "\n".join(text.splitlines()[:line - 1]).rsplit("\n\n", 2)[-2]
            assert "Optional" in before, f"README.md line {line}: an aside not called optional"


def test_readme_blocks_are_found():
    blocks = readme_blocks(README.read_text())
    assert {language for _, language, _, _ in blocks} == {"sh", "python"}
    assert any("hwgen compile" in code for _, _, code, _ in blocks)
    assert shell_commands("pip install . && hwgen demo\npip install -e '.[test]' && "
                          "python -m pytest -n 2\n# a comment\nhwgen a \\\n  --b 1 &") \
        == ["hwgen demo", "hwgen a --b 1 &"]
    assert shell_commands("hwgen sim-board --port 4 &   # wait") == ["hwgen sim-board --port 4 &"]


def test_readme_runs(tmp_path, monkeypatch):
    """The blocks a default run affords: everything but builds, long runs and boards."""
    skipped = run_readme(tmp_path, monkeypatch, slow=False)
    assert {reason for _, reason in skipped} <= {"board", "slow"} | {
        f"{name} is not installed" for name in OPTIONAL}


@pytest.mark.slow
def test_readme_runs_with_builds(tmp_path, monkeypatch):
    """Every block but those that need a real board: the builds, the board path from
    `hwgen build` to `hwgen infer` on the build's netlist, the sweep of real builds."""
    skipped = run_readme(tmp_path, monkeypatch, slow=True)
    assert {reason for _, reason in skipped} <= {"board", NO_SOC_TOOLS} | {
        f"{name} is not installed" for name in OPTIONAL}
