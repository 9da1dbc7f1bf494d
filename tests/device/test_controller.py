"""The controller alone, its program memory a Python list read as the accelerator reads it:
busy, each layer's LOAD (``start_layer``) and two cycles of PRIME (``prime`` in PRIME and
PRIME2) after its descriptor and a spatial layer's geometry words (GEOM, three cycles each), the
descriptor and geometry held while the layer runs, a plain layer's 1x1 geometry, the chunks
(NEXT: ``start_chunk``, then PRIME, PRIME2) for as long as ``more_chunks`` says at
``layer_done``, the layers in order until the one marked ``last``, and the loop bounds, against
a naive model of the sequence, for random programs, batches, chunk counts and layer lengths.
A device without spatial layers (``spatial=False``) takes every descriptor as a plain layer's,
its ``spatial`` flag set or not, with no geometry words after it."""

import numpy as np
import pytest
from amaranth.lib import data
from amaranth.sim import Simulator
from support import SMALL, plain_geometry, random_bits

from hwgen.config import AcceleratorConfig
from hwgen.device.controller import Controller, geometry_lead
from hwgen.memmap import PassKind, descriptor_layout, geometry_layout, geometry_words

CONFIG = AcceleratorConfig(rows=2, cols=3, **{**SMALL, "prog_depth": 16})
#: The same without spatial layers.
PLAIN = AcceleratorConfig(rows=2, cols=3, spatial=False, **{**SMALL, "prog_depth": 16})
CONFIGS = {"spatial": CONFIG, "no-spatial": PLAIN}
#: Cycles GEOM spends on each geometry word (the word addressed two cycles before it is taken).
GEOM_CYCLES = 3


def random_program(rng, config, layers, *, spatial=None):
    """Return ``(words, starts)``: a program of ``layers`` descriptors as PROGRAM words (every
    field random, ``last`` on the last one only, a spatial layer's geometry words random raw
    words after it, if the device has spatial layers) followed by random words to the
    memory's end, and each layer's first word. ``spatial``: each layer's flag (random by
    default). The program must fit."""
    layout = descriptor_layout(config)
    width, count = layout.size, geometry_words(config)
    words, starts = [], []
    for i in range(layers):
        fields = {name: random_bits(rng, field.width) for name, field in layout}
        kinds = list(PassKind)   # a kind field holds one of them, not any bits
        fields["kind"] = kinds[fields["kind"] % len(kinds)].value
        fields["last"] = int(i == layers - 1)
        if spatial is not None:
            fields["spatial"] = int(spatial[i])
        starts.append(len(words))
        words.append(layout.const(fields).as_value().value)
        if fields["spatial"] and config.spatial:
            words += [random_bits(rng, width) for _ in range(count)]
    assert len(words) <= config.prog_depth, "the program does not fit"
    words += [random_bits(rng, width) for _ in range(config.prog_depth - len(words))]
    return words, starts


def fitting_program(rng, config, layers):
    """A random program of ``layers`` layers, as many of them spatial as fit (any number on a
    device without spatial layers, where they take no geometry words)."""
    if not config.spatial:
        return random_program(rng, config, layers)
    count = geometry_words(config)
    room = (config.prog_depth - layers) // count
    spatial = [int(rng.random() < 0.5) for _ in range(layers)]
    for i in np.flatnonzero(spatial)[room:]:
        spatial[i] = 0
    return random_program(rng, config, layers, spatial=spatial)


def expected_geometry(config, words, start):
    """The geometry of the layer at word ``start``: a spatial layer's from the words after its
    descriptor (the first one lowest, the bits past the layout dropped), as ``{field: value}``;
    a plain layer's (every layer's on a device without spatial layers) per
    :func:`support.plain_geometry`, wrapped to the fields' widths."""
    layout, glayout = descriptor_layout(config), geometry_layout(config)
    desc = data.Const(layout, words[start])
    if desc.spatial and config.spatial:
        width = layout.size
        bits = sum(words[start + 1 + j] << (j * width) for j in range(geometry_words(config)))
        const = data.Const(glayout, bits & ((1 << glayout.size) - 1))
        return {name: getattr(const, name) for name in glayout.members}
    plain = plain_geometry({"k_tiles": desc.k_tiles, "src_stride": desc.src_stride})
    return {name: value & ((1 << glayout.members[name].width) - 1)
            for name, value in plain.items()}


def geometry_seen(ctx, dut, fields):
    geom = ctx.get(dut.geom)
    return {name: getattr(geom, name) for name in fields}


class ProgramMemory:
    """The program memory as the accelerator reads it: plain, the word at the controller's
    address the cycle after (the host's address, here random, while idle); registered, a cycle
    later still, with the port reading word 0 while idle (the host does not read)."""

    def __init__(self, rng, *, registered):
        self.rng = rng
        self.registered = registered
        self.port = self.data = None

    def clock(self, words, busy, addr):
        if not busy:
            addr = 0 if self.registered else int(self.rng.integers(len(words)))
        word = words[addr]
        if self.registered:
            self.data, self.port = self.port, word
        else:
            self.data = word


