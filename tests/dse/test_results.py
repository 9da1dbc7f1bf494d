"""hwgen.dse.results: results.csv written row by row and read back with its types."""

import csv

import pytest

from hwgen.dse.results import COLUMNS, ResultsError, ResultsFile, as_read


def _row(n, **extra):
    return {"point": f"{n:016x}", "board": "icebreaker", "tier": "estimate", "model": "m",
            "baud": 1_000_000, "name": f"design{n}", "rows": n, "cols": 2, "dataflow": "ws",
            "post_lanes": None, "status": "ok", "reason": "", "est_lut": 100 * n,
            "cycles_per_inference": 12.5, "device_infer_per_s": 1e6 / n, "timing_pass": n % 2 == 0,
            **extra}


def _full(row):
    # What the file must give back: every column, unknown ones (and empty strings) None.
    return {c: (None if row.get(c) == "" else row.get(c)) for c in COLUMNS}


def test_rows_come_back_with_their_types(tmp_path):
    results = ResultsFile(tmp_path / "results.csv")
    assert results.read() == []
    results.start()
    rows = [_row(1), _row(2, status="invalid", reason='rows=0, "quoted", and commas'),
            _row(3, rows="abc")]   # a failed point keeps what it was given
    for row in rows:
        results.append(row)
        assert results.read()[-1] == _full(row)   # on disk at once
    assert results.read() == [_full(r) for r in rows]
    with open(tmp_path / "results.csv", newline="") as f:
        lines = list(csv.reader(f))
    assert lines[0] == list(COLUMNS) and len(lines) == 4
    assert lines[1][list(COLUMNS).index("post_lanes")] == ""
    assert [as_read(r) for r in rows] == results.read()


def test_start_keeps_or_empties_the_file(tmp_path):
    results = ResultsFile(tmp_path / "results.csv")
    results.start()
    results.append(_row(1))
    results.start()                 # a rerun appends
    results.append(_row(2))
    assert [r["rows"] for r in results.read()] == [1, 2]
    results.start(fresh=True)       # --fresh
    assert results.read() == []
    results.rewrite([_row(5), _row(4)])
    assert [r["rows"] for r in results.read()] == [5, 4]
    assert not (tmp_path / "results.csv.tmp").exists()


def test_a_row_cut_short_is_dropped_and_the_next_starts_on_its_own_line(tmp_path):
    path = tmp_path / "results.csv"
    results = ResultsFile(path)
    results.start()
    results.append(_row(1))
    with open(path, "a") as f:
        f.write("000000000000000f,icebreaker,esti")   # a crash in the middle of a row
    assert [r["rows"] for r in results.read()] == [1]
    results.start()
    results.append(_row(2))
    assert [r["rows"] for r in results.read()] == [1, 2]


def test_a_file_of_other_columns_or_damaged_cells_is_refused(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("point,board\nabc,icebreaker\n")
    with pytest.raises(ResultsError, match=r"results\.csv: its columns are not those this "
                                           r"hwgen writes .*--fresh"):
        ResultsFile(path).read()
    results = ResultsFile(path)
    results.start(fresh=True)
    results.append(_row(1, est_lut="many"))
    with pytest.raises(ResultsError, match=r"results\.csv:2: invalid literal for int"):
        results.read()
    results.start(fresh=True)
    results.append(_row(1, timing_pass="maybe"))
    with pytest.raises(ResultsError, match=r"results\.csv:2: 'maybe' is not True or False"):
        results.read()
    results.start(fresh=True)
    with open(path, "a") as f:
        f.write("a,b\n" + ",".join([""] * len(COLUMNS)) + "\n")
    with pytest.raises(ResultsError, match=rf"results\.csv:2: 2 cells; allowed: {len(COLUMNS)}"):
        results.read()
