"""The board catalog: every preset fits its board, the iCEBreaker's is the whole 4x4, and a
board's family is a Family."""

import dataclasses

import pytest

from hwgen import boards
from hwgen.boards import BOARDS, FitError
from hwgen.boards.config import preset_of


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_presets_fit_their_boards(name):
    board = BOARDS[name]
    config = boards.board_config(board)
    # A preset may carry the clock its builds meet (the 85F's); otherwise it takes the board's.
    assert config.clock_hz == board.preset.get("clock_hz", board.clock_hz)
    boards.check_fit(board, config)


def test_the_85f_preset_is_the_zoo_design_and_its_old_name_stays():
    board = BOARDS["ulx3s-85f"]
    config = boards.board_config(board)
    assert (config.rows, config.cols, config.weight_depth, config.clock_hz) == \
        (8, 8, 33792, 62_500_000)
    assert config.depthwise and config.dw_extra_rows == 1
    assert boards.board_config(board, preset="ulx3s-85f-zoo") == config
    small = boards.board_config(board, preset="ulx3s-85f-small")
    assert (small.weight_depth, small.clock_hz) == (2048, board.clock_hz)
    assert preset_of(board, config) == "ulx3s-85f"
    assert preset_of(board, small) == "ulx3s-85f-small"
    with pytest.raises(ValueError, match="'ulx3s-85f-zoo' is not one of the board's named "
                                         "presets; allowed: none for this board"):
        boards.board_config(BOARDS["icebreaker"], preset="ulx3s-85f-zoo")


def test_icebreaker_preset_is_the_whole_4x4_with_one_requantization_lane():
    board = BOARDS["icebreaker"]
    config = boards.board_config(board)
    assert (config.rows, config.cols, config.requant_lanes) == (4, 4, 1)
    est = boards.check_fit(board, config)
    assert (est["dsp"], est["bram"], est["spram"]) == (8, 28, 4)
    # Four lanes, four multipliers and shifters built from logic cells: more than the UP5K has.
    with pytest.raises(FitError, match=r"logic cells, the device has 5280"):
        boards.check_fit(board, boards.board_config(board, post_lanes=4))
    # The preset's lane count is for its weight-stationary array; an OS array uses all lanes.
    assert boards.board_config(board, dataflow="os").requant_lanes == 4


def test_family_is_an_enum_and_checked():
    assert BOARDS["icebreaker"].family is boards.Family.ICE40
    assert {b.family for b in BOARDS.values()} == set(boards.Family)
    assert BOARDS["ulx3s-85f"].family == "ecp5"     # JSON and report values stay strings
    with pytest.raises(ValueError, match=r"family='xilinx'; allowed: 'ice40', 'ecp5'"):
        dataclasses.replace(BOARDS["icebreaker"], family="xilinx")


@pytest.mark.parametrize("name", sorted(boards.catalog.NAMED_PRESETS))
def test_named_presets_fit_their_boards(name):
    board_name, fields = boards.catalog.NAMED_PRESETS[name]
    board = BOARDS[board_name]
    config = boards.board_config(board, preset=name)
    assert {k: getattr(config, k) for k in fields} == {**fields}
    boards.check_fit(board, config)


def test_resnet8_design_takes_the_multipliers_its_lanes_allow():
    """The ResNet-8 design is the 85F preset's 8x8 array and eight requantization lanes (88
    MULT18X18D, the adder's in DSP blocks, router1). 8x16 products, four requantization lanes
    of two 18x18 slices of a 32-bit accumulator each and the adder's product per activation
    lane (8: the banks are as wide as the 8 rows, the write-back's 4 lanes fit) would take 144
    of the 85F's 156 MULT18X18Ds, over the 128 above which the adder's products are logic
    cells: 136, and eight requantization lanes 144; an array wider than the chip's
    multipliers is still refused."""
    board = BOARDS["ulx3s-85f"]
    config = boards.board_config(board, preset="ulx3s-85f-resnet8")
    assert (config.rows, config.cols, config.requant_lanes, config.acc_bits) == (8, 8, 8, 32)
    assert config.residual and config.act_lanes == 8
    assert boards.fit.implementation_for(board, config) is board.implementation
    assert boards.fit.nextpnr_options(board, config) == []
    assert boards.check_fit(board, config)["dsp"] == 8 * 8 + 8 * 2 + 8
    # The 8x16 design of before (docs/performance.md, "MLPerf Tiny"): its buffers.
    former = {"cols": 16, "weight_depth": 9216, "act_depth": 4096}
    wide = boards.board_config(board, preset="ulx3s-85f-resnet8", post_lanes=4, **former)
    assert wide.act_lanes == 8
    assert boards.fit.dsp_blocks_with_adder(board, wide) == 8 * 16 + 4 * 2 + 8
    assert not boards.fit.implementation_for(board, wide).adder_dsp
    assert boards.fit.nextpnr_options(board, wide) == ["--placer", "static", "--router", "router2"]
    assert boards.check_fit(board, wide)["dsp"] == 8 * 16 + 4 * 2
    eight = boards.board_config(board, preset="ulx3s-85f-resnet8", post_lanes=8, **former)
    assert boards.check_fit(board, eight)["dsp"] == 8 * 16 + 8 * 2
    plain = boards.board_config(board, preset="ulx3s-85f-small")
    assert boards.fit.implementation_for(board, plain) is board.implementation
    assert boards.fit.nextpnr_options(board, plain) == []
    assert boards.check_fit(board, plain)["dsp"] == 8 * 8 + 8 * 2 + 8
    with pytest.raises(FitError, match=r"needs 168 MULT18X18D multipliers, the device has 156"):
        boards.check_fit(board, boards.board_config(board, preset="ulx3s-85f-resnet8",
                                                    rows=10, post_lanes=4, **former))


