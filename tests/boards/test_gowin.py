"""The Gowin build's steps: Amaranth's nextpnr-gowin command turned into nextpnr-himbaechel's,
and the clock constraints it is given."""

from hwgen.boards import BOARDS, board_config
from hwgen.boards.gowin import SDC_FILE, clock_sdc, himbaechel_argv
from hwgen.boards.tops import OSCILLATOR_NET, BoardTop


def test_nextpnr_gowin_options_become_himbaechel_vopts():
    argv = ["--quiet", "--log", "top.tim", "--device", "GW1NR-LV9QN88PC6/I5", "--family",
            "GW1N-9C", "--json", "top.syn.json", "--cst", "top.cst", "--write", "top.pnr.json"]
    pack = ["-d", "GW1N-9C", "-o", "top.fs", "--sspi_as_gpio", "--mspi_as_gpio", "top.pnr.json"]
    assert himbaechel_argv(argv, pack, 27.0) == [
        "--quiet", "--log", "top.tim", "--device", "GW1NR-LV9QN88PC6/I5",
        "--vopt", "family=GW1N-9C", "--json", "top.syn.json", "--vopt", "cst=top.cst",
        "--write", "top.pnr.json", "--vopt", "sspi_as_gpio", "--sdc", SDC_FILE,
        "--freq", "27"]


def test_the_oscillators_pin_is_constrained(tmp_path):
    """Amaranth's Gowin platform writes no clock constraint for the open flow: the build's
    SDC gives the 27 MHz oscillator's pin its period."""
    board = BOARDS["tang-nano-9k"]
    config = board_config(board, rows=2, cols=2)
    platform = board.make_platform()
    platform.build(BoardTop(board, config, baud=115200), name="top", build_dir=str(tmp_path),
                   do_build=False)
    assert clock_sdc(platform) == \
        "create_clock -period 37.0370 -name clk27_0__io [get_ports clk27_0__io]\n"


def test_the_oscillators_net_is_constrained_behind_a_pll():
    """With the design's clock from the rPLL, the oscillator's net behind its input buffer
    (the link's domain) gets the oscillator's period: nextpnr-himbaechel would otherwise time
    it at the PLL's clock (``--freq``)."""
    text = clock_sdc(BOARDS["tang-nano-9k"].make_platform(), [(OSCILLATOR_NET, 27_000_000)])
    assert text.splitlines() == [
        "create_clock -period 37.0370 -name clk_buf_i [get_nets clk_buf.i]"]
