"""A simulated board's process: the harness started, watched, asked for statistics, stopped.

The harness clocks the model in C++ (no Python per cycle): it feeds the bytes received from the
socket to the device one per cycle (the ``device-stream`` top) or bit by bit on the ``rx`` pin
at the UART's divisor (``uart=True``, the ``device`` top), sends what the device answers, and
sleeps in ``poll()`` once the device is idle and no request can be partial (the byte-stream
device says so itself, see :class:`hwgen.device.Device`'s ``gate_idle``; over the UART, once its
partial-frame timeout has run out in simulated cycles since the last byte). One client
at a time; when it disconnects the board keeps its state and accepts the next one. The harness
exits when its parent dies (end of its stdin pipe, or re-parenting), so none is left behind.
"""

import contextlib
import dataclasses
import json
import os
import re
import select
import signal
import subprocess
import threading
import time
import weakref
from pathlib import Path

from hwgen.config import AcceleratorConfig

from .cache import board_binary
from .errors import BoardError
from .netlist import netlist_board_binary, netlist_run_params

__all__ = ["BoardStats", "SimulatedBoard"]


@dataclasses.dataclass(frozen=True)
class BoardStats:
    """Statistics of a running board, as reported by its harness.

    Attributes
    ----------
    cycles : int
        Clock cycles simulated since the board started.
    busy_cycles : int
        Of those, cycles in which the device was running a program.
    run_s : float
        Seconds spent clocking the model (sleeps in ``poll()`` excluded).
    wall_s : float
        Seconds since the board started.
    cpu_s : float
        CPU seconds the harness used: on a busy machine a fairer measure of the model's speed
        than ``run_s``, which includes the time other processes held the CPU.
    quiet : bool
        The device is idle and has received and sent nothing for longer than its partial-frame
        timeout (so any partial request is dropped); the harness sleeps until the next byte.
    """

    cycles: int
    busy_cycles: int
    run_s: float
    wall_s: float
    cpu_s: float
    quiet: bool

    _PATTERN = re.compile(r"stats cycles=(\d+) busy_cycles=(\d+) run_s=([\d.]+) "
                          r"wall_s=([\d.]+) cpu_s=([\d.]+) quiet=([01])")

    @classmethod
    def parse(cls, line):
        """Return the stats of a harness ``stats ...`` line, or None for another line."""
        match = cls._PATTERN.search(line)
        if match is None:
            return None
        c, b, r, w, p, q = match.groups()
        return cls(int(c), int(b), float(r), float(w), float(p), q == "1")

    @property
    def cycles_per_second(self):
        """Simulated cycles per CPU second of the harness."""
        return self.cycles / self.cpu_s if self.cpu_s else 0.0


def _stop(proc, stdin):
    """Stop the harness: SIGTERM, then SIGKILL; also close its stdin (its lifeline)."""
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with contextlib.suppress(OSError):
        stdin.close()


