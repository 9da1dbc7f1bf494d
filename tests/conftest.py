"""Shared fixtures: simulators that skip cleanly when absent."""

import pytest

from sim.runner import simulator_missing


@pytest.fixture(params=["verilator", "icarus"])
def simulator(request):
    """Each cocotb test runs on Verilator and, where installed, on Icarus."""
    reason = simulator_missing(request.param)
    if reason:
        pytest.skip(reason)
    return request.param
