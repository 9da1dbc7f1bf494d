"""The simulated board's errors (sim.board.errors)."""

from sim.board import BoardError, NetlistError


def test_board_errors_are_runtime_errors_and_netlist_errors_board_errors():
    assert issubclass(BoardError, RuntimeError)
    assert issubclass(NetlistError, BoardError)
