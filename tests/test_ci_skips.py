"""In CI (``.ci/run`` sets HWGEN_NO_TOOL_SKIPS), a test that skips for want of a tool fails,
and one that skips for what CI does not install (the LiteX SoC's tools) still skips."""

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent
# (.ci/run sets it for the whole run: each case here sets it, or not, itself.)
NO_TOOL_SKIPS = "HWGEN_NO_TOOL_SKIPS"

SKIPPING = '''
import pytest

def test_needs_icarus():
    pytest.skip("Icarus Verilog (iverilog) is not installed; apt-get install iverilog")

@pytest.mark.skipif(True, reason="PyTorch is not installed")
def test_needs_torch():
    pass

def test_needs_litex():
    pytest.skip("LiteX is not installed (pip install 'hwgen[soc]')")
'''


def _run(tmp_path, **env):
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "ci_skips", "-q",
                           "-rs", "-p", "no:cacheprovider", "-o", "addopts=",
                           str(tmp_path / "test_skipping.py")],
                          cwd=tmp_path, capture_output=True, text=True, check=False,
                          env={**{k: v for k, v in os.environ.items() if k != NO_TOOL_SKIPS},
                               "PYTHONPATH": str(TESTS / "support"), **env})


def test_tool_skips_fail_in_ci(tmp_path):
    done = _run(tmp_path, **{NO_TOOL_SKIPS: "1"})
    assert done.returncode == 1, done.stdout
    # A skip in the test fails it; one in its setup (a skipif mark) is an error.
    assert "1 failed, 1 skipped, 1 error" in done.stdout, done.stdout
    assert "every tool must be installed (HWGEN_NO_TOOL_SKIPS is set): Icarus" in done.stdout


def test_tool_skips_skip_elsewhere(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 0, done.stdout
    assert "3 skipped" in done.stdout, done.stdout
