"""The device end of the host protocol: bytes in, commands on the host port, bytes out.

:class:`FrameEngine` parses request frames of :mod:`hwgen.protocol` from a byte stream, carries them
out on the accelerator's :class:`~hwgen.memmap.HostPortSignature` port and sends one response per
request. It is byte-serial throughout, so that it fits next to a small array on an iCE40UP5K.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..config import AcceleratorConfig
from ..memattrs import SPRAM_ATTRS, SPRAM_SUFFIX
from ..memmap import HostPortSignature, Region, regions
from ..protocol import (
    CRC_BYTES,
    CRC_PARAMETERS,
    HEADER_BYTES,
    MAX_PAYLOAD,
    SYNC_REQUEST,
    SYNC_RESPONSE,
    AccessArgs,
    CountersPayload,
    FrameHeader,
    Opcode,
    RunArgs,
    Status,
    frame_timeout_cycles,
    info_bytes,
    layout_bytes,
)

__all__ = ["FrameEngine"]

_ACCESS_BYTES = layout_bytes(AccessArgs)
_RUN_BYTES = layout_bytes(RunArgs)
_COUNTERS_BYTES = layout_bytes(CountersPayload)


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

    Members
    -------
    i_stream : In(stream.Signature(8))
        Request bytes.
    o_stream : Out(stream.Signature(8))
        Response bytes.
    host : In(HostPortSignature(config))
        The accelerator's host port, driven by the engine (region, addr, wdata, we, re, start,
        batch and clear are outputs of the engine; rdata, rvalid, busy and the counters inputs).

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`AcceleratorConfig`.
    ValueError
        If ``timeout_cycles`` or ``max_payload`` is out of range, naming the value and the range.
    """

    def __init__(self, config, *, timeout_cycles=None, max_payload=MAX_PAYLOAD, spram=False,
                 handshake=False):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if timeout_cycles is None:
            timeout_cycles = frame_timeout_cycles(config.clock_hz)
        if isinstance(timeout_cycles, bool) or not isinstance(timeout_cycles, int) \
                or timeout_cycles < 1:
            raise ValueError(f"timeout_cycles must be an int >= 1, not {timeout_cycles!r}")
        geometry = regions(config)
        least = _ACCESS_BYTES + max(g.word_bytes for g in geometry.values())
        if isinstance(max_payload, bool) or not isinstance(max_payload, int) \
                or not least <= max_payload <= 0xFFFF:
            raise ValueError(
                f"max_payload must be an int in {least}..65535 (a WRITE of one word of the widest "
                f"region needs {least} bytes), not {max_payload!r}")
        self._config = config
        self._geometry = geometry
        self._timeout_cycles = timeout_cycles
        self._max_payload = max_payload
        self._spram = spram
        self._handshake = handshake
        super().__init__({
            "i_stream": In(stream.Signature(8)),
            "o_stream": Out(stream.Signature(8)),
            "host": In(HostPortSignature(config)),
        })

    @property
    def config(self):
        return self._config

    @property
    def timeout_cycles(self):
        return self._timeout_cycles

    @property
    def max_payload(self):
        return self._max_payload

    def elaborate(self, platform):
        m = Module()
        geo = self._geometry
        max_payload = self._max_payload
        i, o, host = self.i_stream, self.o_stream, self.host

        m.submodules.crc = crc = CRC_PARAMETERS.create()
        # Only WRITE words need the buffer, but keeping every payload byte at its own index makes
        # the receive side independent of the opcode; the first bytes are also kept in `args`.
        buffer = Memory(shape=8, depth=max_payload, init=[],
                        attrs=SPRAM_ATTRS if self._spram else None)
        m.submodules["buffer" + (SPRAM_SUFFIX if self._spram else "")] = buffer
        buf_w = buffer.write_port()
        buf_r = buffer.read_port()
        # One address for both ports, and no read while writing: a single-port RAM suffices.
        m.d.comb += [buf_w.addr.eq(buf_r.addr), buf_r.en.eq(~buf_w.en)]
        info = info_bytes(self._config, max_payload)
        m.submodules.info_rom = info_rom = Memory(shape=8, depth=len(info), init=info)
        rom_r = info_rom.read_port()  # synchronous, so that synthesis may use a block RAM

        # One shift register holds a word being assembled (WRITE), a word being sent (READ) or the
        # counters snapshot (COUNTERS); bytes leave from the bottom and enter at the top.
        sr_bytes = max(_COUNTERS_BYTES, *(g.word_bytes for g in geo.values()))
        sr = Signal(8 * sr_bytes)
        sr_fill = Signal(8)                   # the byte entering at the top when `sr` shifts
        sr_next = Cat(sr[8:], sr_fill)

        hdr = Signal(FrameHeader)
        args = Signal(AccessArgs)
        run_args = RunArgs(args.as_value()[:RunArgs.as_shape().size])
        idx = Signal(16)                       # byte index within the current frame section
        idle = Signal(range(self._timeout_cycles))
        status = Signal(Status)
        rsp_len = Signal(16)
        byte_pos = Signal(range(sr_bytes + 1))  # byte within a word (WRITE, READ)
        words_left = Signal(16)
        mem_addr = Signal.like(host.addr, name="mem_addr")
        ptr = Signal(range(max_payload + 1))
        # COMMIT's next buffer address is `ptr + (byte_pos < word_bytes)`: a comparator and an
        # adder before the block RAM's address, the ECP5 device's critical path. Both terms are
        # kept in registers instead.
        ptr_p1 = Signal(range(max_payload + 2), name="ptr_p1")   # ptr + 1
        data_phase = Signal(name="data_phase")                   # byte_pos < word_bytes
        program_loaded = Signal()
        runs = Signal(32)

        # -- argument checks, all combinational on registered fields ----------------------------
        count = args.count
        word_bytes = Signal(range(sr_bytes + 1))
        depth = Signal(range(max(g.depth for g in geo.values()) + 1))
        # count * word_bytes, found by repeated addition in MEASURE: constant multipliers per
        # region cost ~150 LUTs on an iCE40, the loop at most max_payload / word_bytes + 1 cycles.
        xfer = Signal(range(max_payload + sr_bytes + 1))
        measured = Signal(16)
        region_ok = Signal()
        # Registered: read from MEASURE on, at least two cycles (the CRC) after `args` is
        # complete; combinational, the word size fed the buffer address in COMMIT through a
        # comparator and an adder, the iCE40's critical path.
        with m.Switch(args.region):
            for region, g in geo.items():
                with m.Case(region.value):
                    m.d.sync += [
                        region_ok.eq(1),
                        word_bytes.eq(g.word_bytes),
                        depth.eq(g.depth),
                    ]
            with m.Default():
                m.d.sync += region_ok.eq(0)
        # Lengths minus a constant, registered: a subtractor feeding a comparator is two carry
        # chains in series, the iCE40's critical path. Each is read at least two cycles after
        # its operand is written (header, then its CRC; response header, then payload).
        len_m1 = Signal((hdr.length - 1).shape(), name="len_m1")
        data_len = Signal((hdr.length - _ACCESS_BYTES).shape(), name="data_len")
        rsp_len_m1 = Signal((rsp_len - 1).shape(), name="rsp_len_m1")
        m.d.sync += [len_m1.eq(hdr.length - 1), data_len.eq(hdr.length - _ACCESS_BYTES),
                     rsp_len_m1.eq(rsp_len - 1)]
        # `idx` is at the last payload byte (PAYLOAD, TX_PAYLOAD): registered, computed as `idx`
        # advances, so that the state machine does not wait for a 16-bit comparator.
        rx_last = Signal()
        tx_last = Signal()
        is_write = hdr.opcode == Opcode.WRITE
        is_read = hdr.opcode == Opcode.READ
        is_access = is_write | is_read
        is_run = hdr.opcode == Opcode.RUN

        opcode_ok = Signal()
        length_ok = Signal()
        with m.Switch(hdr.opcode):
            with m.Case(Opcode.INFO, Opcode.COUNTERS, Opcode.RESET):
                m.d.comb += [opcode_ok.eq(1), length_ok.eq(hdr.length == 0)]
            with m.Case(Opcode.RUN):
                m.d.comb += [opcode_ok.eq(1), length_ok.eq(hdr.length == _RUN_BYTES)]
            with m.Case(Opcode.READ):
                m.d.comb += [opcode_ok.eq(1), length_ok.eq(hdr.length == _ACCESS_BYTES)]
            with m.Case(Opcode.WRITE):
                m.d.comb += [opcode_ok.eq(1),
                             length_ok.eq((hdr.length >= _ACCESS_BYTES)
                                          & (hdr.length <= max_payload))]
        # A MEASURE cut short leaves xfer > max_payload, which both tests below refuse.
        count_ok = (count != 0) & (
            (is_write & (xfer == data_len)) | (is_read & (xfer <= max_payload)))
        # The end address, registered: an adder feeding a comparator ripples through the
        # LUTs (checks below are read at least three cycles after `args` is complete).
        end_addr = Signal((args.addr + count).shape(), name="end_addr")
        m.d.sync += end_addr.eq(args.addr + count)
        addr_ok = end_addr <= depth
        batch = run_args.batch
        batch_ok = (batch != 0) & (batch <= self._config.acc_depth)

        # The wide comparisons, registered: in CHECK they show their operands of the cycle
        # before (the last of MEASURE, which holds `xfer` still), and the priority chain below
        # starts from registers.
        checks = {}
        for name, value in (("length_ok", length_ok), ("count_ok", count_ok),
                            ("addr_ok", addr_ok), ("batch_ok", batch_ok)):
            checks[name] = Signal(name=f"{name}_q")
            m.d.sync += checks[name].eq(value)
        length_ok, count_ok, addr_ok, batch_ok = checks.values()

        status_next = Signal(Status)
        with m.If(~crc.match_detected):
            m.d.comb += status_next.eq(Status.BAD_CRC)
        with m.Elif(~opcode_ok):
            m.d.comb += status_next.eq(Status.BAD_OPCODE)
        with m.Elif(~length_ok):
            m.d.comb += status_next.eq(Status.BAD_LENGTH)
        with m.Elif(is_access & ~region_ok):
            m.d.comb += status_next.eq(Status.BAD_REGION)
        with m.Elif(is_access & ~count_ok):
            m.d.comb += status_next.eq(Status.BAD_LENGTH)
        with m.Elif(is_access & ~addr_ok):
            m.d.comb += status_next.eq(Status.BAD_ADDRESS)
        with m.Elif(is_run & ~batch_ok):
            m.d.comb += status_next.eq(Status.BAD_BATCH)
        with m.Elif((is_access | is_run) & host.busy):
            m.d.comb += status_next.eq(Status.BUSY)
        with m.Elif(is_run & ~program_loaded):
            m.d.comb += status_next.eq(Status.NO_PROGRAM)
        with m.Else():
            m.d.comb += status_next.eq(Status.OK)

        # -- host port -------------------------------------------------------------------------
        m.d.comb += [
            host.region.eq(args.region[:Region.as_shape().width]),
            host.addr.eq(mem_addr),
            host.batch.eq(batch),
            # Driven all the time (only `we` qualifies it): gating it would cost a LUT per bit.
            host.wdata.eq(sr_next),
        ]

        counters = Signal(CountersPayload)
        m.d.comb += [
            counters.busy.eq(host.busy),
            counters.program_loaded.eq(program_loaded),
            counters.runs.eq(runs),
            counters.cycles.eq(host.cycles),
            counters.busy_cycles.eq(host.busy_cycles),
            counters.macs.eq(host.macs),
        ]

        tx_hdr = Signal(FrameHeader)
        m.d.comb += [
            tx_hdr.sync.eq(SYNC_RESPONSE),
            tx_hdr.opcode.eq(hdr.opcode),
            tx_hdr.seq.eq(hdr.seq),
            tx_hdr.status.eq(status),
            tx_hdr.length.eq(rsp_len),
        ]

        # With `handshake`, a request holds until the port answers with `rvalid`.
        answered = host.rvalid if self._handshake else Const(1, 1)
        wait_write = Signal()
        if self._handshake:
            m.d.comb += wait_write.eq((byte_pos == sr_bytes - 1) & ~host.rvalid)

        def drop_when_idle():
            # A partial request that stops arriving is dropped: without this a truncated frame
            # would hold the parser until bytes of later frames completed it.
            with m.If(i.valid):
                m.d.sync += idle.eq(0)
            with m.Elif(idle == self._timeout_cycles - 1):
                m.d.sync += idle.eq(0)
                m.next = "HUNT"
            with m.Else():
                m.d.sync += idle.eq(idle + 1)

        with m.FSM():
            with m.State("HUNT"):
                m.d.comb += [i.ready.eq(1), crc.data.eq(i.payload)]
                with m.If(i.valid & (i.payload == SYNC_REQUEST)):
                    m.d.comb += [crc.start.eq(1), crc.valid.eq(1)]
                    m.d.sync += [idx.eq(1), idle.eq(0)]
                    m.next = "HEADER"

            with m.State("HEADER"):
                # Bytes 1 .. HEADER_BYTES + CRC_BYTES - 1; the sync byte is not stored.
                m.d.comb += [i.ready.eq(1), crc.data.eq(i.payload), crc.valid.eq(i.valid)]
                with m.If(i.valid):
                    m.d.sync += idx.eq(idx + 1)
                    with m.Switch(idx):
                        for k in range(1, HEADER_BYTES):
                            with m.Case(k):
                                m.d.sync += hdr.as_value()[8 * k:8 * k + 8].eq(i.payload)
                    with m.If(idx == HEADER_BYTES + CRC_BYTES - 1):
                        m.next = "HEADER_CHECK"
                drop_when_idle()

            with m.State("HEADER_CHECK"):
                # The CRC register has taken the last header byte; a good header leaves it at 0,
                # which is also the initial value for the payload CRC.
                m.d.sync += [idx.eq(0), idle.eq(0), rx_last.eq(len_m1 == 0)]
                with m.If(~crc.match_detected):
                    m.next = "HUNT"
                with m.Elif(hdr.length == 0):
                    m.next = "TRAILER"
                with m.Else():
                    m.next = "PAYLOAD"

            with m.State("PAYLOAD"):
                m.d.comb += [i.ready.eq(1), crc.data.eq(i.payload), crc.valid.eq(i.valid)]
                m.d.comb += [
                    buf_r.addr.eq(idx),
                    buf_w.data.eq(i.payload),
                    buf_w.en.eq(i.valid & (idx < max_payload)),
                ]
                with m.If(i.valid):
                    m.d.sync += [idx.eq(idx + 1), rx_last.eq(idx + 1 == len_m1)]
                    with m.Switch(idx):
                        for k in range(_ACCESS_BYTES):
                            with m.Case(k):
                                m.d.sync += args.as_value()[8 * k:8 * k + 8].eq(i.payload)
                    with m.If(rx_last):
                        m.d.sync += idx.eq(0)
                        m.next = "TRAILER"
                drop_when_idle()

            with m.State("TRAILER"):
                m.d.comb += [i.ready.eq(1), crc.data.eq(i.payload), crc.valid.eq(i.valid)]
                with m.If(i.valid):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == CRC_BYTES - 1):
                        m.d.sync += [xfer.eq(0), measured.eq(0)]
                        m.next = "MEASURE"
                drop_when_idle()

            with m.State("MEASURE"):
                # Stops at `count` words or as soon as they exceed the buffer.
                with m.If(is_access & region_ok & (measured != count) & (xfer <= max_payload)):
                    m.d.sync += [xfer.eq(xfer + word_bytes), measured.eq(measured + 1)]
                with m.Else():
                    m.next = "CHECK"

            with m.State("CHECK"):
                # The CRC register has held still since the trailer: match_detected is valid.
                m.d.sync += status.eq(status_next)
                m.next = "DISPATCH"

            with m.State("DISPATCH"):
                m.d.sync += [idx.eq(0), rsp_len.eq(0), mem_addr.eq(args.addr),
                             words_left.eq(count), byte_pos.eq(0)]
                m.next = "TX_HEADER"
                with m.If(status == Status.OK), m.Switch(hdr.opcode):
                    with m.Case(Opcode.INFO):
                        m.d.sync += rsp_len.eq(len(info))
                    with m.Case(Opcode.COUNTERS):
                        m.d.comb += host.snapshot.eq(1)
                        m.d.sync += [rsp_len.eq(_COUNTERS_BYTES), sr.eq(counters)]
                        with m.If(~answered):
                            m.next = "DISPATCH"
                    with m.Case(Opcode.RESET):
                        m.d.comb += host.clear.eq(1)
                        m.d.sync += [program_loaded.eq(0), runs.eq(0)]
                        with m.If(~answered):
                            m.next = "DISPATCH"
                    with m.Case(Opcode.RUN):
                        m.d.comb += host.start.eq(1)
                        with m.If(answered):
                            m.d.sync += runs.eq(runs + 1)
                        with m.Else():
                            m.next = "DISPATCH"
                    with m.Case(Opcode.READ):
                        m.d.sync += rsp_len.eq(xfer)
                    with m.Case(Opcode.WRITE):
                        # Prime the buffer's read port: COMMIT sees byte `ptr` each cycle.
                        m.d.comb += buf_r.addr.eq(_ACCESS_BYTES)
                        m.d.sync += [ptr.eq(_ACCESS_BYTES), ptr_p1.eq(_ACCESS_BYTES + 1),
                                     data_phase.eq(1)]     # byte_pos is 0, word_bytes >= 1
                        m.next = "COMMIT"

            with m.State("COMMIT"):
                # Each word takes sr_bytes cycles: its word_bytes bytes enter at the top of `sr`,
                # then zero bytes push them down to bit 0. That costs cycles (plentiful: the link
                # is far slower) instead of a word-wide alignment multiplexer (scarce LUTs).
                ptr_next = Mux(data_phase, ptr_p1, ptr)
                m.d.comb += [sr_fill.eq(Mux(data_phase, buf_r.data, 0)), buf_r.addr.eq(ptr_next)]
                with m.If(wait_write):
                    # Everything holds, the buffer's output too: `wdata` stays what it was.
                    m.d.comb += [host.we.eq(1), buf_r.en.eq(0)]
                with m.Else():
                    m.d.sync += [sr.eq(sr_next), ptr.eq(ptr_next), ptr_p1.eq(ptr_next + 1),
                                 byte_pos.eq(byte_pos + 1),
                                 data_phase.eq(byte_pos + 1 < word_bytes)]
                    with m.If(byte_pos == sr_bytes - 1):
                        m.d.comb += host.we.eq(1)
                        m.d.sync += [byte_pos.eq(0), data_phase.eq(1), mem_addr.eq(mem_addr + 1),
                                     words_left.eq(words_left - 1)]
                        with m.If(words_left == 1):
                            with m.If(args.region == Region.PROGRAM.value):
                                m.d.sync += program_loaded.eq(1)
                            m.next = "TX_HEADER"

            with m.State("TX_HEADER"):
                m.d.comb += o.valid.eq(1)
                with m.Switch(idx[:3]):
                    for k in range(HEADER_BYTES):
                        with m.Case(k):
                            m.d.comb += o.payload.eq(tx_hdr.as_value()[8 * k:8 * k + 8])
                    with m.Case(HEADER_BYTES):
                        m.d.comb += o.payload.eq(crc.crc[8:])
                    with m.Case(HEADER_BYTES + 1):
                        m.d.comb += o.payload.eq(crc.crc[:8])
                m.d.comb += crc.data.eq(o.payload)
                with m.If(o.ready):
                    m.d.sync += idx.eq(idx + 1)
                    m.d.comb += [
                        crc.valid.eq(idx < HEADER_BYTES),
                        # restart at the first byte, and again after the header CRC so that the
                        # payload CRC covers the payload alone
                        crc.start.eq((idx == 0) | (idx == HEADER_BYTES + CRC_BYTES - 1)),
                    ]
                    with m.If(idx == HEADER_BYTES + CRC_BYTES - 1):
                        m.d.sync += [idx.eq(0), tx_last.eq(rsp_len_m1 == 0)]
                        with m.If(rsp_len == 0):
                            m.next = "TX_TRAILER"
                        with m.Elif(is_read):
                            m.next = "FETCH"
                        with m.Else():
                            m.next = "TX_PAYLOAD"

            with m.State("FETCH"):
                m.d.comb += host.re.eq(1)
                m.next = "FETCH_WAIT"
                # Accept a zero-latency port too: the port only promises a fixed latency.
                with m.If(host.rvalid):
                    m.d.sync += sr.eq(host.rdata)
                    m.d.sync += [byte_pos.eq(word_bytes), mem_addr.eq(mem_addr + 1)]
                    m.next = "TX_PAYLOAD"

            with m.State("FETCH_WAIT"), m.If(host.rvalid):
                m.d.sync += sr.eq(host.rdata)
                m.d.sync += [byte_pos.eq(word_bytes), mem_addr.eq(mem_addr + 1)]
                m.next = "TX_PAYLOAD"

            with m.State("TX_PAYLOAD"):
                m.d.comb += [
                    o.valid.eq(1),
                    # The ROM answers a cycle late: ask for the byte the next cycle will show.
                    # (Its address is 0 in every other state, ready for the first byte.)
                    rom_r.addr.eq(Mux(o.ready, idx + 1, idx)),
                    o.payload.eq(Mux(hdr.opcode == Opcode.INFO, rom_r.data, sr[:8])),
                    crc.data.eq(o.payload),
                    crc.valid.eq(o.ready),
                ]
                with m.If(o.ready):
                    m.d.sync += [idx.eq(idx + 1), sr.eq(sr_next), byte_pos.eq(byte_pos - 1),
                                 tx_last.eq(idx + 1 == rsp_len_m1)]
                    with m.If(tx_last):
                        m.d.sync += idx.eq(0)
                        m.next = "TX_TRAILER"
                    with m.Elif(is_read & (byte_pos == 1)):
                        m.next = "FETCH"

            with m.State("TX_TRAILER"):
                m.d.comb += [o.valid.eq(1),
                             o.payload.eq(Mux(idx[0], crc.crc[:8], crc.crc[8:]))]
                with m.If(o.ready):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == CRC_BYTES - 1):
                        m.next = "HUNT"

        return m
