"""``pareto.png``: every point of a sweep, its fronts highlighted, the board's capacity marked.

Two panels, inferences per second (log scale) against LUTs and against DSP blocks. Grey dots
are the designs that are ok, the coloured line and dots their front, red crosses the designs
the fit estimate refuses (drawn where their estimate puts them, when the model compiled onto
them), the dashed vertical line the device's capacity (only named in the legend when it lies
far beyond every design) and a dotted horizontal line for the best rate the UART allows at
each baud rate of the sweep (:func:`link_bounds`). The figure is drawn with Matplotlib's Agg
canvas, without ``pyplot``'s global state, and saved without a time stamp, so the same rows
give the same file.
"""

from ..config import Dataflow
from .pareto import FAMILY_UNITS, RESOURCES, cost, fronts, rate_text

__all__ = ["link_bounds", "plot_pareto"]

_VALUE = "device_infer_per_s"
# A capacity this many times the largest design drawn is only named in the legend.
_FAR = 2.5
# The UART bounds' line styles, one per rate.
_LINK_STYLES = (":", "-.", "--")


def _label(row):
    label = f"{row.get('rows')}x{row.get('cols')}"
    if row.get("dataflow") == Dataflow.OS:
        label += " os"
    return label


def link_bounds(rows, baud):
    """Return ``[(label, inferences/s)]``, the UART's bound at each rate of the ok ``rows``:
    the best ``link_infer_per_s`` of the points at that rate, ``baud`` for all of them when
    given, else each point's own (results.csv's ``baud``), slowest rate first."""
    best = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("link_infer_per_s"):
            rate = baud if baud is not None else r.get("baud")
            best[rate] = max(best.get(rate, 0), r["link_infer_per_s"])
    if len(best) == 1:
        return [(f"UART bound at {rate_text(rows, baud)}", *best.values())]
    return [(f"UART bound at {rate:,} baud" if rate else "UART bound", bound)
            for rate, bound in sorted(best.items(), key=lambda kv: kv[0] or 0)]


def _panel(ax, rows, front, board, resource, *, links):
    units = FAMILY_UNITS.get(board.family, {}).get(resource, resource.upper())
    ok = [r for r in rows if r.get("status") == "ok" and cost(r, resource) is not None]
    refused = [r for r in rows if r.get("status") == "no-fit" and r.get(_VALUE)
               and cost(r, resource) is not None]
    if ok:
        ax.scatter([cost(r, resource) for r in ok], [r[_VALUE] for r in ok], s=16,
                   color="0.6", label=f"designs ({len(ok)})", zorder=2)
    if refused:
        ax.scatter([cost(r, resource) for r in refused], [r[_VALUE] for r in refused], s=20,
                   marker="x", color="tab:red", alpha=0.6,
                   label=f"does not fit ({len(refused)})", zorder=2)
    if front:
        xs = [cost(r, resource) for r in front]
        ys = [r[_VALUE] for r in front]
        ax.step(xs, ys, where="post", color="tab:blue", linewidth=1.5, zorder=3)
        ax.scatter(xs, ys, s=30, color="tab:blue", label=f"Pareto front ({len(front)})",
                   zorder=4)
        labelled = set()
        for x, y, r in zip(xs, ys, front, strict=True):
            if _label(r) not in labelled:   # the cheapest front point of each array shape
                labelled.add(_label(r))
                ax.annotate(_label(r), (x, y), textcoords="offset points", xytext=(5, -9),
                            fontsize=7, color="tab:blue")
    capacity = board.capacity.get(resource)
    drawn = [cost(r, resource) for r in ok + refused]
    if capacity and drawn and capacity > _FAR * max(drawn):
        # Far beyond every design: named in the legend rather than squeezing the designs.
        ax.plot([], [], color="tab:red", linestyle="--", linewidth=1,
                label=f"{board.name}: {capacity:,} {units} (off the axis)")
    elif capacity:
        ax.axvline(capacity, color="tab:red", linestyle="--", linewidth=1,
                   label=f"{board.name}: {capacity:,} {units}")
    for n, (label, bound) in enumerate(links):
        ax.axhline(bound, color="tab:green", linestyle=_LINK_STYLES[n % len(_LINK_STYLES)],
                   linewidth=1.2,
                   label=f"{label}: {bound:,.0f}/s")
    ax.set_yscale("log")
    ax.set_xlabel(f"{units} (count)")
    ax.set_ylabel("inferences per second (1/s)")
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    ax.legend(fontsize=7, loc="best")


def plot_pareto(rows, path, board, *, title, baud):
    """Draw ``rows`` of one sweep on ``board`` into the PNG file ``path``.

    Parameters
    ----------
    rows : list of dict
        Rows of ``results.csv``.
    path : path-like
    board : hwgen.boards.Board
    title : str
    baud : int or None
        The sweep's UART rate, named beside its bound (None: the points' own,
        :func:`hwgen.dse.pareto.rate_text`).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.6), dpi=110)
    FigureCanvasAgg(fig)
    links = link_bounds(rows, baud)
    axes = fig.subplots(1, len(RESOURCES))
    for ax, (resource, front) in zip(axes, fronts(rows).items(), strict=True):
        _panel(ax, rows, front, board, resource, links=links)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
