"""The activation feeder alone, its banks Python dicts read as the accelerator reads them: the
rows of every (output tile, reduction tile, batch row) with the lanes rotated into place and
zeros past a row's end, ``last`` on a batch's last row, exactly the words of each row read (none
past its end), a requantized layer's last-tile rows spaced as the requantization takes them,
under random backpressure; plain and registered reads give the same rows in the same cycles."""

import itertools
import math

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import SMALL, ControllerOutputs, ReadPortModel, descriptor, random_bits

from hwgen.config import AcceleratorConfig
from hwgen.device.activation_feeder import ActivationFeeder

POISON = -99       # what a bank reads past its end (outside every test's value range)


def _config(shape, post_lanes=None):
    return AcceleratorConfig(rows=shape[0], cols=shape[1], post_lanes=post_lanes,
                             in_bits=8, **{**SMALL, "act_depth": 64})


def random_runs(rng, config, count):
    """``count`` runs of 1..5 rows and 1..3 layers; each layer's rows of ``K`` elements are
    ``ceil(K / lanes)`` words or a word more apart, somewhere in the banks (now and then ending
    at the banks' last word), with random fields the feeder must not use. Where a reduction
    tile can end past a row's last word, the first layer's does."""
    lanes, rows = config.act_lanes, config.rows
    ks = range(1, 4 * rows + 2)
    past_end = [k for k in ks if math.ceil(k / rows) * rows > math.ceil(k / lanes) * lanes]
    runs = []
    for r in range(count):
        batch = int(rng.integers(1, 6))
        layers = []
        for i in range(int(rng.integers(1, 4))):
            first = r == 0 and i == 0 and past_end
            k = int(rng.choice(past_end if first else ks))
            stride = math.ceil(k / lanes) + (0 if first else int(rng.choice([0, 0, 1])))
            top = config.act_depth - batch * stride
            base = top if rng.random() < 0.25 else int(rng.integers(0, top + 1))
            layers.append(descriptor(
                config, k_tiles=math.ceil(k / rows), n_tiles=int(rng.integers(1, 4)),
                src_base=base, src_stride=stride, raw=int(rng.random() < 0.4),
                relu=int(rng.integers(2)), n=random_bits(rng, 3), dst_base=random_bits(rng, 5),
                dst_stride=random_bits(rng, 3), w_base=random_bits(rng, 5),
                p_base=random_bits(rng, 3)))
        runs.append((batch, layers))
    return runs


def tile_rows(config, desc, batch):
    """The layer's rows in the order they must leave, each ``(row, tile position, final)``:
    ``row`` the ``(m, k0)`` of the tile's row, ``final`` whether it is of the last reduction
    tile."""
    for _nt in range(desc["n_tiles"]):
        for kt in range(desc["k_tiles"]):
            for m in range(batch):
                yield m, kt * config.rows, kt == desc["k_tiles"] - 1


def bank_words(config, desc, m, k0):
    """``{bank: address}`` of the words a row's tile reads: bank ``b`` holds the tile's element
    at word ``k0 // lanes + (b < k0 % lanes)`` of the row, read only while within the row."""
    lanes, stride = config.act_lanes, desc["src_stride"]
    kword, krem = divmod(k0, lanes)
    start = desc["src_base"] + m * stride
    return {b: start + kword + (b < krem) for b in range(lanes) if kword + (b < krem) < stride}


def expected_payload(config, banks, desc, *, batch, m, k0):
    """Engine lane ``i`` is element ``k0 + i`` of the row, zero past the row's end."""
    lanes, stride = config.act_lanes, desc["src_stride"]
    start = desc["src_base"] + m * stride
    data = []
    for i in range(config.rows):
        word, bank = divmod(k0 + i, lanes)
        data.append(banks[bank][start + word] if word < stride else 0)
    return data, int(m == batch - 1)


