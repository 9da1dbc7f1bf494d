"""In CI, a test that skips for want of a tool fails instead (a pytest plugin).

``.ci/run`` installs every tool the README's two commands install (Icarus included, and the
importers' optional packages) and sets :data:`NO_TOOL_SKIPS`: a skip then means a tool went
missing, and its runs would vanish silently. What the README's commands do not install (the
LiteX SoC's tools, valgrind for the callgrind benchmark) and what the machine's network does not
offer may still skip.
tests/conftest.py takes the hook; tests/test_ci_skips.py runs it on skipping tests.
"""

import os

import pytest

#: The environment variable that turns the skips into failures.
NO_TOOL_SKIPS = "HWGEN_NO_TOOL_SKIPS"
#: Reasons that may still skip with it set.
MAY_SKIP = ("hwgen[soc]", "riscv64-unknown-elf", "valgrind is not installed",
            "no address but loopback", "cannot listen on")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    fail_tool_skip(outcome.get_result())


def fail_tool_skip(report):
    """Turn ``report`` of a test skipped for want of a tool into a failure, when
    :data:`NO_TOOL_SKIPS` is set."""
    if not (report.skipped and os.environ.get(NO_TOOL_SKIPS)) or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    if not any(allowed in reason for allowed in MAY_SKIP):
        report.outcome = "failed"
        report.longrepr = (f"skipped where every tool must be installed ({NO_TOOL_SKIPS} is "
                           f"set): {reason}")
