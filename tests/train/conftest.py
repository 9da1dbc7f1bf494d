"""Devices for the training's tests.

``interpreted(config, n)`` gives ``n`` devices that run compiled programs in the interpreter of
``tests/support.py`` (which shares no code with the compiler): fast, and exact as a device must
be. ``boards(n)`` gives ``n`` open ``host.Accelerator`` s on simulated boards of
``support.BOARD_WS`` (built once and cached), for the tests over the real protocol;
``cnn_boards(n)`` the same on ``support.BOARD_CNN``, which the digits CNN fits.
"""

import contextlib
import dataclasses

import numpy as np
import pytest
from support import BOARD_CNN, BOARD_WS

from host import Accelerator
from sim.board import SimulatedBoard, board_missing
from sim.interpreter import ProgramInterpreter


@dataclasses.dataclass(frozen=True)
class Counters:
    """What ``host.InferCounters`` says of an infer call, as far as the interpreter knows."""

    rows: int = 0
    runs: int = 0
    macs: int = 0
    cycles: int = 0
    wire_bytes: int = 0


class InterpretedDevice:
    """A device with ``load``/``infer``/``counters`` that runs programs in the interpreter."""

    def __init__(self, config, name):
        self.config = config
        self.config_hash = config.hash
        self.url = f"interpreter://{name}"
        self.program = None
        self.loads = 0
        self.rows = 0
        self._last = Counters()

    def load(self, program):
        assert program.config_hash == self.config_hash
        self.program = program
        self.loads += 1

    def infer(self, x, outputs="last"):
        program = self.program
        x = np.asarray(x, dtype=np.int64)
        count = len(program.layer_outputs) if outputs == "all" else 1
        results = [[] for _ in range(count)]
        runs = 0
        for start in range(0, len(x), program.batch):
            chunk = x[start:start + program.batch]
            device = ProgramInterpreter(program.config, seed=start)
            device.load(program, chunk)
            device.run(len(chunk))
            for index in range(count):
                if outputs == "all":
                    region, base, n = program.layer_output_words(index, len(chunk))
                    words = [device.read(region, base + i) for i in range(n)]
                    results[index].append(program.unpack_layer_output(index, words, len(chunk)))
                else:
                    region, base, n = program.output_words(len(chunk))
                    words = [device.read(region, base + i) for i in range(n)]
                    results[index].append(program.unpack_output(words, len(chunk)))
            runs += 1
        self.rows += len(x)
        self._last = Counters(rows=len(x), runs=runs, macs=program.padded_macs_per_row * len(x))
        specs = program.layer_outputs if outputs == "all" else [program.output]
        arrays = [np.concatenate(r) if r else np.zeros((0, *s.sample_shape), dtype=np.int64)
                  for r, s in zip(results, specs, strict=True)]
        return arrays if outputs == "all" else arrays[0]

    def counters(self):
        return self._last


@pytest.fixture
def interpreted():
    """``interpreted(config, n)``: ``n`` interpreted devices of ``config``."""
    return lambda config, n: [InterpretedDevice(config, i) for i in range(n)]


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


@pytest.fixture(scope="module")
def cnn_boards():
    """``cnn_boards(n)``: ``n`` open Accelerators on running simulated boards of BOARD_CNN."""
    with _boards(BOARD_CNN) as get:
        yield get
