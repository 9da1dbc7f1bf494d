"""The device end of the host protocol: bytes in, commands on the host port, bytes out.

:class:`FrameEngine` parses request frames of :mod:`hwgen.protocol` from a byte stream, carries them
out on the accelerator's :class:`~hwgen.memmap.HostPortSignature` port and sends one response per
request. It is byte-serial throughout, so that it fits next to a small array on an iCE40UP5K.

It has the two layers of the protocol, one component each::

    i_stream ─> FrameCodec ── request ──> CommandExecutor ── host ──> the accelerator
    o_stream <─ (frames)   <─ response ── (checks, commands)

:class:`~hwgen.link.framing.FrameCodec` finds request frames, checks their CRCs and sends the
response frames; :class:`~hwgen.link.executor.CommandExecutor` checks each request
(:class:`~hwgen.link.checks.RequestChecks`), carries it out and supplies the response's status
and payload.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..config import AcceleratorConfig
from ..memmap import HostPortSignature
from ..protocol import MAX_PAYLOAD, RX_FIFO, Features, frame_timeout_cycles
from .executor import CommandExecutor
from .framing import FrameCodec

__all__ = ["FrameEngine"]


class FrameEngine(wiring.Component):
    """Serve the host protocol of :mod:`hwgen.protocol` on the accelerator's host port.

    Requests arrive on :attr:`i_stream`, one byte per transfer; every request whose header is
    intact gets exactly one response on :attr:`o_stream`, after the whole request has arrived.
    The engine handles one request at a time: while it executes or answers, ``i_stream.ready``
    is low (no byte is dropped), and the response waits for ``o_stream.ready`` as long as needed.

    A WRITE payload is kept in a buffer of ``max_payload`` bytes and written to memory only after
    the frame's CRC and every argument check passed. READ words stream from memory to the
    response. Errors (see :mod:`hwgen.protocol` for their order) are answered with a status and
    change nothing. Bytes outside frames are skipped. A frame whose header fails its CRC is
    dropped without an answer (its opcode and sequence number cannot be trusted) and the engine
    goes back to hunting for a sync byte. A frame that stops arriving for ``timeout_cycles``
    cycles is dropped the same way.

    LOAD, FETCH and CLASSES (the element streams of :mod:`hwgen.protocol`, on an engine with
    those ``features``) are checked and carried out the same way: a LOAD's words are written
    after every check passed, a FETCH's or CLASSES' bytes are computed as the response goes out
    (:mod:`hwgen.link.stream_commands`).

    The engine keeps a *program loaded* flag (set by a WRITE to PROGRAM, cleared by RESET; RUN
    needs it) and a count of RUNs started (reported by COUNTERS, cleared by RESET). RESET also
    pulses ``host.clear``; it cannot stop a running program (the host port has no abort).

    Parameters
    ----------
    config : AcceleratorConfig
        The accelerator served; fixes the host port widths and the INFO contents.
    timeout_cycles : int
        Idle clock cycles after which a partial request is dropped; default
        :func:`hwgen.protocol.frame_timeout_cycles` of ``config.clock_hz`` (100 ms, longer than
        any gap of a working host, shorter than the host's response timeout, so a retry finds
        the engine hunting).
    max_payload : int
        Payload buffer in bytes (reported by INFO); at least one WRITE argument block plus the
        widest word, at most 65535.
    spram : bool
        Ask Yosys to put the payload buffer into an iCE40UP ``SB_SPRAM256KA`` (it is written
        while a frame arrives and read while it is committed, never both).
    handshake : bool
        Hold every write, start, clear and counter snapshot (with its address and data) until
        ``host.rvalid`` pulses, as reads wait already: for a port that crosses clock domains
        (:class:`hwgen.link.bridge.HostPortBridge`). Without it they are one-cycle pulses.
    baud : int
        The UART's rate, reported by INFO (0: no UART, byte streams).
    rx_fifo : int
        The receive FIFO in front of the engine, in bytes, reported by INFO.
    features : Features
        The optional commands built in (LOAD and FETCH, CLASSES), reported by INFO.
    prefetch : bool
        Send a READ's payload at one byte a cycle (see
        :class:`~hwgen.link.executor.CommandExecutor`):
        for links that take a byte a cycle.
    wide : bool
        Carry out LOAD, FETCH and WRITE at about a byte a cycle rather than a bit (LOAD,
        FETCH: :class:`~hwgen.link.repacker.Repacker`'s wide form) or a word's width in
        bytes (WRITE, LOAD: each word's bytes put in place, not shifted through the widest
        word): for links that take a byte a cycle, at the cost of LUTs.

    Members
    -------
    i_stream : In(stream.Signature(8))
        Request bytes.
    o_stream : Out(stream.Signature(8))
        Response bytes.
    host : In(HostPortSignature(config))
        The accelerator's host port, driven by the engine (region, addr, wdata, we, re, start,
        batch and clear are outputs of the engine; rdata, rvalid, busy and the counters inputs).
    idle : Out(1)
        No request is partly received or being carried out or answered: until the next byte
        arrives the engine's state holds still.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`AcceleratorConfig`.
    ValueError
        If ``timeout_cycles`` or ``max_payload`` is out of range, naming the value and the range.
    """

    def __init__(self, config, *, timeout_cycles=None, max_payload=MAX_PAYLOAD, spram=False,
                 handshake=False, baud=0, rx_fifo=RX_FIFO, features=Features.ALL,
                 prefetch=False, wide=False):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if timeout_cycles is None:
            timeout_cycles = frame_timeout_cycles(config.clock_hz)
        # The parts check their own parameters.
        self._codec = FrameCodec(timeout_cycles=timeout_cycles)
        self._executor = CommandExecutor(config, max_payload=max_payload, spram=spram,
                                         handshake=handshake, baud=baud, rx_fifo=rx_fifo,
                                         features=features, prefetch=prefetch, wide=wide)
        self._config = config
        super().__init__({
            "i_stream": In(stream.Signature(8)),
            "o_stream": Out(stream.Signature(8)),
            "host": In(HostPortSignature(config)),
            "idle": Out(1),
        })

    @property
    def config(self):
        return self._config

    @property
    def timeout_cycles(self):
        return self._codec.timeout_cycles

    @property
    def max_payload(self):
        return self._executor.max_payload

    def elaborate(self, platform):
        m = Module()
        # The frame layer finds requests and sends responses; the command layer checks and
        # carries out each request and supplies its response.
        m.submodules.codec = codec = self._codec
        m.submodules.executor = executor = self._executor
        wiring.connect(m, wiring.flipped(self.i_stream), codec.i_stream)
        wiring.connect(m, codec.request, executor.request)
        wiring.connect(m, executor.response, codec.response)
        wiring.connect(m, codec.o_stream, wiring.flipped(self.o_stream))
        wiring.connect(m, wiring.flipped(self.host), executor.host)
        m.d.comb += self.idle.eq(codec.idle)
        return m
