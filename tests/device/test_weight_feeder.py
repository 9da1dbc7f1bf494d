"""The weight feeder alone, its memory a Python dict read as the accelerator reads it: each
layer's words ``w_base ..`` in order, each once and nothing after (a layer whose geometry has
``wrep``: its first tile's ``rows`` words again for every tile; with ``wdiag``: each tile's
one word ``rows`` times, row ``i`` with every lane but ``i`` zero), again for each chunk of the
layer's output pixels (the controller's ``prime``, two cycles, restarts it), under random
backpressure on ``o_weight``, plain and with registered reads (which must give the same rows in
the same cycles)."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import SMALL, ControllerOutputs, ReadPortModel, descriptor, random_bits

from hwgen.config import AcceleratorConfig
from hwgen.device.weight_feeder import WeightFeeder


def _config(shape):
    return AcceleratorConfig(rows=shape[0], cols=shape[1], **SMALL)


def random_layers(rng, config, count):
    """``(descriptor, chunks, mode)`` of ``count`` layers of 1..3 reduction and output tiles
    and 1..3 chunks, every third from the second with one tile read for all (mode ``"wrep"``),
    every third from the third with a word a tile (``"wdiag"``), the others ``""``, their
    weights anywhere in the memory (the last one ending at its last word)."""
    layers = []
    for i in range(count):
        k_tiles, n_tiles = (int(v) for v in rng.integers(1, 4, 2))
        mode = ("", "wrep", "wdiag")[i % 3]
        words = {"wrep": config.rows, "wdiag": k_tiles * n_tiles}.get(
            mode, k_tiles * n_tiles * config.rows)
        top = config.weight_depth - words
        w_base = top if i == count - 1 else int(rng.integers(0, top + 1))
        desc = descriptor(config, k_tiles=k_tiles, n_tiles=n_tiles, w_base=w_base,
                          spatial=int(rng.integers(2)),
                          **{f: random_bits(rng, 4) for f in ("n", "src_base", "dst_base",
                                                              "p_base")})
        layers.append((desc, int(rng.integers(1, 4)), mode))
    return layers


def run_feeder(config, registered, layers, ready, *, seed, copies=1, pairs=False):
    """Run ``layers`` one after the other as the controller does (FETCH and DECODE, LOAD, then
    per chunk PRIME and PRIME2, the chunk, and NEXT for the next one), each step a few cycles
    after the previous chunk's last word left, with the engine's ``ready`` of each cycle from
    ``ready``; return the ``(cycle, chunk, word)`` of every transfer (chunks numbered across
    layers) and the first cycles of the chunks' ``prime``. With ``copies``, every copy of the
    memory's address and read is the first's from the first clock edge on. With ``pairs``
    each transfer is recorded as its rows (one or two, the second read on a second port model
    at ``rd_addr_b``), each with the transfer's cycle."""
    dut = WeightFeeder(config, registered_reads=registered, copies=copies, pairs=pairs)
    rng = np.random.default_rng(seed)     # the same random bits for both variants
    wbits = config.w_bits
    memory = {a: [int(v) for v in rng.integers(-(1 << (wbits - 1)), 1 << (wbits - 1),
                                               config.cols)]
              for a in range(config.weight_depth)}
    # Past the memory (an address the feeder may form once a layer's words are all read).
    port = ReadPortModel(memory, registered=registered, poison=[0] * config.cols)
    port_b = ReadPortModel(memory, registered=registered, poison=[0] * config.cols)
    sent, primes = [], []
    # What the controller does, step after step: (pulse, descriptor) once the chunk in flight
    # is over; "wait" marks a gap (FETCH, DECODE, GEOM, or the time the results take).
    steps = []
    for desc, chunks, mode in layers:
        steps += [("wait", None), ("start_layer", (desc, mode))]
        for c in range(chunks):
            steps += [("start_chunk", None)] if c else []
            steps += [("prime", None), ("wait", None)]
        steps.append(("end_layer", None))

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng, ports={"start": "prime"})
        pending = list(steps)
        left, idle, chunk, desc = 0, 0, -1, None
        for cycle, r in enumerate(ready):
            if not (pending or left or idle):
                break
            pulse = None
            while not left and not idle and pending:
                what, arg = pending.pop(0)
                if what == "wait":
                    idle = 1 + int(rng.integers(0, 4))
                elif what == "end_layer":
                    ctrl.end_layer()
                else:
                    pulse = what
                    if arg is not None:
                        desc, mode = arg
                        # the geometry's, held while the layer runs
                        ctx.set(dut.wrep, mode == "wrep")
                        ctx.set(dut.wdiag, mode == "wdiag")
                    if what == "prime":
                        chunk += 1
                        left = desc["k_tiles"] * desc["n_tiles"] * config.rows
                        primes.append(cycle)
                    break
            ctrl.drive(ctx, pulse, desc=desc if pulse == "start_layer" else None,
                       batch=1 if pulse == "start_layer" else None)
            ctx.set(dut.o_weight.ready, r)
            if ctx.get(dut.o_weight.valid) and r:
                assert left, (cycle, "a word after the chunk's last")
                payload = dut.o_weight.payload
                rows = [payload]
                if pairs:
                    rows = payload.rows[:1 + ctx.get(payload.two)]
                for row in rows:
                    sent.append((cycle, chunk, [ctx.get(row[j]) for j in range(config.cols)]))
                    left -= 1
            elif not left and idle and pulse is None:
                idle -= 1
            addrs = [ctx.get(dut.rd_addr[i]) for i in range(copies)]
            reads = [ctx.get(dut.rd_port[i]) for i in range(copies)]
            if cycle:
                assert addrs == addrs[:1] * copies and reads == reads[:1] * copies, (
                    cycle, addrs, reads)
            data = port.clock(addrs[0], reads[0], take=ctx.get(dut.rd_en))
            if pairs:
                addrs_b = [ctx.get(dut.rd_addr_b[i]) for i in range(copies)]
                assert not cycle or addrs_b == addrs_b[:1] * copies, (cycle, addrs_b)
                data_b = port_b.clock(addrs_b[0], reads[0], take=ctx.get(dut.rd_en))
            await ctx.tick()
            ctx.set(dut.rd_data, data)
            if pairs:
                ctx.set(dut.rd_data_b, data_b)
        assert not pending and not left, "the layers did not finish in time"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return sent, primes, memory


