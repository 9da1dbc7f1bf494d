"""The board tops: the link's clock domain and the PLL instance they elaborate."""

import dataclasses
import re

import pytest
from amaranth.hdl import Fragment

from hwgen import boards
from hwgen.boards import BOARDS


def test_link_runs_from_the_oscillator_when_the_pll_makes_the_clock():
    board = BOARDS["icebreaker"]
    fast = boards.BoardTop(board, boards.board_config(board, clock_hz=42_000_000), baud=1_000_000)
    assert fast.link_clock_hz == 12_000_000
    assert fast.device.divisor == 12          # 1 Mbaud from 12 MHz, not from 42
    plain = boards.BoardTop(board, boards.board_config(board), baud=1_000_000)
    assert plain.link_clock_hz is None and plain.device.divisor == 12
    ecp5 = BOARDS["ulx3s-12f"]
    ecp5_top = boards.BoardTop(ecp5, boards.board_config(ecp5), baud=1_000_000)
    assert ecp5_top.link_clock_hz == 25_000_000 and ecp5_top.device.divisor == 25
    ecp5_plain = boards.BoardTop(ecp5, boards.board_config(ecp5, clock_hz=25_000_000),
                                 baud=1_000_000)
    assert ecp5_plain.link_clock_hz is None
    # And each top elaborates for its board (which also marks its parts used).
    for b, top in ((board, fast), (board, plain), (ecp5, ecp5_top), (ecp5, ecp5_plain)):
        Fragment.get(top, b.make_platform())


@pytest.mark.parametrize(("link", "primitive"), [(True, "SB_PLL40_2_PAD"), (False, "SB_PLL40_PAD")])
def test_icebreaker_pll_instance_has_the_planned_dividers(link, primitive):
    board = BOARDS["icebreaker"]
    board = dataclasses.replace(board, implementation=dataclasses.replace(
        board.implementation, link_on_oscillator=link))
    config = boards.board_config(board, clock_hz=42_000_000, rows=2, cols=2)
    platform = board.make_platform()
    il = platform.build(boards.BoardTop(board, config, baud=1_000_000), name="top",
                        do_build=False).files["top.il"]
    cell = re.search(rf"cell \\{primitive} \\pll\n(.*?)\n  end", il, re.S).group(1)
    pll = boards.ice40_pll(12_000_000, 42_000_000)
    for name in ("DIVR", "DIVF", "DIVQ", "FILTER_RANGE"):
        assert f"parameter \\{name} {pll[name]}\n" in cell + "\n"
    assert ("PLLOUTGLOBALB \\clk" in cell) == link


def global_reset(il):
    """Return the SGSR cell's body in ``il`` and the two flip-flops before it (their bodies),
    or None."""
    sgsr = re.search(r"cell \\SGSR \\global_reset\n(.*?)\n  end", il, re.S)
    stages = [re.search(rf"cell \\FD1S3AX \\gsr_stage{i}\n(.*?)\n  end", il, re.S)
              for i in range(2)]
    if sgsr is None:
        return None
    return sgsr.group(1), [stage.group(1) for stage in stages]


@pytest.mark.parametrize("top", ["device", "array", "bf16-array"])
def test_ecp5_at_the_oscillator_has_a_sync_domain_and_the_global_reset(top):
    # Amaranth's own ECP5 domain is reset-less, and the DSP blocks take the domain's reset: a
    # ULX3S design at 25 MHz (no PLL) failed to elaborate with a DomainError.
    board = BOARDS["ulx3s-12f"]
    config = boards.board_config(board, clock_hz=25_000_000, rows=2, cols=2)
    design = {"device": lambda: boards.BoardTop(board, config, baud=1_000_000),
              "array": lambda: boards.ArrayTop(board, config),
              "bf16-array": lambda: boards.BF16ArrayTop(board, config)}[top]()
    il = board.make_platform().build(design, name="top", do_build=False).files["top.il"]
    assert "EHXPLLL" not in il
    sgsr, stages = global_reset(il)
    assert "connect \\D 1'1" in stages[0]    # no lock to wait for
    assert "connect \\GSR \\gsr_sync1 [0]" in sgsr


@pytest.mark.parametrize(("name", "global_reset_network"), [
    ("ulx3s-85f", True), ("ulx3s-12f", True), ("icebreaker", False), ("tang-nano-9k", False)])
def test_the_ecp5_plls_lock_resets_through_the_global_set_reset(name, global_reset_network):
    # The lock through two flip-flops that the network spares, into the SGSR; no reset in the
    # fabric (tests/boards/test_flow.py's 12F build checks that nextpnr placed the SGSR).
    board = BOARDS[name]
    config = boards.board_config(board, clock_hz=2 * board.osc_hz, rows=2, cols=2)
    il = board.make_platform().build(boards.BoardTop(board, config, baud=1_000_000),
                                     name="top", do_build=False).files["top.il"]
    found = global_reset(il)
    assert (found is not None) == global_reset_network
    assert "DCCA" not in il
    if global_reset_network:
        sgsr, stages = found
        assert all("parameter \\GSR \"DISABLED\"" in stage for stage in stages)
        assert "connect \\D \\pll_lock [0]" in stages[0]
        assert "connect \\D \\gsr_sync0 [0]" in stages[1]
        # (Yosys names the PLL's clock `clk`.)
        clock = re.search(r"connect \\CK (.*)", stages[0]).group(1)
        assert f"connect \\CK {clock}" in stages[1] and f"connect \\CLK {clock}" in sgsr
        assert "connect \\GSR \\gsr_sync1 [0]" in sgsr
        assert not re.search(r"cell \S+ \\reset_sync\b", il)
    else:
        assert len(re.findall(r"cell \S+ \\reset_sync\b", il)) == 1


def test_bf16_array_top_drives_every_input_and_is_deterministic():
    """The bf16 array's top reads every output into LED 0, and elaborates to the same RTLIL
    twice."""
    board = BOARDS["ulx3s-85f"]
    config = boards.board_config(board, clock_hz=50_000_000, rows=2, cols=2)
    ils = [board.make_platform().build(boards.BF16ArrayTop(board, config), name="top",
                                       do_build=False).files["top.il"] for _ in range(2)]
    assert ils[0] == ils[1]
    assert "EHXPLLL" in ils[0]


def test_build_refuses_an_unknown_top(tmp_path):
    """An unknown top is refused before any tool runs, naming those allowed."""
    board = BOARDS["ulx3s-85f"]
    config = boards.board_config(board, rows=2, cols=2)
    with pytest.raises(ValueError, match=r"top='bf16' is not a board top; allowed: 'device', "
                                         r"'array', 'bf16-array'"):
        boards.build(board, config, tmp_path, baud=1_000_000, top="bf16")
