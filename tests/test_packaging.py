"""The wheel and the sdist carry every file the installed package opens at run time.

`pip install .` (not `-e`) ships only what the packaging declares: a wheel without the board
harness once passed every test of an editable install and failed `hwgen demo` for users.
"""

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import sim

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hwgen", "sim", "host")


def _tracked_data_files():
    """Non-Python files under the packages, as git tracks them (or as they lie, without git)."""
    try:
        out = subprocess.run(["git", "ls-files", *PACKAGES], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*")
               if p.is_file() and "__pycache__" not in p.parts]
    return sorted(f for f in out if not f.endswith(".py"))


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    pytest.importorskip("build", reason="the 'build' package is in the test extras")
    out = tmp_path_factory.mktemp("dist")
    # From a copy without build output: setuptools reuses a stale build/ folder.
    src = tmp_path_factory.mktemp("src") / "hwgen"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", "build", "*.egg-info", "__pycache__", ".*_cache", "rtl_out", "docs"))
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--sdist", "--outdir", str(out),
                    str(src)], check=True, capture_output=True, text=True, timeout=600)
    wheel = next(out.glob("*.whl"))
    sdist = next(out.glob("*.tar.gz"))
    with zipfile.ZipFile(wheel) as z:
        wheel_names = set(z.namelist())
    with tarfile.open(sdist) as t:
        # sdist members are prefixed with "<name>-<version>/".
        sdist_names = {name.split("/", 1)[1] for name in t.getnames() if "/" in name}
    return wheel_names, sdist_names


def test_every_file_the_code_opens_is_declared():
    names = {f"sim/{name}" for name in sim.DATA_FILES}
    assert set(_tracked_data_files()) == names, (
        "a non-Python file in the packages must be listed in sim.DATA_FILES (and reached with "
        "sim.data_path), or removed")
    for name in sim.DATA_FILES:
        assert sim.data_path(name).is_file()


def test_data_path_refuses_unknown_files():
    with pytest.raises(ValueError, match=r"board_main\.cpp"):
        sim.data_path("nope.v")


@pytest.mark.parametrize("which", ["wheel", "sdist"])
def test_distributions_carry_the_data_files(dists, which):
    names = dists[0] if which == "wheel" else dists[1]
    for path in [*(f"sim/{n}" for n in sim.DATA_FILES), *_tracked_data_files()]:
        assert path in names, f"{path} is missing from the {which}"
    # And the code itself, with every subpackage.
    for pkg in PACKAGES:
        assert f"{pkg}/__init__.py" in names
    for init in ROOT.glob("hwgen/**/__init__.py"):
        assert str(init.relative_to(ROOT)) in names
