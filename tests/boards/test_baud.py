"""The link's baud rate on each board: the clock the UART runs from, the tolerance check and
the defaults (hwgen.boards.baud)."""

import pytest

from hwgen import boards
from hwgen.boards import BOARDS, BaudError, board_config, default_baud, link_plan
from hwgen.boards.baud import bridge_rates


def _within(clk_hz, baud):
    # Independent statement of the rule: the integer divisor's own error plus the bridge's
    # 2 % within both receivers' margin to the stop bit's middle (ours: half a bit less the
    # cycle of edge detection, FTDI's: half a bit less a sixteenth), over 9.5 bits.
    d = round(clk_hz / baud)
    err = abs(clk_hz / d - baud) / baud
    return d >= 4 and err <= 0.02 and err + 0.02 <= min(0.5 - 1 / d, 0.5 - 1 / 16) / 9.5


def test_bridges_in_the_catalog():
    assert BOARDS["ulx3s-12f"].baud == 3_000_000 and BOARDS["ulx3s-12f"].bridge == "FT231X"
    assert BOARDS["icebreaker"].baud == 6_000_000 and BOARDS["icebreaker"].bridge == "FT2232H"
    ft231x = bridge_rates(BOARDS["ulx3s-85f"])
    assert ft231x[:4] == [3_000_000, 2_000_000, 1_500_000, 1_200_000]   # nothing in 2M..3M
    assert 1_000_000 in ft231x and 115_200 not in ft231x
    assert bridge_rates(BOARDS["icebreaker"])[:3] == [6_000_000, 4_800_000, 4_000_000]
    assert bridge_rates(BOARDS["icebreaker"], top=12_000_000)[:3] == [12_000_000, 8_000_000,
                                                                      6_000_000]


def test_ulx3s_runs_the_bridge_rate_on_the_design_clock():
    board = BOARDS["ulx3s-12f"]
    config = board_config(board)
    assert config.clock_hz == 62_500_000
    assert not _within(25_000_000, 3_000_000)   # 8 cycles a bit: 4.2 % fast
    plan = link_plan(board, config, 3_000_000)
    assert plan["clock_hz"] == 62_500_000 and not plan["own_domain"]
    assert plan["divisor"] == 21
    assert plan["error"] == pytest.approx(62.5e6 / 21 / 3e6 - 1)
    assert default_baud(board, config) == (3_000_000, None)
    top = boards.BoardTop(board, config, baud=3_000_000)
    assert top.link_clock_hz is None and top.device.divisor == 21
    # 1 Mbaud still runs from the oscillator, in its own domain.
    assert link_plan(board, config, 1_000_000) == {"clock_hz": 25_000_000, "own_domain": True,
                                                    "divisor": 25, "error": 0.0}


def test_icebreaker_default_falls_back_to_what_12_mhz_makes():
    board = BOARDS["icebreaker"]
    baud, note = default_baud(board, board_config(board))
    assert baud == 3_000_000 and _within(12_000_000, baud)
    assert "6,000,000" in note and "--clock-hz" in note
    with pytest.raises(BaudError, match=r"at least 4 needed.*rates that work here: 3,000,000"):
        link_plan(board, board_config(board), 6_000_000)
    # 36 MHz from the PLL makes 6 Mbaud in 6 cycles; the link then shares that clock.
    plan = link_plan(board, board_config(board, clock_hz=36_000_000), 6_000_000)
    assert plan == {"clock_hz": 36_000_000, "own_domain": False, "divisor": 6, "error": 0.0}


@pytest.mark.parametrize("name", sorted(BOARDS))
@pytest.mark.parametrize("baud", [115_200, 1_000_000, 1_500_000, 2_000_000, 3_000_000,
                                  4_000_000, 6_000_000, 12_000_000])
def test_the_check_is_the_rule(name, baud):
    board = BOARDS[name]
    config = board_config(board)
    clocks = sorted({board.osc_hz, config.clock_hz})
    if not any(_within(hz, baud) for hz in clocks):
        with pytest.raises(BaudError, match=r"%.*rates that work here"):
            link_plan(board, config, baud)
        return
    plan = link_plan(board, config, baud)
    assert _within(plan["clock_hz"], baud)
    assert plan["divisor"] == round(plan["clock_hz"] / baud)
