"""The record of measured figures: one entry per command that measured them.

The record is a JSON file in the repository (``docs/figures.json``). Each entry is keyed by
the command line that printed its figures (``hwgen build --board ulx3s-85f --preset
ulx3s-85f-resnet8``, ``python benchmarks/mlperf_tiny.py --models resnet8``) and holds them
with the date, the commit and the machine's load when they were measured::

    {"hwgen build --board icebreaker --clock-hz 24000000 --baud 6000000": {
        "date": "2026-11-26", "commit": "4e76456", "load": 5.2,
        "design": "icebreaker",
        "figures": {"fmax_mhz": 29.6, "lut": 5113, "lut_available": 5280, ...}}}

A command that measures takes ``--record [FILE]`` (:func:`add_record_option`) and writes its
entry with :func:`record`, replacing the command's previous one; the table of
docs/performance.md's "Current figures" is regenerated from the record at the same time
(:func:`update_docs`, also ``python -m hwgen.figures``). Everything else that states a figure
is generated from the record or tested against it (``tests/test_figures.py``): the README's
figures, docs/boards.md's presets, ``REACHED_HZ`` of ``benchmarks/mlperf_tiny.py``
(:func:`reached_hz`) and the presets' comments in :mod:`hwgen.boards.catalog`.
"""

import argparse
import datetime
import json
import numbers
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

__all__ = ["DEFAULT_RECORD", "add_record_option", "benchmark_record", "command_line",
           "figures_table", "load", "reached_hz", "record", "record_benchmark", "record_path",
           "update_docs"]

#: Where the record lives in a checkout of hwgen, relative to its root.
DEFAULT_RECORD = Path("docs") / "figures.json"
#: The page whose "Current figures" table is generated, beside the record.
DOCS_PAGE = "performance.md"
_BEGIN, _END = "<!-- figures: begin -->", "<!-- figures: end -->"


def add_record_option(parser):
    """Add ``--record [FILE]`` to an :mod:`argparse` parser."""
    parser.add_argument(
        "--record", nargs="?", const=str(DEFAULT_RECORD), default=None, metavar="FILE",
        help=f"write the measured figures into the record (default {DEFAULT_RECORD}, run from "
             "the hwgen checkout), keyed by this command line, and regenerate the current "
             f"figures of {DOCS_PAGE} beside it")


def record_path(value):
    """Return the record file that ``--record`` names, checked before anything is measured.

    Raises
    ------
    ValueError
        If the file does not exist (a new record starts as ``{}``) or is not a record.
    """
    path = Path(value)
    if not path.is_file():
        raise ValueError(f"--record: {path} does not exist; allowed: an existing record such "
                         f"as the checkout's {DEFAULT_RECORD} (run from the checkout's root)")
    load(path)
    return path


def load(path=None):
    """Return the record at ``path`` (default: this checkout's ``docs/figures.json``).

    Raises
    ------
    ValueError
        If the file is not JSON of entries as the module describes.
    """
    path = Path(__file__).parents[1] / DEFAULT_RECORD if path is None else Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the record of figures: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the record is not a JSON object of entries")
    for command, entry in data.items():
        figures = entry.get("figures") if isinstance(entry, dict) else None
        if not isinstance(figures, dict) or not all(
                isinstance(v, numbers.Real) for v in figures.values()):
            raise ValueError(f"{path}: entry {command!r} has no 'figures' of numbers")
    return data


def command_line(program, argv, *, record=None, drop=()):
    """Return the key of a run: ``program`` and its arguments ``argv`` without ``--record``
    (and its file ``record``, as parsed) and without the options in ``drop`` (with their value,
    if the next word is one: output folders, a progress bar, which change nothing measured)."""
    words, skip = [], False
    for index, word in enumerate(argv):
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        following = argv[index + 1] if index + 1 < len(argv) else None
        if name == "--record":
            skip = "=" not in word and following is not None and following == record
            continue
        if name in drop:
            skip = "=" not in word and following is not None and not following.startswith("-")
            continue
        words.append(word)
    return " ".join([program, *(shlex.quote(w) for w in words)])


def benchmark_record(parser, args):
    """Return the record a benchmark's ``--record`` names, checked before it measures (the
    parser's usage error otherwise), or None without ``--record``."""
    if args.record is None:
        return None
    try:
        return record_path(args.record)
    except ValueError as exc:
        parser.error(str(exc))


