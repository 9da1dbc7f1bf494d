"""The activation feeder alone, its banks Python dicts read as the accelerator reads them: the
rows of every chunk, output tile, reduction tile and output pixel (:func:`support.walk_rows`),
of plain layers over rows and of spatial layers over images, with each row's elements in
engine lane order and zeros past a pixel's words or for a pixel in the padding, ``last`` on each
pass's last row, exactly the words of each row read (none past its pixel, none of a padding
pixel), ``more_chunks`` at each chunk's end, a requantized layer's last-tile rows spaced as the
requantization takes them, under random backpressure; plain and registered reads give the same
rows in the same cycles. The controller's ``prime`` lasts two cycles (PRIME, PRIME2). A device
without spatial layers (``spatial=False``) feeds plain layers the same way."""

import itertools
import math

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import (
    SMALL,
    ControllerOutputs,
    ReadPortModel,
    descriptor,
    each_once,
    plain_geometry,
    random_bits,
    random_image_layer,
    walk_rows,
)

from hwgen.config import AcceleratorConfig
from hwgen.device.activation_feeder import ActivationFeeder
from hwgen.device.controller import geometry_lead
from hwgen.implementation import Implementation, Registers

POISON = -99       # what a bank reads past its end (outside every test's value range)
MAX_ROWS = 250     # rows of a random image layer


def _config(shape, post_lanes=None, acc_depth=SMALL["acc_depth"], spatial=True):
    return AcceleratorConfig(rows=shape[0], cols=shape[1], post_lanes=post_lanes,
                             in_bits=8, spatial=spatial,
                             **{**SMALL, "act_depth": 64, "acc_depth": acc_depth})


def plain_layer(rng, config, batch, *, past_end=False):
    """A matrix layer over ``batch`` rows of ``K`` features, ``ceil(K / lanes)`` words or a
    word more apart, somewhere in the banks (now and then ending at their last word), with
    random fields the feeder must not use. ``past_end``: a ``K`` whose last reduction tile
    ends past the row's last word, if there is one."""
    lanes, rows = config.act_lanes, config.rows
    ks = range(1, 4 * rows + 2)
    beyond = [k for k in ks if math.ceil(k / rows) * rows > math.ceil(k / lanes) * lanes]
    first = past_end and beyond
    k = int(rng.choice(beyond if first else ks))
    stride = math.ceil(k / lanes) + (0 if first else int(rng.choice([0, 0, 1])))
    top = config.act_depth - batch * stride
    base = top if rng.random() < 0.25 else int(rng.integers(0, top + 1))
    return descriptor(
        config, k_tiles=math.ceil(k / rows), n_tiles=int(rng.integers(1, 4)),
        src_base=base, src_stride=stride, raw=int(rng.random() < 0.4),
        leaky=int(rng.integers(2)), n=random_bits(rng, 3), dst_base=random_bits(rng, 5),
        dst_stride=random_bits(rng, 3), w_base=random_bits(rng, 5),
        p_base=random_bits(rng, 3)), None


def random_runs(rng, config, count):
    """``count`` runs of 1..5 rows (images) and 1..3 layers, plain and spatial (small images,
    several chunks where ``acc_depth`` is small); the first layer is plain and, where a
    reduction tile can end past a row's last word, does; the second has padding. A device
    without spatial layers gets plain layers only, on up to ``acc_depth`` rows."""
    runs = []
    for r in range(count):
        most = 5 if config.spatial else config.acc_depth
        batch = int(rng.integers(1, min(most, config.acc_depth) + 1))
        layers = []
        for i in range(int(rng.integers(2 if r == 0 else 1, 4))):
            first, padded = r == 0 and i == 0, r == 0 and i == 1
            if first or not config.spatial or (not padded and rng.random() < 0.4):
                layers.append(plain_layer(rng, config, batch, past_end=first))
            else:
                while True:     # one small enough to keep the module quick
                    desc, geom = random_image_layer(rng, config, batch, max_side=3,
                                                    max_channels=2 * config.act_lanes,
                                                    pad=1 if padded else None)
                    if len(walk_rows(config, desc, geom, batch)) <= MAX_ROWS:
                        break
                layers.append((desc, geom))
        runs.append((batch, layers))
    return runs


