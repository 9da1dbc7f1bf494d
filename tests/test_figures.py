"""Every measured figure the docs and the code state is the record's (docs/figures.json).

- README.md's "Current figures" table and docs/boards.md's presets table: each row names the
  commands that measured it (backticked, in its last cell); each has an entry in the record,
  and every number of the row's figures cell is one of those entries' figures, as printed
  (the same decimals; a figure may be shown in thousands or millions: ``1.24 M``).
- The demo's output in the README is the ``hwgen demo`` entry's.
- docs/performance.md's "Current figures" table is the record's, as generated.
- ``REACHED_HZ`` of benchmarks/mlperf_tiny.py is each preset's newest recorded build's Fmax,
  and the presets' comments in hwgen/boards/catalog.py name no clock but configured ones and
  recorded ones.
"""

import importlib.util
import json
import re
from pathlib import Path

import pytest

from hwgen import figures
from hwgen.boards.catalog import BOARDS, NAMED_PRESETS
from hwgen.cli.build import UNMEASURED

ROOT = Path(__file__).parents[1]
RECORD = ROOT / "docs" / "figures.json"
# A number as the docs print it: 1,241,272 or 97.22 or 3.
_NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?!\w)")
_COMMAND = re.compile(r"`((?:hwgen|python) [^`]+)`")


def numbers_in(text):
    """Return ``[(value, decimals, as written)]`` of the numbers in ``text``."""
    return [(float(whole.replace(",", "") + (f".{frac}" if frac else "")), len(frac or ""),
             match.group(0)) for match in _NUMBER.finditer(text)
            for whole, frac in [match.groups()]]


def shown_as(value, figure, decimals):
    """Whether ``figure`` printed with ``decimals`` decimals, in units, thousands or millions,
    reads ``value``."""
    return any(round(figure / scale, decimals) == value for scale in (1, 1e3, 1e6))


def unmatched(text, entries):
    """Return the numbers of ``text`` that are no figure of ``entries`` as printed."""
    values = [v for entry in entries for v in entry["figures"].values()]
    return [written for value, decimals, written in numbers_in(text)
            if not any(shown_as(value, v, decimals) for v in values)]


def table_rows(text, heading):
    """Return the rows (lists of cells) of the first table after ``heading``."""
    section = text[text.index(heading):]
    rows = []
    for number, line in enumerate(section.splitlines()):
        if number and line.startswith("#"):
            break
        if line.startswith("|") and not re.match(r"\|\s*-", line):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
        elif rows and not line.startswith("|"):
            break
    return rows[1:]   # without the header


def check_rows(rows, data, figures_cell, where):
    """Return the problems of ``rows``: commands without an entry, numbers of
    ``row[figures_cell]`` that are none of the entries' figures."""
    problems = []
    for row in rows:
        commands = _COMMAND.findall(row[-1])
        if not commands:
            problems.append(f"{where}: row {row[0]!r} names no command (in backticks)")
            continue
        missing = [c for c in commands if c not in data]
        if missing:
            problems.append(f"{where}: row {row[0]!r}: no entry in the record for {missing}")
            continue
        wrong = unmatched(row[figures_cell], [data[c] for c in commands])
        if wrong:
            problems.append(f"{where}: row {row[0]!r}: {wrong} are none of the figures "
                            f"of {commands} in docs/figures.json")
    return problems


@pytest.fixture(scope="module")
def data():
    return figures.load(RECORD)


def test_readme_figures_are_the_records(data):
    rows = table_rows((ROOT / "README.md").read_text(), "## Current figures")
    assert len(rows) >= 10
    assert check_rows(rows, data, 1, "README.md") == []


def test_the_readme_demo_output_is_the_records(data):
    text = (ROOT / "README.md").read_text()
    output = re.search(r"prints:\n\n```text\n(.*?)```", text, re.S).group(1)
    assert len(numbers_in(output)) >= 10
    assert unmatched(output, [data["hwgen demo"]]) == []


def test_boards_md_presets_are_the_records(data):
    rows = table_rows((ROOT / "docs" / "boards.md").read_text(), "| board | preset |")
    unbuilt = {"ulx3s-25f"}
    assert {row[0].split("`")[1] for row in rows} >= set(BOARDS) - unbuilt
    assert check_rows(rows, data, -2, "docs/boards.md") == []


def test_a_wrong_figure_is_found():
    """The checks can fail: a number that is no figure, a command without an entry."""
    data = {"hwgen demo": {"figures": {"accuracy_pct": 97.2222, "rate": 1241272}}}
    assert unmatched("97.22 %, 1.24 M and 1,241,272", data.values()) == []
    assert unmatched("97.23 %, 1.25 M", data.values()) == ["97.23", "1.25"]
    rows = [["demo", "97.22 %", "`hwgen demo`"], ["build", "5", "`hwgen build`"]]
    assert check_rows(rows, data, 1, "x") == [
        "x: row 'build': no entry in the record for ['hwgen build']"]


