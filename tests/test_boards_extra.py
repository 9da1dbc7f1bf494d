"""Without the ``[boards]`` extra (the YoWASP tools), the tests that need it skip, each with the
reason, and none fails: they run here with the extra hidden (:mod:`support.no_boards`)."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
#: The tests that build with the YoWASP tools or run them.
NEED_BOARDS = [
    "tests/boards/test_flow.py::test_build_smoke",
    "tests/boards/test_yosys.py",
    "tests/test_toolcache.py",
    "tests/soc/test_board.py::test_shims_run_the_yowasp_tools",
    "tests/dse/test_driver.py::test_a_build_tier_point_in_a_dask_worker",
    "tests/test_benchmarks.py::test_benchmark_runs_quick_and_records[boards.py]",
    "tests/test_benchmarks.py::test_benchmark_runs_quick_and_records[netlist.py]",
]


def test_tests_that_need_the_boards_extra_skip_without_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HWGEN_NO_TOOL_SKIPS"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "support.no_boards", "-q",
                           "-rs", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "t"),
                           *NEED_BOARDS], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False, timeout=900)
    out = done.stdout
    assert done.returncode == 0, out[-6000:]
    skipped = re.findall(r"^SKIPPED \[(\d+)\] [^:]+:\d+: (.*)$", out, re.M)
    assert sum(int(n) for n, _ in skipped) >= 10, out[-6000:]
    assert all("pip install" in reason and "boards]" in reason for _, reason in skipped), \
        skipped