def expected_row(banks, row):
    """Engine lane ``i``'s element of ``row`` (zero where it reads as zero), and ``last``."""
    return [0 if lane is None else banks[lane[0]][lane[1]] for lane in row.lanes], int(row.last)


class ReadChecker:
    """Checks each cycle's bank reads: the words of the row being read, exactly.

    The walker's rows of a chunk are there from the cycle after the two of ``prime``; the
    feeder takes one whenever ``rd_take`` is high. Plain reads read a row in the cycle it is
    taken; registered reads read, in each cycle, the row that is next after it (from the last
    cycle of ``prime`` on)."""

    def __init__(self, registered, staged=False):
        self.registered, self.staged = registered, staged
        self.rows, self.next, self.primed = [], 0, False
        self.filling = False    # staged rows: the cycle after prime fills the walker's cur
        self.checked = 0

    def start(self, rows):
        self.rows, self.next, self.primed = rows, 0, False

    def cycle(self, reads, take, pulse, phase):
        """``reads``: ``{bank: address}`` enabled in this cycle; ``phase``: the cycle of
        ``prime`` (1, 2), 0 outside it."""
        if pulse in ("start_layer", "start_chunk"):
            self.rows = []
        last_prime = phase == ControllerOutputs.PRIME_CYCLES
        if self.staged:
            last_prime, self.filling = self.filling, last_prime
        taken = take and self.primed and self.next < len(self.rows)
        if self.registered:
            ahead = self.next + taken
            ready = self.primed or last_prime
            want = self.rows[ahead].reads if ready and ahead < len(self.rows) else {}
        else:
            want = self.rows[self.next].reads if taken else {}
        assert reads == want, (self.next, phase, reads, want)
        self.checked += bool(want)
        self.next += taken
        self.primed = self.primed or last_prime


