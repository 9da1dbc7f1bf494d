"""The host driver: run compiled networks on a device reached through a pyserial URL.

:class:`Accelerator` is the high-level API over :class:`host.client.DeviceClient`:

.. code-block:: python

    from host import Accelerator

    with Accelerator("socket://127.0.0.1:4567", config=config) as acc:
        acc.load(program)              # a hwgen.compiler.Program, or the path of a saved one
        y = acc.infer(x)               # any number of samples; program.batch of them per run
        trace = acc.infer(x, outputs="all")  # every layer's output (compiled with readout=True)
        print(acc.counters())          # device cycles, MACs and link bytes of that infer

Inputs and outputs have the program's sample shapes (:attr:`MatrixSpec.sample_shape
<hwgen.compiler.MatrixSpec>`): rows of features ``[M, K]``, or NHWC images ``[M, H, W, C]`` for
a network whose first layer is spatial; a network that ends in a spatial layer returns images
``[M, H', W', C']``.

It checks on opening that the device speaks this host's protocol version and, given a
configuration, that it was built from it (the INFO config hash); it refuses a program compiled
for another configuration. Every failure of the link or the device raises an exception that
names the request; nothing waits for longer than the timeouts allow.
"""

import contextlib
import dataclasses
import math
import numbers
import os
import sys
import time

import numpy as np
import serial

from hwgen.compiler.codec import check_input_samples, output_words, unpack_output
from hwgen.config import AcceleratorConfig
from hwgen.cycles import program_cycles
from hwgen.protocol import DEFAULT_BAUD, PROTOCOL_VERSION, SYNC_REQUEST, Opcode

from .client import BusyTimeout, DeviceClient, DeviceError, LinkError, LinkTimeout
from .transport import open_port

__all__ = ["Accelerator", "BusyTimeout", "DeviceError", "IncompatibleDevice", "InferCounters",
           "LinkError", "LinkTimeout", "check_samples", "sample_unit"]

# A progress bar appears on its own for runs of more chunks than this (and a terminal).
_PROGRESS_CHUNKS = 20
# Bounds of the wait between two COUNTERS polls of a running program: short enough not to idle a
# fast device, long enough not to flood the link while a slow one (a simulation) computes.
_POLL_MIN_S = 0.0002
_POLL_MAX_S = 0.05
# Sleeps shorter than this are not worth a system call; the COUNTERS round trip takes longer.
_SLEEP_MIN_S = 0.0001


def sample_unit(program):
    """Return what the samples of ``program`` are called in messages: ``"rows"`` (of features)
    or ``"samples"`` (images)."""
    return "rows" if len(program.input.sample_shape) == 1 else "samples"


def check_samples(program, x, what):
    """Return ``x`` as an int64 ``[M, *program.input.sample_shape]`` array of the program's
    signed input values.

    Raises
    ------
    ValueError
        Starting with ``what``, naming the allowed shape (and, for images given NCHW, how to
        convert them), dtype or range (see :func:`hwgen.compiler.codec.check_input_samples`).
    """
    spec = program.input
    return check_input_samples(x, spec.sample_shape, spec.lane_bits, what,
                               rows=sample_unit(program))


def readout_specs(program, outputs, what):
    """Return the matrices an infer call reads after each run: ``[program.output]`` for
    ``outputs="last"``, every layer's for ``"all"``.

    Raises
    ------
    ValueError
        Naming ``what``, for another ``outputs``, or ``"all"`` of a program compiled without
        read-out (saying how to compile one).
    """
    if outputs == "last":
        return [program.output]
    if outputs != "all":
        raise ValueError(f"{what}: outputs={outputs!r}; allowed: 'last' (the network's output) "
                         "or 'all' (every layer's)")
    if not program.layer_outputs:
        raise ValueError(f"{what}: outputs='all' needs every layer's output of the run, but "
                         "the program was compiled without read-out (its layers reuse two "
                         "areas); compile it with hwgen.compile(network, config, readout=True)")
    return list(program.layer_outputs)


class IncompatibleDevice(RuntimeError):
    """The device cannot run what the host has: another protocol version or configuration.

    Attributes
    ----------
    device, expected : str
        What the device reports and what the host needs (versions or config hashes).
    differences : list of str
        ``"field: device X, expected Y"`` for every INFO field that differs (may be empty).
    """

    def __init__(self, message, *, device=None, expected=None, differences=()):
        self.device = device
        self.expected = expected
        self.differences = list(differences)
        super().__init__(message)


