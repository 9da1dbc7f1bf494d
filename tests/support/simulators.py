"""Which cocotb regressions run on which simulator in the default run.

Every case runs on Verilator. Icarus, about fifty times slower, runs a few cases chosen to
cover both dataflows and the odd shapes by default (the simulator's own behaviour: its
X propagation, its four-state memories); the rest of its cases run with ``-m slow``, so that the
default run stays short while every configuration is still checked on Verilator.
"""

import itertools

import pytest

from sim.runner import simulator_missing


def on_simulators(cases, icarus):
    """Return ``pytest.param(*case, simulator)`` for every case (a tuple of the test's other
    parameters) on each simulator: on Icarus marked slow unless ``case`` is in ``icarus``."""
    params = []
    for case, simulator in itertools.product(cases, ("verilator", "icarus")):
        slow = simulator == "icarus" and case not in icarus
        params.append(pytest.param(*case, simulator, marks=[pytest.mark.slow] if slow else [],
                                   id="-".join((*map(str, case), simulator))))
    return params


def need_simulator(simulator):
    """Skip the test, with the reason, where ``simulator`` cannot run."""
    reason = simulator_missing(simulator)
    if reason:
        pytest.skip(reason)