def record_benchmark(script, args, argv, figures, **kwargs):
    """Write a benchmark's ``figures`` into the record ``--record`` named (if it did) under
    ``python benchmarks/<script> <argv>``; ``argv`` is what the script parsed (None:
    ``sys.argv[1:]``) and ``kwargs`` as for :func:`record`."""
    if args.record is None:
        return
    argv = sys.argv[1:] if argv is None else argv
    command = command_line(f"python benchmarks/{Path(script).name}", argv, record=args.record)
    try:
        record(args.record, command, figures, **kwargs)
    except ValueError as exc:  # nothing measured: one line and exit 1, as `hwgen` says it
        print(f"{Path(script).name}: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


def _commit():
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=False, timeout=10,
                              cwd=Path(__file__).parents[1])
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def record(path, command, figures, *, design=None, note=None):
    """Write ``figures`` (name -> number) as the entry of ``command`` in the record at
    ``path``, replacing its previous one, and regenerate the current figures of the docs
    page beside it (:func:`update_docs`). Return the entry.

    ``design`` names the preset that was measured (a board's or a named one), for
    :func:`reached_hz`; ``note`` says under which conditions, in a few words.
    """
    bad = {k: v for k, v in figures.items()
           if not isinstance(v, numbers.Real) or isinstance(v, complex)}
    if bad:
        raise ValueError(f"record: figures must be numbers; got {bad}")
    # A run whose figures were not found must not replace the command's measured entry.
    if not figures:
        raise ValueError(f"record: `{command}` measured no figures; its entry in {path} is "
                         "left as it was")
    path = Path(path)
    entry = {"date": datetime.datetime.now(datetime.UTC).date().isoformat(),
             "commit": _commit(), "load": round(os.getloadavg()[0], 1),
             "figures": {k: _plain(v) for k, v in sorted(figures.items())}}
    if design is not None:
        entry["design"] = design
    if note is not None:
        entry["note"] = note
    # Two measuring commands that finish together (two builds side by side) each read, change
    # and write the whole record: one at a time, or the later write loses the earlier entry.
    with FileLock(f"{path}.lock"):
        data = load(path)
        data[command] = entry
        path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        update_docs(path)
    print(f"recorded {len(figures)} figures of `{command}` in {path}", flush=True)
    return entry


def _plain(value):
    """A figure as JSON keeps it: bools as 0/1, NumPy scalars as Python numbers, floats to
    nine significant digits (more than any measurement holds; no binary noise)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    return float(f"{float(value):.9g}")


def reached_hz(data=None):
    """Return ``{design: Fmax in Hz}`` of each preset's newest recorded build (an entry of
    ``hwgen build`` with its ``design`` and an ``fmax_mhz``)."""
    data = load() if data is None else data
    newest = {}
    for command, entry in data.items():
        design, fmax = entry.get("design"), entry["figures"].get("fmax_mhz")
        if not command.startswith("hwgen build ") or design is None or fmax is None:
            continue
        if design not in newest or entry["date"] >= newest[design][0]:
            newest[design] = (entry["date"], round(fmax * 1e6))
    return {design: hz for design, (_, hz) in sorted(newest.items())}


def _number(value):
    return f"{value:,}" if isinstance(value, int) else f"{value:,.6g}"


def figures_table(data):
    """Return the Markdown table of the record: one row per command, newest first."""
    lines = ["| command | figures | measured |", "| --- | --- | --- |"]
    for command, entry in sorted(data.items(), key=lambda kv: (kv[1]["date"], kv[0]),
                                 reverse=True):
        figures = ", ".join(f"{name} {_number(value)}"
                            for name, value in entry["figures"].items())
        when = ", ".join(str(p) for p in (entry["date"], entry.get("commit"),
                                          f"load {entry['load']}" if "load" in entry else None)
                         if p)
        note = f" ({entry['note']})" if entry.get("note") else ""
        lines.append(f"| `{command}` | {figures} | {when}{note} |")
    return "\n".join(lines)


def docs_section(data):
    """Return the generated text between the page's markers."""
    return (f"{_BEGIN}\n<!-- generated from {DEFAULT_RECORD.name} by `python -m hwgen.figures`; "
            f"edit the record, not this table -->\n\n{figures_table(data)}\n\n{_END}")


def update_docs(path, *, check=False):
    """Regenerate the "Current figures" table of the docs page beside the record at ``path``
    (between its markers). With ``check``, change nothing and return whether it is current.

    Raises
    ------
    ValueError
        If the page or its markers are missing.
    """
    page = Path(path).parent / DOCS_PAGE
    if not page.is_file():
        raise ValueError(f"{page} does not exist: the record's table goes there")
    text = page.read_text()
    found = re.search(re.escape(_BEGIN) + ".*?" + re.escape(_END), text, re.S)
    if not found:
        raise ValueError(f"{page}: no '{_BEGIN}' ... '{_END}' markers for the figures' table")
    new = text[:found.start()] + docs_section(load(path)) + text[found.end():]
    if check:
        return new == text
    page.write_text(new)
    return True


def main(argv=None):
    """``python -m hwgen.figures [--check] [FILE]``: regenerate (or check) the docs' table."""
    parser = argparse.ArgumentParser(prog="python -m hwgen.figures", description=main.__doc__)
    parser.add_argument("record", nargs="?", default=str(DEFAULT_RECORD), metavar="FILE")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the table differs from the record")
    args = parser.parse_args(argv)
    try:
        current = update_docs(args.record, check=args.check)
    except ValueError as exc:
        print(f"hwgen.figures: error: {exc}", file=sys.stderr)
        return 2
    if not current:
        print(f"{DOCS_PAGE} is not the record's: run python -m hwgen.figures", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