class Sequence:
    """The naive model: the controller's state in each cycle, and how it moves on."""

    def __init__(self, config):
        self.config = config
        self.state, self.layer, self.addr, self.wait = "idle", 0, 0, 0
        self.words = self.starts = None

    def spatial(self):
        desc = data.Const(descriptor_layout(self.config), self.words[self.addr])
        return desc.spatial and self.config.spatial

    def advance(self, *, start, done, more):
        """Move on one clock edge: ``start`` (the host), ``done`` (``layer_done``) and
        ``more`` (``more_chunks``) as they were in the cycle."""
        s = self.state
        if s == "idle" and start:
            self.state, self.layer, self.addr = "fetch", 0, 0
        elif s == "fetch":
            self.state = "decode"
        elif s == "decode":
            self.state, self.wait = ("geom", 0) if self.spatial() else ("load", 0)
        elif s == "geom":
            self.wait += 1
            if self.wait == GEOM_CYCLES * geometry_words(self.config):
                self.state = "load"
        elif s in ("load", "next"):
            self.state = "prime"
        elif s == "prime":
            self.state = "prime2"
        elif s == "prime2":
            self.state = "run"
        elif s == "run" and done:
            desc = data.Const(descriptor_layout(self.config), self.words[self.addr])
            if more:
                self.state = "next"
            elif desc.last:
                self.state = "idle"
            else:
                self.state, self.layer = "fetch", self.layer + 1
                self.addr = self.starts[self.layer]


