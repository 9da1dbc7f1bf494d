"""The checks of LOAD, FETCH and CLASSES (:mod:`hwgen.protocol`'s element streams).

:class:`StreamChecks` finds, for a request's :class:`~hwgen.protocol.StreamArgs` or
:class:`~hwgen.protocol.ClassArgs`, whether its region suits the command, whether its shape is
possible, whether its bytes fit (a LOAD's payload length, a FETCH's or CLASSES' answer in the
payload buffer) and whether its words lie in the region; :class:`~hwgen.link.checks.
RequestChecks` puts them in the protocol's order.

The products the checks need (``runs * run * bits``, ``addr * lanes + runs * pitch``) are found
by repeated addition, as :class:`~hwgen.link.checks.RequestChecks` finds a WRITE's byte count:
a multiplier per product would take LUTs the iCE40 does not have (its DSP blocks are the
array's), and the loop takes at most ``max(bits, lanes) + 8 * max_payload + 1`` cycles, once
per request. The words are checked in elements, ``addr * lanes + runs * pitch <= depth *
lanes``, which is ``addr + ceil(runs * pitch / lanes) <= depth`` without a division.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

from ..config import AcceleratorConfig
from ..memmap import Region, regions
from ..protocol import ClassArgs, StreamArgs, layout_bytes

__all__ = ["StreamChecks"]

_STREAM_BYTES = layout_bytes(StreamArgs)


class _Step(enum.Enum, shape=3):
    PER_RUN = 0   # bits per run: `run` added `bits` times (CLASSES: `k`, 8 * index bytes)
    ORIGIN = 1    # the first element: `addr` added `lanes` times
    RUNS = 2      # per run: its bits and `pitch` elements
    SETTLE = 3    # two cycles for the registered results (bytes, then the comparison)
    SETTLED = 4
    DONE = 5


class StreamChecks(wiring.Component):
    """Check the arguments of a LOAD, FETCH or CLASSES request (see the module).

    Pulse ``start`` (with the arguments and the command in place, held until the results are
    read), then hold ``step`` high while ``more`` is; the results are valid from the first
    cycle in which ``more`` is low after ``start``'s.

    Parameters
    ----------
    config : AcceleratorConfig
    max_payload : int

    Members
    -------
    load, fetch, classes : In(1)
        The command.
    stream : In(StreamArgs)
    class_args : In(ClassArgs)
    length : In(16)
        The request's payload length.
    start, step : In(1)
    more : Out(1)
    region_ok, shape_ok, bytes_ok, addr_ok : Out(1)
    nbytes : Out(16)
        The answer's length (FETCH, CLASSES), valid with ``bytes_ok``.
    """

    def __init__(self, config, *, max_payload):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        self._config = config
        self._max_payload = max_payload
        super().__init__({
            "load": In(1), "fetch": In(1), "classes": In(1),
            "stream": In(StreamArgs), "class_args": In(ClassArgs), "length": In(16),
            "start": In(1), "step": In(1), "more": Out(1),
            "region_ok": Out(1), "shape_ok": Out(1), "bytes_ok": Out(1), "addr_ok": Out(1),
            "nbytes": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        config, max_payload = self._config, self._max_payload
        geo = regions(config)
        sa, ca = self.stream, self.class_args
        is_act = sa.region == Region.ACT.value
        is_out = (sa.region == Region.OUTPUT.value) | self.classes
        act_limit = geo[Region.ACT].depth * config.act_lanes
        out_limit = geo[Region.OUTPUT].depth * config.cols
        # Registered: read after the loop (at least a cycle after `start`).
        region_ok, shape_ok = Signal(), Signal()
        with m.If(self.classes):
            m.d.sync += [region_ok.eq(1),
                         shape_ok.eq((ca.samples != 0) & (ca.n != 0) & (ca.k != 0)
                                     & (ca.k <= ca.n) & (ca.n <= ca.pitch))]
        with m.Else():
            lane_ok = Mux(is_out, sa.bits <= config.acc_bits, sa.bits <= config.in_bits)
            m.d.sync += [region_ok.eq(is_act | (self.fetch & is_out)),
                         shape_ok.eq((sa.runs != 0) & (sa.run != 0) & (sa.bits != 0) & lane_ok
                                     & (sa.lead + sa.run <= sa.pitch))]
        m.d.comb += [self.region_ok.eq(region_ok), self.shape_ok.eq(shape_ok)]

        # Operands per command: CLASSES sends k indices of 8 * index_bytes bits per sample.
        per, times = Mux(self.classes, ca.k, sa.run), Mux(self.classes, Mux(ca.n > 256, 16, 8),
                                                          sa.bits)
        runs, pitch = Mux(self.classes, ca.samples, sa.runs), Mux(self.classes, ca.pitch,
                                                                  sa.pitch)
        addr = Mux(self.classes, ca.addr, sa.addr)
        lanes = Mux(is_out, config.cols, config.act_lanes)
        limit = Mux(is_out, out_limit, act_limit)

        bit_limit = 8 * max_payload
        most_per_run = 0xFFFF * max(64, 16)
        per_run = Signal(range(most_per_run + 1))
        total = Signal(range(bit_limit + most_per_run + 1))   # bits; stops past bit_limit
        most_lanes = max(config.cols, config.act_lanes)
        # elements; no more pitches once past `limit`
        origin = Signal(range((1 << 32) * most_lanes + max(act_limit, out_limit) + 0x10000))
        count = Signal(16)
        phase = Signal(_Step)
        m.d.comb += self.more.eq(region_ok & shape_ok & (phase != _Step.DONE))
        with m.If(self.start):
            m.d.sync += [phase.eq(_Step.PER_RUN), per_run.eq(0), total.eq(0), origin.eq(0),
                         count.eq(0)]
        with m.Elif(self.step):
            m.d.sync += count.eq(count + 1)
            with m.Switch(phase):
                with m.Case(_Step.PER_RUN):
                    m.d.sync += per_run.eq(per_run + per)
                    with m.If(count + 1 == times):
                        m.d.sync += [phase.eq(_Step.ORIGIN), count.eq(0)]
                with m.Case(_Step.ORIGIN):
                    m.d.sync += origin.eq(origin + addr)
                    with m.If(count + 1 == lanes):
                        m.d.sync += [phase.eq(_Step.RUNS), count.eq(0)]
                with m.Case(_Step.RUNS):
                    m.d.sync += total.eq(total + per_run)
                    with m.If(origin <= limit):
                        m.d.sync += origin.eq(origin + pitch)
                    with m.If((count + 1 == runs) | (total + per_run > bit_limit)):
                        m.d.sync += phase.eq(_Step.SETTLE)
                with m.Case(_Step.SETTLE):
                    m.d.sync += phase.eq(_Step.SETTLED)
                with m.Case(_Step.SETTLED):
                    m.d.sync += phase.eq(_Step.DONE)

        nbytes = Signal(range((bit_limit + most_per_run + 7) // 8 + 1), name="stream_nbytes")
        m.d.sync += nbytes.eq((total + 7) >> 3)
        m.d.comb += self.nbytes.eq(nbytes)
        fits = Signal(name="fits")
        m.d.sync += fits.eq(Mux(self.load, nbytes == self.length - _STREAM_BYTES,
                                nbytes <= max_payload))
        addr_ok = Signal(name="stream_addr_ok")
        m.d.sync += addr_ok.eq(origin <= limit)
        m.d.comb += [self.bytes_ok.eq(fits), self.addr_ok.eq(addr_ok)]
        return m
