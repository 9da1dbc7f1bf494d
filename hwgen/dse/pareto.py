"""The Pareto front of a sweep: the designs no other design beats on both cost and speed.

A design is on the front of throughput against a resource when no other design uses at most as
much of it and computes at least as many inferences per second, and is better in one of the
two. The throughput is the device's (``device_infer_per_s``: inferences per second at the
point's clock from :mod:`hwgen.cycles`; the target clock in the estimate tier, Fmax in the build
tier); the UART's bound at the sweep's baud rate is listed beside it. The resources are the
build's measurements where the point was built, the fit estimate otherwise.
"""

__all__ = ["FAMILY_UNITS", "RESOURCES", "cost", "fronts", "pareto_front", "rate_text",
           "render_markdown"]

#: The resources a front is drawn against.
RESOURCES = ("lut", "dsp")
#: What a resource is called on each FPGA family (axis labels, table headers).
FAMILY_UNITS = {
    "ice40": {"lut": "logic cells", "dsp": "SB_MAC16 DSP blocks", "bram": "block RAMs"},
    "ecp5": {"lut": "LUT4s", "dsp": "MULT18X18D multipliers", "bram": "DP16KD block RAMs"},
}
_VALUE = "device_infer_per_s"


def pareto_front(items, cost_of, value_of):
    """Return the items no other item dominates, by increasing cost.

    An item dominates another when its cost is at most the other's and its value at least the
    other's, one of the two strictly. Items with the same cost and value as a front item are on
    the front too. Items whose cost or value is None are left out.

    Parameters
    ----------
    items : iterable
    cost_of, value_of : callable
        Return an item's cost (lower is better) and value (higher is better).
    """
    known = [(cost_of(i), value_of(i), n, i) for n, i in enumerate(items)]
    known = sorted(((c, v, n, i) for c, v, n, i in known if c is not None and v is not None),
                   key=lambda t: (t[0], -t[1], t[2]))
    front, best, last = [], None, None
    for c, v, _, item in known:
        if best is None or v > best:
            front.append(item)
            best, last = v, (c, v)
        elif (c, v) == last:
            front.append(item)
    return front


def cost(row, resource):
    """Return the amount of ``resource`` a row's design uses: built, else estimated."""
    measured = row.get(resource)
    return measured if measured is not None else row.get(f"est_{resource}")


def fronts(rows):
    """Return ``{resource: front rows}`` of the rows whose status is ok, for each of
    :data:`RESOURCES`."""
    ok = [r for r in rows if r.get("status") == "ok"]
    return {res: pareto_front(ok, lambda r, res=res: cost(r, res), lambda r: r.get(_VALUE))
            for res in RESOURCES}


def _varying(rows, fields):
    return [f for f in fields if len({repr(r.get(f)) for r in rows}) > 1]


def _number(value, digits=0):
    if value is None:
        return ""
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def rate_text(rows, baud):
    """Name the sweep's UART rate: ``baud``, or (None) the points' own rates (results.csv's
    ``baud``, the board's bridge rate where a point's clocks make it)."""
    if baud is not None:
        return f"{baud:,} baud"
    rates = sorted({r["baud"] for r in rows if r.get("baud")})
    if len(rates) == 1:
        return f"{rates[0]:,} baud (the board's rate)"
    return ("each point's rate (column baud: the board's bridge rate where the point's clocks "
            "make it" + (f"; {', '.join(f'{r:,}' for r in rates)}" if rates else "") + ")")


def render_markdown(rows, board, *, tier, model, baud):
    """Return the text of ``pareto.md`` for the rows of one sweep on ``board``."""
    from .space import FIELDS

    units = FAMILY_UNITS.get(board.family, {"lut": "LUTs", "dsp": "DSPs", "bram": "BRAMs"})
    ok = [r for r in rows if r.get("status") == "ok"]
    failed = {}
    for r in rows:
        if r.get("status") != "ok":
            failed[r.get("status")] = failed.get(r.get("status"), 0) + 1
    detail = ", ".join(f"{k} {v}" for k, v in sorted(failed.items()))
    measured = "place and route" if tier == "build" else "the fit estimate"
    clock = "Fmax" if tier == "build" else "the target clock"
    cap = board.capacity
    lines = [
        f"# Pareto front: {model} on {board.name} ({tier} tier)", "",
        f"{len(rows)} point{'s' * (len(rows) != 1)}: {len(ok)} ok, {sum(failed.values())} failed"
        + (f" ({detail})" if detail else "") + ".", "",
        f"Throughput: inferences per second the device computes at {clock}, from the exact "
        f"cycle model at full batches; 'link-bound' is the rate the UART allows at "
        f"{rate_text(rows, baud)}. Resources: from {measured}. The {board.name} has "
        f"{_number(cap.get('lut'))} {units['lut']}, {_number(cap.get('dsp'))} {units['dsp']} and "
        f"{_number(cap.get('bram'))} {units['bram']}.",
    ]
    shown = _varying(rows, [f for f in FIELDS if f not in ("clock_hz",)]) or ["rows", "cols"]
    head = [*shown, "clock MHz", units["lut"], units["dsp"], units["bram"], "cycles/inference",
            "inferences/s", "link-bound/s", "point"]
    for res, front in fronts(rows).items():
        lines += ["", f"## Throughput against {units[res]}", ""]
        if not front:
            lines.append("No point is ok, so there is no front.")
            continue
        lines += ["| " + " | ".join(head) + " |",
                  "|" + "|".join(" --- " if h in shown or h == "point" else " ---: "
                                 for h in head) + "|"]
        for r in front:
            cells = [("all" if f == "post_lanes" and r.get(f) is None else str(r.get(f)))
                     for f in shown]
            cells += [f"{r.get('clock_mhz'):g}", _number(cost(r, "lut")),
                      _number(cost(r, "dsp")), _number(cost(r, "bram")),
                      _number(r.get("cycles_per_inference"), 1),
                      _number(r.get(_VALUE)), _number(r.get("link_infer_per_s")),
                      f"`{r.get('point')}`"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
