"""LOAD, FETCH and CLASSES in the command executor: their datapath and their states.

:class:`StreamCommands` adds to :class:`~hwgen.link.executor.CommandExecutor`'s state machine
what the element streams of :mod:`hwgen.protocol` need, on a device built with them
(:class:`~hwgen.protocol.Features`):

- a :class:`~hwgen.link.repacker.Repacker`, fed from the payload buffer (LOAD) or from the
  words read from memory (FETCH, CLASSES), its output going into the words written to memory
  (LOAD) or into the response (FETCH);
- a :class:`~hwgen.link.classes.ClassScanner` (CLASSES), which restarts the repacker for each
  scan and sends the picks' indices as the response;
- the states ``LOAD`` (the words of a LOAD, assembled in the executor's shift register as a
  WRITE's are, then written) and ``STREAM``, ``STREAM_READ``, ``STREAM_WAIT`` (the response
  of a FETCH or CLASSES goes out while the words it needs are read, one at a time, when the
  repacker asks for a byte and the last word's bytes are used up).
"""

from amaranth.hdl import Const, Mux, Signal

from ..memmap import Region, regions
from ..protocol import ClassArgs, Features, Opcode, StreamArgs, layout_bytes
from .classes import ClassScanner
from .commit import store_byte, write_pending
from .repacker import Repacker

__all__ = ["StreamCommands"]

_STREAM_BYTES = layout_bytes(StreamArgs)


