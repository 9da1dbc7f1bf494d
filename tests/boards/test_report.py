"""The build report: resources from recorded logs, the design's clock among several, the
rendering of nextpnr's phase times."""

import json
from pathlib import Path

import pytest

from hwgen import boards
from hwgen.boards import BOARDS

DATA = Path(__file__).parents[1] / "data"

@pytest.mark.parametrize("family", ["ice40", "ecp5"])
def test_parse_recorded_logs(family):
    meta = json.loads((DATA / f"{family}_build.json").read_text())
    pnr = boards.parse_nextpnr_log((DATA / f"{family}_nextpnr.log").read_text())
    cells = boards.parse_yosys_log((DATA / f"{family}_yosys.log").read_text())
    assert pnr["clocks"] == meta["clocks"]
    assert pnr["phases_s"] == meta["nextpnr_phases_s"]
    assert {k: list(v) for k, v in pnr["utilisation"].items()
            if k in meta["utilisation"]} == meta["utilisation"]
    assert {k: cells[k] for k in meta["yosys_cells"]} == meta["yosys_cells"]
    res = boards.resources(BOARDS[meta["board"]], pnr, cells)
    assert set(res) == {"lut", "ff", "dsp", "bram"} | ({"spram"} if family == "ice40" else set())
    assert res["dsp"]["used"] == meta["yosys_cells"][meta["dsp_cell"]]


def _two_clock_report(link_result):
    # As nextpnr prints them for the iCEBreaker at 33 MHz with the link in its own domain: the
    # constraint comes back as a period in picoseconds (33.03 MHz).
    log = (f"Info: Max frequency for clock 'device.bridge.busy_sync.link_clk': 27.76 MHz "
           f"({link_result} at 12.00 MHz)\n"
           "Info: Max frequency for clock                              'clk': 36.15 MHz "
           "(PASS at 33.03 MHz)\n")
    board = BOARDS["icebreaker"]
    config = boards.board_config(board, clock_hz=33_000_000)
    return boards.make_report(board, config, boards.clock_plan(board, config.clock_hz),
                              boards.estimate(board, config), top="device", baud=115200,
                              seed=None, times={}, bitstream="x.bin", nextpnr_log=log,
                              yosys_log="")


def test_report_finds_the_design_clock_and_judges_every_clock():
    timing = _two_clock_report("PASS")["timing"]
    assert (timing["fmax_mhz"], timing["target_mhz"], timing["pass"]) == (36.15, 33.0, True)
    assert len(timing["clocks"]) == 2
    # The link's clock failing fails the build, although the design's clock passes.
    assert _two_clock_report("FAIL")["timing"]["pass"] is False


def test_report_renders_nextpnr_phase_times():
    report = _two_clock_report("PASS")
    # A log without the lines: no line for them.
    assert not any(line.startswith("- nextpnr:")
                   for line in boards.render_markdown(report).splitlines())
    report["nextpnr_phases_s"] = {"place": 16.0, "refine": 37.68, "route": 91.49}
    assert ("- nextpnr: placement 16 s, refinement 37.68 s, routing 91.49 s"
            in boards.render_markdown(report).splitlines())


def _routed_for_less(fmax_mhz):
    # A 75 MHz design (its PLL's) that nextpnr placed and routed for 62.5 MHz: nextpnr judges
    # its Fmax against 62.5; the report against the design's 75.
    log = ("Info: Max frequency for clock '$glbnet$clk': "
           f"{fmax_mhz:.2f} MHz (PASS at 62.50 MHz)\n"
           "Info: Max frequency for clock '$glbnet$clk25_0__io': 200.00 MHz (PASS at 25.00 MHz)\n")
    board = BOARDS["ulx3s-85f"]
    config = boards.board_config(board, rows=4, cols=4, clock_hz=75_000_000)
    return boards.make_report(board, config, boards.clock_plan(board, config.clock_hz),
                              boards.estimate(board, config), top="device", baud=3_000_000,
                              seed=None, times={}, bitstream="x.bit", nextpnr_log=log,
                              yosys_log="", pnr_clock_hz=62_500_000)


def test_a_design_routed_for_a_slower_clock_passes_at_its_own():
    """nextpnr routed the design's clock for 62.5 MHz (``--pnr-clock-hz``): the report finds
    that clock by the constraint it was routed for and passes it only if its Fmax reaches the
    design's 75 MHz, whatever nextpnr said; the report and the record say what it was routed
    for."""
    from hwgen.boards.report import report_figures

    met = _routed_for_less(78.64)
    timing = met["timing"]
    assert (timing["fmax_mhz"], timing["target_mhz"], timing["pnr_target_mhz"],
            timing["pass"]) == (78.64, 75.0, 62.5, True)
    assert report_figures(met)["pnr_target_mhz"] == 62.5
    assert ("- clock: 75 MHz from the PLL, placed and routed for 62.5 MHz (the timing judged at "
            "75)" in boards.render_markdown(met).splitlines())
    missed = _routed_for_less(70.0)["timing"]
    assert missed["pass"] is False
    assert missed["clocks"]["$glbnet$clk"]["pass"] is False
    assert missed["clocks"]["$glbnet$clk25_0__io"]["pass"] is True
    # Routed for its own clock, a report has no such figure.
    assert "pnr_target_mhz" not in _two_clock_report("PASS")["timing"]


def test_a_design_routed_for_its_links_clock_is_told_from_the_link():
    """A 50 MHz design routed for 25 MHz, the frequency of its link's own clock (the
    oscillator's): both constraints match, and the design's is the net named ``clk``; the link's
    is judged at its own 25 MHz, not at the design's 50."""
    log = ("Info: Max frequency for clock '$glbnet$clk_buf.buf.i': 40.00 MHz (PASS at 25.00 MHz)\n"
           "Info: Max frequency for clock '$glbnet$clk': {} MHz (PASS at 25.00 MHz)\n")
    board = BOARDS["ulx3s-12f"]
    config = boards.board_config(board, rows=2, cols=2, clock_hz=50_000_000)

    def timing(fmax):
        return boards.make_report(board, config, boards.clock_plan(board, config.clock_hz),
                                  boards.estimate(board, config), top="device", baud=1_000_000,
                                  seed=None, times={}, bitstream="x.bit",
                                  nextpnr_log=log.format(fmax), yosys_log="",
                                  pnr_clock_hz=25_000_000)["timing"]

    met = timing("55.00")
    assert (met["fmax_mhz"], met["pass"]) == (55.0, True)
    assert met["clocks"]["$glbnet$clk_buf.buf.i"]["pass"] is True
    missed = timing("45.00")
    assert (missed["fmax_mhz"], missed["pass"]) == (45.0, False)
