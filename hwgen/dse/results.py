"""``results.csv``: one row per evaluated point, appended as each point finishes.

Every row is written and flushed the moment its point comes back, so an interrupted sweep
keeps every finished point, and a rerun skips the points whose key (:func:`point_key
<hwgen.dse.space.point_key>`) is already in the file. Values are written as Python prints them;
an empty cell is an unknown (a figure the point's tier or failure did not produce) or, in
``post_lanes``, every column requantized at once.
"""

import csv
import os
from pathlib import Path

from .space import FIELDS

__all__ = ["COLUMNS", "ResultsError", "ResultsFile", "as_read"]

_CONFIG_TYPES = {field: (str if field == "dataflow" else int) for field in FIELDS}

#: The columns of ``results.csv`` and the type of each.
COLUMNS = {
    "point": str, "board": str, "tier": str, "model": str, "baud": int,
    "name": str, "config_hash": str, **_CONFIG_TYPES,
    "status": str, "reason": str,
    "est_lut": int, "est_ff": int, "est_dsp": int, "est_bram": int,
    "lut": int, "ff": int, "dsp": int, "bram": int,
    "fmax_mhz": float, "timing_pass": bool, "build_s": float,
    "batch": int, "cycles_per_run": int, "cycles_per_inference": float,
    "clock_mhz": float, "device_infer_per_s": float, "link_infer_per_s": float,
    "infer_per_s": float, "eval_s": float,
}


# Bytes at the end of the file searched for the end of the last whole row (rows are far
# shorter).
_TAIL_BYTES = 1 << 16


class ResultsError(ValueError):
    """``results.csv`` cannot be read as a results file of this version."""


def _parse(column, text):
    if text == "":
        return None
    kind = COLUMNS[column]
    if kind is bool:
        if text not in ("True", "False"):
            raise ValueError(f"{text!r} is not True or False")
        return text == "True"
    if kind is str:
        return text
    if column in _CONFIG_TYPES:
        # A failed point keeps the values it was given, which need not be integers.
        try:
            return int(text)
        except ValueError:
            return text
    return kind(text)


def _format(value):
    return "" if value is None else str(value)


def as_read(row):
    """Return ``row`` as :meth:`ResultsFile.read` gives it back once written: every column,
    each of its column's type, empty cells (and empty strings) None."""
    return {c: _parse(c, _format(row.get(c))) for c in COLUMNS}


class ResultsFile:
    """The ``results.csv`` of a sweep folder.

    Parameters
    ----------
    path : path-like
    """

    def __init__(self, path):
        self.path = Path(path)

    def read(self):
        """Return the rows in the file (an empty list if there is no file).

        A last row cut short (a crash while writing it) is dropped: its point runs again.

        Raises
        ------
        ResultsError
            If the header is not :data:`COLUMNS` or a cell is not of its column's type,
            naming the line.
        """
        if not self.path.exists():
            return []
        with open(self.path, newline="") as f:
            lines = list(csv.reader(f))
        if not lines:
            return []
        if lines[0] != list(COLUMNS):
            raise ResultsError(
                f"{self.path}: its columns are not those this hwgen writes (an older "
                f"version?); allowed: {','.join(COLUMNS)}; move the file away or start "
                f"afresh (--fresh)")
        rows = []
        for number, cells in enumerate(lines[1:], start=2):
            if len(cells) != len(COLUMNS):
                if len(cells) < len(COLUMNS) and number == len(lines):
                    break
                raise ResultsError(f"{self.path}:{number}: {len(cells)} cells; allowed: "
                                   f"{len(COLUMNS)}")
            try:
                rows.append({c: _parse(c, v) for c, v in zip(COLUMNS, cells, strict=True)})
            except ValueError as exc:
                raise ResultsError(f"{self.path}:{number}: {exc}") from None
        return rows

    def start(self, *, fresh=False):
        """Prepare the file for :meth:`append`: write the header to a new (or, with
        ``fresh``, emptied) file; drop a last row cut short by a crash."""
        if fresh or not self.path.exists() or self.path.stat().st_size == 0:
            self.rewrite([])
            return
        with open(self.path, "rb+") as f:
            end = f.seek(0, os.SEEK_END)
            tail_start = max(0, end - _TAIL_BYTES)
            f.seek(tail_start)
            tail = f.read()
            if not tail.endswith(b"\n"):
                f.truncate(tail_start + tail.rfind(b"\n") + 1)

    def append(self, row):
        """Add one row (a dict of :data:`COLUMNS`; missing ones empty) to the file at once."""
        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerow([_format(row.get(c)) for c in COLUMNS])

    def rewrite(self, rows):
        """Replace the file by ``rows`` at once (a new file renamed over the old one)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(COLUMNS)
            for row in rows:
                writer.writerow([_format(row.get(c)) for c in COLUMNS])
        os.replace(tmp, self.path)