def run_feeder(config, level, runs, ready, *, seed):
    """Run ``runs`` as the controller would (FETCH and DECODE, LOAD, PRIME and PRIME2, the
    chunk, its results, NEXT and PRIME for the next chunk, ...), each step a few cycles after
    the previous chunk's rows all left; return the ``(cycle, chunk, data, last)`` of every row
    taken by the engine (chunks numbered across layers), each chunk's first ``prime`` cycle and
    rows, the stream of every cycle and the banks' contents. ``level``: the device's register
    level (registered reads from ``Registers.READS`` on, the walker's staged rows from
    ``Registers.ARRAY`` on with one requantization step, each chunk's first row a cycle
    later)."""
    dut = ActivationFeeder(config, Implementation(registers=level))
    registered = level >= Registers.READS
    lanes = config.act_lanes
    rng = np.random.default_rng(seed)
    banks = [{a: int(v) for a, v in enumerate(rng.integers(-128, 128, config.act_depth))}
             for _ in range(lanes)]
    ports = [ReadPortModel(bank, registered=registered, poison=POISON) for bank in banks]
    checker = ReadChecker(registered, _staged(config, level))
    sent, primes, chunks, stream = [], [], [], []
    # The controller's steps: ("wait", ...) a gap, then what it pulses once the chunk before
    # has left.
    steps = []
    for batch, layers in runs:
        for i, (desc, geom) in enumerate(layers):
            rows = walk_rows(config, desc, geom or plain_geometry(desc), batch)
            count = rows[-1].chunk + 1
            # GEOM's last cycles: a spatial layer's descriptor and geometry already hold.
            ahead = geometry_lead(config) if geom is not None else 0
            steps += [("wait", None), *[("ahead", (desc, geom))] * ahead,
                      ("start_layer", (desc, geom, batch if i == 0 else None))]
            for c in range(count):
                part = [r for r in rows if r.chunk == c]
                if c:
                    steps.append(("start_chunk", None))
                steps += [("prime", (part, desc)), ("results", c < count - 1)]
            steps.append(("end_layer", None))
        steps.append(("end_run", None))

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng)
        pending = list(steps)
        left, wait, more = 0, 0, None
        for r in ready:
            if not (pending or left or wait):
                break
            pulse, layer = None, {}
            while not left and not wait and pending:
                what, arg = pending.pop(0)
                if what == "wait":
                    wait, more = int(rng.integers(1, 4)), None
                elif what == "results":
                    wait, more = int(rng.integers(2, 5)), arg
                elif what in ("end_layer", "end_run"):
                    getattr(ctrl, what)()
                elif what == "ahead":
                    desc, geom = arg
                    layer = {"desc": desc, "geom": geom}
                    break
                else:
                    pulse, more = what, None
                    if what == "start_layer":
                        desc, geom, batch = arg
                        layer = {"desc": desc, "geom": geom, "batch": batch}
                    elif what == "prime":
                        part, desc = arg
                        left = len(part)
                        primes.append(len(stream))
                        chunks.append((part, desc))
                        checker.start(part)
                    break
            phase = ctrl.drive(ctx, pulse, **layer)
            ctx.set(dut.o_act.ready, r)
            if more is not None:
                assert ctx.get(dut.more_chunks) == more, len(stream)
            valid = ctx.get(dut.o_act.valid)
            payload = ctx.get(dut.o_act.payload)
            row = ([payload.data[i] for i in range(config.rows)], payload.last)
            stream.append((valid, r, row if valid else None))
            if valid and r:
                assert left, (len(stream) - 1, "a row after the chunk's last")
                sent.append((len(stream) - 1, len(chunks) - 1, *row))
                left -= 1
            elif not left and wait and pulse is None:
                wait -= 1
            en = ctx.get(dut.rd_en)
            take = ctx.get(dut.rd_take)
            addr = ctx.get(dut.rd_addr)
            checker.cycle({b: addr[b] for b in range(lanes) if en >> b & 1}, take, pulse, phase)
            words = [port.clock(addr[b], en >> b & 1, take=take)
                     for b, port in enumerate(ports)]
            if "prime_next" in dut.signature.members:
                # The controller's prime_next: the next cycle's prime, as this one leaves.
                ctx.set(dut.prime_next, int(ctrl.priming > 0 or _primes_next(pending, left,
                                                                             wait)))
            await ctx.tick()
            ctx.set(dut.rd_data, words)
        assert not pending and not left, "the runs did not finish in time"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert checker.checked > 0
    return sent, primes, chunks, stream, banks


def _primes_next(pending, left, wait):
    """Whether the bench's next cycle starts a chunk's ``prime``: nothing left to take nor to
    wait for, and a prime next among its steps (the end of a layer or run takes no cycle)."""
    steps = (what for what, _ in pending if what not in ("end_layer", "end_run"))
    return not left and not wait and next(steps, None) == "prime"


def check_rows(sent, chunks, banks):
    """The rows the engine took are the model's, in order; return how many of their lanes
    read as zero."""
    want = [(c, *expected_row(banks, row)) for c, (part, _) in enumerate(chunks)
            for row in part]
    got = [(c, data, last) for _, c, data, last in sent]
    assert len(got) == len(want)
    for n, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, (n, g, w)
    return sum(lane is None for part, _ in chunks for row in part for lane in row.lanes)


def check_stream(stream):
    """A row offered and not taken is offered again, unchanged, in the next cycle."""
    for c, (valid, ready, row) in enumerate(stream[:-1]):
        if valid and not ready:
            assert stream[c + 1][0] and stream[c + 1][2] == row, c


def check_spacing(config, sent, chunks):
    """After a row of a requantized layer's last reduction tile, the next row of its chunk
    enters no sooner than ``requant_steps`` cycles later; return how many were spaced."""
    finals = [row.final and not desc["raw"] for part, desc in chunks for row in part]
    spaced = 0
    for n, ((cycle, c, _, _), (next_cycle, next_c, _, _)) in enumerate(itertools.pairwise(sent)):
        if finals[n] and c == next_c:
            assert next_cycle - cycle >= config.requant_steps, n
            spaced += 1
    return spaced