class SimulatedBoard:
    """A simulated device serving :mod:`hwgen.protocol` on ``socket://127.0.0.1:PORT``.

    A context manager: entering builds the board if it is not cached (about a minute of C++ for
    a small design, :func:`board_binary`) and starts it; leaving stops the process and frees the
    port, also when the block raises. If the Python process dies without leaving the block, the
    harness notices the end of its stdin pipe and exits by itself.

    Parameters
    ----------
    config : AcceleratorConfig
    port : int
        TCP port on ``127.0.0.1``; 0 picks a free one (see :attr:`port`).
    uart : bool
        Simulate the UART pins at the device's divisor instead of feeding the byte streams
        directly (slower: ten bit periods per byte).
    build_dir : path-like, optional
        Folder of cached boards instead of :func:`board_cache_root`.
    timeout : float
        Seconds to wait for the harness to listen, and for a :meth:`stats` answer.
    log : callable, optional
        Receives progress lines while building.
    launcher : sequence of str
        A command the harness runs under, its arguments following (a profiler:
        ``["valgrind", "--tool=callgrind"]``); empty: the harness alone.

    Raises
    ------
    BoardError
        From :meth:`start` (or ``with``) if the build fails or the harness does not start.
    """

    def __init__(self, config, *, port=0, uart=False, build_dir=None, timeout=30.0, log=None,
                 launcher=()):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int in 0..65535 (0: any free port), not {port!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
        self.config = config
        self.uart = bool(uart)
        self.build_dir = build_dir
        self.timeout = timeout
        self.log = log
        if isinstance(launcher, str) or not all(isinstance(w, str) for w in launcher):
            raise TypeError(f"launcher must be a sequence of str (a command's words), not "
                            f"{launcher!r}")
        self.launcher = list(launcher)
        self._want_port = port
        self.port = None
        self.process = None
        self._stderr_lines = []
        self._stats = None
        self._stats_seen = threading.Condition()
        self._reader = None
        self._finalizer = None
        self._params = None
        self._netlist = None

    @classmethod
    def from_build(cls, out_dir, *, port=0, timeout=30.0, log=None, skew=None):
        """Return a board that simulates the synthesized netlist of ``hwgen build --out
        out_dir`` (see :mod:`sim.board.netlist`): the cells that became the bitstream, over the
        UART pins at the build's baud rate. Its :attr:`config` comes from the build's report; the
        simulation is built into (and cached in) ``out_dir/sim/``. ``port``, ``timeout`` and
        ``log`` are as for the constructor. ``skew``: the simulated USB bridge's bit time off
        the build's rate, e.g. ``0.02`` for 2 % long (None: the UART's own bit time;
        :func:`sim.board.netlist.netlist_run_params`).

        Raises
        ------
        sim.board.NetlistError
            (a :class:`BoardError`) If ``out_dir`` is not a finished build of a whole device.
        """
        config, params = netlist_run_params(out_dir, skew=skew)
        board = cls(config, port=port, uart=True, timeout=timeout, log=log)
        board._netlist = (Path(out_dir), params)
        return board

    # -- life cycle ------------------------------------------------------------------------------

    def start(self):
        """Build if needed, start the harness and wait until it listens; return ``self``."""
        if self.process is not None:
            raise BoardError("the board is already started")
        if self._netlist is not None:
            out_dir, params = self._netlist
            binary = netlist_board_binary(out_dir, log=self.log)
            self._params = params
        else:
            binary = board_binary(self.config, uart=self.uart, cache_dir=self.build_dir,
                                  log=self.log)
            self._params = params = json.loads((binary.parent / "board.json").read_text())["run"]
        cmd = [*self.launcher, str(binary), "--port", str(self._want_port)]
        for name, value in params.items():
            cmd += [f"--{name}", str(value)]
        # stdin is the harness's lifeline: it exits when the pipe closes (this process died).
        self.process = proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._finalizer = weakref.finalize(self, _stop, proc, proc.stdin)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True,
                                        name=f"board-{proc.pid}-stderr")
        self._reader.start()
        try:
            self.port = self._read_port(proc)
        except BaseException:
            self.close()
            raise
        return self

    def _read_port(self, proc):
        deadline = time.monotonic() + self.timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
            if not ready:
                raise BoardError(f"the simulated board did not start listening within "
                                 f"{self.timeout:g} s{self.stderr_tail()}")
            chunk = os.read(proc.stdout.fileno(), 64)
            if not chunk:
                proc.wait(timeout=5)
                self._reader.join(timeout=5)  # so that its last words are in the message
                raise BoardError(f"the simulated board exited ({proc.returncode}) before "
                                 f"listening{self.stderr_tail()}")
            line += chunk
        match = re.fullmatch(rb"port (\d+)\n", line)
        if match is None:
            raise BoardError(f"the simulated board printed {line!r}, not its port")
        return int(match.group(1))

    def _read_stderr(self):
        for raw in self.process.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            stats = BoardStats.parse(line)
            with self._stats_seen:
                if stats is None:
                    self._stderr_lines = [*self._stderr_lines[-20:], line]
                else:
                    self._stats = stats
                self._stats_seen.notify_all()

    def messages(self):
        """Return the last (up to 21) lines the harness wrote on stderr, statistics left out:
        its errors, and a gate-level board's warnings (``hwgen-sim: ...``)."""
        with self._stats_seen:
            return list(self._stderr_lines)

    def stderr_tail(self):
        """Return the board's last messages as ``": a | b"`` (empty if none), for errors."""
        lines = self.messages()
        return (": " + " | ".join(lines)) if lines else ""

    def close(self):
        """Stop the harness and free its port (safe to call more than once)."""
        if self._finalizer is not None:
            self._finalizer()  # runs _stop once
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self.process is not None:
            for pipe in (self.process.stdout, self.process.stderr):
                with contextlib.suppress(OSError):
                    pipe.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- use -------------------------------------------------------------------------------------

    @property
    def url(self):
        """The pyserial URL of the board, ``socket://127.0.0.1:PORT``."""
        if self.port is None:
            raise BoardError("the board is not started")
        return f"socket://127.0.0.1:{self.port}"

    @property
    def divisor(self):
        """Clock cycles per bit of the simulated UART (``uart=True``), else None."""
        if self._params is None:
            return None
        return self._params.get("divisor")

    @property
    def pid(self):
        """Process id of the harness."""
        return None if self.process is None else self.process.pid

    def alive(self):
        """Return whether the harness is running."""
        return self.process is not None and self.process.poll() is None

    def stats(self):
        """Return the harness's current :class:`BoardStats` (asks it with SIGUSR1).

        Raises
        ------
        BoardError
            If the board is not running or does not answer within :attr:`timeout`.
        """
        if not self.alive():
            raise BoardError("the simulated board is not running")
        with self._stats_seen:
            before = self._stats
            self.process.send_signal(signal.SIGUSR1)
            if not self._stats_seen.wait_for(lambda: self._stats is not before, self.timeout):
                raise BoardError(f"the simulated board did not report its statistics within "
                                 f"{self.timeout:g} s")
            return self._stats

    def wait_quiet(self, timeout=None):
        """Block until the board is quiet (see :class:`BoardStats`); return its stats.

        Every byte sent to the board before this call is taken into account: afterwards the
        device has dropped any partial request, as a real one does after a pause.
        """
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not (stats := self.stats()).quiet:
            if time.monotonic() > deadline:
                raise BoardError(f"the simulated board is not quiet after {timeout:g} s "
                                 f"({stats})")
            time.sleep(0.01)
        return stats