def test_the_85f_preset_loads_two_weight_rows_a_cycle_and_other_designs_one():
    """The 85F's preset (at any clock) builds with ``weight_pairs`` beyond the board's
    implementation (``PRESET_IMPLEMENTATIONS``); its named presets and other designs on it
    with the board's, and the cycle model counts the preset's tiles two rows a cycle."""
    from hwgen.timing import unit_latencies

    board = BOARDS["ulx3s-85f"]
    assert not board.implementation.weight_pairs
    for clock_hz in (None, 56_250_000):
        config = boards.board_config(board, clock_hz=clock_hz)
        built = boards.fit.implementation_for(board, config)
        assert built == dataclasses.replace(board.implementation, weight_pairs=True)
        assert unit_latencies(config, built).weight_rows == 2
    for other in (boards.board_config(board, preset="ulx3s-85f-resnet8"),
                  boards.board_config(board, rows=4),
                  boards.board_config(board, dtype="bf16")):
        assert not boards.fit.implementation_for(board, other).weight_pairs


@pytest.mark.parametrize("fields", [{"dtype": "bf16"}, {"dataflow": "os"}], ids=["bf16", "os"])
def test_arrays_that_pairs_do_not_serve_build_without_them(fields):
    """A board whose implementation loads tiles two rows a cycle builds an int8
    weight-stationary design so, and a bf16 or output-stationary one a row a cycle (which
    ``Implementation.check`` would refuse with pairs), all else the board's."""
    board = dataclasses.replace(BOARDS["ulx3s-45f"], implementation=dataclasses.replace(
        BOARDS["ulx3s-45f"].implementation, weight_pairs=True))
    config = boards.board_config(board)
    assert boards.fit.implementation_for(board, config) is board.implementation
    other = boards.board_config(board, **fields)
    built = boards.fit.implementation_for(board, other)
    assert built == dataclasses.replace(board.implementation, weight_pairs=False)
    assert built.check(other) is built
    with pytest.raises(ValueError, match="weight_pairs=True loads an int8 weight-stationary"):
        board.implementation.check(other)


def test_the_simulated_implementations_are_the_boards():
    """The Amaranth simulations of the accelerator run what the ULX3S boards build
    (tests.support's copies)."""
    from support import ECP5, ECP5_85F

    assert boards.BOARDS["ulx3s-45f"].implementation == ECP5
    assert boards.BOARDS["ulx3s-85f"].implementation == ECP5_85F


def test_a_preset_builds_with_the_seed_its_recorded_build_routed_with(monkeypatch):
    """``hwgen build`` without ``--seed`` places a preset at the seed ``PRESET_SEEDS`` names
    for it (the 85F's: 8, where its recorded build met 62.5 MHz), and any other design (the
    preset at another clock, another named preset) at nextpnr's own."""
    from hwgen.boards import catalog
    from hwgen.boards.config import preset_seed

    board = BOARDS["ulx3s-85f"]
    assert preset_seed(board, boards.board_config(board)) == 8
    monkeypatch.setitem(catalog.PRESET_SEEDS, "ulx3s-85f", 7)
    assert preset_seed(board, boards.board_config(board)) == 7
    assert preset_seed(board, boards.board_config(board, clock_hz=45_000_000)) is None
    assert preset_seed(board, boards.board_config(board, preset="ulx3s-85f-small")) is None
    assert preset_seed(board, boards.board_config(board, rows=4)) is None
    assert preset_seed(BOARDS["icebreaker"], boards.board_config(BOARDS["icebreaker"])) is None


def test_a_preset_builds_with_the_placer_and_router_its_recorded_build_routed_with(
        monkeypatch):
    """``hwgen build`` gives nextpnr the placer and router ``PRESET_NEXTPNR`` names for a
    preset at any clock (the 85F's: HeAP and router1; its seed only at its own clock), a
    placement option in ``HWGEN_NEXTPNR_OPTS`` replacing its own, and any other design the
    flow's choice."""
    from hwgen.boards.flow import nextpnr_arguments

    board = BOARDS["ulx3s-85f"]
    monkeypatch.delenv("HWGEN_NEXTPNR_OPTS", raising=False)
    assert nextpnr_arguments(board, boards.board_config(board), seed=8) == [
        "--timing-allow-fail", "--placer", "heap", "--router", "router1", "--seed", "8"]
    faster = boards.board_config(board, clock_hz=75_000_000)
    assert nextpnr_arguments(board, faster) == [
        "--timing-allow-fail", "--placer", "heap", "--router", "router1"]
    other = boards.board_config(board, clock_hz=75_000_000, prog_depth=256)
    assert nextpnr_arguments(board, other) == [
        "--timing-allow-fail", "--placer", "static", "--router", "router2"]
    monkeypatch.setenv("HWGEN_NEXTPNR_OPTS", "--placer static")
    assert nextpnr_arguments(board, boards.board_config(board)) == [
        "--timing-allow-fail", "--router", "router1", "--placer", "static"]