def test_performance_md_table_is_generated_from_the_record():
    assert figures.update_docs(RECORD, check=True), \
        "docs/performance.md's Current figures differ from docs/figures.json: run " \
        "python -m hwgen.figures"


def test_reached_hz_is_the_newest_recorded_build(data):
    spec = importlib.util.spec_from_file_location("mlperf_tiny",
                                                  ROOT / "benchmarks" / "mlperf_tiny.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reached = figures.reached_hz(data)
    assert reached == module.REACHED_HZ
    for design in ("ulx3s-85f", "icebreaker", *NAMED_PRESETS):
        builds = [e for c, e in data.items() if c.startswith("hwgen build ")
                  and e.get("design") == design]
        newest = max(builds, key=lambda e: e["date"])
        assert reached[design] == round(newest["figures"]["fmax_mhz"] * 1e6)


def test_catalog_comments_name_configured_or_recorded_clocks(data):
    """A clock in a preset's comment is one it is built for, or a recorded Fmax."""
    configured = {b.osc_hz for b in BOARDS.values()} | {b.clock_hz for b in BOARDS.values()}
    presets = [b.preset for b in BOARDS.values()] + [p for _, p in NAMED_PRESETS.values()]
    configured |= {p["clock_hz"] for p in presets if "clock_hz" in p}
    recorded = [e["figures"]["fmax_mhz"] for e in data.values() if "fmax_mhz" in e["figures"]]
    source = (ROOT / "hwgen" / "boards" / "catalog.py").read_text()
    comments = "\n".join(line for line in source.splitlines() if line.lstrip().startswith("#"))
    wrong = [f"{m.group(0)}" for m in re.finditer(r"(\d+(?:\.\d+)?) MHz", comments)
             if float(m.group(1)) * 1e6 not in configured
             and not any(shown_as(float(m.group(1)), f, len((m.group(1) + ".").split(".")[1]))
                         for f in recorded)]
    assert wrong == []


def test_record_writes_an_entry_and_the_table(tmp_path, capsys):
    record = tmp_path / "figures.json"
    record.write_text("{}\n")
    (tmp_path / "performance.md").write_text("# P\n\n<!-- figures: begin -->\n"
                                             "<!-- figures: end -->\n\nhistory\n")
    command = figures.command_line("hwgen build", ["--board", "icebreaker", "--record",
                                                   str(record), "--allow-timing-fail",
                                                   "--out", "b"],
                                   record=str(record), drop=UNMEASURED)
    assert command == "hwgen build --board icebreaker"
    assert figures.command_line("hwgen demo", ["--no-progress", "--rows=4", "--record"],
                                record="docs/figures.json", drop=("--no-progress",)) == \
        "hwgen demo --rows=4"
    figures.record(record, command, {"fmax_mhz": 29.612345678, "pass": True},
                   design="icebreaker")
    entry = json.loads(record.read_text())[command]
    assert entry["figures"] == {"fmax_mhz": 29.6123457, "pass": 1}
    assert entry["design"] == "icebreaker"
    assert figures.reached_hz(json.loads(record.read_text())) == {"icebreaker": 29_612_346}
    page = (tmp_path / "performance.md").read_text()
    assert "| `hwgen build --board icebreaker` | fmax_mhz 29.6123, pass 1 |" in page
    assert page.endswith("\n\nhistory\n")
    assert figures.update_docs(record, check=True)
    with pytest.raises(ValueError, match="figures must be numbers"):
        figures.record(record, command, {"fmax_mhz": "fast"})
    with pytest.raises(ValueError, match=r"measured no figures; its entry .* left as it was"):
        figures.record(record, command, {})
    assert json.loads(record.read_text())[command] == entry
    with pytest.raises(ValueError, match="does not exist"):
        figures.record_path(tmp_path / "none.json")


def test_a_benchmark_that_measured_nothing_exits_1_in_one_line(tmp_path, capsys):
    import argparse

    record = tmp_path / "figures.json"
    record.write_text("{}\n")
    args = argparse.Namespace(record=str(record))
    with pytest.raises(SystemExit) as exit_info:
        figures.record_benchmark("benchmarks/link.py", args, ["--record", str(record)], {})
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("link.py: error: record: ")
    assert record.read_text() == "{}\n"


def test_records_written_at_once_keep_every_entry(tmp_path):
    """Measuring commands that finish together (builds side by side, each a process of its own)
    each add their entry: none is lost to another's write of the whole record."""
    from concurrent.futures import ProcessPoolExecutor

    record = tmp_path / "figures.json"
    record.write_text("{}\n")
    (tmp_path / "performance.md").write_text("<!-- figures: begin -->\n<!-- figures: end -->\n")
    commands = [f"hwgen build --board b{i}" for i in range(12)]
    with ProcessPoolExecutor(4) as pool:
        list(pool.map(_record_one, [record] * len(commands), commands))
    assert sorted(json.loads(record.read_text())) == sorted(commands)
    assert figures.update_docs(record, check=True)


def _record_one(record, command):
    figures.record(record, command, {"fmax_mhz": 1.0})
