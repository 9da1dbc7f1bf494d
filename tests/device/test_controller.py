"""The controller alone, its program memory a Python list read as the accelerator reads it:
busy, each layer's start with its descriptor, the descriptor held while the layer runs, the
layers in order until the one marked ``last``, and the loop bounds, against a naive model of
the sequence, for random programs, batches and layer lengths."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import SMALL, random_bits

from hwgen.config import AcceleratorConfig
from hwgen.device.controller import Controller
from hwgen.memmap import descriptor_layout

CONFIG = AcceleratorConfig(rows=2, cols=3, **SMALL)


def random_program(rng, config, layers):
    """A program of ``layers`` descriptors (every field random, ``last`` on the last one only)
    and random words after it, as dicts."""
    layout = descriptor_layout(config)
    words = []
    for i in range(config.prog_depth):
        word = {name: random_bits(rng, layout.members[name].width) for name in layout.members}
        if i < layers:
            word["last"] = int(i == layers - 1)
        words.append(word)
    return words


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


def layout_const(layout, word):
    return layout.const(word).as_value().value


@pytest.mark.parametrize("registered_reads", [False, True], ids=["plain-reads", "registered"])
@pytest.mark.parametrize("registered_bounds", [False, True], ids=["bounds", "registered-bounds"])
def test_runs_a_program_layer_by_layer(registered_bounds, registered_reads):
    cfg = CONFIG
    dut = Controller(cfg, registered_bounds=registered_bounds)
    layout = descriptor_layout(cfg)
    bw = len(dut.batch)
    kw, nw = layout.members["k_tiles"].width, layout.members["n_tiles"].width
    rng = np.random.default_rng(2 * registered_bounds + registered_reads)
    stats = {"runs": 0, "layers": 0, "ignored_starts": 0}

    def as_word(word):
        return layout_const(layout, word)

    async def bench(ctx):
        mem = ProgramMemory(rng, registered=registered_reads)
        words = random_program(rng, cfg, 1)
        state, layer, batch, done_at = "idle", 0, None, None
        runs_left = 10
        cycle = 0
        while runs_left or state != "idle":
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

            # The model's outputs in this cycle.
            assert ctx.get(dut.busy) == (state != "idle"), (cycle, state)
            assert ctx.get(dut.start_layer) == (state == "decode"), (cycle, state)
            if state == "decode":
                assert ctx.get(dut.next_desc.as_value()) == as_word(words[layer])
                assert ctx.get(dut.prog_addr) == layer
            if state != "idle":
                assert ctx.get(dut.batch) == batch
            # The bounds: valid from FETCH (from DECODE in registers).
            if state in ("decode", "run") or (state == "fetch" and
                                              (layer > 0 or not registered_bounds)):
                assert ctx.get(dut.last_row) == (batch - 1) % (1 << bw)
                assert ctx.get(dut.before_last_row) == (batch - 2) % (1 << bw)
            # The running layer's descriptor and tiles, until the next one is decoded.
            shown = layer if state == "run" else layer - 1
            if state != "idle" and shown >= 0:
                want = words[shown]
                assert ctx.get(dut.desc.as_value()) == as_word(want), (cycle, state, layer)
                assert ctx.get(dut.k_end) == (want["k_tiles"] - 1) % (1 << kw)
                assert ctx.get(dut.n_end) == (want["n_tiles"] - 1) % (1 << nw)

            mem.clock(words, ctx.get(dut.busy), ctx.get(dut.prog_addr))
            await ctx.tick()
            cycle += 1
            if state == "idle":
                if start:
                    state, layer, batch = "fetch", 0, batch_in
                    stats["runs"] += 1
                    runs_left -= 1
                elif rng.random() < 0.2:
                    # The host writes another program while idle.
                    words = random_program(rng, cfg, int(rng.integers(1, cfg.prog_depth + 1)))
            else:
                stats["ignored_starts"] += start
                if state == "fetch":
                    state = "decode"
                elif state == "decode":
                    state, done_at = "run", cycle + int(rng.choice([0, 0, 1, 2, 5]))
                    stats["layers"] += 1
                elif done:
                    state = "idle" if words[layer]["last"] else "fetch"
                    layer += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert stats["runs"] == 10 and stats["layers"] > 15 and stats["ignored_starts"] > 3


def test_a_layer_marked_last_ends_the_run_at_any_word():
    """Programs of every length up to the memory's depth, the last one filling it: each run
    takes exactly its layers, and the next run starts from word 0."""
    cfg = CONFIG
    dut = Controller(cfg)
    layout = descriptor_layout(cfg)
    rng = np.random.default_rng(9)
    seen = []

    async def bench(ctx):
        for layers in range(1, cfg.prog_depth + 1):
            words = random_program(rng, cfg, layers)
            ctx.set(dut.start, 1)
            ctx.set(dut.batch_in, layers)
            addr = None
            decoded = []
            for _ in range(20 * cfg.prog_depth):
                if addr is not None:
                    ctx.set(dut.prog_data, words[addr])
                ctx.set(dut.layer_done, ctx.get(dut.busy) and not ctx.get(dut.start_layer))
                if ctx.get(dut.start_layer):
                    decoded.append(ctx.get(dut.next_desc.as_value()))
                addr = ctx.get(dut.prog_addr) if ctx.get(dut.busy) else 0
                await ctx.tick()
                ctx.set(dut.start, 0)
                if not ctx.get(dut.busy):
                    break
            seen.append((decoded, [layout_const(layout, w) for w in words[:layers]]))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(seen) == cfg.prog_depth
    for decoded, want in seen:
        assert decoded == want
