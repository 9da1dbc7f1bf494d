"""PLL settings that make a clock exactly, and the clock plan of a board."""

import pytest

from hwgen import boards
from hwgen.boards import BOARDS, PLLError


def test_ice40_pll_exact():
    pll = boards.ice40_pll(12_000_000, 48_000_000)
    assert 12_000_000 * (pll["DIVF"] + 1) // ((pll["DIVR"] + 1) << pll["DIVQ"]) == 48_000_000
    assert 533e6 <= pll["vco_hz"] <= 1066e6


def test_ecp5_pll_exact():
    pll = boards.ecp5_pll(25_000_000, 150_000_000)
    assert 25_000_000 * pll["CLKFB_DIV"] // pll["CLKI_DIV"] == 150_000_000
    assert 400e6 <= pll["vco_hz"] <= 800e6


def test_pll_refuses_inexact_clock():
    with pytest.raises(PLLError, match=r"cannot make 40 MHz exactly .* nearest"):
        boards.ice40_pll(12_000_000, 40_000_000)
    with pytest.raises(PLLError, match="151 MHz"):
        boards.clock_plan(BOARDS["ulx3s-85f"], 151_000_000)


def test_board_clock_needs_no_pll():
    assert boards.clock_plan(BOARDS["icebreaker"], 12_000_000)["pll"] is None