@dataclasses.dataclass(frozen=True)
class InferCounters:
    """What one :meth:`Accelerator.infer` call cost, on the device and on the link.

    Attributes
    ----------
    rows : int
        Input samples processed (rows of features, or images).
    runs : int
        RUN requests (chunks of at most ``program.batch`` samples).
    cycles, busy_cycles, macs : int
        Growth of the device's counters over the call: cycles a program was running, cycles an
        activation row entered the array, multiply-accumulates issued.
    seconds : float
        Wall time of the call.
    bytes_sent, bytes_received : int
        Bytes written to and read from the link, retries and polls included.
    payload_bytes : int
        Bytes of input words written and output words read: the data the call had to move.
    """

    rows: int = 0
    runs: int = 0
    cycles: int = 0
    busy_cycles: int = 0
    macs: int = 0
    seconds: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0
    payload_bytes: int = 0

    @property
    def wire_bytes(self):
        """Bytes in both directions."""
        return self.bytes_sent + self.bytes_received

    @property
    def link_efficiency(self):
        """``payload_bytes / wire_bytes`` (0 when nothing was sent)."""
        return self.payload_bytes / self.wire_bytes if self.wire_bytes else 0.0

    @property
    def rows_per_second(self):
        """Samples per second of wall time."""
        return self.rows / self.seconds if self.seconds else 0.0


class _CountingPort:
    """A pyserial port that counts the bytes through it and remembers the last request sent."""

    def __init__(self, port):
        self.port = port
        self.sent = 0
        self.received = 0
        self.last_request = None

    @property
    def timeout(self):
        return self.port.timeout

    @timeout.setter
    def timeout(self, value):
        self.port.timeout = value

    def write(self, data):
        if len(data) > 1 and data[0] == SYNC_REQUEST:
            try:
                self.last_request = Opcode(data[1]).name
            except ValueError:
                self.last_request = f"opcode {data[1]:#04x}"
        self.sent += len(data)
        return self.port.write(data)

    def read(self, size=1):
        data = self.port.read(size)
        self.received += len(data)
        return data

    def close(self):
        self.port.close()


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a number of seconds > 0, not {value!r}")


