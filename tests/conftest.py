"""Shared fixtures: simulators that skip cleanly when absent, refused constructors."""

import gc
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

from sim.runner import simulator_missing


@pytest.fixture(params=["verilator", "icarus"])
def simulator(request):
    """Each cocotb test runs on Verilator and, where installed, on Icarus."""
    reason = simulator_missing(request.param)
    if reason:
        pytest.skip(reason)
    return request.param


def _refused(match, make, errors=ValueError):
    """Check that ``make()`` raises ``errors`` matching ``match``. The half-built components
    are collected here, where their UnusedElaboratable warnings are expected; left to the
    garbage collector they would warn during some later test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(errors, match=match):
            make()
        gc.collect()


@pytest.fixture
def refused():
    """``refused(match, make, errors=ValueError)``: a constructor that must refuse its
    arguments, without leaving UnusedElaboratable warnings behind."""
    return _refused
