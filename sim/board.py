"""The simulated board: the device's Verilog under Verilator, serving its byte link over TCP.

:class:`SimulatedBoard` builds the device for an :class:`~hwgen.config.AcceleratorConfig` with a
small C++ harness (``sim/board_main.cpp``) and runs it as a subprocess that listens on
``127.0.0.1``. A host opens it like a serial port, with the pyserial URL :attr:`SimulatedBoard.url`
(``socket://127.0.0.1:PORT``), and talks :mod:`hwgen.protocol` to it exactly as to a board:

.. code-block:: python

    with SimulatedBoard(config) as board:
        with host.Accelerator(board.url, config=config) as acc:
            acc.load(program)
            y = acc.infer(x)

The harness clocks the model in C++ (no Python per cycle): it feeds the bytes received from the
socket to the device one per cycle (the ``device-stream`` top) or bit by bit on the ``rx`` pin
at the UART's divisor (``uart=True``, the ``device`` top), sends what the device answers, and
sleeps in ``poll()`` once the device is idle and no request can be partial (it has answered
after the last byte, or its partial-frame timeout has run out in simulated cycles). One client
at a time; when it disconnects the board keeps its state and accepts the next one. The harness
exits when its parent dies (end of its stdin pipe, or re-parenting), so none is left behind.

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
import dataclasses
import fcntl
import hashlib
import importlib.metadata
import inspect
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path

from hwgen import protocol
from hwgen.config import AcceleratorConfig
from hwgen.generate import emit_design, ports

from . import data_path

__all__ = ["BoardError", "BoardStats", "SimulatedBoard", "board_binary", "board_cache_root",
           "board_missing", "frame_timeout_cycles"]

HARNESS = data_path("board_main.cpp")
# Name of the device module inside the board's Verilog, and of the wrapper around it.
_DEVICE_MODULE = "hwgen_device"
_WRAPPER_MODULE = "hwgen_board"
# Compiling the model with optimisation costs build time once and pays back on every cycle.
_OPT_FLAGS = "OPT_FAST=-O2 OPT_SLOW=-O1 OPT_GLOBAL=-O2"
# Cycles the harness keeps clocking after the device's partial-frame timeout has run out, so that
# a truncated request is surely dropped before the board goes to sleep.
_QUIESCE_MARGIN = 4096
_BUILD_TIMEOUT = 3600
# Boards of an older version of a design, unused for this long, are deleted after a new build.
_PRUNE_AGE_S = 7 * 24 * 3600


class BoardError(RuntimeError):
    """The simulated board could not be built or started, or it stopped unexpectedly."""


def board_missing():
    """Return why a simulated board cannot be built here, or None when it can."""
    from hwgen.toolchain import setup_verilator

    try:
        setup_verilator()
    except RuntimeError as exc:
        return str(exc)
    for tool, package in (("make", "make"), ("c++", "g++"), ("perl", "perl")):
        if shutil.which(tool) is None:
            return f"{tool!r} is not installed (Verilator's build needs it; apt-get install " \
                   f"{package})"
    return None


def board_cache_root():
    """Return the folder that holds the cached boards (see
    :func:`hwgen.toolcache.hwgen_cache_root`)."""
    from hwgen.toolcache import hwgen_cache_root

    return hwgen_cache_root() / "boards"


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


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
    # This file's build function, not the whole file: editing a docstring rebuilds nothing.
    return _digest(verilog, wrapper, json.dumps(run, sort_keys=True), HARNESS.read_bytes(),
                   inspect.getsource(_build), _OPT_FLAGS, _version("verilator"))


def _wrapper(component, uart):
    """Return Verilog of the module the harness drives: the device with registered link inputs.

    Registering the inputs (and the reset) keeps every input-dependent signal of the device out
    of Verilator's input-combinational region, which is evaluated on both clock edges; on a small
    design that makes the model about a third faster. The byte stream gets a two-entry FIFO so
    that one byte per cycle still gets through; the response bytes are captured in a register.
    """
    names = {p["name"] for p in ports(component)}
    need = {"rx", "tx", "busy"} if uart else {
        "i_stream__payload", "i_stream__valid", "i_stream__ready", "o_stream__payload",
        "o_stream__valid", "o_stream__ready", "busy"}
    if need - names:
        raise BoardError(f"the device has no port(s) {', '.join(sorted(need - names))}; the "
                         "simulated board needs them")
    common = """\
  reg rst_q = 1'b1;
  always @(posedge clk) rst_q <= reset;
