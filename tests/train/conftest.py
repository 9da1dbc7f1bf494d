"""Devices for the training's tests.

``interpreted(config, n)`` gives ``n`` open ``host.Accelerator`` s on in-process devices
(:class:`sim.inprocess.InProcessDevice`): the real host driver and byte protocol, the programs
run by the interpreter (which shares no code with the compiler), no Verilator; fast, and exact as
a device must be. ``boards(n)`` gives ``n`` open ``host.Accelerator`` s on simulated boards of
``support.BOARD_WS`` (built once and cached, and which the digits CNN fits), for the tests over
the real gateware.
"""

import contextlib

import pytest
from support import BOARD_WS

from host import Accelerator
from sim.board import SimulatedBoard, board_missing
from sim.inprocess import InProcessDevice


@pytest.fixture
def interpreted():
    """``interpreted(config, n)``: ``n`` Accelerators on in-process devices of ``config``,
    closed after the test."""
    with contextlib.ExitStack() as stack:
        yield lambda config, n: [
            stack.enter_context(Accelerator(InProcessDevice(config), config=config))
            for _ in range(n)]


@contextlib.contextmanager
def _boards(config):
    """``get(n)``: ``n`` open Accelerators on running simulated boards of ``config``, started
    as needed and stopped at the end."""
    with contextlib.ExitStack() as stack:
        started = []

        def get(n):
            reason = board_missing()
            if reason:
                pytest.skip(reason)
            while len(started) < n:
                board = stack.enter_context(SimulatedBoard(config))
                started.append(stack.enter_context(Accelerator(board.url, config=config)))
            return started[:n]

        yield get


@pytest.fixture(scope="module")
def boards():
    """``boards(n)``: ``n`` open Accelerators on running simulated boards of BOARD_WS."""
    with _boards(BOARD_WS) as get:
        yield get

