"""The configuration a board builds: preset, then the options given."""

import argparse

from hwgen import boards
from hwgen.boards import BOARDS
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
