"""What nextpnr's log says: device use, timing, the time of each phase, and, while it runs, the
phase it has reached and the arcs its router has left.

:func:`parse_nextpnr_log` reads a finished log; :class:`LogWatch` follows the log of a running
nextpnr (:func:`nextpnr_phases`, :func:`nextpnr_arcs_left`) so that a build can say where it is.
"""

import math
import re

from .catalog import Family

__all__ = ["CLOCK_NET", "NEXTPNR_CELLS", "NEXTPNR_SHARED_CELLS", "LogWatch", "nextpnr_arcs_left",
           "nextpnr_overuse", "nextpnr_phases", "parse_nextpnr_log", "util_of"]

#: The net of the design's clock, as nextpnr names it (the ``sync`` domain's clock, which a PLL
#: drives); a global buffer's net is named ``$glbnet$`` and it.
CLOCK_NET = "clk"
_UTIL_RE = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", re.M)
_FMAX_RE = re.compile(
    r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz \((PASS|FAIL) at ([\d.]+) MHz\)")
# The lines in which nextpnr's placers and routers time themselves, and the phase each times.
_PHASE_TIME_RES = (
    ("place", re.compile(r"^Info: HeAP Placer Time: ([\d.]+)s", re.M)),
    ("refine", re.compile(r"^Info: SA placement time ([\d.]+)s", re.M)),
    ("route", re.compile(r"^Info: Router[12] time ([\d.]+)s", re.M)),
)

#: nextpnr's cell type of each report resource (``lut``, ``ff``, ``dsp``, ``bram``, ``pll``,
#: ``io``), per family; the iCE40's table has no flip-flop line.
NEXTPNR_CELLS = {
    Family.ICE40: {"lut": "ICESTORM_LC", "dsp": "ICESTORM_DSP", "bram": "ICESTORM_RAM",
                   "spram": "ICESTORM_SPRAM", "pll": "ICESTORM_PLL", "io": "SB_IO"},
    Family.ECP5: {"lut": "TRELLIS_COMB", "ff": "TRELLIS_FF", "dsp": "MULT18X18D",
                  "bram": "DP16KD", "pll": "EHXPLLL", "io": "TRELLIS_IO"},
    Family.GOWIN: {"lut": "LUT4", "ff": "DFF", "dsp": "MULT18X18", "bram": "BSRAM",
                   "pll": "rPLL", "io": "IOB"},
}
#: Cells that take sites of a report resource besides its own cell, per family, with the share
#: of a site each takes: a Gowin ALU (a carry cell) is a LUT4 of its slice in carry mode, a
#: MULT9X9 half of a MULT18X18.
NEXTPNR_SHARED_CELLS = {Family.GOWIN: {"lut": (("ALU", 1),), "dsp": (("MULT9X9", 0.5),)}}


def parse_nextpnr_log(text):
    """Read device use and timing from a nextpnr log.

    Returns
    -------
    dict
        ``"utilisation"``: ``{cell type: (used, available)}`` from the last "Device
        utilisation" table; ``"clocks"``: ``{clock: {"fmax_mhz", "target_mhz", "pass"}}`` from
        the last timing report (after routing); ``"phases_s"``: the seconds nextpnr says its
        placement (``"place"``), the placement's refinement (``"refine"``) and routing
        (``"route"``) took, for the phases the log reports.
    """
    util = {}
    tables = text.split("Device utilisation:")
    if len(tables) > 1:
        table = tables[-1].split("\n\n")[0]
        util = {m[1]: (int(m[2]), int(m[3])) for m in _UTIL_RE.finditer(table)}
    clocks = {}
    for m in _FMAX_RE.finditer(text):
        clocks[m[1]] = {"fmax_mhz": float(m[2]), "target_mhz": float(m[4]),
                        "pass": m[3] == "PASS"}
    phases = {}
    for phase, pattern in _PHASE_TIME_RES:
        found = pattern.findall(text)
        if found:
            phases[phase] = float(found[-1])
    return {"utilisation": util, "clocks": clocks, "phases_s": phases}


def util_of(family, res, util):
    """Return ``(used, available)`` of the report resource ``res`` (``lut``, ``dsp``, ...) in
    nextpnr's utilisation table ``util`` (:func:`parse_nextpnr_log`) of a ``family`` design:
    its cell's line, with the cells that take its sites too (:data:`NEXTPNR_SHARED_CELLS`)."""
    used, avail = util.get(NEXTPNR_CELLS[family].get(res), (0, 0))
    shared = sum(util.get(cell, (0, 0))[0] * share
                 for cell, share in NEXTPNR_SHARED_CELLS.get(family, {}).get(res, ()))
    return used + math.ceil(shared), avail


# Log lines that start nextpnr's long phases, and what the progress line calls them.
_NEXTPNR_PHASES = (
    ("Info: Running main analytical placer", "placing"),
    ("Info: Running Static placer", "placing"),
    ("Info: Running simulated annealing placer for refinement", "refining the placement"),
    ("Info: Routing..", "routing"),
    ("Info: Running router2...", "routing"),
)


def nextpnr_phases(text):
    """Return the long phases (placing, refining the placement, routing) a nextpnr log has
    reached, in order."""
    seen = []
    for line in text.splitlines():
        for marker, phase in _NEXTPNR_PHASES:
            if line.startswith(marker) and phase not in seen:
                seen.append(phase)
    return seen


_ROUTING_ARCS = re.compile(r"^Info: Routing (\d+) arcs\.$", re.M)
# Router1's progress table, every 1000 arcs routed: the last column before the times is the
# number of arcs left to route.
_ROUTER1_ROW = re.compile(r"^Info:\s+\d+ \|\s+\d+\s+\d+ \|\s+\d+\s+\d+ \|\s+(\d+)\|", re.M)


def nextpnr_arcs_left(text):
    """Return ``(left, total)``: the arcs router1 has still to route as of the last progress
    row of a nextpnr log, and the arcs it routes in all; ``None`` for a part without them
    (before routing, or another router's log)."""
    total = _ROUTING_ARCS.findall(text)
    rows = _ROUTER1_ROW.findall(text)
    if not total or not rows:
        return None
    return int(rows[-1]), int(total[-1])


_ROUTER2_ITER = re.compile(r"^Info:\s+iter=(\d+) wires=\d+ overused=\d+ overuse=(\d+)", re.M)


def nextpnr_overuse(text):
    """Return ``(iteration, overuse)``: router2's last iteration in a nextpnr log and the
    routing resources still used more than once after it (0 once routed), or ``None`` for a
    log without them (before routing, or router1's)."""
    rows = _ROUTER2_ITER.findall(text)
    return (int(rows[-1][0]), int(rows[-1][1])) if rows else None


class LogWatch:
    """Follow a nextpnr log that a running nextpnr writes; report each phase once, as it
    appears, and keep the router's progress (:attr:`arcs`).

    Parameters
    ----------
    path : pathlib.Path
        The log; it need not exist yet.
    """

    def __init__(self, path):
        self._path = path
        self._offset = 0
        self._partial = b""   # bytes after the last newline: a line still being written
        self._text = ""       # the whole lines read so far (a nextpnr log is some 70 KB)
        self._seen = []
        #: ``(left, total)`` arcs of the router as last read, or None before it reports.
        self.arcs = None
        #: ``(iteration, overuse)`` of router2 as last read, or None before it reports.
        self.overuse = None

    def new_phases(self):
        """Read what the log gained; return the phases it reached since the last call."""
        try:
            with open(self._path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        lines, _, self._partial = (self._partial + chunk).rpartition(b"\n")
        if lines:
            self._text += lines.decode(errors="replace") + "\n"
        # Read again as a whole: the router's total precedes its rows, maybe chunks earlier.
        phases = nextpnr_phases(self._text)
        fresh, self._seen = phases[len(self._seen):], phases
        self.arcs = nextpnr_arcs_left(self._text)
        self.overuse = nextpnr_overuse(self._text)
        return fresh