class ReadChecker:
    """Checks each cycle's bank reads: the words of the row being read, exactly, and while no row
    is (after a layer's last), only words of the layer's input area.

    Plain reads happen in the cycle a row is taken (every such cycle reads at least the tile's
    first word); registered reads address the row of the next cycle, which is the next row once
    ``rd_take`` has taken this one."""

    def __init__(self, config, registered):
        self.config = config
        self.registered = registered
        self.rows, self.desc, self.batch, self.next = [], None, None, 0
        self.checked = 0

    def start(self, desc, batch):
        self.rows = list(tile_rows(self.config, desc, batch))
        self.desc, self.batch, self.next = desc, batch, 0

    def cycle(self, reads, take, *, starting):
        """``reads``: ``{bank: address}`` enabled in this cycle."""
        if self.desc is None or (starting and not self.registered):
            return
        if self.registered and take and not starting:
            self.next = min(self.next + 1, len(self.rows))
        if self.next < len(self.rows):
            m, k0, _ = self.rows[self.next]
            if self.registered or reads:
                assert reads == bank_words(self.config, self.desc, m, k0), (self.next, reads)
                self.checked += 1
                if not self.registered:
                    self.next += 1
        else:
            lo = self.desc["src_base"]
            hi = lo + self.batch * self.desc["src_stride"]
            assert all(lo <= a < hi for a in reads.values()), reads


def run_feeder(config, registered, runs, ready, *, seed):
    """Run ``runs`` as the controller would: each layer starts a few cycles after the previous
    one's rows all left, each run's ``busy`` a few cycles after its last layer's; return the
    ``(cycle, layer index, data, last)`` of every row taken by the engine, the cycles at which
    each layer started, and the banks' contents."""
    dut = ActivationFeeder(config, registered_reads=registered)
    lanes = config.act_lanes
    rng = np.random.default_rng(seed)
    banks = [{a: int(v) for a, v in enumerate(rng.integers(-128, 128, config.act_depth))}
             for _ in range(lanes)]
    ports = [ReadPortModel(bank, registered=registered, poison=POISON) for bank in banks]
    checker = ReadChecker(config, registered)
    sent, starts, stream = [], [], []
    layers = [(batch, desc, i == 0) for batch, descs in runs for i, desc in enumerate(descs)]

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng)
        pending = list(layers)
        busy, wait, left, index = 0, 2, 0, -1
        last_of_run = True
        for r in ready:
            start = None
            if not left and not wait:
                if not busy and not pending:
                    break
                if busy and last_of_run:
                    busy, wait = 0, int(rng.integers(1, 4))    # the run ends
                    ctrl.end_run()
                elif not busy:
                    busy, wait = 1, 1                         # FETCH, then DECODE
                    last_of_run = False
                else:
                    batch, start, first = pending.pop(0)
                    index += 1
                    left = sum(1 for _ in tile_rows(config, start, batch))
                    last_of_run = not pending or pending[0][2]
                    starts.append(len(stream))
                    checker.start(start, batch)
            ctrl.drive(ctx, start, batch=batch if start is not None and first else None)
            ctx.set(dut.busy, busy)
            ctx.set(dut.o_act.ready, r)
            valid = ctx.get(dut.o_act.valid)
            payload = ctx.get(dut.o_act.payload)
            row = ([payload.data[i] for i in range(config.rows)], payload.last)
            stream.append((valid, r, row if valid else None))
            if valid and r:
                sent.append((len(stream) - 1, index, *row))
                left -= 1
                if not left:
                    wait = int(rng.integers(2, 5))
            elif not left and wait:
                wait -= 1
            en = ctx.get(dut.rd_en)
            take = ctx.get(dut.rd_take)
            reads = {b: ctx.get(dut.rd_addr[b]) for b in range(lanes) if en >> b & 1}
            if busy:
                checker.cycle(reads, take, starting=start is not None)
            words = [port.clock(ctx.get(dut.rd_addr[b]), en >> b & 1, take=take)
                     for b, port in enumerate(ports)]
            await ctx.tick()
            ctx.set(dut.rd_data, words)
        assert not pending and not left, "the runs did not finish in time"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert checker.checked > 0
    return sent, starts, stream, banks, layers


