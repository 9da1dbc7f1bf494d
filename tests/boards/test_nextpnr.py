"""nextpnr's log: phase times, the phases reached, the router's arcs left, followed as it is
written."""

import re
from pathlib import Path

import pytest

from hwgen import boards
from hwgen.boards.nextpnr import LogWatch, nextpnr_overuse

DATA = Path(__file__).parents[1] / "data"

def test_phase_times_of_router2_and_of_a_log_cut_short():
    text = (DATA / "ecp5_nextpnr.log").read_text()
    router2 = text.replace("Info: Router1 time 36.64s", "Info: Router2 time 12.50s")
    assert boards.parse_nextpnr_log(router2)["phases_s"]["route"] == 12.5
    # A log that ends while routing has the placement's times and no routing time.
    head = text[:text.index("Info: Routing..")]
    assert boards.parse_nextpnr_log(head)["phases_s"] == {"place": 19.73, "refine": 82.32}


@pytest.mark.parametrize("family", ["ice40", "ecp5"])
def test_nextpnr_phases_of_recorded_logs(family):
    text = (DATA / f"{family}_nextpnr.log").read_text()
    assert boards.nextpnr_phases(text) == ["placing", "refining the placement", "routing"]
    head = text[:text.index("Info: Running simulated annealing")]
    assert boards.nextpnr_phases(head) == ["placing"]
    assert boards.nextpnr_phases("") == []


def test_log_watch_reports_each_phase_once_across_partial_writes(tmp_path):
    path = tmp_path / "top.tim"
    watch = LogWatch(path)
    assert watch.new_phases() == []                  # not written yet
    text = (DATA / "ecp5_nextpnr.log").read_text()
    cut = text.index("Info: Routing..") + 7          # in the middle of the routing line
    path.write_text(text[:cut])
    assert watch.new_phases() == ["placing", "refining the placement"]
    assert watch.new_phases() == []
    with open(path, "a") as f:
        f.write(text[cut:])
    assert watch.new_phases() == ["routing"]
    assert watch.new_phases() == []


@pytest.mark.parametrize(("family", "total"), [("ecp5", 26260), ("ice40", 2834)])
def test_nextpnr_arcs_left_of_recorded_logs(family, total):
    text = (DATA / f"{family}_nextpnr.log").read_text()
    assert boards.nextpnr_arcs_left(text) == (0, total)        # routed to the end
    rows = re.findall(r"^Info:\s+\d+ \|.*$", text, re.M)
    first = rows[2]                                            # after the table's header rows
    left = int(first.split("|")[3])
    assert 0 < left < total
    head = text[:text.index(first) + len(first)]
    assert boards.nextpnr_arcs_left(head) == (left, total)
    assert boards.nextpnr_arcs_left(text[:text.index("Info: Routing..")]) is None


def test_parse_empty_log():
    assert boards.parse_nextpnr_log("") == {"utilisation": {}, "clocks": {}, "phases_s": {}}


# The head of router2's part of a nextpnr-ecp5 log (the 8x16 ResNet-8 design, 2026-11-26).
_ROUTER2_LOG = """\
Info: Routing globals...
Info:     routing clock net $glbnet$clk using global 0
Info: Running router2...
Info: Setting up routing resources...
Info: Running main router loop...
Info:     iter=1 wires=770696 overused=69768 overuse=98076 archfail=NA
Info:     iter=2 wires=809437 overused=53516 overuse=60925 archfail=NA
Info:     iter=3 wires=827075 overused=45004 overuse=48798 archfail=NA
"""


def test_router2_is_routing_and_its_overuse_is_read():
    """router2 (the ECP5 designs with the most DSP blocks) names no "Routing.." phase and no
    arcs table: its start is the routing phase, and its iterations' overuse the progress."""
    head = _ROUTER2_LOG[:_ROUTER2_LOG.index("Info:     iter=1")]
    assert boards.nextpnr_phases(head) == ["routing"]
    assert nextpnr_overuse(head) is None
    assert nextpnr_overuse(_ROUTER2_LOG) == (3, 48798)
    assert boards.nextpnr_arcs_left(_ROUTER2_LOG) is None


def test_an_experiments_router_replaces_the_flows_and_the_seed_comes_last(monkeypatch):
    from hwgen.boards.flow import nextpnr_arguments

    board = boards.BOARDS["ulx3s-85f"]
    config = boards.board_config(board, rows=8, cols=16, post_lanes=4)   # static, router2
    monkeypatch.delenv("HWGEN_NEXTPNR_OPTS", raising=False)
    assert nextpnr_arguments(board, config) == [
        "--timing-allow-fail", "--placer", "static", "--router", "router2"]
    monkeypatch.setenv("HWGEN_NEXTPNR_OPTS", "--router router1")
    assert nextpnr_arguments(board, config, seed=3) == [
        "--timing-allow-fail", "--placer", "static", "--router", "router1", "--seed", "3"]
    monkeypatch.setenv("HWGEN_NEXTPNR_OPTS", "--router router1 --placer sa")
    assert nextpnr_arguments(board, config, seed=3) == [
        "--timing-allow-fail", "--router", "router1", "--placer", "sa", "--seed", "3"]
