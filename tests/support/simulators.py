"""Which cocotb regressions run on which simulator in the default run.

Icarus, about fifty times slower, runs a few cases chosen to cover both dataflows and the odd
shapes by default (the simulator's own behaviour: its X propagation, its four-state memories).
Verilator runs every case, or, where a test names them, the cases that cover each
configuration once and each dataflow on several configurations (the other dataflow of a
configuration goes through the same code of the generator, and Icarus or the slow run takes
it). The rest run with ``-m slow``, so that the default run stays short.
"""

import itertools

import pytest

from sim.runner import simulator_missing


def on_simulators(cases, icarus, verilator=None):
    """Return ``pytest.param(*case, simulator)`` for every case (a tuple of the test's other
    parameters) on each simulator: on Icarus marked slow unless ``case`` is in ``icarus``, on
    Verilator unless ``verilator`` is None or holds it."""
    default = {"icarus": set(icarus), "verilator": set(cases if verilator is None else verilator)}
    params = []
    for case, simulator in itertools.product(cases, ("verilator", "icarus")):
        slow = case not in default[simulator]
        params.append(pytest.param(*case, simulator, marks=[pytest.mark.slow] if slow else [],
                                   id="-".join((*map(str, case), simulator))))
    return params


def need_simulator(simulator):
    """Skip the test, with the reason, where ``simulator`` cannot run."""
    reason = simulator_missing(simulator)
    if reason:
        pytest.skip(reason)
