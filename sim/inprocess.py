"""A device in this process: the byte protocol of :mod:`hwgen.protocol` served by the program
interpreter, for the host driver's tests and for training without a board.

:class:`InProcessDevice` is a byte transport (:class:`host.transport.Transport`): the host
writes request frames to it and reads response frames from it, as from a serial port or the
simulated board's socket, so that ``host.Accelerator(InProcessDevice(config))`` runs the real
host driver, byte for byte, with no Verilator and no socket. Behind the bytes are the memories
and the controller of :class:`sim.interpreter.ProgramInterpreter`, and the counters of the cycle
model (:mod:`hwgen.cycles`).

It answers as the gateware's frame engine does (:mod:`hwgen.link.checks`,
:mod:`hwgen.link.executor`): requests are checked in the protocol's order (payload CRC, opcode,
length for the opcode, region, count (a stream's shape and bytes), ``addr + count`` (a
stream's words), batch, program loaded) and the first
failure is answered with its status, changing nothing; a frame whose header CRC fails gets no
answer; garbage between frames is skipped; a partial frame is dropped once no byte has come for
:data:`~hwgen.protocol.FRAME_TIMEOUT_MS`. WRITE to PROGRAM sets the *program loaded* flag,
RESET clears it, the run count and the counters (not the memories). LOAD, FETCH and CLASSES
(the packed wire and the class output) are :mod:`sim.wire_streams`'.

One difference is by design: RUN runs the program to its end before it is answered, so the
device is never busy and never answers BUSY (:attr:`InProcessDevice.synchronous` tells the host
driver not to wait for the program's modelled duration). A program the interpreter finds wrong
(a layer that overwrites its own input, an accumulator out of range) raises its
``AssertionError`` from :meth:`InProcessDevice.write`: on a board it would compute garbage, here
the test that sent it fails.
"""

import dataclasses
import itertools
import time

from host.frames import RequestDecoder
from hwgen.config import AcceleratorConfig
from hwgen.cycles import layer_busy_rows, layer_cycles
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    FRAME_TIMEOUT_MS,
    MAX_PAYLOAD,
    RX_FIFO,
    AccessArgs,
    ClassArgs,
    CounterValues,
    Features,
    Opcode,
    RunArgs,
    Status,
    StreamArgs,
    encode_response,
    info_bytes,
    layout_bytes,
    pack_counters,
    pack_words,
    unpack_access,
    unpack_run,
)

from . import wire_streams
from .interpreter import ProgramInterpreter

__all__ = ["InProcessDevice"]

_ACCESS_BYTES = layout_bytes(AccessArgs)
_RUN_BYTES = layout_bytes(RunArgs)
_STREAM_BYTES = layout_bytes(StreamArgs)
_CLASS_BYTES = layout_bytes(ClassArgs)
#: Payload bytes of each opcode with a fixed length; the others (WRITE, LOAD) take from their
#: arguments' to ``max_payload``.
_FIXED_LENGTH = {Opcode.INFO: 0, Opcode.COUNTERS: 0, Opcode.RESET: 0, Opcode.RUN: _RUN_BYTES,
                 Opcode.READ: _ACCESS_BYTES, Opcode.FETCH: _STREAM_BYTES,
                 Opcode.CLASSES: _CLASS_BYTES}
_LEAST_LENGTH = {Opcode.WRITE: _ACCESS_BYTES, Opcode.LOAD: _STREAM_BYTES}
#: The commands each optional feature brings.
_FEATURE_OPCODES = {Opcode.LOAD: Features.PACKED, Opcode.FETCH: Features.PACKED,
                    Opcode.CLASSES: Features.CLASSES}
_NUMBERS = itertools.count()


