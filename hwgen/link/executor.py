"""The command layer of the host protocol: requests carried out on the accelerator's host port.

:class:`CommandExecutor` takes the requests that :class:`hwgen.link.framing.FrameCodec` receives,
checks them (:class:`hwgen.link.checks.RequestChecks`), carries out INFO, WRITE, READ, RUN,
COUNTERS and RESET on a :class:`~hwgen.memmap.HostPortSignature` port and supplies each
response's status and payload; LOAD, FETCH and CLASSES (the element streams, on a device with
them) are :class:`hwgen.link.stream_commands.StreamCommands`'.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..config import AcceleratorConfig
from ..memattrs import SPRAM_ATTRS, SPRAM_SUFFIX
from ..memmap import HostPortSignature, Region, regions
from ..protocol import (
    RX_FIFO,
    AccessArgs,
    CountersPayload,
    Features,
    Opcode,
    RunArgs,
    Status,
    StreamArgs,
    info_bytes,
    layout_bytes,
)
from .checks import RequestChecks
from .commit import add_commit
from .framing import RequestSignature, ResponseSignature
from .prefetch import WordPrefetch, send_prefetched
from .stream_commands import StreamCommands

__all__ = ["CommandExecutor"]

_ACCESS_BYTES = layout_bytes(AccessArgs)
_COUNTERS_BYTES = layout_bytes(CountersPayload)


class CommandExecutor(wiring.Component):
    """Check each request, carry it out on the host port and supply its response.

    A request's payload is kept as it arrives: its first bytes as the arguments (an
    :class:`~hwgen.protocol.AccessArgs` or :class:`~hwgen.protocol.RunArgs`), every byte at its
    own index in a buffer of ``max_payload`` bytes (bytes beyond it are dropped). When the
    request is complete (``request.done``) it is checked; a request that fails a check is
    answered with the check's status and changes nothing. Otherwise a WRITE's words go from the
    buffer to memory, a READ's words stream from memory into the response, RUN starts the
    program, COUNTERS takes a snapshot and RESET pulses ``host.clear``; then the response goes
    out (``response.valid``), a READ's words fetched one at a time as the frame layer asks for
    its payload (with ``prefetch``: from the header on, each while the last one goes out).

    The executor keeps a *program loaded* flag (set by a WRITE to PROGRAM, cleared by RESET; RUN
    needs it) and a count of RUNs started (reported by COUNTERS, cleared by RESET).

    Parameters
    ----------
    config : AcceleratorConfig
        The accelerator served; fixes the host port widths and the INFO contents.
    max_payload : int
        Payload buffer in bytes (reported by INFO); at least one WRITE argument block plus the
        widest word, at most 65535.
    spram : bool
        Ask Yosys to put the payload buffer into an iCE40UP ``SB_SPRAM256KA`` (it is written
        while a request arrives and read while it is carried out, never both).
    handshake : bool
        Hold every write, start, clear and counter snapshot (with its address and data) until
        ``host.rvalid`` pulses, as reads wait already. Without it they are one-cycle pulses.
    baud : int
        The UART's rate, reported by INFO so that a host can open the port at it (0: no
        UART, byte streams).
    rx_fifo : int
        The receive FIFO in front of the engine, in bytes, reported by INFO.
    features : Features
        The optional commands built in (LOAD and FETCH, CLASSES), reported by INFO; the
        others' opcodes are unknown.
    prefetch : bool
        Fetch each next word of a READ while the bytes of one go out (a register as wide as
        the widest word): the payload goes out at one byte a cycle if the port answers within
        ``word_bytes - 1`` cycles. Without it the response pauses for each word's read, which
        a link slower than a byte a cycle (a UART) hides.
    wide : bool
        LOAD and FETCH at up to a byte a cycle (the wide
        :class:`~hwgen.link.repacker.Repacker`, a LOAD's payload read a byte a cycle), and the
        words of WRITE and LOAD assembled a byte a cycle in place (then written from the
        shift register, a cycle after their last byte) rather than shifted through all of it.

    Members
    -------
    request : In(RequestSignature())
        The requests, from the frame layer.
    response : Out(ResponseSignature())
        Their answers, to the frame layer.
    host : In(HostPortSignature(config))
        The accelerator's host port (region, addr, wdata, we, re, start, batch, clear and
        snapshot are outputs of the executor; rdata, rvalid, busy and the counters inputs).

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`AcceleratorConfig`.
    ValueError
        If ``max_payload`` is out of range, naming the value and the range.
    """

    def __init__(self, config, *, max_payload, spram=False, handshake=False, baud=0,
                 rx_fifo=RX_FIFO, features=Features.ALL, prefetch=False, wide=False):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        geometry = regions(config)
        least = _ACCESS_BYTES + max(g.word_bytes for g in geometry.values())
        if isinstance(max_payload, bool) or not isinstance(max_payload, int) \
                or not least <= max_payload <= 0xFFFF:
            raise ValueError(
                f"max_payload must be an int in {least}..65535 (a WRITE of one word of the widest "
                f"region needs {least} bytes), not {max_payload!r}")
        self._config = config
        self._geometry = geometry
        self._max_payload = max_payload
        self._baud = baud
        self._rx_fifo = rx_fifo
        self._features = Features(features)
        self._streams = (StreamCommands(config, self._features, handshake=handshake,
                                        wide=wide)
                         if self._features else None)
        self._spram = spram
        self._handshake = handshake
        self._prefetch = prefetch
        self._wide = bool(wide)
        super().__init__({
            "request": In(RequestSignature()),
            "response": Out(ResponseSignature()),
            "host": In(HostPortSignature(config)),
        })

    @property
    def max_payload(self):
        return self._max_payload

    def elaborate(self, platform):
        m = Module()
        rq, rs, host = self.request, self.response, self.host
        m.submodules.checks = checks = RequestChecks(self._config, max_payload=self._max_payload,
                                                     features=self._features)
        dp = self._datapath(m, checks)
        is_read = rq.header.opcode == Opcode.READ

        def load_word():
            # A word read from memory goes out from its first byte; the next one comes from the
            # next address.
            m.d.sync += [dp.sr.eq(host.rdata), dp.byte_pos.eq(checks.word_bytes),
                         dp.mem_addr.eq(dp.mem_addr + 1)]
            m.next = "IDLE"

        with m.FSM():
            with m.State("IDLE"):
                # Between requests, which includes while the response goes out: offer its
                # payload, and fetch the next word of a READ when the last one has gone.
                m.d.comb += [rs.valid.eq(1), rs.payload.valid.eq(1),
                             # The buffer's address follows the arriving payload; it is 0 in
                             # the states that do not set it: one state's decoding and a
                             # register before the address, the ECP5 device's critical path.
                             dp.buf_r.addr.eq(rq.index)]
                if self._prefetch:
                    send_prefetched(m, rs, host, dp, is_read)
                else:
                    with m.If(rs.payload.ready):
                        m.d.sync += [dp.sr.eq(dp.sr_next), dp.byte_pos.eq(dp.byte_pos - 1)]
                        with m.If(~rs.last & is_read & (dp.byte_pos == 1)):
                            m.next = "FETCH"
                    with m.If(rs.begin & is_read):
                        m.next = "FETCH"
                with m.If(rq.done):
                    m.next = "MEASURE"

            with m.State("MEASURE"):
                m.d.comb += checks.step.eq(checks.more)
                with m.If(~checks.more):
                    m.next = "CHECK"

            with m.State("CHECK"):
                # The CRC register has held still since the trailer: `crc_ok` is valid.
                m.d.sync += rs.status.eq(checks.status)
                m.next = "DISPATCH"

            self._dispatch(m, dp)
            add_commit(m, host, dp, handshake=self._handshake, wide=self._wide)
            if self._streams is not None:
                self._streams.states(m, self, dp)

            if not self._prefetch:
                with m.State("FETCH"):
                    m.d.comb += host.re.eq(1)
                    m.next = "FETCH_WAIT"
                    # Accept a zero-latency port too: the port only promises a fixed latency.
                    with m.If(host.rvalid):
                        load_word()

                with m.State("FETCH_WAIT"), m.If(host.rvalid):
                    load_word()

        return m

    def _datapath(self, m, checks):
        """Add the payload buffer, the arguments, the INFO ROM, the shift register and the
        other registers that the states share; wire the checks and the host port. Return the
        shared ones in a namespace."""
        rq, rs, host = self.request, self.response, self.host
        max_payload = self._max_payload
        dp = SimpleNamespace(checks=checks)
        # Only WRITE words need the buffer, but keeping every payload byte at its own index makes
        # the receive side independent of the opcode; the first bytes are also kept in `args`.
        buffer = Memory(shape=8, depth=max_payload, init=[],
                        attrs=SPRAM_ATTRS if self._spram else None)
        m.submodules["buffer" + (SPRAM_SUFFIX if self._spram else "")] = buffer
        buf_w = buffer.write_port()
        dp.buf_r = buf_r = buffer.read_port()
        # One address for both ports, and no read while writing: a single-port RAM suffices.
        m.d.comb += [buf_w.addr.eq(buf_r.addr), buf_r.en.eq(~buf_w.en),
                     buf_w.data.eq(rq.payload.payload),
                     buf_w.en.eq(rq.payload.valid & (rq.index < max_payload))]
        # The arguments: an AccessArgs, or the longer StreamArgs (whose first fields are an
        # AccessArgs' region and addr) on a device with LOAD, FETCH or CLASSES.
        arg_bytes = layout_bytes(StreamArgs) if self._features else _ACCESS_BYTES
        raw_args = Signal(8 * arg_bytes, name="raw_args")
        dp.args = args = AccessArgs(raw_args[:AccessArgs.as_shape().size])
        dp.stream = StreamArgs(raw_args) if self._features else None
        with m.If(rq.payload.valid), m.Switch(rq.index):
            for k in range(arg_bytes):
                with m.Case(k):
                    m.d.sync += raw_args[8 * k:8 * k + 8].eq(rq.payload.payload)

        info = info_bytes(self._config, max_payload, self._baud, self._rx_fifo, self._features)
        dp.info_bytes = len(info)
        m.submodules.info_rom = info_rom = Memory(shape=8, depth=len(info), init=info)
        rom_r = info_rom.read_port()  # synchronous, so that synthesis may use a block RAM

        # One shift register holds a word being assembled (WRITE), a word being sent (READ) or the
        # counters snapshot (COUNTERS); bytes leave from the bottom and enter at the top.
        dp.sr_bytes = sr_bytes = max(_COUNTERS_BYTES,
                                     *(g.word_bytes for g in self._geometry.values()))
        dp.sr = sr = Signal(8 * sr_bytes)
        dp.sr_fill = Signal(8)                 # the byte entering at the top when `sr` shifts
        dp.sr_next = Cat(sr[8:], dp.sr_fill)
        dp.tx_byte = Signal(8)  # a response's byte, but INFO's
        dp.byte_pos = Signal(range(sr_bytes + 1))  # byte within a word (WRITE, READ)
        dp.words_left = Signal(16)
        dp.ptr = Signal(range(max_payload + 1))
        # COMMIT's next buffer address is `ptr + (byte_pos < word_bytes)`: a comparator and an
        # adder before the block RAM's address, the ECP5 device's critical path. Both terms are
        # kept in registers instead.
        dp.ptr_p1 = Signal(range(max_payload + 2), name="ptr_p1")  # ptr + 1
        dp.data_phase = Signal(name="data_phase")                  # byte_pos < word_bytes
        dp.mem_addr = Signal.like(host.addr, name="mem_addr")
        dp.program_loaded = Signal()
        # A word is whole in `sr`: it is written in this cycle (commit.write_pending).
        dp.pending = Signal(name="pending")
        dp.runs = Signal(32)
        m.d.comb += [
            checks.header.eq(rq.header),
            checks.args.eq(args),
            checks.crc_ok.eq(rq.crc_ok),
            checks.busy.eq(host.busy),
            checks.program_loaded.eq(dp.program_loaded),
            checks.start.eq(rq.done),
            host.region.eq(args.region[:Region.as_shape().width]),
            host.addr.eq(dp.mem_addr),
            host.batch.eq(RunArgs(args.as_value()[:RunArgs.as_shape().size]).batch),
            # Driven all the time (only `we` qualifies it): gating it would cost a LUT per bit.
            # A register: the memories across the die see no multiplexer before it.
            host.wdata.eq(sr),
            # The ROM answers a cycle late: it is asked for the byte the next cycle will show.
            rom_r.addr.eq(rs.next_index),
            dp.tx_byte.eq(sr[:8]),
            rs.payload.payload.eq(Mux(rq.header.opcode == Opcode.INFO, rom_r.data, dp.tx_byte)),
        ]
        if self._prefetch:
            # Reads only while a READ's response goes out (IDLE), as `dp.mem_addr` moves on.
            m.submodules.prefetch = dp.prefetch = pf = WordPrefetch(len(host.rdata))
            m.d.comb += [pf.rvalid.eq(host.rvalid), pf.rdata.eq(host.rdata),
                         pf.count.eq(args.count)]
            with m.If(pf.fetched):
                m.d.sync += dp.mem_addr.eq(dp.mem_addr + 1)
        if self._streams is not None:
            self._streams.datapath(m, self, dp)
        return dp

    def _dispatch(self, m, dp):
        """Add DISPATCH: carry out the checked request, or prepare its words (WRITE, READ)."""
        rq, rs, host = self.request, self.response, self.host
        counters = Signal(CountersPayload)
        m.d.comb += [
            counters.busy.eq(host.busy),
            counters.program_loaded.eq(dp.program_loaded),
            counters.runs.eq(dp.runs),
            counters.cycles.eq(host.cycles),
            counters.busy_cycles.eq(host.busy_cycles),
            counters.macs.eq(host.macs),
        ]
        # With `handshake`, a request holds until the port answers with `rvalid`.
        answered = host.rvalid if self._handshake else Const(1, 1)
        with m.State("DISPATCH"):
            m.d.sync += [rs.length.eq(0), dp.mem_addr.eq(dp.args.addr),
                         dp.words_left.eq(dp.args.count), dp.byte_pos.eq(0)]
            m.next = "IDLE"
            with m.If(rs.status == Status.OK), m.Switch(rq.header.opcode):
                with m.Case(Opcode.INFO):
                    m.d.sync += rs.length.eq(dp.info_bytes)
                with m.Case(Opcode.COUNTERS):
                    m.d.comb += host.snapshot.eq(1)
                    m.d.sync += [rs.length.eq(_COUNTERS_BYTES), dp.sr.eq(counters)]
                    with m.If(~answered):
                        m.next = "DISPATCH"
                with m.Case(Opcode.RESET):
                    m.d.comb += host.clear.eq(1)
                    m.d.sync += [dp.program_loaded.eq(0), dp.runs.eq(0)]
                    with m.If(~answered):
                        m.next = "DISPATCH"
                with m.Case(Opcode.RUN):
                    m.d.comb += host.start.eq(1)
                    with m.If(answered):
                        m.d.sync += dp.runs.eq(dp.runs + 1)
                    with m.Else():
                        m.next = "DISPATCH"
                with m.Case(Opcode.READ):
                    if self._prefetch:
                        m.d.comb += dp.prefetch.start.eq(1)
                    m.d.sync += rs.length.eq(dp.checks.xfer)
                if self._streams is not None:
                    self._streams.dispatch(m, self, dp)
                with m.Case(Opcode.WRITE):
                    # Prime the buffer's read port: COMMIT sees byte `ptr` each cycle.
                    m.d.comb += dp.buf_r.addr.eq(_ACCESS_BYTES)
                    m.d.sync += [dp.ptr.eq(_ACCESS_BYTES), dp.ptr_p1.eq(_ACCESS_BYTES + 1),
                                 dp.data_phase.eq(1)]     # byte_pos is 0, word_bytes >= 1
                    m.next = "COMMIT"
