"""Element streams between a region's words and the packed wire, a bit or a byte per cycle.

:class:`Repacker` walks an element stream of :mod:`hwgen.protocol` (``runs`` runs of ``run``
elements, ``lead`` zeros before each, ``pitch`` elements apart; see
:class:`~hwgen.protocol.StreamArgs`) over the bits of the region's words, lane 0 bit 0 first,
and converts between the two orders:

- *load* (LOAD): packed bytes in, the words' bytes out (``word_bytes`` per word, the bits above
  the lanes 0). Each run element takes ``bits`` bits from the input and is sign-extended to the
  lane; every other lane, to the end of the last word, is 0.
- *fetch* (FETCH, CLASSES): the words' bytes in, packed bytes out: each run element's low
  ``bits`` bits; every other bit is dropped. The last byte is padded with 0 bits.

Why bit-serial: an element may start at any bit of a byte and at any lane of a word, so a
parallel converter needs barrel shifters as wide as a word on both sides (hundreds of LUTs on
an iCE40); one bit per cycle needs two 8-bit shift registers and a few counters, and a word of
``w`` bits takes ``w`` cycles, which is shorter than its packed bytes take on the UART at any
clock the boards run (ten clocks a bit at least). A link that takes a byte a cycle (the
simulated board's byte streams, AXI4-Stream) gets the *wide* repacker: each cycle it moves as
many bits as the current segment of the word (an element's data bits, the rest of its lane,
the pad) and both byte registers allow, at most eight, through 8- and 16-bit shifters: about a
byte a cycle where elements and lanes are bytes.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..config import AcceleratorConfig
from ..memmap import Region, regions
from ..protocol import ClassArgs, StreamArgs

__all__ = ["Repacker"]

_COUNT = StreamArgs.as_shape().members["runs"]   # the width of runs, run, lead and pitch
assert ClassArgs.as_shape().members["n"] == _COUNT


class _Phase(enum.Enum, shape=3):
    IDLE = 0
    LEAD = 1   # the zeros before a run
    RUN = 2    # a run's elements
    GAP = 3    # the zeros after a run, up to the pitch
    TAIL = 4   # load: zeros to the end of the last word
    FLUSH = 5  # the last output byte, then idle


class Repacker(wiring.Component):
    """Convert an element stream between word bytes and packed bytes (see the module).

    ``start`` takes the arguments (they may change afterwards); ``done`` pulses when the last
    output byte has been taken. Between the two, ``busy`` is high and the input and output
    streams move. The arguments must pass the protocol's checks (``runs``, ``run``, ``bits``
    at least 1, ``bits`` at most the lane, ``lead + run <= pitch``).

    Parameters
    ----------
    config : AcceleratorConfig
        Fixes the lanes of ACT and OUTPUT words.
    wide : bool
        Move up to a byte per cycle, not a bit (see the module); the component then has a
        ``serial`` input.

    Members
    -------
    start : In(1)
    load : In(1)
        Load (packed to words) rather than fetch.
    output : In(1)
        The region is OUTPUT (``cols`` lanes of ``acc_bits``), else ACT (``act_lanes`` of
        ``in_bits``).
    runs, run, lead, pitch : In(16)
    bits : In(8)
    i : In(stream.Signature(8))
        Packed bytes (load) or word bytes (fetch).
    o : Out(stream.Signature(8))
        Word bytes (load) or packed bytes (fetch).
    busy, done : Out(1)
    bit, produce, element_end : Out(1)
        The bit entering the output register and that it enters (``produce``); ``element_end``
        pulses as a run element's last bit goes through (for :class:`ClassScanner
        <hwgen.link.classes.ClassScanner>`, which reads the elements whole).
    serial : In(1)
        (``wide`` only.) One bit per cycle, as the bit-serial repacker (for the scanner,
        which takes ``bit`` a bit at a time); read while busy.
    """

    def __init__(self, config, *, wide=False):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        self._wide = bool(wide)
        geo = regions(config)
        # (lanes, lane bits, pad bits above the lanes) of each region's word
        self._shapes = {
            region: (lanes, bits, 8 * geo[region].word_bytes - lanes * bits)
            for region, lanes, bits in ((Region.ACT, config.act_lanes, config.in_bits),
                                        (Region.OUTPUT, config.cols, config.acc_bits))}
        super().__init__({
            "start": In(1), "load": In(1), "output": In(1),
            "runs": In(_COUNT), "run": In(_COUNT), "lead": In(_COUNT), "pitch": In(_COUNT),
            "bits": In(8),
            "i": In(stream.Signature(8)), "o": Out(stream.Signature(8)),
            "busy": Out(1), "done": Out(1),
            "bit": Out(1), "produce": Out(1), "element_end": Out(1),
            **({"serial": In(1)} if self._wide else {}),
        })

    def elaborate(self, platform):
        m = Module()
        act, out = self._shapes[Region.ACT], self._shapes[Region.OUTPUT]
        most_lanes = max(act[0], out[0])
        widest = max(act[1], out[1], act[2], out[2], 1)

        # -- arguments, registered at start -----------------------------------------------
        load, bits = Signal(), Signal(8)
        lanes_m1 = Signal(range(most_lanes))
        lane_bits_m1 = Signal(range(widest))
        pad_m1 = Signal(range(widest))
        has_pad = Signal()
        run, lead, gap = Signal(_COUNT), Signal(_COUNT), Signal(_COUNT)
        lead_zero, gap_zero = Signal(), Signal()
        with m.If(self.start):
            m.d.sync += [load.eq(self.load), bits.eq(self.bits), run.eq(self.run),
                         lead.eq(self.lead), gap.eq(self.pitch - self.lead - self.run),
                         lead_zero.eq(self.lead == 0),
                         gap_zero.eq(self.pitch == self.lead + self.run)]
            for flag, (lanes, lane_bits, pad) in ((0, act), (1, out)):
                with m.If(self.output == flag):
                    m.d.sync += [lanes_m1.eq(lanes - 1), lane_bits_m1.eq(lane_bits - 1),
                                 pad_m1.eq(max(pad, 1) - 1), has_pad.eq(pad != 0)]

        # -- position: phase and elements left in it, lane and bit of the word -------------
        phase = Signal(_Phase)
        left = Signal(_COUNT)        # elements left in the phase, this one included
        runs_left = Signal(_COUNT)   # periods left, this one included
        lane = Signal(range(most_lanes))
        bitc = Signal(range(widest))
        in_pad = Signal()

        # -- the two byte registers ---------------------------------------------------------
        in_sr, in_cnt = Signal(8), Signal(range(9))
        out_sr, out_cnt = Signal(8), Signal(range(9))
        walking = (phase != _Phase.IDLE) & (phase != _Phase.FLUSH)
        m.d.comb += [
            self.busy.eq(phase != _Phase.IDLE),
            *([] if self._wide else [self.i.ready.eq(walking & (in_cnt == 0))]),
            self.o.valid.eq(out_cnt == 8),
            self.o.payload.eq(out_sr),
        ]
        if not self._wide:
            with m.If(self.i.valid & self.i.ready):
                m.d.sync += [in_sr.eq(self.i.payload), in_cnt.eq(8)]
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += out_cnt.eq(0)

        # -- one step: one bit of the word (wide: up to a byte of it) ------------------------
        in_run = (phase == _Phase.RUN) & ~in_pad
        data = in_run & (bitc < bits)
        sign = Signal()  # the last data bit taken (load: the element's sign so far)
        needs_in = Mux(load, data, 1)
        gives_out = Mux(load, 1, data)
        w = SimpleNamespace(
            phase=phase, left=left, runs_left=runs_left, load=load, run=run, lead=lead, gap=gap,
            lead_zero=lead_zero, gap_zero=gap_zero)
        if self._wide:
            step, n, lane_end, pad_end = self._byte_step(m, SimpleNamespace(
                walking=walking, in_sr=in_sr, in_cnt=in_cnt, out_sr=out_sr, out_cnt=out_cnt,
                in_run=in_run, data=data, sign=sign, needs_in=needs_in, gives_out=gives_out,
                load=load, bits=bits, bitc=bitc, in_pad=in_pad, lane_bits_m1=lane_bits_m1,
                pad_m1=pad_m1, phase=phase, left=left, runs_left=runs_left))
        else:
            step = walking & (~needs_in | (in_cnt != 0)) & (~gives_out | (out_cnt != 8))
            value = Mux(data | ~load, in_sr[0], in_run & sign)
            m.d.comb += [self.bit.eq(value), self.produce.eq(step & gives_out)]
            with m.If(step & needs_in):
                m.d.sync += [in_sr.eq(in_sr[1:]), in_cnt.eq(in_cnt - 1)]
                with m.If(data):
                    m.d.sync += sign.eq(in_sr[0])
            with m.If(step & gives_out):
                m.d.sync += [out_sr.eq(Cat(out_sr[1:], value)), out_cnt.eq(out_cnt + 1)]
            n = 1
            lane_end = ~in_pad & (bitc == lane_bits_m1)
            pad_end = bitc == pad_m1

        word_end = Mux(in_pad, pad_end, lane_end & (lane == lanes_m1) & ~has_pad)
        m.d.comb += self.element_end.eq(step & lane_end & (phase == _Phase.RUN))
        with m.If(step):
            m.d.sync += bitc.eq(bitc + n)
            with m.If(in_pad & word_end):
                m.d.sync += [in_pad.eq(0), bitc.eq(0)]
            with m.Elif(~in_pad & lane_end):
                m.d.sync += [bitc.eq(0), lane.eq(lane + 1)]
                with m.If(lane == lanes_m1):
                    m.d.sync += [lane.eq(0), in_pad.eq(has_pad)]
                w.word_end = word_end
                self._advance(m, w)
            with m.If((phase == _Phase.TAIL) & word_end):
                m.d.sync += phase.eq(_Phase.FLUSH)

        # The last byte: filled up with 0 bits (fetch), then taken.
        with m.If(phase == _Phase.FLUSH):
            with m.If(out_cnt == 0):
                m.d.sync += phase.eq(_Phase.IDLE)
                m.d.comb += self.done.eq(1)
            with m.Elif(out_cnt != 8):
                if self._wide:   # all of them at once
                    m.d.sync += [out_sr.eq(out_sr >> (8 - out_cnt)[:4]), out_cnt.eq(8)]
                else:
                    m.d.sync += [out_sr.eq(Cat(out_sr[1:], 0)), out_cnt.eq(out_cnt + 1)]

        with m.If(self.start):
            m.d.sync += [phase.eq(Mux(self.lead == 0, _Phase.RUN, _Phase.LEAD)),
                         left.eq(Mux(self.lead == 0, self.run, self.lead)),
                         runs_left.eq(self.runs), lane.eq(0), bitc.eq(0), in_pad.eq(0),
                         in_cnt.eq(0), out_cnt.eq(0)]
        return m

    def _byte_step(self, m, w):
        """Add the wide step: as many bits as the segment of the word (an element's data, the
        rest of its lane, the pad) and both byte registers allow, at most eight (one with
        ``serial``); ``w`` holds the walker's registers and decisions. Return ``step``, the
        bits it moves, and whether it ends the lane and the pad."""
        in_sr, in_cnt, out_sr, out_cnt = w.in_sr, w.in_cnt, w.out_sr, w.out_cnt
        # Where the segment ends: the data's, the lane's or the pad's.
        seg_end = Mux(w.in_pad, w.pad_m1, Mux(w.data, w.bits - 1, w.lane_bits_m1)) + 1
        seg = seg_end - w.bitc
        emit = self.o.valid & self.o.ready     # the output register empties this cycle
        space = Mux(emit, 8, 8 - out_cnt)
        fit = Signal(range(9), name="fit")
        m.d.comb += fit.eq(Mux(seg > 8, 8, seg))
        fit_in = Signal(range(9), name="fit_in")
        m.d.comb += fit_in.eq(Mux(w.needs_in & (in_cnt < fit), in_cnt, fit))
        fit_out = Signal(range(9), name="fit_out")
        m.d.comb += fit_out.eq(Mux(w.gives_out & (space < fit_in), space, fit_in))
        n = Signal(range(9), name="n")     # bits moved this cycle
        m.d.comb += n.eq(Mux(self.serial & (fit_out != 0), 1, fit_out))
        step = w.walking & (n != 0)
        # The input register takes the next byte in the cycle its last bits go, but in the
        # stream's last element (fetch): the walk may end with them, and a byte asked for then
        # would be a word read that a restart (CLASSES' next scan) finds under way.
        last = ~w.load & (w.phase == _Phase.RUN) & (w.left == 1) & (w.runs_left == 1)
        m.d.comb += self.i.ready.eq(w.walking & ((in_cnt == 0)
                                                 | (step & w.needs_in & (n == in_cnt) & ~last)))
        value = Mux(w.data | ~w.load, in_sr, Mux(w.in_run, w.sign.replicate(8), 0))
        m.d.comb += [self.bit.eq(value[0]), self.produce.eq(step & w.gives_out)]
        with m.If(step & w.needs_in):
            m.d.sync += [in_sr.eq(in_sr >> n), in_cnt.eq(in_cnt - n)]
            with m.If(w.data):
                m.d.sync += w.sign.eq(in_sr.bit_select((n - 1)[:3], 1))
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [in_sr.eq(self.i.payload), in_cnt.eq(8)]
        with m.If(step & w.gives_out):
            m.d.sync += [out_sr.eq((Cat(out_sr, value) >> n)[:8]),
                         out_cnt.eq(Mux(emit, 0, out_cnt) + n)]
        with m.Elif(emit):
            m.d.sync += out_cnt.eq(0)
        next_bitc = w.bitc + n
        return step, n, ~w.in_pad & (next_bitc == w.lane_bits_m1 + 1), \
            next_bitc == w.pad_m1 + 1

    @staticmethod
    def _advance(m, w):
        """Add the step from one element to the next (at a lane's end): count down the phase,
        go on to the next phase at its end, and to the end of the stream after the last
        period (fetch: after the last run's last element). ``w`` holds the walker's
        registers."""
        phase, left, runs_left, run, lead = w.phase, w.left, w.runs_left, w.run, w.lead
        last = left == 1
        period_end = Signal()
        m.d.sync += left.eq(left - 1)
        with m.Switch(phase):
            with m.Case(_Phase.LEAD), m.If(last):
                m.d.sync += [phase.eq(_Phase.RUN), left.eq(run)]
            with m.Case(_Phase.RUN):
                with m.If(last & ~w.load & (runs_left == 1)):
                    m.d.sync += phase.eq(_Phase.FLUSH)
                with m.Elif(last & w.gap_zero):
                    m.d.comb += period_end.eq(1)
                with m.Elif(last):
                    m.d.sync += [phase.eq(_Phase.GAP), left.eq(w.gap)]
            with m.Case(_Phase.GAP):
                m.d.comb += period_end.eq(last)
        with m.If(period_end):
            m.d.sync += [runs_left.eq(runs_left - 1),
                         phase.eq(Mux(w.lead_zero, _Phase.RUN, _Phase.LEAD)),
                         left.eq(Mux(w.lead_zero, run, lead))]
            with m.If(runs_left == 1):
                # The stream's last element: zeros to the end of its word (load only: fetch
                # ended with the last run's element).
                m.d.sync += phase.eq(Mux(w.word_end, _Phase.FLUSH, _Phase.TAIL))
