"""CLASSES: the indices of each sample's largest scores, found on the device.

:class:`ClassScanner` answers a checked CLASSES request (:class:`~hwgen.protocol.ClassArgs`):
for each sample, ``k`` scans over its ``n`` scores (signed OUTPUT lanes, read whole through a
:class:`~hwgen.link.repacker.Repacker` in fetch mode), each sending the index of its pick.

Why one scan per index: scan ``i`` picks the best score *strictly after* the previous pick in
the order (score descending, index ascending): a score ``s`` at index ``j`` is eligible when
``s < prev`` or ``s == prev and j > prev_j``, and the first eligible of the largest score wins
(scores come in index order, so a strict ``>`` keeps ties at the lowest index). That order is
total, so ``k`` scans give the top ``k`` in order without remembering which scores were taken:
no mask of ``n`` bits, no sorting network, only three registers of a score and three of an
index. The cost is time, ``k`` passes over the sample's words (``k`` is small: 1 for argmax),
and the link is slower than a pass anyway.

A ``dtype="bf16"`` design's scores are fp32 patterns, sign-magnitude: each is compared as its
key (:func:`hwgen.compiler.classes.score_keys`), the other bits of a negative one inverted,
whose signed order is the floats' (a NaN above +Inf).
"""

from amaranth.hdl import Cat, Module, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..config import AcceleratorConfig
from ..memmap import addr_bits
from ..protocol import ClassArgs

__all__ = ["ClassScanner"]

_COUNT = ClassArgs.as_shape().members["n"]   # 16: the width of samples, pitch, n and k


class ClassScanner(wiring.Component):
    """Carry out a checked CLASSES request (see the module).

    ``start`` takes the arguments; the scanner then restarts the repacker once per scan
    (``rp_start`` with ``rp_lead``: the sample's first score's lane; ``seek`` with ``word``:
    where the word reads start), watches the scores go through (``bit``, ``produce``,
    ``element_end``, ``rp_done``) and sends each pick's index on ``o``, ``index_bytes(n)``
    bytes little-endian; ``done`` pulses after the last.

    Parameters
    ----------
    config : AcceleratorConfig
        Fixes the scores' width (``acc_bits``), their lanes per word (``cols``) and the
        address width.

    Members
    -------
    start : In(1)
    args : In(ClassArgs)
    bit, produce, element_end, rp_done : In(1)
        From the repacker.
    rp_start : Out(1)
    rp_lead : Out(16)
    seek : Out(1)
    word : Out(addr_bits(config))
    o : Out(stream.Signature(8))
    done : Out(1)
    """

    def __init__(self, config):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config must be an AcceleratorConfig, not {config!r}")
        self._config = config
        super().__init__({
            "start": In(1), "args": In(ClassArgs),
            "bit": In(1), "produce": In(1), "element_end": In(1), "rp_done": In(1),
            "rp_start": Out(1), "rp_lead": Out(_COUNT),
            "seek": Out(1), "word": Out(addr_bits(self._config)),
            "o": Out(stream.Signature(8)), "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        config, args = self._config, self.args
        acc_bits, cols = config.acc_bits, config.cols
        score = Signal(acc_bits)     # the score going through, LSB first
        best, prev = Signal(signed(acc_bits)), Signal(signed(acc_bits))
        j, best_j, prev_j = Signal(_COUNT), Signal(_COUNT), Signal(_COUNT)
        have_best, first = Signal(), Signal()
        lane = Signal(range(cols))           # the sample's first score's lane
        samples_left, picks_left = Signal(_COUNT), Signal(_COUNT)
        pitch, k = Signal(_COUNT), Signal(_COUNT)
        two_bytes = Signal()
        rest = Signal(_COUNT + 1)            # lane + pitch, reduced to a lane (ADVANCE)
        m.d.comb += [self.rp_lead.eq(lane), self.o.payload.eq(best_j[:8])]

        with m.If(self.produce):
            m.d.sync += score.eq(Cat(score[1:], self.bit))
        # The score completed in a cycle (its last bit the one going in) is compared in the
        # next, from a register: the repacker's bit, three comparisons and the enables of the
        # best score's register in one cycle were a longest path of the 85F's design.
        candidate = Signal(signed(acc_bits), name="candidate")
        ended = Signal(name="ended")
        m.d.sync += ended.eq(self.element_end)
        whole = Cat(score[1:], self.bit)
        if config.dtype == "bf16":   # fp32 patterns: the float order as a signed one
            whole = Cat(whole[:-1] ^ whole[-1].replicate(acc_bits - 1), whole[-1])
        with m.If(self.element_end):
            m.d.sync += candidate.eq(whole)
        eligible = first | (candidate < prev) | ((candidate == prev) & (j > prev_j))
        with m.If(ended):
            m.d.sync += j.eq(j + 1)
            with m.If(eligible & (~have_best | (candidate > best))):
                m.d.sync += [best.eq(candidate), best_j.eq(j), have_best.eq(1)]

        with m.FSM():
            with m.State("IDLE"), m.If(self.start):
                m.d.sync += [self.word.eq(args.addr), lane.eq(0), pitch.eq(args.pitch),
                             k.eq(args.k), samples_left.eq(args.samples),
                             two_bytes.eq(args.n > 256)]
                m.next = "SAMPLE"
            with m.State("SAMPLE"):
                m.d.sync += [first.eq(1), picks_left.eq(k)]
                m.next = "SCAN"
            with m.State("SCAN"):
                m.d.comb += [self.seek.eq(1), self.rp_start.eq(1)]
                m.d.sync += [have_best.eq(0), j.eq(0)]
                m.next = "WALK"
            with m.State("WALK"), m.If(self.rp_done):
                m.next = "SETTLE"
            with m.State("SETTLE"):     # the last score's comparison
                m.next = "LOW"
            with m.State("LOW"):
                m.d.comb += self.o.valid.eq(1)
                with m.If(self.o.ready & two_bytes):
                    m.next = "HIGH"
                with m.Elif(self.o.ready):
                    m.next = "NEXT"
            with m.State("HIGH"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(best_j[8:])]
                with m.If(self.o.ready):
                    m.next = "NEXT"
            with m.State("NEXT"):
                m.d.sync += [prev.eq(best), prev_j.eq(best_j), first.eq(0),
                             picks_left.eq(picks_left - 1), rest.eq(lane + pitch)]
                m.next = "SCAN"
                with m.If((picks_left == 1) & (samples_left == 1)):
                    m.d.comb += self.done.eq(1)
                    m.next = "IDLE"
                with m.Elif(picks_left == 1):
                    m.next = "ADVANCE"
            with m.State("ADVANCE"):
                # The next sample's first score: `pitch` lanes on, one word per `cols`.
                with m.If(rest >= cols):
                    m.d.sync += [rest.eq(rest - cols), self.word.eq(self.word + 1)]
                with m.Else():
                    m.d.sync += [lane.eq(rest), samples_left.eq(samples_left - 1)]
                    m.next = "SAMPLE"
        return m
