"""The host driver: run compiled networks on a device reached through a byte transport.

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

The device is a pyserial URL (a board's port, the simulated board's ``socket://``) or any
object with ``read``/``write`` (:class:`host.transport.Transport`), such as the in-process
device of :mod:`sim.inprocess`: ``Accelerator(InProcessDevice(config))`` runs this driver,
byte for byte, on the program interpreter.

A board that ``hwgen serve`` shares on the network with a key is opened with the same key
(``Accelerator("socket://lab1:4600", key="board.key")``): the connection proves it holds the key
before the first frame (:mod:`host.auth`).

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
import time

import serial

from hwgen.config import AcceleratorConfig
from hwgen.protocol import PROTOCOL_VERSION

from .auth import authenticate, check_unanswered_challenge, read_key
from .client import BusyTimeout, DeviceClient, DeviceError, LinkError, LinkTimeout
from .info import IncompatibleDevice, check_device, check_program
from .pacing import RunPacer
from .plan import check_samples, execute_load, infer_mode, readout_specs
from .rate import serial_rate
from .runner import StagedPort, progress_bar, run_all
from .transport import CountingTransport, open_transport

__all__ = ["Accelerator", "BusyTimeout", "DeviceError", "IncompatibleDevice", "InferCounters",
           "LinkError", "LinkTimeout", "as_program"]

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
        Bytes of the data the call had to move: the input values LOADed and the output values
        FETCHed or class indices answered (packed), or, on a protocol version 5 device, the
        input words written and the output words read.
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


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a number of seconds > 0, not {value!r}")


class Accelerator:
    """A device that runs compiled networks, reached through a pyserial URL or a transport.

    Parameters
    ----------
    device : str or Transport
        Anything :func:`serial.serial_for_url` opens (``/dev/ttyUSB1``, ``COM3``,
        ``socket://127.0.0.1:PORT`` of the simulated board, ``loop://``), or an object with
        ``read(size)`` and ``write(data)`` (:class:`host.transport.Transport`, e.g.
        :class:`sim.inprocess.InProcessDevice`). :meth:`close` closes it either way.
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
    baudrate : int or None
        Serial rate of a real port (ignored by ``socket://``, ``loop://`` and transports); None:
        the rate of every board's default build (:func:`host.rate.serial_rate`; a build's own:
        ``baudrate=serial_rate(build=DIR)``). INFO reports the device's (``info.baud``).
    key : bytes, str or os.PathLike, optional
        The key of a server that asks for one (``hwgen serve --key-file``): the key, or the
        path of the key file (:func:`host.auth.read_key`). None: the device asks for none.

    Attributes
    ----------
    url : str
        The URL, or the transport's ``url`` (its type and id if it has none).

    Raises
    ------
    LinkError
        If the port cannot be opened or does not answer INFO (:class:`LinkTimeout`).
    host.auth.AuthenticationError
        A LinkError: the server rejected the key, asks for one and none was given, or asks
        for none (within ``timeout``) and one was given.
    IncompatibleDevice
        If the device speaks another protocol version or was built from another configuration;
        the message names both values and the fields that differ.
    ValueError, TypeError
        For bad arguments (a device that is neither a URL nor a transport, naming both).
    """

    def __init__(self, device, *, timeout=5.0, retries=3, config=None, progress=None,
                 baudrate=None, key=None):
        _check_positive("timeout", timeout)
        key = None if key is None else read_key(key)
        if config is not None and not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig or None, not {config!r}")
        if progress not in (None, True, False):
            raise ValueError(f"progress must be True, False or None (automatic), not "
                             f"{progress!r}")
        self.timeout = timeout
        self.progress = progress
        try:
            raw, self.url = open_transport(device, baudrate=serial_rate(baudrate))
        except (serial.SerialException, OSError, ValueError) as exc:
            raise LinkError(f"cannot open {device}: {exc}") from None
        self._port = CountingTransport(raw)
        try:
            if key is not None:  # before any frame, on the raw link: not counted
                authenticate(raw, key, timeout, self.url)
            self.client = DeviceClient(self._port, timeout=timeout, retries=retries)
            self._program = None
            self._last = InferCounters()
            self._snapshot = None  # the device's counters while idle, before the next RUN
            self._info = self._handshake(config)
            # A real device runs at its clock; the pacer measures how fast it really is.
            self._pacer = RunPacer(timeout, None if config is None else 1.0 / config.clock_hz,
                                   synchronous=self._port.synchronous)
        except BaseException:
            self.close()
            raise

    def _handshake(self, config):
        try:
            info = self._call("INFO handshake", self.client.info)
        except LinkError:
            check_unanswered_challenge(self._port.head, self.url)
            raise
        except ValueError as exc:  # an INFO layout this host cannot read: another protocol
            raise IncompatibleDevice(
                f"the device at {self.url} answered INFO in a form this host (protocol version "
                f"{PROTOCOL_VERSION}) cannot read: {exc}", expected=str(PROTOCOL_VERSION)) \
                from None
        check_device(info, config, self.url)
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

    # -- loading and inference -------------------------------------------------------------------

    def load(self, program):
        """Write a compiled program's images (PROGRAM, WEIGHT, PARAM) to the device.

        ``program`` is a :class:`hwgen.compiler.Program`, or the ``.npz`` file
        :meth:`Program.save` wrote.

        Raises
        ------
        IncompatibleDevice
            If the program was compiled for another configuration (naming both hashes).
        ValueError, OSError
            If the file cannot be read as a program.
        DeviceError, LinkError, LinkTimeout, BusyTimeout
            If the device refuses or does not answer, or stays busy with an earlier run.
        """
        program = as_program(program, "load")
        check_program(self._info, program, self.url)
        self._program = None
        # An interrupted infer may have left a program running; memory is locked until it ends.
        self._snapshot = self._call("load: wait for the device", self.client.wait_idle,
                                    self.timeout)
        execute_load(StagedPort(self, "load"), program)
        self._pacer.program_loaded(program)
        self._program = program

    def infer(self, x, outputs="last", *, probabilities=False, output=None):
        """Run the loaded program on every sample of ``x``; return one output per sample.

        Samples are sent in chunks of at most ``program.batch`` (one RUN each, planned by
        :func:`host.plan.run_plans`, carried out by :mod:`host.runner`), in order; the result
        has exactly ``len(x)`` samples, ``[i]`` the network's output for ``x[i]``. A device of
        protocol version 6 gets the input packed at its width and answers the output at its
        ``wire_bits`` (or the classes), the next chunk's input streaming in while the last
        one's output streams out; an older one is written and read in words (same results).

        Parameters
        ----------
        x : array_like of int, shape (M, *program.input.sample_shape)
            Signed ``in_bits`` integers: rows ``(M, K)`` of the program's ``K`` input features,
            or NHWC images ``(M, H, W, C)`` when the network's first layer is spatial; ``M``
            may be 0. A ``dtype="bf16"`` program takes finite bf16 values: an
            ``ml_dtypes.bfloat16`` array, or float32 holding bf16 values
            (:meth:`hwgen.nn.Bf16Network.quantize_input` rounds floats to them).
        outputs : {"last", "all"}
            ``"all"``: after each run, also read every layer's output of that run (at
            :attr:`Program.layer_outputs <hwgen.compiler.Program>`); the program must have
            been compiled with ``readout=True``.
        output : {None, "scores", "argmax"} or ("top_k", k)
            None: the program's :attr:`~hwgen.compiler.Program.output_mode`. ``"argmax"``: the
            index of each sample's largest score; ``("top_k", k)``: the indices of its ``k``
            largest, in descending order; ties to the lowest index (NumPy's ``argmax`` and
            ``argsort(-s, kind="stable")[:, :k]`` of the scores). Only for an output of one row
            per sample.

        Returns
        -------
        numpy.ndarray of int64, shape (M, *program.output.sample_shape), or list of them
            As :meth:`hwgen.nn.QuantizedNetwork.forward` returns it (saturated activations, or
            raw accumulators for a ``raw`` output layer); with ``outputs="all"``, one array per
            layer, as :meth:`~hwgen.nn.QuantizedNetwork.forward_trace` returns them.
            With ``probabilities=True``, the last output as the network's final Softmax,
            LogSoftmax or Sigmoid gives it, in float64, applied here on the host
            (:meth:`Program.probabilities <hwgen.compiler.Program.probabilities>`; the device
            returns the raw scores, and the argmax is the same). For a class output, int64
            indices: shape ``(M,)`` of argmax, ``(M, k)`` of top-k. A ``dtype="bf16"``
            program's output is :meth:`hwgen.nn.Bf16Network.forward`'s: float32 scores (a raw
            last layer) or ``ml_dtypes.bfloat16`` values; its classes rank the scores as
            floats, a NaN above +Inf (docs/arithmetic.md, "bfloat16").

        Raises
        ------
        RuntimeError
            If no program is loaded.
        ValueError
            Before anything is sent, if ``x`` is not integer, not of the program's sample shape
            (naming it, and how to convert NCHW images) or outside signed ``in_bits`` (naming
            the first bad element), or ``outputs``, ``output`` or ``probabilities`` are not
            allowed together or for the program (saying why); for a ``dtype="bf16"``
            program, if ``x`` is neither bf16 nor float32, or holds a value that is not bf16,
            an Inf or a NaN (naming the first index).
        BusyTimeout
            If a run is still going ``timeout`` seconds after it should have ended.
        DeviceError, LinkError, LinkTimeout
            If the device refuses a request or the link fails; the message names the samples
            and the request.
        """
        program = self._program
        if program is None:
            raise RuntimeError("infer: no program is loaded; call load(program) first")
        mode = infer_mode(program, outputs, output, probabilities)
        kept = readout_specs(program, outputs, "infer")
        x = check_samples(program, x, "infer")
        if self._snapshot is None:  # the last call failed: a run may still be going
            self._snapshot = self._call("infer: wait for the device", self.client.wait_idle,
                                        self.timeout)
        rows = len(x)
        start_time = time.perf_counter()
        sent, received, first = self._port.sent, self._port.received, self._snapshot
        chunks = math.ceil(rows / program.batch)
        bar = progress_bar(self.progress, rows, chunks)
        port = StagedPort(self, "infer")
        try:
            outs = run_all(port, program, x, outputs, mode, kept=kept, bar=bar)
        except BaseException:
            self._snapshot = None
            raise
        finally:
            if bar is not None:
                bar.close()
        last = self._snapshot
        self._last = InferCounters(
            rows=rows, runs=chunks, cycles=last.cycles - first.cycles,
            busy_cycles=last.busy_cycles - first.busy_cycles, macs=last.macs - first.macs,
            seconds=time.perf_counter() - start_time,
            bytes_sent=self._port.sent - sent, bytes_received=self._port.received - received,
            payload_bytes=port.payload_bytes)
        if probabilities:
            return program.probabilities(outs[0])
        return outs if outputs == "all" else outs[0]

    # -- counters and closing --------------------------------------------------------------------

    def counters(self):
        """Return the :class:`InferCounters` of the last :meth:`infer` call (zeros before any).

        The device counters in it are the growth of the device's own counters over that call,
        so they equal the cycle model's ``sum(program_cycles(program, m))`` over its runs; see
        :meth:`device_counters` for the device's cumulative values.
        """
        return self._last

    def device_counters(self):
        """Return the device's cumulative :class:`~hwgen.protocol.CounterValues` (one
        COUNTERS)."""
        return self._call("COUNTERS", self.client.counters)

    def close(self):
        """Close the port or transport (safe to call more than once)."""
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


def as_program(program, what):
    """Return ``program`` (a :class:`~hwgen.compiler.Program`), or the program saved at the
    path ``program``.

    Raises
    ------
    TypeError
        Naming ``what``, for anything else.
    ValueError, OSError
        If the file cannot be read as a program.
    """
    from hwgen.compiler import Program

    if isinstance(program, str | os.PathLike):
        return Program.load(program)
    if not isinstance(program, Program):
        raise TypeError(f"{what} takes a hwgen.compiler.Program or the path of a saved one, "
                        f"not {type(program).__name__}")
    return program