class InProcessDevice:
    """A device built from ``config``, served in this process over the byte protocol.

    Parameters
    ----------
    config : AcceleratorConfig
        What the device reports in INFO and what sizes its memories.
    max_payload : int
        Its payload buffer in bytes (reported by INFO), as the frame engine's: at least one
        WRITE argument block plus the widest word, at most 65535.
    seed : int
        Of the garbage that words never written read as (see
        :class:`~sim.interpreter.ProgramInterpreter`).
    rx_fifo : int
        The receive FIFO INFO reports (this device buffers without limit).
    features : Features
        The optional commands it has (LOAD and FETCH, CLASSES); the others answer BAD_OPCODE,
        as on a device built without them.

    Attributes
    ----------
    url : str
        ``inprocess://N``, a name unique in this process (pools tell devices apart by it).
    timeout : float or None
        Seconds :meth:`read` waits when no byte is there (a port's read timeout; the host
        driver sets it).
    synchronous : bool
        True: RUN finishes before it is answered (see the module's notes).
    interpreter : ProgramInterpreter
        The memories and the controller.
    counters : CounterValues
        What COUNTERS would answer now.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`AcceleratorConfig`.
    ValueError
        If ``max_payload`` is out of range, naming the value and the range.
    """

    synchronous = True

    def __init__(self, config, *, max_payload=MAX_PAYLOAD, seed=0, rx_fifo=RX_FIFO,
                 features=Features.ALL):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        self.geometry = regions(config)
        least = _ACCESS_BYTES + max(g.word_bytes for g in self.geometry.values())
        if isinstance(max_payload, bool) or not isinstance(max_payload, int) \
                or not least <= max_payload <= 0xFFFF:
            raise ValueError(f"max_payload must be an int in {least}..65535 (a WRITE of one "
                             f"word of the widest region needs {least} bytes), not "
                             f"{max_payload!r}")
        self.config = config
        self.max_payload = max_payload
        self.url = f"inprocess://{next(_NUMBERS)}"
        self.timeout = None
        self.interpreter = ProgramInterpreter(config, seed=seed)
        self.counters = CounterValues(False, False, 0, 0, 0, 0)
        self.features = Features(features)
        self._info_payload = info_bytes(config, max_payload, rx_fifo=rx_fifo,
                                        features=self.features)
        self._decoder = RequestDecoder()
        self._out = bytearray()
        self._last_byte = time.monotonic()
        self._closed = False

    # -- the byte transport ----------------------------------------------------------------------

    def write(self, data):
        """Receive request bytes; answer every request they complete. Return ``len(data)``."""
        self._check_open()
        now = time.monotonic()
        if self._decoder.pending and now - self._last_byte > FRAME_TIMEOUT_MS / 1000:
            self._decoder.reset()  # the frame engine's idle timeout: a partial frame is dropped
        self._last_byte = now
        for frame in self._decoder.feed(bytes(data)):
            status, payload = self.answer(frame)
            if status != Status.OK:
                payload = b""
            self._out += encode_response(frame.opcode, frame.seq, status, payload)
        return len(data)

    def read(self, size=1):
        """Return up to ``size`` response bytes; wait :attr:`timeout` seconds if there are
        none (as a serial port does), then return what there is (maybe nothing)."""
        self._check_open()
        if not self._out and self.timeout:
            time.sleep(self.timeout)
        out = bytes(self._out[:size])
        del self._out[:size]
        return out

    def close(self):
        """Refuse further reads and writes (the memories are kept for inspection)."""
        self._closed = True

    def _check_open(self):
        if self._closed:
            raise ConnectionError(f"{self.url} is closed")

    # -- the frame engine's rules ----------------------------------------------------------------

    def answer(self, frame):
        """Return ``(status, payload)`` for a request :class:`~host.frames.Frame`: the first
        check it fails with no change of state, or OK and the command's result."""
        status = self.check(frame)
        if status != Status.OK:
            return status, b""
        return Status.OK, getattr(self, f"_{frame.opcode.name.lower()}")(frame.payload)

    def check(self, frame):
        """Return the :class:`~hwgen.protocol.Status` the frame engine gives ``frame``: the
        checks of :class:`hwgen.link.checks.RequestChecks`, in its order (busy never
        applies)."""
        opcode, length = frame.opcode, len(frame.payload)
        if not frame.crc_ok:
            return Status.BAD_CRC
        if not isinstance(opcode, Opcode) or _FEATURE_OPCODES.get(opcode, self.features) \
                not in self.features:
            return Status.BAD_OPCODE
        if not self._length_ok(opcode, length):
            return Status.BAD_LENGTH
        checks = {Opcode.WRITE: self._check_access, Opcode.READ: self._check_access,
                  Opcode.RUN: self._check_run, Opcode.LOAD: self._check_stream,
                  Opcode.FETCH: self._check_stream, Opcode.CLASSES: self._check_classes}
        if opcode in checks:
            return checks[opcode](opcode, frame.payload)
        return Status.OK

    def _length_ok(self, opcode, length):
        if opcode in _FIXED_LENGTH:
            return length == _FIXED_LENGTH[opcode]
        return _LEAST_LENGTH[opcode] <= length <= self.max_payload  # WRITE, LOAD

    def _check_access(self, opcode, payload):
        region, addr, count, rest = unpack_access(payload)
        if not isinstance(region, Region):
            return Status.BAD_REGION
        nbytes = count * self.geometry[region].word_bytes
        if count == 0 or (nbytes != len(rest) if opcode == Opcode.WRITE
                          else nbytes > self.max_payload):
            return Status.BAD_LENGTH
        if addr + count > self.geometry[region].depth:
            return Status.BAD_ADDRESS
        return Status.OK

    def _check_stream(self, opcode, payload):
        return wire_streams.check_stream(opcode.name.lower(), payload, self.geometry,
                                         self.config, self.max_payload)

    def _check_classes(self, opcode, payload):
        return wire_streams.check_classes(payload, self.geometry, self.config,
                                          self.max_payload)

    def _check_run(self, opcode, payload):
        if not 1 <= unpack_run(payload) <= self.config.acc_depth:
            return Status.BAD_BATCH
        if not self.counters.program_loaded:
            return Status.NO_PROGRAM
        return Status.OK

    # -- the commands (checked) ------------------------------------------------------------------

    def _info(self, payload):
        return self._info_payload

    def _write(self, payload):
        region, addr, count, rest = unpack_access(payload)
        geometry = self.geometry[region]
        nbytes, mask = geometry.word_bytes, (1 << geometry.word_bits) - 1
        for i in range(count):
            # The port is word_bits wide: bits above them are dropped, as the gateware does.
            word = int.from_bytes(rest[i * nbytes:(i + 1) * nbytes], "little") & mask
            self.interpreter.write(region, addr + i, word)
        if region == Region.PROGRAM:
            self._set(program_loaded=True)
        return b""

    def _read(self, payload):
        region, addr, count, _ = unpack_access(payload)
        return pack_words(self.geometry[region],
                          [self.interpreter.read(region, addr + i) for i in range(count)])

    def _run(self, payload):
        batch = unpack_run(payload)
        layers = list(self._layers())
        self.interpreter.run(batch)
        c = self.config
        rows = sum(layer_busy_rows(d, batch) for d in layers)
        self._set(runs=self.counters.runs + 1,
                  cycles=self.counters.cycles + sum(layer_cycles(c, d, batch) for d in layers),
                  busy_cycles=self.counters.busy_cycles + rows,
                  macs=self.counters.macs + rows * c.rows * c.cols)
        return b""

    def _load(self, payload):
        wire_streams.load(self.interpreter, self.config, payload)
        return b""

    def _fetch(self, payload):
        return wire_streams.fetch(self.interpreter, self.config, payload)

    def _classes(self, payload):
        return wire_streams.classes(self.interpreter, self.config, payload)

    def _counters(self, payload):
        return pack_counters(self.counters)

    def _reset(self, payload):
        self.counters = CounterValues(False, False, 0, 0, 0, 0)
        return b""

    def _set(self, **values):
        self.counters = dataclasses.replace(self.counters, **values)

    def _layers(self):
        """Yield the descriptors of the program in PROGRAM (a spatial one with its
        ``geometry``), in the order the controller walks them, as the cycle model takes
        them."""
        interp = self.interpreter
        pc, depth = 0, self.geometry[Region.PROGRAM].depth
        while pc < depth:
            d = interp.descriptor(pc)
            pc += 1
            if d["spatial"]:
                d["geometry"] = interp.geometry(pc)
                pc += interp.geom_words
            yield d
            if d["last"]:
                return

    def __repr__(self):
        return f"<InProcessDevice {self.url} config {self.config.hash}>"
