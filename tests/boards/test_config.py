"""The configuration a board builds: preset, then the options given."""

import argparse

import pytest

from hwgen import boards
from hwgen.boards import BOARDS
from hwgen.boards.catalog import NAMED_PRESETS
from hwgen.config import AcceleratorConfig


def _args(**kw):
    ns = argparse.Namespace(**dict.fromkeys(AcceleratorConfig.__dataclass_fields__))
    ns.config = None
    for k, v in kw.items():
        setattr(ns, k, v)
    return ns


def test_board_config_overrides_preset_with_given_options():
    board = BOARDS["icebreaker"]
    config = boards.board_config(board, _args(acc_depth=32))
    assert (config.rows, config.acc_bits, config.acc_depth) == (4, 22, 32)
    assert config.clock_hz == board.clock_hz


def test_a_named_preset_replaces_the_boards_and_options_still_override_it():
    board_name, fields = NAMED_PRESETS["ulx3s-85f-vww"]
    board = BOARDS[board_name]
    config = boards.board_config(board, preset="ulx3s-85f-vww")
    assert {k: getattr(config, k) for k in fields} == fields   # its clock too
    given = boards.board_config(board, _args(preset="ulx3s-85f-vww", acc_depth=16))
    assert (given.rows, given.acc_depth) == (fields["rows"], 16)
    allowed = "allowed: ulx3s-85f-resnet8, ulx3s-85f-small, ulx3s-85f-vww"
    with pytest.raises(ValueError, match=allowed):
        boards.board_config(board, preset="ulx3s-85f-nope")


def test_a_clock_given_is_kept_even_when_it_is_the_configs_default():
    """``--clock-hz 50000000`` on a 62.5 MHz board: 50 MHz, not the board's clock."""
    board = BOARDS["ulx3s-85f"]
    default = AcceleratorConfig().clock_hz
    assert board.clock_hz != default
    assert boards.board_config(board, _args(clock_hz=default)).clock_hz == default
    assert boards.board_config(board, clock_hz=default).clock_hz == default
    assert boards.board_config(board, preset="ulx3s-85f-small").clock_hz == board.clock_hz


def test_a_presets_own_clock_is_kept(monkeypatch):
    """A named design that carries the clock it meets is built at that clock."""
    from hwgen.boards import catalog

    default = AcceleratorConfig().clock_hz
    board_name, fields = NAMED_PRESETS["ulx3s-85f-vww"]
    monkeypatch.setitem(catalog.NAMED_PRESETS, "slow",
                        (board_name, {**fields, "clock_hz": default}))
    config = boards.board_config(BOARDS[board_name], preset="slow")
    assert config.clock_hz == default != BOARDS[board_name].clock_hz


@pytest.mark.parametrize("board_name", sorted(BOARDS))
def test_bf16_on_a_board_takes_its_preset_less_what_only_int8_has(board_name):
    # --dtype bf16 alone: the preset's int8 fields (22-bit sums, no bounds, requantization
    # lanes, activations in SPRAM) give way to bf16's, the rest of the preset stays.
    board = BOARDS[board_name]
    int8 = boards.board_config(board, _args())
    config = boards.board_config(board, _args(dtype="bf16"))
    assert (config.dtype, config.acc_bits, config.bounds) == ("bf16", 32, True)
    assert (config.post_lanes, config.act_spram_depth) == (None, 0)
    assert (config.rows, config.cols, config.weight_depth) == (
        int8.rows, int8.cols, int8.weight_depth)


def test_bf16_with_an_int8_field_given_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"acc_bits=22 with dtype='bf16'.*allowed: acc_bits=32"):
        boards.board_config(BOARDS["icebreaker"], _args(dtype="bf16", acc_bits=22))


def test_a_design_is_a_board_or_a_named_preset_by_its_name():
    board, config = boards.named_design("icebreaker")
    assert board is BOARDS["icebreaker"] and config == boards.board_config(board)
    board, config = boards.named_design("ulx3s-85f-vww", clock_hz=40_000_000)
    assert board is BOARDS[NAMED_PRESETS["ulx3s-85f-vww"][0]]
    assert config == boards.board_config(board, preset="ulx3s-85f-vww", clock_hz=40_000_000)
    with pytest.raises(ValueError, match=r"design 'ulx3s-99f' is neither a board nor a named "
                                         r"preset; allowed: boards .*icebreaker.*; presets "
                                         r".*ulx3s-85f-vww"):
        boards.named_design("ulx3s-99f")