"""
    if uart:
        return f"""\
module {_WRAPPER_MODULE}(input clk, input reset, input rx, output tx, output busy);
{common}  reg rx_q = 1'b1;
  always @(posedge clk) rx_q <= rx;
  {_DEVICE_MODULE} dut(.clk(clk), .rst(rst_q), .rx(rx_q), .tx(tx), .busy(busy));
endmodule
"""
    return f"""\
module {_WRAPPER_MODULE}(
  input clk, input reset,
  input feed_valid, input [7:0] feed_payload, output feed_ready,
  output reg out_valid, output reg [7:0] out_payload, input out_hold,
  output feed_empty, output busy);
{common}  reg [7:0] q0 = 8'h00, q1 = 8'h00;
  reg [1:0] n = 2'd0;
  reg hold_q = 1'b0;
  wire dev_ready, dev_valid;
  wire [7:0] dev_payload;
  wire take = (n != 2'd0) & dev_ready;
  wire put = feed_valid & (n != 2'd2);
  assign feed_ready = n != 2'd2;
  assign feed_empty = n == 2'd0;
  always @(posedge clk) begin
    hold_q <= out_hold;
    out_valid <= dev_valid & ~hold_q;
    out_payload <= dev_payload;
    if (rst_q) begin
      n <= 2'd0;
    end else begin
      case ({{put, take}})
        2'b10: begin
          if (n == 2'd0) q0 <= feed_payload; else q1 <= feed_payload;
          n <= n + 2'd1;
        end
        2'b01: begin
          q0 <= q1;
          n <= n - 2'd1;
        end
        2'b11: begin
          if (n == 2'd1) q0 <= feed_payload;
          else begin q0 <= q1; q1 <= feed_payload; end
        end
        default: ;
      endcase
    end
  end
  {_DEVICE_MODULE} dut(.clk(clk), .rst(rst_q),
    .i_stream__payload(q0), .i_stream__valid(n != 2'd0), .i_stream__ready(dev_ready),
    .o_stream__payload(dev_payload), .o_stream__valid(dev_valid), .o_stream__ready(~hold_q),
    .busy(busy));
endmodule
"""


def frame_timeout_cycles(config):
    """Return the clock cycles after which the device of ``config`` drops a partial request."""
    return protocol.frame_timeout_cycles(config.clock_hz)


def _run_params(config, divisor):
    """Return the harness's run-time arguments for a device of ``config`` whose UART has
    ``divisor`` cycles per bit (None: the byte streams)."""
    quiesce = frame_timeout_cycles(config) + _QUIESCE_MARGIN
    if divisor is None:
        return {"quiesce": quiesce}
    # A byte takes 10 bit periods on the line; the frame timeout counts from the FIFO side.
    return {"quiesce": quiesce + 20 * divisor, "divisor": divisor}


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
    link = "uart" if uart else "stream"
    index = root / "index" / f"{config.name}-{link}-{_source_key(config, link)}"
    with contextlib.suppress(OSError):
        binary = root / index.read_text().strip() / "board"
        if binary.exists():
            os.utime(binary.parent)  # in use: not to be pruned
            return binary
    component, verilog = emit_design(config, "device" if uart else "device-stream",
                                     _DEVICE_MODULE)
    wrapper = _wrapper(component, uart)
    run = _run_params(config, component.divisor if component.link == "uart" else None)
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


def _harness_command(sources, *, uart, jobs, flags=()):
    """Return the Verilator command that builds ``board`` in the current folder from the
    Verilog ``sources`` (the wrapper module :data:`_WRAPPER_MODULE` among them) and the
    harness, copied there."""
    return ["verilator", "--cc", "--exe", "--build", "--build-jobs", str(jobs or os.cpu_count()),
            # Amaranth's output trips Verilator's width lints; they are not errors.
            "-Wno-fatal", "-Wno-lint", "--prefix", "Vboard", "--top-module", _WRAPPER_MODULE,
            "-O3", "--x-assign", "fast", "--x-initial", "fast", "--Mdir", "obj", "-o", "../board",
            "-CFLAGS", f"-DBOARD_UART={int(uart)}", "-MAKEFLAGS", _OPT_FLAGS, *flags,
            *map(str, sources), HARNESS.name]


def _run_logged(cmd, folder, what, error=BoardError):
    """Run ``cmd`` in ``folder`` with its output appended to ``folder/build.log``; raise
    ``error`` naming ``what`` with the end of the log if it fails."""
    log_path = Path(folder) / "build.log"
    with open(log_path, "a") as log_file:
        proc = subprocess.run(cmd, cwd=folder, stdout=log_file, stderr=subprocess.STDOUT,
                              timeout=_BUILD_TIMEOUT, check=False)
    if proc.returncode != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise error(f"{what} failed (exit {proc.returncode}):\n{tail}")


def _build(config, link, *, verilog, wrapper, run, folder, jobs):
    reason = board_missing()
    if reason:
        raise BoardError(reason)
    (folder / "device.v").write_text(verilog)
    (folder / "wrapper.v").write_text(wrapper)
    shutil.copyfile(HARNESS, folder / HARNESS.name)
    _run_logged(_harness_command(["device.v", "wrapper.v"], uart=link == "uart", jobs=jobs),
                folder, f"building the simulated board for {config.name}")
    if not (folder / "board").exists():
        raise BoardError(f"building the simulated board for {config.name} left no executable; "
                         f"see {folder / 'build.log'}")
    # The object files are ~1 MB and not needed to run; keep the Verilog and log for people.
    shutil.rmtree(folder / "obj", ignore_errors=True)
    manifest = {"config": config.to_dict(), "config_hash": config.hash, "link": link,
                "run": run, "hwgen": _version("hwgen"), "verilator": _version("verilator")}
    (folder / "board.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


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

    Raises
    ------
    BoardError
        From :meth:`start` (or ``with``) if the build fails or the harness does not start.
    """

    def __init__(self, config, *, port=0, uart=False, build_dir=None, timeout=30.0, log=None):
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
    def from_build(cls, out_dir, *, port=0, timeout=30.0, log=None):
        """Return a board that simulates the synthesized netlist of ``hwgen build --out
        out_dir`` (see :mod:`sim.netlist`): the cells that became the bitstream, over the UART
        pins at the build's baud rate. Its :attr:`config` comes from the build's report; the
        simulation is built into (and cached in) ``out_dir/sim/``. ``port``, ``timeout`` and
        ``log`` are as for the constructor.

        Raises
        ------
        sim.netlist.NetlistError
            (a :class:`BoardError`) If ``out_dir`` is not a finished build of a whole device.
        """
        from .netlist import netlist_run_params

        config, params = netlist_run_params(out_dir)
        board = cls(config, port=port, uart=True, timeout=timeout, log=log)
        board._netlist = (Path(out_dir), params)
        return board

    # -- life cycle ------------------------------------------------------------------------------

    def start(self):
        """Build if needed, start the harness and wait until it listens; return ``self``."""
        if self.process is not None:
            raise BoardError("the board is already started")
        if self._netlist is not None:
            from .netlist import netlist_board_binary

            out_dir, params = self._netlist
            binary = netlist_board_binary(out_dir, log=self.log)
            self._params = params
        else:
            binary = board_binary(self.config, uart=self.uart, cache_dir=self.build_dir,
                                  log=self.log)
            self._params = params = json.loads((binary.parent / "board.json").read_text())["run"]
        cmd = [str(binary), "--port", str(self._want_port)]
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