def check_rows(config, sent, banks, layers):
    """The rows the engine took are the model's, in order; return how many of their lanes lay
    past their row's end."""
    want = []
    past = 0
    for i, (batch, desc, _) in enumerate(layers):
        for m, k0, _ in tile_rows(config, desc, batch):
            data, last = expected_payload(config, banks, desc, batch=batch, m=m, k0=k0)
            want.append((i, data, last))
            past += sum((k0 + j) // config.act_lanes >= desc["src_stride"]
                        for j in range(config.rows))
    got = [(i, data, last) for _, i, data, last in sent]
    assert len(got) == len(want)
    for n, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, (n, g, w)
    # A tile that ends inside a row's last word meets the next word (zeros) where it can:
    # where the tiles' rows do not divide the banks.
    assert (past > 0) == (config.act_lanes % config.rows != 0)
    return past


def check_stream(stream):
    """A row offered and not taken is offered again, unchanged, in the next cycle."""
    for c, (valid, ready, row) in enumerate(stream[:-1]):
        if valid and not ready:
            assert stream[c + 1][0] and stream[c + 1][2] == row, c


def check_spacing(config, sent, layers):
    """After a row of a requantized layer's last reduction tile, the next row enters no sooner
    than ``requant_steps`` cycles later."""
    finals = {(i, n): final and not layers[i][1]["raw"]
              for i, (batch, desc, _) in enumerate(layers)
              for n, (_, _, final) in enumerate(tile_rows(config, desc, batch))}
    counts = {}
    spaced = 0
    for (cycle, i, _, _), (next_cycle, _, _, _) in itertools.pairwise(sent):
        n = counts[i] = counts.get(i, -1) + 1
        if finals[i, n]:
            assert next_cycle - cycle >= config.requant_steps
            spaced += 1
    return spaced


CASES = {
    # (shape, post_lanes): rows < lanes (rotated; tiles ending inside a word where rows do not
    # divide lanes), rows == lanes, one bank; several requantization steps with and without
    # rotation. (rows > lanes cannot be: there are max(rows, cols) banks.)
    "2x3": ((2, 3), None),
    "3x2": ((3, 2), None),
    "1x1": ((1, 1), None),
    "1x4": ((1, 4), None),
    "2x4-steps2": ((2, 4), 2),
    "4x2-steps2": ((4, 2), 1),
    "3x6-steps3": ((3, 6), 2),
    "2x5": ((2, 5), None),
    "3x4-steps2": ((3, 4), 2),
}


@pytest.mark.parametrize("registered", [False, True], ids=["plain", "registered"])
@pytest.mark.parametrize("case", list(CASES))
def test_rows_back_to_back(case, registered):
    """With the engine always ready: every row as the model says; the layer's first row two
    cycles after its start (a read, then the row), then one row per cycle, but
    ``requant_steps`` cycles after a requantized layer's last-tile row."""
    cfg = _config(*CASES[case])
    rng = np.random.default_rng(len(case))
    runs = random_runs(rng, cfg, 3)
    sent, starts, _, banks, layers = run_feeder(cfg, registered, runs, [1] * 3000, seed=5)
    check_rows(cfg, sent, banks, layers)
    for i, (batch, desc, _) in enumerate(layers):
        cycles = [c for c, layer, _, _ in sent if layer == i]
        want = [starts[i] + 2]
        for _, _, final in list(tile_rows(cfg, desc, batch))[:-1]:
            want.append(want[-1] + (cfg.requant_steps if final and not desc["raw"] else 1))
        assert cycles == want, i


@pytest.mark.parametrize("p_ready", [0.75, 0.35])
@pytest.mark.parametrize("case", list(CASES))
def test_rows_under_backpressure(case, p_ready):
    """Under random backpressure: the same rows, the requantized rows spaced, a refused row
    held; registered reads give the same rows in the same cycles as plain ones."""
    cfg = _config(*CASES[case])
    rng = np.random.default_rng(len(case) + int(p_ready * 100))
    runs = random_runs(rng, cfg, 3)
    ready = [int(v) for v in rng.random(6000) < p_ready]
    results = [run_feeder(cfg, registered, runs, ready, seed=6) for registered in (False, True)]
    for sent, _, stream, banks, layers in results:
        check_rows(cfg, sent, banks, layers)
        check_stream(stream)
        spaced = check_spacing(cfg, sent, layers)
        assert spaced > 0
    assert results[0][0] == results[1][0]