def check_words(config, layers, sent, memory):
    """Every chunk's words in order (its layer's, from ``w_base``), each once, nothing else."""
    want, chunk = [], 0
    rows = config.rows
    for desc, chunks, mode in layers:
        count = desc["k_tiles"] * desc["n_tiles"] * rows
        if mode == "wdiag":
            words = [[v if j == w % rows else 0
                      for j, v in enumerate(memory[desc["w_base"] + w // rows])]
                     for w in range(count)]
        else:
            words = [memory[desc["w_base"] + (w % rows if mode == "wrep" else w)]
                     for w in range(count)]
        for _ in range(chunks):
            want += [(chunk, word) for word in words]
            chunk += 1
    assert [(chunk, word) for _, chunk, word in sent] == want


SHAPES = [(2, 3), (3, 2), (1, 1), (4, 2)]


@pytest.mark.parametrize("registered", [False, True], ids=["plain", "registered"])
@pytest.mark.parametrize("shape", SHAPES)
def test_words_in_order_back_to_back(shape, registered):
    """With the engine always ready, a chunk's words leave one per cycle from the third cycle
    after its first ``prime`` (PRIME2, a read, then the word)."""
    cfg = _config(shape)
    rng = np.random.default_rng(shape[0] * 10 + shape[1])
    layers = random_layers(rng, cfg, 6)
    assert {mode for _, _, mode in layers} == {"", "wrep", "wdiag"}
    sent, primes, memory = run_feeder(cfg, registered, layers, [1] * 1200, seed=1)
    check_words(cfg, layers, sent, memory)
    assert len(primes) > len(layers)
    for chunk, prime in enumerate(primes):
        cycles = [c for c, i, _ in sent if i == chunk]
        first = prime + ControllerOutputs.PRIME_CYCLES + 1
        assert cycles == list(range(first, first + len(cycles)))


@pytest.mark.parametrize("p_ready", [0.7, 0.3])
@pytest.mark.parametrize("shape", SHAPES)
def test_backpressure(shape, p_ready):
    """Under random backpressure each word still leaves once, in order; the registered reads
    (with their skid register) give the same words in the same cycles as the plain ones."""
    cfg = _config(shape)
    rng = np.random.default_rng(shape[0] * 10 + shape[1] + int(p_ready * 10))
    layers = random_layers(rng, cfg, 4)
    ready = [int(v) for v in rng.random(3000) < p_ready]
    results = [run_feeder(cfg, registered, layers, ready, seed=2)
               for registered in (False, True)]
    for sent, _, memory in results:
        check_words(cfg, layers, sent, memory)
    assert results[0][0] == results[1][0]


@pytest.mark.parametrize("copies", [2, 4])
def test_copies_address_the_memories_alike(copies):
    """The registered reads' copies (one address and read per WEIGHT memory, kept apart in
    synthesis by their initial values and polarity) are the first's in every cycle after the
    first, under backpressure, and the words are the plain feeder's in the same cycles."""
    cfg = _config((2, 3))
    rng = np.random.default_rng(7 + copies)
    layers = random_layers(rng, cfg, 4)
    ready = [int(v) for v in rng.random(3000) < 0.6]
    plain = run_feeder(cfg, False, layers, ready, seed=3)
    copied = run_feeder(cfg, True, layers, ready, seed=3, copies=copies)
    check_words(cfg, layers, copied[0], copied[2])
    assert copied[0] == plain[0]


def test_copies_need_registered_reads():
    """More than one copy without registered reads, or more than four, is refused."""
    cfg = _config((2, 3))
    for registered, copies in ((False, 2), (True, 5), (True, 0)):
        with pytest.raises(ValueError, match=f"copies={copies}; allowed: 1 to 4"):
            WeightFeeder(cfg, registered_reads=registered, copies=copies)


@pytest.mark.parametrize("registered", [False, True], ids=["plain", "registered"])
def test_nothing_after_the_last_word(registered):
    """A refused word is offered again, the same, until taken; after a chunk's last word the
    stream stays empty however long the next chunk takes to start, and the next chunk's
    ``prime`` (cycles 51 and 52) starts the layer's words over."""
    cfg = _config((2, 3))
    layer = descriptor(cfg, k_tiles=2, n_tiles=2, w_base=10)
    dut = WeightFeeder(cfg, registered_reads=registered)
    rng = np.random.default_rng(3)
    port = ReadPortModel({a: [a % 7, a % 5, a % 3] for a in range(cfg.weight_depth)},
                         registered=registered, poison=[0, 0, 0])
    pulses = {1: "start_layer", 2: "prime", 50: "start_chunk", 51: "prime"}
    seen = []

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng, ports={"start": "prime"})
        for cycle in range(100):
            pulse = pulses.get(cycle)
            ctrl.drive(ctx, pulse, desc=layer if pulse == "start_layer" else None,
                       batch=1 if pulse == "start_layer" else None)
            ready = int(cycle % 5 != 2)
            ctx.set(dut.o_weight.ready, ready)
            valid = ctx.get(dut.o_weight.valid)
            seen.append((valid, ready, ctx.get(dut.o_weight.payload.as_value())))
            data = port.clock(ctx.get(dut.rd_addr[0]), ctx.get(dut.rd_port[0]),
                              take=ctx.get(dut.rd_en))
            await ctx.tick()
            ctx.set(dut.rd_data, data)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    transfers = [c for c, (v, r, _) in enumerate(seen) if v and r]
    words = [_packed(cfg, [a % 7, a % 5, a % 3]) for a in range(10, 18)]
    assert [seen[c][2] for c in transfers] == words * 2
    first, second = transfers[:8], transfers[8:]
    # Each chunk's first word three cycles after its first `prime` (a ready cycle, both).
    assert (first[0], second[0]) == (2 + 3, 51 + 3)
    assert not any(v for v, _, _ in seen[first[-1] + 1:second[0]] + seen[second[-1] + 1:])
    for c, (v, r, payload) in enumerate(seen[:-1]):
        if v and not r:
            assert seen[c + 1][0] and seen[c + 1][2] == payload


def _packed(cfg, lanes):
    """The word of ``lanes`` signed ``w_bits`` weights, lane 0 lowest."""
    return sum((v & ((1 << cfg.w_bits) - 1)) << (j * cfg.w_bits) for j, v in enumerate(lanes))


@pytest.mark.parametrize("copies", [1, 4])
@pytest.mark.parametrize("shape", [(2, 3), (3, 2), (1, 1), (4, 2), (5, 3)])
def test_pairs_carry_the_same_rows(shape, copies):
    """With pairs every transfer carries two consecutive rows of a tile (one at the end of a
    tile of an odd number of rows; the second row of a wdiag tile from the same word, its own
    lane kept), the same rows in the same order as one at a time, under backpressure; back to
    back a tile of ``rows`` rows takes ``ceil(rows / 2)`` transfers."""
    cfg = _config(shape)
    rng = np.random.default_rng(40 + shape[0] * 10 + shape[1] + copies)
    layers = random_layers(rng, cfg, 6)
    ready = [int(v) for v in rng.random(3000) < 0.6]
    sent, _, memory = run_feeder(cfg, True, layers, ready, seed=4, copies=copies, pairs=True)
    check_words(cfg, layers, sent, memory)
    sent, primes, memory = run_feeder(cfg, True, layers, [1] * 1200, seed=4, copies=copies,
                                      pairs=True)
    check_words(cfg, layers, sent, memory)
    per_tile = -(-cfg.rows // 2)
    for chunk, prime in enumerate(primes):
        cycles = sorted({c for c, i, _ in sent if i == chunk})
        first = prime + ControllerOutputs.PRIME_CYCLES + 1
        assert cycles == list(range(first, first + len(cycles)))
        rows = sum(i == chunk for _, i, _ in sent)
        assert len(cycles) == rows // cfg.rows * per_tile


def test_pairs_need_registered_reads():
    """Pairs are read a cycle ahead, as registered reads are: without them they are refused."""
    with pytest.raises(ValueError, match="pairs=True needs registered_reads=True"):
        WeightFeeder(_config((2, 3)), pairs=True)
