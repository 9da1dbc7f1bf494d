"""The request checks of the host protocol, in the order :mod:`hwgen.protocol` gives them.

:class:`RequestChecks` finds the status a request deserves: the first check it fails, or OK.
"""

from types import SimpleNamespace

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..config import AcceleratorConfig
from ..memmap import regions
from ..protocol import (
    AccessArgs,
    ClassArgs,
    Features,
    FrameHeader,
    Opcode,
    RunArgs,
    Status,
    StreamArgs,
    layout_bytes,
)
from .stream_checks import StreamChecks

__all__ = ["RequestChecks"]

_ACCESS_BYTES = layout_bytes(AccessArgs)
_RUN_BYTES = layout_bytes(RunArgs)
_STREAM_BYTES = layout_bytes(StreamArgs)
_CLASS_BYTES = layout_bytes(ClassArgs)


class RequestChecks(wiring.Component):
    """Check a request's header and arguments; answer the first failure's status, or OK.

    The checks and their order are those of :mod:`hwgen.protocol`: payload CRC, opcode, length
    for the opcode, region, count (zero, inconsistent with the length, or more than
    ``max_payload`` bytes to read; LOAD, FETCH and CLASSES: the stream's shape and bytes),
    ``addr + count`` (a stream's words), batch, busy, program loaded. LOAD, FETCH and CLASSES
    are checked by :class:`~hwgen.link.stream_checks.StreamChecks` (on a device with their
    ``features``; without, their opcodes are unknown).

    A WRITE's or READ's byte count (``count`` words of the region) is found by repeated addition
    rather than by a multiplier: pulse ``start``, then hold ``step`` high while ``more`` is (at
    most ``max_payload // word_bytes + 1`` steps). ``status`` is valid from the cycle after the
    first one after ``start`` in which ``more`` is low, while the inputs hold still. ``header``
    and ``args`` must hold still from the cycle before ``start``: several checks are registered
    so that no comparison follows an adder or a subtractor in the same cycle.

    Parameters
    ----------
    config : AcceleratorConfig
        Fixes the regions (word sizes and depths) and the largest batch.
    max_payload : int
        The payload buffer of the frame engine, in bytes (at most 65535).
    features : Features
        The optional commands the device has.

    Members
    -------
    header : In(FrameHeader)
        The request's header.
    args : In(AccessArgs)
        The first bytes of its payload (a RUN's :class:`~hwgen.protocol.RunArgs` at the bottom).
    stream : In(StreamArgs)
        Its first bytes as LOAD's and FETCH's arguments (a device with ``Features.PACKED``
        or ``Features.CLASSES``; CLASSES' :class:`~hwgen.protocol.ClassArgs` at the bottom).
    crc_ok : In(1)
        Its payload CRC matched.
    busy : In(1)
        The accelerator runs a program.
    program_loaded : In(1)
        PROGRAM was written since the last RESET.
    start, step : In(1)
        Restart the byte count; add one word to it.
    more : Out(1)
        The byte count needs another step.
    status : Out(Status)
        The request's status.
    word_bytes : Out(range(widest + 1))
        Bytes of a word of ``args.region`` (registered; valid from two cycles after ``args``).
    xfer : Out(range(max_payload + widest + 1))
        The byte count: ``count * word_bytes`` once ``more`` is low, unless that exceeds
        ``max_payload`` (then something larger).
    stream_bytes : Out(16)
        A FETCH's or CLASSES' answer length, valid with ``status``.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`AcceleratorConfig`.
    ValueError
        If ``max_payload`` is not an int in ``1 .. 65535``.
    """

    def __init__(self, config, *, max_payload, features=Features.NONE):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        if isinstance(max_payload, bool) or not isinstance(max_payload, int) \
                or not 1 <= max_payload <= 0xFFFF:
            raise ValueError(f"max_payload must be an int in 1..65535, not {max_payload!r}")
        self._config = config
        self._geometry = regions(config)
        self._max_payload = max_payload
        self._features = Features(features)
        widest = max(g.word_bytes for g in self._geometry.values())
        streams = {"stream": In(StreamArgs), "stream_bytes": Out(16)} if self._features else {}
        super().__init__({
            **streams,
            "header": In(FrameHeader),
            "args": In(AccessArgs),
            "crc_ok": In(1),
            "busy": In(1),
            "program_loaded": In(1),
            "start": In(1),
            "step": In(1),
            "more": Out(1),
            "status": Out(Status),
            "word_bytes": Out(range(widest + 1)),
            "xfer": Out(range(max_payload + widest + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        geo, max_payload = self._geometry, self._max_payload
        hdr, args, xfer = self.header, self.args, self.xfer
        count = args.count
        is_write = hdr.opcode == Opcode.WRITE
        is_read = hdr.opcode == Opcode.READ
        is_access = is_write | is_read
        is_run = hdr.opcode == Opcode.RUN
        stream = self._stream_checks(m)

        # Registered: read from the count on, at least two cycles (the CRC) after `args` is
        # complete; combinational, the word size fed the buffer address in COMMIT through a
        # comparator and an adder, the iCE40's critical path.
        region_ok = Signal()
        depth = Signal(range(max(g.depth for g in geo.values()) + 1))
        with m.Switch(args.region):
            for region, g in geo.items():
                with m.Case(region.value):
                    m.d.sync += [
                        region_ok.eq(1),
                        self.word_bytes.eq(g.word_bytes),
                        depth.eq(g.depth),
                    ]
            with m.Default():
                m.d.sync += region_ok.eq(0)

        # count * word_bytes by repeated addition: constant multipliers per region cost ~150
        # LUTs on an iCE40, the loop at most max_payload / word_bytes + 1 cycles. It stops at
        # `count` words or as soon as they exceed the buffer.
        measured = Signal(16)
        m.d.comb += self.more.eq((is_access & region_ok & (measured != count)
                                  & (xfer <= max_payload)) | stream.more)
        with m.If(self.start):
            m.d.sync += [xfer.eq(0), measured.eq(0)]
        with m.Elif(self.step):
            m.d.sync += [xfer.eq(xfer + self.word_bytes), measured.eq(measured + 1)]

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
            if Features.PACKED in self._features:
                with m.Case(Opcode.LOAD):
                    m.d.comb += [opcode_ok.eq(1),
                                 length_ok.eq((hdr.length >= _STREAM_BYTES)
                                              & (hdr.length <= max_payload))]
                with m.Case(Opcode.FETCH):
                    m.d.comb += [opcode_ok.eq(1), length_ok.eq(hdr.length == _STREAM_BYTES)]
            if Features.CLASSES in self._features:
                with m.Case(Opcode.CLASSES):
                    m.d.comb += [opcode_ok.eq(1), length_ok.eq(hdr.length == _CLASS_BYTES)]
        # Lengths minus a constant, registered: a subtractor feeding a comparator is two carry
        # chains in series, the iCE40's critical path.
        data_len = Signal((hdr.length - _ACCESS_BYTES).shape(), name="data_len")
        m.d.sync += data_len.eq(hdr.length - _ACCESS_BYTES)
        # A count cut short leaves xfer > max_payload, which both tests below refuse.
        count_ok = (count != 0) & (
            (is_write & (xfer == data_len)) | (is_read & (xfer <= max_payload)))
        # The end address, registered: an adder feeding a comparator ripples through the
        # LUTs (checks below are read at least three cycles after `args` is complete).
        end_addr = Signal((args.addr + count).shape(), name="end_addr")
        m.d.sync += end_addr.eq(args.addr + count)
        addr_ok = end_addr <= depth
        batch = RunArgs(args.as_value()[:RunArgs.as_shape().size]).batch
        batch_ok = (batch != 0) & (batch <= self._config.acc_depth)

        # The wide comparisons, registered: after the count they show their operands of the
        # cycle before (the last step's, which holds `xfer` still), and the priority chain below
        # starts from registers.
        checks = {}
        for name, value in (("length_ok", length_ok), ("count_ok", count_ok),
                            ("addr_ok", addr_ok), ("batch_ok", batch_ok)):
            checks[name] = Signal(name=f"{name}_q")
            m.d.sync += checks[name].eq(value)
        length_ok, count_ok, addr_ok, batch_ok = checks.values()

        status = self.status
        with m.If(~self.crc_ok):
            m.d.comb += status.eq(Status.BAD_CRC)
        with m.Elif(~opcode_ok):
            m.d.comb += status.eq(Status.BAD_OPCODE)
        with m.Elif(~length_ok):
            m.d.comb += status.eq(Status.BAD_LENGTH)
        with m.Elif(is_access & ~region_ok):
            m.d.comb += status.eq(Status.BAD_REGION)
        with m.Elif(is_access & ~count_ok):
            m.d.comb += status.eq(Status.BAD_LENGTH)
        with m.Elif(is_access & ~addr_ok):
            m.d.comb += status.eq(Status.BAD_ADDRESS)
        with m.Elif(stream.command & ~stream.region_ok):
            m.d.comb += status.eq(Status.BAD_REGION)
        with m.Elif(stream.command & ~(stream.shape_ok & stream.bytes_ok)):
            m.d.comb += status.eq(Status.BAD_LENGTH)
        with m.Elif(stream.command & ~stream.addr_ok):
            m.d.comb += status.eq(Status.BAD_ADDRESS)
        with m.Elif(is_run & ~batch_ok):
            m.d.comb += status.eq(Status.BAD_BATCH)
        with m.Elif((is_access | is_run | stream.command) & self.busy):
            m.d.comb += status.eq(Status.BUSY)
        with m.Elif(is_run & ~self.program_loaded):
            m.d.comb += status.eq(Status.NO_PROGRAM)
        with m.Else():
            m.d.comb += status.eq(Status.OK)
        return m

    def _stream_checks(self, m):
        """Add the checks of LOAD, FETCH and CLASSES (a device with them); return their
        results (all passing, and no command, on a device without)."""
        if not self._features:
            ok = Const(1, 1)
            return SimpleNamespace(command=Const(0, 1), more=Const(0, 1), region_ok=ok,
                                   shape_ok=ok, bytes_ok=ok, addr_ok=ok)
        m.submodules.stream_checks = checks = StreamChecks(self._config,
                                                           max_payload=self._max_payload)
        opcode = self.header.opcode
        packed = Features.PACKED in self._features
        classes = Features.CLASSES in self._features
        load = (opcode == Opcode.LOAD) if packed else Const(0, 1)
        fetch = (opcode == Opcode.FETCH) if packed else Const(0, 1)
        is_classes = (opcode == Opcode.CLASSES) if classes else Const(0, 1)
        command = load | fetch | is_classes
        m.d.comb += [
            checks.load.eq(load), checks.fetch.eq(fetch), checks.classes.eq(is_classes),
            checks.stream.eq(self.stream),
            checks.class_args.eq(self.stream.as_value()[:ClassArgs.as_shape().size]),
            checks.length.eq(self.header.length),
            checks.start.eq(self.start), checks.step.eq(self.step),
            self.stream_bytes.eq(checks.nbytes),
        ]
        return SimpleNamespace(command=command, more=checks.more & command,
                               region_ok=checks.region_ok, shape_ok=checks.shape_ok,
                               bytes_ok=checks.bytes_ok, addr_ok=checks.addr_ok)