CASES = {
    # (shape, post_lanes, acc_depth[, spatial]): rows < lanes (rotated; tiles ending inside a
    # word where rows do not divide lanes), rows == lanes, one bank; several requantization
    # steps with and without rotation, with fewer banks than columns (max(rows, post_lanes));
    # chunks of a few pixels; devices without spatial layers (plain layers on up to acc_depth
    # rows). (rows > lanes cannot be: there are at least rows banks.)
    "2x3": ((2, 3), None, 16),
    "3x2-acc4": ((3, 2), None, 4),
    "1x1-acc1": ((1, 1), None, 1),
    "1x4": ((1, 4), None, 16),
    "2x4-steps2-acc5": ((2, 4), 2, 5),
    "4x2-steps2": ((4, 2), 1, 16),
    "3x6-steps3-acc3": ((3, 6), 2, 3),
    "2x5-acc7": ((2, 5), None, 7),
    "3x4-steps2": ((3, 4), 2, 16),
    "2x3-rows": ((2, 3), None, 16, False),
    "2x6-steps2-acc7-rows": ((2, 6), 3, 7, False),
}


def _staged(config, level):
    """Whether the feeder's walker stages its rows: from ``Registers.ARRAY`` on, where its step
    is a register (one requantization step)."""
    return level >= Registers.ARRAY and config.requant_steps == 1


#: The register levels whose feeders differ (``Registers.HOST`` adds nothing to the feeder).
LEVELS = [Registers.NONE, Registers.READS, Registers.ARRAY]


@pytest.mark.parametrize("level", LEVELS, ids=["plain", "registered", "staged"])
@pytest.mark.parametrize("case", list(CASES))
def test_rows_back_to_back(case, level):
    """With the engine always ready: every row as the model says; a chunk's first row three
    cycles after its first ``prime`` (PRIME2, a read, then the row; four with the walker's
    staged rows, which it has with the skid: one requantization step, as the feeder states to
    the cycle model), then one row per cycle, but ``requant_steps`` cycles after a
    requantized layer's last-tile row."""
    cfg = _config(*CASES[case])
    rng = np.random.default_rng(len(case))
    runs = random_runs(rng, cfg, 3)
    sent, primes, chunks, _, banks = run_feeder(cfg, level, runs, [1] * 4000, seed=5)
    check_rows(sent, chunks, banks)
    fill = _staged(cfg, level)
    assert fill == ActivationFeeder.first_row_for(cfg, Implementation(registers=level))
    for c, ((part, desc), prime) in enumerate(zip(chunks, primes, strict=True)):
        cycles = [cycle for cycle, i, _, _ in sent if i == c]
        want = [prime + ControllerOutputs.PRIME_CYCLES + 1 + fill]
        for row in part[:-1]:
            want.append(want[-1] + (cfg.requant_steps if row.final and not desc["raw"] else 1))
        assert cycles == want, c


# Each shape once by default, at one of the two backpressures (alternating; the other with
# ``-m slow``): how often the array refuses a row does not depend on the shape.
@pytest.mark.parametrize(("case", "p_ready"), each_once(CASES, [0.35, 0.75]))
def test_rows_under_backpressure(case, p_ready):
    """Under random backpressure: the same rows, the requantized rows spaced, a refused row
    held; registered reads give the same rows in the same cycles as plain ones (staged rows the
    same rows, checked by cycle against their reads); lanes past a pixel's words or of a
    padding pixel read as zeros."""
    cfg = _config(*CASES[case])
    rng = np.random.default_rng(len(case) + int(p_ready * 100))
    runs = random_runs(rng, cfg, 3)
    ready = [int(v) for v in rng.random(8000) < p_ready]
    results = [run_feeder(cfg, level, runs, ready, seed=6) for level in LEVELS]
    for sent, _, chunks, stream, banks in results:
        zeros = check_rows(sent, chunks, banks)
        assert zeros > 0
        check_stream(stream)
        assert check_spacing(cfg, sent, chunks) > 0
    assert results[0][0] == results[1][0]
