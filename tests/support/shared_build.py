"""One board build a test session shares, whatever the number of pytest-xdist workers.

A build takes a minute or more; tests that only need *a* finished build of a small device (its
bitstream, its netlist, its report) take this one instead of building their own. The first
worker to ask builds it, under a lock file in the session's shared temporary folder; the others
wait for it and read what it wrote (pytest-xdist's documented pattern for session data).
"""

import json
import os

from filelock import FileLock

from hwgen import boards
from hwgen.boards import BOARDS

#: The shared build: the iCEBreaker's whole device, 2x2, at 24 MHz from the PLL with the link on
#: the 12 MHz oscillator in a domain of its own (the two-domain design, whose netlist checks the
#: bridge between them too), which builds in about a minute. The one-domain build at the
#: board's oscillator is the Dask build tier's point (tests/dse/test_driver.py).
TINY_DEVICE = ("icebreaker", "device", {"rows": 2, "cols": 2, "clock_hz": 24_000_000})
#: The shared Gowin build: the Tang Nano 9K's whole device, 2x2 with the board preset's widths
#: (no LOAD, FETCH, CLASSES), at 54 MHz from the rPLL with the link on the 27 MHz oscillator
#: in a domain of its own (about 2.5 minutes; Fmax 81 MHz).
TINY_GOWIN_DEVICE = ("tang-nano-9k", "device", {"rows": 2, "cols": 2, "clock_hz": 54_000_000})

#: The shared builds' UART rate: 4 cycles a bit of the iCEBreaker's 12 MHz oscillator (so that
#: its link keeps a domain of its own), 9 of the Tang Nano 9K's 27 MHz; few cycles a byte for
#: the gate-level checks.
SHARED_BAUD = 3_000_000


def shared_root(tmp_path_factory):
    """Return the temporary folder every worker of this session sees."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def tiny_device_build(tmp_path_factory):
    """Return ``{"out": folder, "report": report, "lines": progress lines}`` of
    :data:`TINY_DEVICE`'s build, built once per session with its gate-level simulation
    (:func:`sim.board.netlist.netlist_board_binary`, in ``folder/sim``)."""
    return _shared_build(tmp_path_factory, "tiny-device-build", TINY_DEVICE)


def tiny_gowin_build(tmp_path_factory):
    """Return :func:`tiny_device_build`'s record of :data:`TINY_GOWIN_DEVICE`'s build, built
    once per session with its gate-level simulation."""
    return _shared_build(tmp_path_factory, "tiny-gowin-build", TINY_GOWIN_DEVICE)


def _shared_build(tmp_path_factory, name, spec):
    from sim.board.netlist import netlist_board_binary

    folder = shared_root(tmp_path_factory) / name
    done = folder / "shared.json"
    with FileLock(f"{folder}.lock"):
        if not done.exists():
            board_name, top, options = spec
            board = BOARDS[board_name]
            lines = []
            config = boards.board_config(board, **options)
            report = boards.build(board, config, folder, baud=SHARED_BAUD, seed=1, top=top,
                                  log=lambda line, **k: lines.append(line.strip()))
            # Unoptimized C++: the tests' runs are short (sim.board.netlist).
            netlist_board_binary(folder, optimize=False)
            done.write_text(json.dumps({"out": str(folder), "report": report,
                                        "lines": lines}))
    return json.loads(done.read_text())
