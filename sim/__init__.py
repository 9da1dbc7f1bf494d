"""Simulation: cocotb benches, their runner, the simulated board and the gate-level board.

:data:`DATA_FILES` names every non-Python file the installed package opens by path (the board
harness and the cell models); :func:`data_path` is the one way to reach them, so that a file
added here without packaging fails the packaging test, not a user's run.
"""

from pathlib import Path

__all__ = ["DATA_FILES", "data_path"]

DATA_FILES = ("board_main.cpp", "dp16kd_body.v", "mult18x18d_model.v", "gowin_cells_model.v",
              "gowin_bsram_body.vh", "gowin_sp_body.vh", "gowin_sdp_body.vh", "gowin_dp_body.vh",
              "gowin_mult_body.vh")


def data_path(name):
    """Return the path of the package data file ``name`` (one of :data:`DATA_FILES`)."""
    if name not in DATA_FILES:
        raise ValueError(f"{name!r} is not a data file of sim; allowed: {', '.join(DATA_FILES)}")
    return Path(__file__).with_name(name)
