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


@pytest.mark.parametrize(("board", "mhz"), [("tang-nano-9k", 54), ("tang-primer-20k", 40.5)])
def test_gowin_pll_exact(board, mhz):
    """The rPLL's dividers make the clock from the boards' 27 MHz, its VCO in the chip's
    range."""
    board = BOARDS[board]
    hz = int(mhz * 1e6)
    pll = boards.clock_plan(board, hz)["pll"]
    assert 27_000_000 * (pll["FBDIV_SEL"] + 1) == hz * (pll["IDIV_SEL"] + 1)
    low, high = boards.pll.GOWIN_PLL_LIMITS[board.chip]["vco"]
    assert low <= pll["vco_hz"] == hz * pll["ODIV_SEL"] <= high
    with pytest.raises(PLLError, match=r"Gowin GW1N-9C PLL cannot make 50 MHz exactly from "
                                       r"the board's 27 MHz; nearest exact clocks: .*49.5 MHz"):
        boards.clock_plan(BOARDS["tang-nano-9k"], 50_000_000)
