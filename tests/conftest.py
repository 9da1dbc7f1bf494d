"""Shared fixtures: simulators that skip cleanly when absent, the session's shared board build,
refused constructors; in CI, skips for want of a tool fail (:mod:`support.ci_skips`); with
``-n 2``, the longest tests start first (:mod:`support.schedule`)."""

import gc
import os
import signal
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable
from one_thread_pools import POOLS  # before NumPy and torch load (support imports NumPy)
from support import tiny_device_build, tiny_gowin_build, yowasp_missing
from support.ci_skips import fail_tool_skip
from support.schedule import hand_out_one_at_a_time, longest_first

from sim.runner import simulator_missing


def pytest_configure(config):
    """Ctrl-C works in the tests' processes and the commands they start, whose Ctrl-C tests
    send SIGINT: a shell starts a job in the background (``pytest &``, ``nohup``) with SIGINT
    ignored, which Python and every program it starts would inherit."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header(config):
    return "thread pools: " + ", ".join(f"{pool}={os.environ[pool]}" for pool in POOLS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI, a skip for want of a tool is a failure (:mod:`support.ci_skips`)."""
    outcome = yield
    fail_tool_skip(outcome.get_result())


def pytest_collection_modifyitems(config, items):
    """The longest tests first (:mod:`support.schedule`)."""
    longest_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """One test at a time to each worker, in the order of collection (:mod:`support.schedule`)."""
    return hand_out_one_at_a_time(config, log)


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


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory):
    """A finished build of a small whole device (:data:`support.TINY_DEVICE`) with its
    gate-level simulation, built once per session: ``{"out", "report", "lines"}``."""
    reason = yowasp_missing()
    if reason:
        pytest.skip(reason)
    return tiny_device_build(tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_gowin(tmp_path_factory):
    """The Gowin build of a small whole device (:data:`support.TINY_GOWIN_DEVICE`) with its
    gate-level simulation, built once per session: ``{"out", "report", "lines"}``."""
    reason = yowasp_missing(gowin=True)
    if reason:
        pytest.skip(reason)
    return tiny_gowin_build(tmp_path_factory)


@pytest.fixture
def refused():
    """``refused(match, make, errors=ValueError)``: a constructor that must refuse its
    arguments, without leaving UnusedElaboratable warnings behind."""
    return _refused