@pytest.mark.parametrize("registered_reads", [False, True], ids=["plain-reads", "registered"])
@pytest.mark.parametrize("registered_bounds", [False, True], ids=["bounds", "registered-bounds"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_runs_a_program_layer_by_layer(config, registered_bounds, registered_reads):
    cfg = CONFIGS[config]
    dut = Controller(cfg, registered_bounds=registered_bounds)
    layout = descriptor_layout(cfg)
    bw = len(dut.batch)
    kw, nw = layout.members["k_tiles"].width, layout.members["n_tiles"].width
    rng = np.random.default_rng(2 * registered_bounds + registered_reads + 4 * cfg.spatial)
    stats = {"runs": 0, "layers": 0, "spatial": 0, "flagged": 0, "chunks": 0,
             "ignored_starts": 0, "ahead": 0}

    async def bench(ctx):
        mem = ProgramMemory(rng, registered=registered_reads)
        model = Sequence(cfg)
        model.words, model.starts = fitting_program(rng, cfg, 1)
        batch, done_at, chunks_left = None, None, 0
        runs_left = 25
        cycle = 0
        while runs_left or model.state != "idle":
            state = model.state
            if mem.data is not None:
                ctx.set(dut.prog_data, mem.data)
            # The host: starts a run now and then while idle, and (ignored) while busy; its
            # batch request changes every cycle.
            start = int(rng.random() < (0.3 if state == "idle" and runs_left else 0.05))
            batch_in = int(rng.integers(1, cfg.acc_depth + 1))
            ctx.set(dut.start, start)
            ctx.set(dut.batch_in, batch_in)
            done = int(state == "run" and cycle == done_at)
            ctx.set(dut.layer_done, done)
            # Valid at layer_done only: random otherwise.
            more = int(chunks_left > 0) if done else int(rng.integers(2))
            ctx.set(dut.more_chunks, more)

            # The model's outputs in this cycle.
            where = (cycle, state, model.layer)
            assert ctx.get(dut.busy) == (state != "idle"), where
            pulses = (ctx.get(dut.start_layer), ctx.get(dut.prime), ctx.get(dut.start_chunk))
            assert pulses == (state == "load", state in ("prime", "prime2"),
                              state == "next"), where
            if state in ("fetch", "decode"):
                assert ctx.get(dut.prog_addr) == model.addr, where
            if state != "idle":
                assert ctx.get(dut.batch) == batch, where
            # The bounds: valid from FETCH (from DECODE in registers).
            if state != "idle" and (state != "fetch" or model.layer > 0
                                    or not registered_bounds):
                assert ctx.get(dut.last_row) == (batch - 1) % (1 << bw), where
            # The running layer's descriptor and geometry from LOAD on (a spatial layer's
            # from geometry_lead cycles before it), its tiles' bounds from PRIME on (from LOAD
            # without registered bounds).
            ahead = (state == "geom" and model.wait >= GEOM_CYCLES * geometry_words(cfg)
                     - geometry_lead(cfg))
            stats["ahead"] += ahead
            if ahead:
                assert ctx.get(dut.desc.as_value()) == model.words[model.addr], where
                geom = expected_geometry(cfg, model.words, model.addr)
                assert geometry_seen(ctx, dut, geom) == geom, where
            if state in ("load", "prime", "prime2", "run", "next"):
                want = data.Const(layout, model.words[model.addr])
                assert ctx.get(dut.desc.as_value()) == model.words[model.addr], where
                geom = expected_geometry(cfg, model.words, model.addr)
                assert geometry_seen(ctx, dut, geom) == geom, where
                if state != "load" or not registered_bounds:
                    assert ctx.get(dut.k_end) == (want.k_tiles - 1) % (1 << kw), where
                    assert ctx.get(dut.n_end) == (want.n_tiles - 1) % (1 << nw), where

            mem.clock(model.words, ctx.get(dut.busy), ctx.get(dut.prog_addr))
            kind_next, start_next = ctx.get(dut.kind_next), ctx.get(dut.start_layer_next)
            chunk_next = ctx.get(dut.start_chunk_next)
            await ctx.tick()
            cycle += 1
            # The next cycle's descriptor kind and starts (the units' registers take them).
            assert ctx.get(dut.desc.kind) == kind_next, where
            assert ctx.get(dut.start_layer) == start_next, where
            assert ctx.get(dut.start_chunk) == chunk_next, where
            model.advance(start=start, done=done, more=more)
            if state == "idle":
                if start:
                    batch = batch_in
                    stats["runs"] += 1
                    runs_left -= 1
                elif rng.random() < 0.2:
                    # The host writes another program while idle.
                    layers = int(rng.integers(1, 6))
                    model.words, model.starts = fitting_program(rng, cfg, layers)
            else:
                stats["ignored_starts"] += start
            if state == "decode":
                stats["layers"] += 1
                stats["spatial"] += model.state == "geom"
                stats["flagged"] += data.Const(layout, model.words[model.addr]).spatial
            if model.state == "run" and state != "run":
                done_at = cycle + int(rng.choice([0, 0, 1, 2, 5]))
            if state == "load":
                chunks_left = int(rng.choice([0, 0, 1, 2]))
            elif state == "next":
                chunks_left -= 1
                stats["chunks"] += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert stats["runs"] == 25 and stats["layers"] > 40 and stats["ignored_starts"] > 10
    assert stats["chunks"] > 10 and stats["flagged"] > 10
    if cfg.spatial:
        assert stats["spatial"] > 10
        assert stats["ahead"] >= stats["spatial"] * geometry_lead(cfg) > 0
    else:
        assert stats["spatial"] == stats["ahead"] == 0


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_layer_marked_last_ends_the_run_at_any_word(config):
    """Programs of every length up to the memory's depth (spatial and plain layers; the last
    program fills it): each run loads exactly its layers, each with its descriptor and
    geometry, primes each for the two cycles after its LOAD, and the next run starts from word
    0. Without spatial layers every descriptor is one word, its ``spatial`` flag random."""
    cfg = CONFIGS[config]
    dut = Controller(cfg)
    count = geometry_words(cfg) if cfg.spatial else 0
    rng = np.random.default_rng(9)
    seen = []

    async def bench(ctx):
        for length in range(1, cfg.prog_depth + 1):
            # Layers that take exactly `length` words: as many spatial ones as fit.
            spatial = []
            while sum(1 + count * s for s in spatial) < length:
                left = length - sum(1 + count * s for s in spatial)
                spatial.append(int(left >= 1 + count and rng.random() < 0.7))
            words, starts = random_program(rng, cfg, len(spatial), spatial=spatial)
            ctx.set(dut.start, 1)
            ctx.set(dut.batch_in, len(spatial))
            ctx.set(dut.layer_done, 1)
            addr = None
            loaded, loads, primes = [], [], []
            for cycle in range(20 * cfg.prog_depth):
                if addr is not None:
                    ctx.set(dut.prog_data, words[addr])
                if ctx.get(dut.start_layer):
                    loaded.append((ctx.get(dut.desc.as_value()), ctx.get(dut.geom.as_value())))
                    loads.append(cycle)
                if ctx.get(dut.prime):
                    primes.append(cycle)
                assert not ctx.get(dut.start_chunk)
                addr = ctx.get(dut.prog_addr) if ctx.get(dut.busy) else 0
                await ctx.tick()
                ctx.set(dut.start, 0)
                if not ctx.get(dut.busy):
                    break
            want = [(words[s], expected_geometry(cfg, words, s)) for s in starts]
            seen.append((loaded, want, primes == [c + i for c in loads for i in (1, 2)]))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(seen) == cfg.prog_depth
    for loaded, want, primed in seen:
        assert len(loaded) == len(want)
        assert primed
        for (desc, geom), (w_desc, w_geom) in zip(loaded, want, strict=True):
            assert desc == w_desc
            # The fields a plain layer's 1x1 walk uses (its other steps are free).
            fields = _fields(cfg, geom)
            assert {k: fields[k] for k in w_geom} == w_geom


def _fields(config, bits):
    const = data.Const(geometry_layout(config), bits)
    return {name: getattr(const, name) for name in geometry_layout(config).members}