class StreamCommands:
    """The element streams' part of the command executor (see the module).

    Parameters
    ----------
    config : AcceleratorConfig
    features : Features
        Which of LOAD and FETCH (``PACKED``) and CLASSES the device has; at least one.
    handshake : bool
        As the executor's: hold a write until the port answers with ``rvalid``.
    wide : bool
        As the executor's: the wide repacker, a LOAD's payload fed to it a byte a cycle and
        its words assembled in place (:func:`hwgen.link.commit.store_byte`).
    """

    def __init__(self, config, features, *, handshake, wide=False):
        self.config = config
        self.features = Features(features)
        self.handshake = handshake
        self.wide = bool(wide)
        self.out_word_bytes = regions(config)[Region.OUTPUT].word_bytes

    def datapath(self, m, ex, dp):
        """Add the repacker (and the scanner) and wire them to the executor's datapath ``dp``
        (its namespace gains ``rp``, ``sc``, ``rp_start``, ``is_classes`` and the ``feed_*``
        registers); a FETCH's or CLASSES' response sends their bytes."""
        config, opcode = self.config, ex.request.header.opcode
        m.submodules.repacker = dp.rp = rp = Repacker(config, wide=self.wide)
        dp.rp_start = Signal()
        sa = dp.stream
        ca = ClassArgs(sa.as_value()[:ClassArgs.as_shape().size])
        dp.is_classes = is_classes = (opcode == Opcode.CLASSES) \
            if Features.CLASSES in self.features else Const(0, 1)
        dp.feed_ptr = Signal(range(ex.max_payload + 1))
        dp.feed_full, dp.feed_wait, dp.feed_byte = Signal(), Signal(), Signal(8)
        m.d.comb += [
            dp.checks.stream.eq(sa),
            rp.load.eq(opcode == Opcode.LOAD),
            rp.output.eq(is_classes | (sa.region == Region.OUTPUT.value)),
        ]
        with m.If(opcode == Opcode.FETCH):
            m.d.comb += dp.tx_byte.eq(rp.o.payload)
        if Features.CLASSES not in self.features:
            m.d.comb += [rp.start.eq(dp.rp_start), rp.runs.eq(sa.runs), rp.run.eq(sa.run),
                         rp.lead.eq(sa.lead), rp.pitch.eq(sa.pitch), rp.bits.eq(sa.bits)]
            return
        m.submodules.class_scanner = dp.sc = sc = ClassScanner(config)
        if self.wide:   # the scanner takes the scores a bit at a time
            m.d.comb += rp.serial.eq(is_classes)
        # CLASSES names no region (its arguments start with `addr`): it reads OUTPUT.
        region = dp.args.region[:Region.as_shape().width]
        m.d.comb += ex.host.region.eq(Mux(is_classes, Region.OUTPUT.value, region))
        # A scan walks one sample's scores: one run of `n` whole lanes from the sample's lane
        # (the pitch does not matter: a fetch ends with its last run).
        m.d.comb += [
            sc.args.eq(ca), sc.bit.eq(rp.bit), sc.produce.eq(rp.produce),
            sc.element_end.eq(rp.element_end), sc.rp_done.eq(rp.done),
            rp.start.eq(dp.rp_start | sc.rp_start),
            rp.runs.eq(Mux(is_classes, 1, sa.runs)),
            rp.run.eq(Mux(is_classes, ca.n, sa.run)),
            rp.lead.eq(Mux(is_classes, sc.rp_lead, sa.lead)),
            rp.pitch.eq(Mux(is_classes, ca.n, sa.pitch)),
            rp.bits.eq(Mux(is_classes, config.acc_bits, sa.bits)),
        ]
        with m.If(is_classes):
            m.d.comb += dp.tx_byte.eq(sc.o.payload)

    def dispatch(self, m, ex, dp):
        """Add the cases of DISPATCH (inside its switch on the opcode, status OK)."""
        rs = ex.response
        if Features.PACKED in self.features:
            with m.Case(Opcode.LOAD):
                # (DISPATCH took `addr` as the first word: StreamArgs starts as AccessArgs.)
                m.d.comb += dp.rp_start.eq(1)
                m.d.sync += [dp.feed_ptr.eq(_STREAM_BYTES), dp.feed_full.eq(0),
                             dp.feed_wait.eq(0)]
                m.next = "LOAD"
            with m.Case(Opcode.FETCH):
                m.d.comb += dp.rp_start.eq(1)
                m.d.sync += rs.length.eq(dp.checks.stream_bytes)
                m.next = "STREAM"
        if Features.CLASSES in self.features:
            with m.Case(Opcode.CLASSES):
                m.d.comb += dp.sc.start.eq(1)
                m.d.sync += rs.length.eq(dp.checks.stream_bytes)
                m.next = "STREAM"

    def states(self, m, ex, dp):
        """Add the states LOAD, STREAM, STREAM_READ and STREAM_WAIT."""
        if Features.PACKED in self.features:
            if self.wide:
                self._load_wide(m, ex, dp)
            else:
                self._load(m, ex, dp)
        self._stream(m, ex, dp)

    def _load_wide(self, m, ex, dp):
        rp = dp.rp
        with m.State("LOAD"):
            # The payload buffer shows byte `feed_ptr` a cycle after it is addressed; that
            # byte (`feed_wait`: it is there) goes to the repacker, or into `feed_byte` if the
            # repacker does not take it. A byte is addressed whenever neither holds one that
            # stays: a byte a cycle while the repacker takes one.
            there = dp.feed_full | dp.feed_wait
            m.d.comb += [dp.buf_r.addr.eq(dp.feed_ptr), rp.i.valid.eq(there),
                         rp.i.payload.eq(Mux(dp.feed_full, dp.feed_byte, dp.buf_r.data))]
            taken = there & rp.i.ready
            ask = ~there | taken
            m.d.sync += [dp.feed_wait.eq(ask),
                         dp.feed_full.eq(there & ~taken),
                         dp.feed_ptr.eq(dp.feed_ptr + ask)]
            with m.If(dp.feed_wait & ~taken):
                m.d.sync += dp.feed_byte.eq(dp.buf_r.data)
            # The words: each byte in its place, the word written a cycle after its last.
            hold, _ = write_pending(m, ex.host, dp, handshake=self.handshake)
            m.d.comb += rp.o.ready.eq(~hold)
            with m.If(rp.o.valid & ~hold):
                store_byte(m, dp, rp.o.payload)
            with m.If(~dp.pending & (dp.byte_pos == 0) & ~rp.busy):
                m.next = "IDLE"

    def _load(self, m, ex, dp):
        host, rp = ex.host, dp.rp
        sr, byte_pos, sr_bytes = dp.sr, dp.byte_pos, dp.sr_bytes
        with m.State("LOAD"):
            # The payload buffer feeds the repacker a byte at a time: each read's byte is kept
            # in a register until the repacker takes it (the buffer's read enable stays the
            # inverse of its write enable, which its mapping onto an iCE40 SPRAM needs).
            m.d.comb += [dp.buf_r.addr.eq(dp.feed_ptr), rp.i.valid.eq(dp.feed_full),
                         rp.i.payload.eq(dp.feed_byte)]
            with m.If(dp.feed_wait):
                m.d.sync += [dp.feed_byte.eq(dp.buf_r.data), dp.feed_full.eq(1),
                             dp.feed_wait.eq(0)]
            with m.Elif(~dp.feed_full):
                m.d.sync += [dp.feed_wait.eq(1), dp.feed_ptr.eq(dp.feed_ptr + 1)]
            with m.Elif(rp.i.ready):
                m.d.sync += dp.feed_full.eq(0)
            # The words as a WRITE's (see COMMIT): word_bytes bytes from the repacker enter the
            # top of `sr`, then zero bytes push them down to bit 0, and the word is written from
            # `sr` in the next cycle, as the next word's bytes come.
            data_phase = byte_pos < dp.checks.word_bytes
            ready = ~data_phase | rp.o.valid
            hold, _ = write_pending(m, host, dp, handshake=self.handshake)
            m.d.comb += dp.sr_fill.eq(Mux(data_phase, rp.o.payload, 0))
            with m.If(ready & ~hold):
                m.d.comb += rp.o.ready.eq(data_phase)
                m.d.sync += [sr.eq(dp.sr_next), byte_pos.eq(byte_pos + 1)]
                with m.If(byte_pos == sr_bytes - 1):
                    m.d.sync += [byte_pos.eq(0), dp.pending.eq(1)]
            with m.If(~dp.pending & (byte_pos == 0) & ~rp.busy):
                m.next = "IDLE"

    def _stream(self, m, ex, dp):
        rs, host, rp = ex.response, ex.host, dp.rp
        sc = getattr(dp, "sc", None)
        sr, byte_pos = dp.sr, dp.byte_pos
        word_bytes = Mux(dp.is_classes, self.out_word_bytes, dp.checks.word_bytes)

        def serve():
            # The response goes out while the words are read: the repacker's bytes (FETCH) or
            # the scanner's (CLASSES; the repacker's output is then not needed).
            m.d.comb += [rs.valid.eq(1), rp.i.valid.eq(byte_pos != 0),
                         rp.i.payload.eq(sr[:8])]
            if sc is None:
                m.d.comb += [rs.payload.valid.eq(rp.o.valid), rp.o.ready.eq(rs.payload.ready)]
            else:
                m.d.comb += [
                    rs.payload.valid.eq(Mux(dp.is_classes, sc.o.valid, rp.o.valid)),
                    rp.o.ready.eq(dp.is_classes | rs.payload.ready),
                    sc.o.ready.eq(rs.payload.ready),
                ]
            with m.If(rp.i.valid & rp.i.ready):
                m.d.sync += [sr.eq(dp.sr_next), byte_pos.eq(byte_pos - 1)]
            if sc is not None:
                with m.If(sc.seek):
                    m.d.sync += [dp.mem_addr.eq(sc.word), byte_pos.eq(0)]
            with m.If(rs.payload.valid & rs.payload.ready & rs.last):
                m.next = "IDLE"

        def load_word():
            m.d.sync += [sr.eq(host.rdata), byte_pos.eq(word_bytes),
                         dp.mem_addr.eq(dp.mem_addr + 1)]
            m.next = "STREAM"

        # (serve() last in each state: the response's end wins over a word read.)
        with m.State("STREAM"):
            with m.If((byte_pos == 0) & rp.i.ready):
                m.next = "STREAM_READ"
            serve()
        with m.State("STREAM_READ"):
            m.d.comb += host.re.eq(1)
            m.next = "STREAM_WAIT"
            with m.If(host.rvalid):
                load_word()
            serve()
        with m.State("STREAM_WAIT"):
            with m.If(host.rvalid):
                load_word()
            serve()
