"""Build generated Verilog and run a cocotb test bench on it, from Python or pytest.

One build folder per run, so runs can go side by side (``pytest -n 2``).
"""

import hashlib
import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from hwgen.generate import emit_design
from hwgen.toolchain import icarus_available, setup_verilator

__all__ = ["SIMULATORS", "CocotbFailure", "run_cocotb", "run_cocotb_source",
           "simulator_missing"]

SIMULATORS = ("verilator", "icarus")


class CocotbFailure(AssertionError):
    """A cocotb test bench reported failing tests."""


def simulator_missing(simulator):
    """Return why ``simulator`` cannot run here, or ``None`` when it can."""
    if simulator == "icarus" and not icarus_available():
        return "Icarus Verilog (iverilog) is not installed; apt-get install iverilog"
    if simulator == "verilator":
        try:
            setup_verilator()
        except RuntimeError as exc:
            return str(exc)
    if simulator not in SIMULATORS:
        return f"simulator={simulator!r} is not supported; allowed: {', '.join(SIMULATORS)}"
    return None


# Verilator's runtime does not depend on the design: compile it once per toolchain and reuse it.
# Which objects it is made of depends on Verilator's version (5.048 has no verilated_dpi.o): a
# build lists them in its Vtop_classes.mk, and the cache keeps that list beside them.
_RUNTIME_LIST = "objects.txt"


def _runtime_cache(waves, optimize):
    import importlib.metadata as md

    from hwgen.toolcache import hwgen_cache_root

    key = (f"verilator-{md.version('verilator')}-cocotb-{md.version('cocotb')}"
           f"-trace{int(waves)}-opt{int(optimize)}")
    return hwgen_cache_root() / key


def _cached_runtime(cache):
    """Return the cached runtime's object files, or None when it is not wholly cached."""
    listed = cache / _RUNTIME_LIST
    if not listed.is_file():
        return None
    objects = [cache / name for name in listed.read_text().split()]
    return objects if objects and all(o.is_file() for o in objects) else None


def _runtime_makeflags(waves, optimize):
    """Make variables that link the cached runtime instead of compiling it, or ``""``."""
    objects = _cached_runtime(_runtime_cache(waves, optimize))
    if objects is None:
        return ""
    # Command-line variables override verilated.mk's; LOADLIBES is linked after the design.
    # In MAKEFLAGS a space inside a value is written as "\\ ".
    return "VM_GLOBAL_FAST= VM_GLOBAL_SLOW= LOADLIBES=" + "\\ ".join(str(o) for o in objects)


def _runtime_objects(build_dir):
    """Return the names of the runtime's objects a build made (``VM_GLOBAL_FAST`` and
    ``VM_GLOBAL_SLOW`` of its ``Vtop_classes.mk``)."""
    names, listing = [], False
    for line in (build_dir / "Vtop_classes.mk").read_text().splitlines():
        if line.startswith("VM_GLOBAL_"):
            listing = True
        elif listing and line.startswith((" ", "\t")):
            names += [f"{word}.o" for word in line.split() if word != "\\"]
        else:
            listing = False
    return names


def _save_runtime(build_dir, waves, optimize):
    cache = _runtime_cache(waves, optimize)
    if _cached_runtime(cache) is not None:
        return
    names = _runtime_objects(build_dir)
    if not names or not all((build_dir / name).is_file() for name in names):
        return
    cache.mkdir(parents=True, exist_ok=True)
    # Copy then rename, so a parallel build never sees half a file; the list comes last.
    for name in (*names, _RUNTIME_LIST):
        tmp = cache / f"{name}.{os.getpid()}.tmp"
        if name == _RUNTIME_LIST:
            tmp.write_text("\n".join(names) + "\n")
        else:
            shutil.copyfile(build_dir / name, tmp)
        os.replace(tmp, cache / name)


def _lean_verilator():
    """Return cocotb's Verilator runner without ``--public-flat-rw``.

    Our benches touch only top-level ports, which stay visible; making every internal signal
    public multiplies the generated C++ and its compile time.
    """
    from cocotb_tools.runner import Verilator

    class LeanVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            i = cmds[0].index("--public-flat-rw")
            cmds[0][i:i + 1] = ["--public-depth", "1"]
            return cmds

    return LeanVerilator()


def _failures(results_xml):
    root = ET.parse(results_xml).getroot()
    total, failed = 0, []
    for case in root.iter("testcase"):
        total += 1
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            failed.append(f"{case.get('name')}: {bad.get('message', '')}".strip())
    return total, failed


# Verilator's C++ at -O0 compiles several times faster (16x16: 43 s instead of 240 s), and
# cocotb runs spend their time in Python, not in the model. At -O0 the design's C++ is
# compiled as one file: split, each of its files and two precompiled headers pay for
# Verilator's headers again (a 1x1 network's bench built in 16 s, as one file in 5 s).
_FAST_BUILD = "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0 VM_PARALLEL_BUILDS=0"


