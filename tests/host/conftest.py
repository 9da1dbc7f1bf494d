"""Simulated boards for the tests of the host pool and ``hwgen serve``.

``board_factory(config)`` starts a :class:`sim.board.SimulatedBoard` (built once per
configuration and cached across sessions) that is stopped when the test ends;
``module_board_factory`` does the same for boards shared by a whole test module. Both skip the
test when Verilator or a C++ tool is missing.
"""

import contextlib

import pytest

from sim.board import SimulatedBoard, board_missing


def _factory(stack):
    def start(config):
        reason = board_missing()
        if reason:
            pytest.skip(reason)
        return stack.enter_context(SimulatedBoard(config))

    return start


@pytest.fixture
def board_factory():
    """``board_factory(config)``: a running simulated board, stopped after the test."""
    with contextlib.ExitStack() as stack:
        yield _factory(stack)


@pytest.fixture(scope="module")
def module_board_factory():
    """``module_board_factory(config)``: a running simulated board, stopped after the module."""
    with contextlib.ExitStack() as stack:
        yield _factory(stack)