class Accelerator:
    """A device that runs compiled networks, opened from a pyserial URL.

    Parameters
    ----------
    url : str
        Anything :func:`serial.serial_for_url` opens: ``/dev/ttyUSB1``, ``COM3``,
        ``socket://127.0.0.1:PORT`` (the simulated board), ``loop://``.
    timeout : float
        Seconds to wait for the answer to one request, and for a running program beyond its
        expected duration.
    retries : int
        Attempts after the first one for a request whose answer is lost or damaged.
    config : AcceleratorConfig, optional
        When given, the device must have been built from it (INFO's config hash).
    progress : bool or None
        Show a :mod:`tqdm` bar during :meth:`infer`: ``True`` always, ``False`` never, ``None``
        when a call takes more than 20 runs and stderr is a terminal.
    baudrate : int
        Serial rate of a real port (ignored by ``socket://`` and ``loop://``); by default the
        rate hwgen builds boards for, :data:`hwgen.device.DEFAULT_BAUD`.

    Raises
    ------
    LinkError
        If the port cannot be opened or does not answer INFO (:class:`LinkTimeout`).
    IncompatibleDevice
        If the device speaks another protocol version or was built from another configuration;
        the message names both values and the fields that differ.
    ValueError, TypeError
        For bad arguments.
    """

    def __init__(self, url, *, timeout=5.0, retries=3, config=None, progress=None,
                 baudrate=DEFAULT_BAUD):
        if not isinstance(url, str):
            raise TypeError(f"url must be a pyserial URL string, not {url!r}")
        _check_positive("timeout", timeout)
        if config is not None and not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig or None, not {config!r}")
        if progress not in (None, True, False):
            raise ValueError(f"progress must be True, False or None (automatic), not "
                             f"{progress!r}")
        self.url = url
        self.timeout = timeout
        self.progress = progress
        try:
            raw = open_port(url, baudrate=baudrate)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise LinkError(f"cannot open {url}: {exc}") from None
        self._port = _CountingPort(raw)
        try:
            self.client = DeviceClient(self._port, timeout=timeout, retries=retries)
            self._program = None
            self._expected_cycles = {}  # rows of a run -> cycles it takes, for the program
            self._last = InferCounters()
            self._snapshot = None  # the device's counters while idle, before the next RUN
            # Seconds per device cycle as last measured; a real device runs at its clock.
            self._seconds_per_cycle = None
            self._info = self._handshake(config)
        except BaseException:
            self.close()
            raise

    # -- opening ---------------------------------------------------------------------------------

    def _handshake(self, config):
        try:
            info = self._call("INFO handshake", self.client.info)
        except ValueError as exc:  # an INFO layout this host cannot read: another protocol
            raise IncompatibleDevice(
                f"the device at {self.url} answered INFO in a form this host (protocol version "
                f"{PROTOCOL_VERSION}) cannot read: {exc}", expected=str(PROTOCOL_VERSION)) \
                from None
        if info.version != PROTOCOL_VERSION:
            raise IncompatibleDevice(
                f"the device at {self.url} speaks protocol version {info.version}; this host "
                f"speaks version {PROTOCOL_VERSION}", device=str(info.version),
                expected=str(PROTOCOL_VERSION))
        if config is not None and info.config_hash != config.hash_int:
            differences = [d for d in info.mismatches(config)
                           if not d.startswith("config_hash:")]
            detail = ("; differing fields: " + "; ".join(differences)) if differences else \
                " (INFO's fields agree, so a field INFO does not report differs, e.g. a " \
                "buffer depth or clock_hz)"
            raise IncompatibleDevice(
                f"the device at {self.url} was built from config hash "
                f"{info.config_hash:016x}, not from {config.name} (config hash {config.hash})"
                + detail, device=f"{info.config_hash:016x}", expected=config.hash,
                differences=differences)
        self._seconds_per_cycle = 1.0 / config.clock_hz if config is not None else None
        return info

    def _call(self, what, func, *args):
        """Run one client operation; name the stage ``what`` in any error it raises.

        :class:`DeviceClient`'s errors name the request and keep their type; a port that fails
        underneath (a closed socket, an unplugged adaptor) raises pyserial's exceptions, which
        become a :class:`LinkError` naming the request that was on its way.
        """
        try:
            return func(*args)
        except DeviceError as exc:
            raise DeviceError(f"{what}: {exc.request}", exc.status) from exc
        except (LinkError, BusyTimeout) as exc:  # the client names the request; add the stage
            raise type(exc)(f"{what}: {exc}") from exc
        except (serial.SerialException, ConnectionError) as exc:
            request = self._port.last_request or "the first request"
            raise LinkError(f"{what}: the link to {self.url} failed during {request}: "
                            f"{exc}") from exc

    # -- properties ------------------------------------------------------------------------------

    @property
    def info(self):
        """The device's :class:`~host.info.DeviceInfo` (read once, when opened)."""
        return self._info

    @property
    def config_hash(self):
        """The device's configuration hash, as 16 hex digits (like ``AcceleratorConfig.hash``)."""
        return f"{self._info.config_hash:016x}"

    @property
    def bytes_sent(self):
        """Bytes written to the link since it was opened (retries and polls included)."""
        return self._port.sent

    @property
    def bytes_received(self):
        """Bytes read from the link since it was opened."""
        return self._port.received

    @property
    def program(self):
        """The :class:`~hwgen.compiler.Program` loaded by :meth:`load`, or None."""
        return self._program

    # -- loading ---------------------------------------------------------------------------------

    def load(self, program):
        """Write a compiled program's images (PROGRAM, WEIGHT, PARAM) to the device.

        Parameters
        ----------
        program : hwgen.compiler.Program or path-like
            A program, or the ``.npz`` file :meth:`Program.save` wrote.

        Raises
        ------
        IncompatibleDevice
            If the program was compiled for another configuration (naming both hashes).
        ValueError, OSError
            If the file cannot be read as a program.
        DeviceError, LinkError, LinkTimeout, BusyTimeout
            If the device refuses or does not answer, or stays busy with an earlier run.
        """
        from hwgen.compiler import Program

        if isinstance(program, str | os.PathLike):
            program = Program.load(program)
        elif not isinstance(program, Program):
            raise TypeError(f"load takes a hwgen.compiler.Program or the path of a saved one, "
                            f"not {type(program).__name__}")
        if program.config_hash != self.config_hash:
            raise IncompatibleDevice(
                f"the program was compiled for {program.config.name} (config hash "
                f"{program.config_hash}); the device at {self.url} was built from config hash "
                f"{self.config_hash}", device=self.config_hash, expected=program.config_hash,
                differences=[d for d in self._info.mismatches(program.config)
                             if not d.startswith("config_hash:")])
        self._program = None
        # An interrupted infer may have left a program running; memory is locked until it ends.
        self._snapshot = self._call("load: wait for the device", self.client.wait_idle,
                                    self.timeout)
        for region, (base, words) in program.images.items():
            if len(words):
                self._call(f"load: write {region.name}", self.client.write, region, base, words)
        if self._seconds_per_cycle is None:
            self._seconds_per_cycle = 1.0 / program.config.clock_hz
        self._expected_cycles = {}
        self._program = program

    # -- inference -------------------------------------------------------------------------------

    def infer(self, x, outputs="last"):
        """Run the loaded program on every sample of ``x``; return one output per sample.

        Samples are sent in chunks of at most ``program.batch`` (one RUN each), in order; the
        result has exactly ``len(x)`` samples, ``[i]`` the network's output for ``x[i]``.

        Parameters
        ----------
        x : array_like of int, shape (M, *program.input.sample_shape)
            Signed ``in_bits`` integers: rows ``(M, K)`` of the program's ``K`` input features,
            or NHWC images ``(M, H, W, C)`` when the network's first layer is spatial; ``M``
            may be 0.
        outputs : {"last", "all"}
            ``"all"``: after each run, also read every layer's output of that run from the
            device (READ requests at :attr:`Program.layer_outputs <hwgen.compiler.Program>`);
            the program must have been compiled with ``readout=True``.

        Returns
        -------
        numpy.ndarray of int64, shape (M, *program.output.sample_shape), or list of them
            As :meth:`hwgen.nn.QuantizedNetwork.forward` returns it: saturated activations, or
            raw accumulators for a ``raw`` output layer; ``(M, N)`` rows, or ``(M, H', W',
            C')`` images of a network that ends in a spatial layer. With ``outputs="all"``, one
            array per layer, ``(M, *shape_i)``, as
            :meth:`~hwgen.nn.QuantizedNetwork.forward_trace` returns them.

        Raises
        ------
        RuntimeError
            If no program is loaded.
        ValueError
            Before anything is sent, if ``x`` is not integer, not of the program's sample shape
            (the message names it, and how to convert NCHW images) or outside signed
            ``in_bits`` (naming the first bad element), if ``outputs`` is
            neither ``"last"`` nor ``"all"``, or if ``"all"`` is asked of a program compiled
            without read-out (saying how to compile one).
        BusyTimeout
            If a run is still going ``timeout`` seconds after it should have ended.
        DeviceError, LinkError, LinkTimeout
            If the device refuses a request or the link fails; the message names the samples
            and the request.
        """
        program = self._program
        if program is None:
            raise RuntimeError("infer: no program is loaded; call load(program) first")
        kept = readout_specs(program, outputs, "infer")
        x = check_samples(program, x, "infer")
        if self._snapshot is None:  # the last call failed: a run may still be going
            self._snapshot = self._call("infer: wait for the device", self.client.wait_idle,
                                        self.timeout)
        rows = len(x)
        outs = [np.empty((rows, *spec.sample_shape), dtype=np.int64) for spec in kept]
        unit = sample_unit(program)
        chunks = math.ceil(rows / program.batch)
        in_bytes = self._info.regions[program.input.region].word_bytes
        start_time = time.perf_counter()
        sent, received = self._port.sent, self._port.received
        first = self._snapshot
        payload = 0
        bar = self._progress_bar(rows, chunks)
        try:
            for start in range(0, rows, program.batch):
                m = min(program.batch, rows - start)
                stage = f"infer {unit} {start}..{start + m - 1} of {rows}"
                words = program.pack_input(x[start:start + m])
                self._call(stage, self.client.write, program.input.region, program.input.base,
                           words)
                self._call(stage, self.client.run, m)
                self._wait_run(stage, program, m)
                payload += len(words) * in_bytes
                for out, spec in zip(outs, kept, strict=True):
                    region, base, count = output_words(spec, program.batch, m)
                    raw = self._call(stage, self.client.read, region, base, count)
                    out[start:start + m] = unpack_output(spec, program.batch, raw.tolist(), m)
                    payload += count * self._info.regions[region].word_bytes
                if bar is not None:
                    bar.update(m)
        except BaseException:
            self._snapshot = None
            raise
        finally:
            if bar is not None:
                bar.close()
        last = self._snapshot
        self._last = InferCounters(
            rows=rows, runs=chunks,
            cycles=last.cycles - first.cycles if chunks else 0,
            busy_cycles=last.busy_cycles - first.busy_cycles if chunks else 0,
            macs=last.macs - first.macs if chunks else 0,
            seconds=time.perf_counter() - start_time,
            bytes_sent=self._port.sent - sent, bytes_received=self._port.received - received,
            payload_bytes=payload)
        return outs if outputs == "all" else outs[0]

    def _progress_bar(self, rows, chunks):
        show = self.progress
        if show is None:
            show = chunks > _PROGRESS_CHUNKS and sys.stderr.isatty()
        if not show:
            return None
        from tqdm import tqdm

        return tqdm(total=rows, unit="sample", desc="infer", leave=False)

    def _wait_run(self, stage, program, m):
        """Poll COUNTERS until the run just started ends; keep the final counters.

        The first poll comes when the run should be over: the cycle model's count times the
        seconds per device cycle seen so far (the clock period at first, far longer on a
        simulated board). A poll that finds the device busy and well on its way measures the
        rate from the cycles done and sleeps until the rest should be done; one that finds it
        barely started doubles the estimate. A run that is over at the first poll shortens the
        estimate a little, to follow a device that got faster. So a run usually costs one
        COUNTERS round trip, and now and then two.
        """
        began = self._snapshot.cycles
        expected = self._expected_cycles.get(m)
        if expected is None:  # the cycle model takes milliseconds: once per batch size
            expected = self._expected_cycles[m] = program_cycles(program, m)
        spc = self._seconds_per_cycle
        t_run = time.monotonic()
        deadline = t_run + expected * spc + self.timeout
        wait = min(expected * spc, self.timeout)
        first = True
        while True:
            if wait >= _SLEEP_MIN_S:
                time.sleep(wait)
            counters = self._call(stage, self.client.counters)
            now = time.monotonic()
            if not counters.busy:
                if first:
                    self._seconds_per_cycle = spc * 0.95
                self._snapshot = counters
                return
            first = False
            done = counters.cycles - began
            if done > 0 and done >= expected / 4:
                spc = (now - t_run) / done  # a sample large enough to trust
            else:
                spc *= 2
            self._seconds_per_cycle = spc
            deadline = max(deadline, t_run + expected * spc + self.timeout)
            if now > deadline:
                raise BusyTimeout(
                    f"{stage}: the program is still running {now - t_run:.1f} s after RUN "
                    f"batch={m} ({done} of the expected {expected} cycles done)")
            wait = (expected - done) * spc * 1.05
            wait = min(max(wait, _POLL_MIN_S), _POLL_MAX_S, max(0.0, deadline - now))

    # -- counters and closing --------------------------------------------------------------------

    def counters(self):
        """Return the :class:`InferCounters` of the last :meth:`infer` call (zeros before any).

        The device counters in it are the growth of the device's own counters over that call,
        so they equal the cycle model's ``sum(program_cycles(program, m))`` over its runs; see
        :meth:`device_counters` for the device's cumulative values.
        """
        return self._last

    def device_counters(self):
        """Return the device's cumulative :class:`~hwgen.protocol.CounterValues` (one COUNTERS)."""
        return self._call("COUNTERS", self.client.counters)

    def close(self):
        """Close the port (safe to call more than once)."""
        port = getattr(self, "_port", None)
        if port is not None:
            with contextlib.suppress(serial.SerialException, OSError):
                port.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        loaded = "no program" if self._program is None else \
            f"program batch {self._program.batch}"
        return f"<Accelerator {self.url} config {self.config_hash}, {loaded}>"