def run_cocotb(config, test_module, build_dir, *, top="engine", simulator="verilator",
               env=None, waves=False, testcase=None, seed=None, optimize=False):
    """Generate ``top`` for ``config``, build it with ``simulator`` and run ``test_module``.

    The configuration reaches the test bench as JSON in ``HWGEN_CONFIG``; ``env`` adds more
    variables. ``optimize`` compiles Verilator's C++ with optimization (slower to build, faster
    to run: for long runs). Returns the number of cocotb tests that ran.

    Raises
    ------
    CocotbFailure
        Naming each failing cocotb test with its message, and the log file.
    RuntimeError
        If the simulator is missing or the build fails.
    """
    build_dir = _ready(simulator, build_dir)
    name = "dut"
    src = build_dir / f"{name}.v"
    src.write_text(emit_design(config, top, name)[1])
    return run_cocotb_source(src, name, test_module, build_dir, label=config.name,
                             simulator=simulator, env={"HWGEN_CONFIG": config.to_json(),
                                                       **(env or {})},
                             waves=waves, testcase=testcase, seed=seed, optimize=optimize)


def _ready(simulator, build_dir):
    """Return ``build_dir`` resolved and made, or raise RuntimeError if ``simulator`` is
    missing."""
    reason = simulator_missing(simulator)
    if reason:
        raise RuntimeError(reason)
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    return build_dir


def _build_key(src, simulator, waves, optimize):
    """What a build depends on: the Verilog's digest, the simulator and the build options."""
    digest = hashlib.sha256(Path(src).read_bytes()).hexdigest()
    return f"{digest} {Path(src).resolve()} {simulator} waves={waves} optimize={optimize}"


def _build(runner, src, toplevel, build_dir, *, simulator, waves, optimize):
    """Build ``src`` with cocotb's ``runner`` in ``build_dir``."""
    build_kwargs = {}
    if simulator == "verilator":
        # Amaranth's output trips Verilator's width lints; they are not errors.
        build_kwargs["build_args"] = ["-Wno-fatal", "-Wno-lint"]
    else:
        build_kwargs["timescale"] = ("1ns", "1ps")
        # cocotb compiles as SystemVerilog (-g2012), where a declaration's initial value is
        # set before time 0 without an event; Yosys's Verilog relies on that event (its
        # `reg init = 0` trigger) to run each `always @*` once, else their outputs stay X
        # until an input changes (a bf16 core then never leaves busy). The last -g wins.
        build_kwargs["build_args"] = ["-g2005"]
    saved_makeflags = os.environ.get("MAKEFLAGS")
    extra = ""
    if simulator == "verilator":
        extra = _runtime_makeflags(waves, optimize)
        if not optimize:
            extra = f"{extra} {_FAST_BUILD}".strip()
    if extra:
        os.environ["MAKEFLAGS"] = f"{saved_makeflags or ''} {extra}".strip()
    try:
        runner.build(sources=[src], hdl_toplevel=toplevel, build_dir=build_dir, waves=waves,
                     log_file=build_dir / "build.log", **build_kwargs)
    finally:
        if saved_makeflags is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = saved_makeflags
    if simulator == "verilator":
        _save_runtime(build_dir, waves, optimize)


def run_cocotb_source(src, toplevel, test_module, build_dir, *, label, simulator="verilator",
                      env=None, waves=False, testcase=None, seed=None, optimize=False):
    """Build the Verilog file ``src`` (top module ``toplevel``) with ``simulator`` and run
    ``test_module`` on it: :func:`run_cocotb` for any design, the Verilog already written.
    ``label`` names the design in the failures; ``env`` is the test bench's environment.
    Returns the number of cocotb tests that ran.

    Raises
    ------
    CocotbFailure
        Naming each failing cocotb test with its message, and the log file.
    RuntimeError
        If the simulator is missing or the build fails.
    """
    from cocotb_tools.runner import get_runner

    build_dir = _ready(simulator, build_dir)
    runner = _lean_verilator() if simulator == "verilator" else get_runner(simulator)
    # The same Verilog built the same way in the same folder is built already: runs that
    # share a build (a hypothesis test's examples) skip Verilator's verilate and make.
    stamp, built = build_dir / "built.txt", _build_key(src, simulator, waves, optimize)
    if not (stamp.exists() and stamp.read_text() == built):
        stamp.unlink(missing_ok=True)
        _build(runner, src, toplevel, build_dir, simulator=simulator, waves=waves,
               optimize=optimize)
        stamp.write_text(built)

    test_env = dict(env or {})
    results = build_dir / "results.xml"
    log = build_dir / "sim.log"
    # The runner exits the process on failures under pytest; we report them ourselves.
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        runner.test(test_module=test_module, hdl_toplevel=toplevel, hdl_toplevel_lang="verilog",
                    build_dir=build_dir, test_dir=build_dir, extra_env=test_env,
                    results_xml=str(results), waves=waves, testcase=testcase, seed=seed,
                    log_file=log,
                    **({"timescale": ("1ns", "1ps")} if simulator == "icarus" else {}))
    except SystemExit as exc:
        if not results.exists():
            raise RuntimeError(f"simulation failed ({exc.code}); log: {log}") from None
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved
    total, failed = _failures(results)
    if failed or total == 0:
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        raise CocotbFailure(
            f"{len(failed)} of {total} cocotb tests failed ({simulator}, {label}):\n"
            + "\n".join(failed) + f"\nlog: {log}\n{tail}")
    return total


def read_config_env():
    """Return the :class:`AcceleratorConfig` a test bench was started with."""
    from hwgen.config import AcceleratorConfig

    return AcceleratorConfig.from_dict(json.loads(os.environ["HWGEN_CONFIG"]))
