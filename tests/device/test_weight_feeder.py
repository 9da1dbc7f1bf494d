"""The weight feeder alone, its memory a Python dict read as the accelerator reads it: each
layer's words ``w_base ..`` in order, each once and nothing after, under random backpressure on
``o_weight``, plain and with registered reads (which must give the same rows in the same
cycles)."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import SMALL, ControllerOutputs, ReadPortModel, descriptor, random_bits

from hwgen.config import AcceleratorConfig
from hwgen.device.weight_feeder import WeightFeeder


def _config(shape):
    return AcceleratorConfig(rows=shape[0], cols=shape[1], **SMALL)


def random_layers(rng, config, count):
    """Descriptors of ``count`` layers of 1..3 reduction and output tiles, their weights
    anywhere in the memory (the last one ending at its last word)."""
    layers = []
    for i in range(count):
        k_tiles, n_tiles = (int(v) for v in rng.integers(1, 4, 2))
        words = k_tiles * n_tiles * config.rows
        top = config.weight_depth - words
        w_base = top if i == count - 1 else int(rng.integers(0, top + 1))
        layers.append(descriptor(config, k_tiles=k_tiles, n_tiles=n_tiles, w_base=w_base,
                                 **{f: random_bits(rng, 4) for f in ("n", "src_base",
                                                                     "dst_base", "p_base")}))
    return layers


def run_feeder(config, registered, layers, ready, *, seed):
    """Run ``layers`` one after the other, each started a few cycles after the previous one's
    last word left, with the engine's ``ready`` of each cycle from ``ready``; return the
    ``(cycle, layer, word)`` of every transfer and the layers' start cycles."""
    dut = WeightFeeder(config, registered_reads=registered)
    rng = np.random.default_rng(seed)     # the same random bits for both variants
    wbits = config.w_bits
    memory = {a: [int(v) for v in rng.integers(-(1 << (wbits - 1)), 1 << (wbits - 1),
                                               config.cols)]
              for a in range(config.weight_depth)}
    # Past the memory (an address the feeder may form once a layer's words are all read).
    port = ReadPortModel(memory, registered=registered, poison=[0] * config.cols)
    sent, starts = [], []

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng)
        pending = list(layers)
        left, idle, layer = 0, 2, -1
        for cycle, r in enumerate(ready):
            start = None
            if not left and not idle and pending:
                start = pending.pop(0)
                layer += 1
                left = start["k_tiles"] * start["n_tiles"] * config.rows
                starts.append(cycle)
            ctrl.drive(ctx, start)
            ctx.set(dut.o_weight.ready, r)
            if ctx.get(dut.o_weight.valid) and r:
                sent.append((cycle, layer, [ctx.get(dut.o_weight.payload[j])
                                            for j in range(config.cols)]))
                left -= 1
                if not left:
                    idle = 1 + int(rng.integers(0, 4))
            elif not left and idle:
                idle -= 1
            data = port.clock(ctx.get(dut.rd_addr), ctx.get(dut.rd_en) or registered,
                              take=ctx.get(dut.rd_en))
            await ctx.tick()
            ctx.set(dut.rd_data, data)
        assert not pending, "the layers did not finish in time"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return sent, starts, memory


def check_words(config, layers, sent, memory):
    """Every layer's words in order, each once, nothing else."""
    want = [(i, memory[d["w_base"] + w]) for i, d in enumerate(layers)
            for w in range(d["k_tiles"] * d["n_tiles"] * config.rows)]
    assert [(layer, word) for _, layer, word in sent] == want


SHAPES = [(2, 3), (3, 2), (1, 1), (4, 2)]


@pytest.mark.parametrize("registered", [False, True], ids=["plain", "registered"])
@pytest.mark.parametrize("shape", SHAPES)
def test_words_in_order_back_to_back(shape, registered):
    """With the engine always ready, a layer's words leave one per cycle from the second cycle
    after its start (a read, then the word)."""
    cfg = _config(shape)
    rng = np.random.default_rng(shape[0] * 10 + shape[1])
    layers = random_layers(rng, cfg, 4)
    sent, starts, memory = run_feeder(cfg, registered, layers, [1] * 400, seed=1)
    check_words(cfg, layers, sent, memory)
    for i, start in enumerate(starts):
        cycles = [c for c, layer, _ in sent if layer == i]
        assert cycles == list(range(start + 2, start + 2 + len(cycles)))


@pytest.mark.parametrize("p_ready", [0.7, 0.3])
@pytest.mark.parametrize("shape", SHAPES)
def test_backpressure(shape, p_ready):
    """Under random backpressure each word still leaves once, in order; the registered reads
    (with their skid register) give the same words in the same cycles as the plain ones."""
    cfg = _config(shape)
    rng = np.random.default_rng(shape[0] * 10 + shape[1] + int(p_ready * 10))
    layers = random_layers(rng, cfg, 4)
    ready = [int(v) for v in rng.random(1500) < p_ready]
    results = [run_feeder(cfg, registered, layers, ready, seed=2)
               for registered in (False, True)]
    for sent, _, memory in results:
        check_words(cfg, layers, sent, memory)
    assert results[0][0] == results[1][0]


@pytest.mark.parametrize("registered", [False, True], ids=["plain", "registered"])
def test_nothing_after_the_last_word(registered):
    """A refused word is offered again, the same, until taken; after the layer's last word the
    stream stays empty however long the next layer takes to start."""
    cfg = _config((2, 3))
    layer = descriptor(cfg, k_tiles=2, n_tiles=2, w_base=10)
    dut = WeightFeeder(cfg, registered_reads=registered)
    rng = np.random.default_rng(3)
    port = ReadPortModel({a: [a % 7, a % 5, a % 3] for a in range(cfg.weight_depth)},
                         registered=registered, poison=[0, 0, 0])
    seen = []

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng)
        for cycle in range(60):
            ctrl.drive(ctx, layer if cycle == 1 else None)
            ready = int(cycle % 5 != 2)
            ctx.set(dut.o_weight.ready, ready)
            valid = ctx.get(dut.o_weight.valid)
            seen.append((valid, ready, ctx.get(dut.o_weight.payload.as_value())))
            data = port.clock(ctx.get(dut.rd_addr), ctx.get(dut.rd_en) or registered,
                              take=ctx.get(dut.rd_en))
            await ctx.tick()
            ctx.set(dut.rd_data, data)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    transfers = [c for c, (v, r, _) in enumerate(seen) if v and r]
    assert len(transfers) == 8
    assert [seen[c][2] for c in transfers] == [_packed(cfg, [a % 7, a % 5, a % 3])
                                               for a in range(10, 18)]
    assert not any(v for v, _, _ in seen[transfers[-1] + 1:])
    for c, (v, r, payload) in enumerate(seen[:-1]):
        if v and not r:
            assert seen[c + 1][0] and seen[c + 1][2] == payload


def _packed(cfg, lanes):
    """The word of ``lanes`` signed ``w_bits`` weights, lane 0 lowest."""
    return sum((v & ((1 << cfg.w_bits) - 1)) << (j * cfg.w_bits) for j, v in enumerate(lanes))
