"""The patch walker alone, its inputs driven as the controller and the activation feeder drive
them (a layer's LOAD, two cycles of PRIME, a later chunk's NEXT and PRIME again, and the
feeder's ``take`` at random, also in cycles without a row): every row of every chunk in order
against a naive model that enumerates a convolution's rows with products
(:func:`support.walk_rows`), each row's bank addresses, in-pixel and in-image masks, first
bank, ``last`` and ``final``, ``more_chunks`` after each chunk's first pass, nothing after a
chunk's last row and no row before the cycle after PRIME; without look-ahead the banks read the
row taken in that cycle, with it the row ``cur`` holds in the next (the chunk's first row in
the second cycle of PRIME). Layers are the matrix layers of random CNNs as the compiler lays
them out, random image layers and plain layers over rows (the controller's 1x1 geometry); a
device without spatial layers (``spatial=False``) walks plain layers only, batches up to
``acc_depth`` in one chunk."""

import re

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import (
    ControllerOutputs,
    descriptor,
    each_once,
    image_geometry,
    plain_geometry,
    random_bits,
    random_image_layer,
    walk_rows,
)

import hwgen
from hwgen.compiler import CompileError
from hwgen.config import AcceleratorConfig
from hwgen.device.controller import geometry_lead
from hwgen.device.patch_walker import PatchWalker
from hwgen.memmap import PassKind, descriptor_layout
from hwgen.nn import Conv2D, QuantizedNetwork
from sim.netgen import random_cnn

_BUFFERS = {"act_depth": 256, "weight_depth": 2048, "param_depth": 64, "out_depth": 128,
            "prog_depth": 32}

CONFIGS = {
    # rows < banks, not dividing them (a channel group starts in any bank); chunks of 5.
    "2x3-acc5": AcceleratorConfig(rows=2, cols=3, acc_depth=5, **_BUFFERS),
    # rows == banks: every group starts in bank 0.
    "3x2-acc4": AcceleratorConfig(rows=3, cols=2, acc_depth=4, **_BUFFERS),
    # One bank, one pixel per chunk (every row is a pass's last).
    "1x1-acc1": AcceleratorConfig(rows=1, cols=1, acc_depth=1, **_BUFFERS),
    # act_depth not a power of two: addresses wrap at 128, the origin often below word 0.
    "2x4-depth100": AcceleratorConfig(rows=2, cols=4, acc_depth=16,
                                      **{**_BUFFERS, "act_depth": 100}),
    # rows = 3 of 4 banks: a group's first bank moves by 3, with a carry into the next word.
    "3x4-acc7": AcceleratorConfig(rows=3, cols=4, acc_depth=7, **_BUFFERS),
}

#: Devices without spatial layers (no image walk): plain layers over rows only.
PLAIN_CONFIGS = {
    "2x3-acc5": AcceleratorConfig(rows=2, cols=3, acc_depth=5, spatial=False, **_BUFFERS),
    "1x1-acc1": AcceleratorConfig(rows=1, cols=1, acc_depth=1, spatial=False, **_BUFFERS),
    "3x4-acc7": AcceleratorConfig(rows=3, cols=4, acc_depth=7, spatial=False, **_BUFFERS),
    # The iCEBreaker's array and buffers (its preset has no spatial layers).
    "icebreaker": AcceleratorConfig(rows=4, cols=4, acc_depth=64, act_depth=256,
                                    weight_depth=256, param_depth=16, out_depth=64,
                                    prog_depth=8, spatial=False),
}

#: Rows per test case, roughly: what keeps a module's cases within seconds.
ROW_BUDGET = 2500


def compiled_cnn_runs(rng, config, count):
    """Runs of the matrix layers of ``count`` random CNNs as the compiler lays them out (their
    pooling layers left out: the walker does not run them), each on 1..2 images, small enough
    for the budget."""
    runs = []
    while len(runs) < count:
        side = int(rng.integers(2, 6))
        shape = (side, int(rng.integers(max(1, side - 1), side + 2)), int(rng.integers(1, 5)))
        net = random_cnn(rng, config, input_shape=shape, blocks=int(rng.integers(1, 3)),
                         max_channels=4)
        try:
            program = hwgen.compile(net, config)
        except CompileError:
            continue
        batch = int(rng.integers(1, min(2, program.batch) + 1))
        layers = [(d, d.get("geometry")) for d in program.descriptors
                  if d["kind"] == PassKind.MATRIX.value]
        layers = [({k: v for k, v in d.items() if k != "geometry"}, g) for d, g in layers]
        if sum(len(walk_rows(config, d, g or plain_geometry(d), batch))
               for d, g in layers) <= ROW_BUDGET // (2 * count):
            runs.append((batch, layers))
    return runs


def plain_layer(rng, config, batch):
    """A matrix layer over ``batch`` rows of ``K`` features (``ceil(K / lanes)`` words or a word
    more apart), fields the walk must not use random (on a device without spatial layers, the
    descriptor's ``spatial`` flag too: its controller takes every layer as plain)."""
    lanes = config.act_lanes
    k_tiles = int(rng.integers(1, 4))
    k = int(rng.integers((k_tiles - 1) * config.rows + 1, k_tiles * config.rows + 1))
    stride = -(-k // lanes) + int(rng.choice([0, 0, 1]))
    top = config.act_depth - batch * stride
    return descriptor(config, k_tiles=k_tiles, n_tiles=int(rng.integers(1, 4)),
                      src_base=int(rng.integers(0, top + 1)), src_stride=stride,
                      spatial=0 if config.spatial else int(rng.integers(2)),
                      raw=int(rng.integers(2)), n=random_bits(rng, 3),
                      dst_base=random_bits(rng, 5), w_base=random_bits(rng, 5)), None


def random_runs(rng, config, count):
    """``count`` runs of 1..3 layers, image and plain, on batches of 1..3 (at most
    ``acc_depth``)."""
    runs = []
    for _ in range(count):
        batch = int(rng.integers(1, min(4, config.acc_depth) + 1))
        layers = [random_image_layer(rng, config, batch, max_side=4, max_channels=6)
                  if rng.random() < 0.6 else plain_layer(rng, config, batch)
                  for _ in range(int(rng.integers(1, 4)))]
        runs.append((batch, layers))
    return runs


def plain_runs(rng, config, count):
    """``count`` runs of 1..3 plain layers on batches of 1..``acc_depth`` rows (a third of them
    ``acc_depth``: the chunk's last row is the batch's), for a device without spatial layers."""
    runs = []
    for _ in range(count):
        full = rng.random() < 0.35
        batch = config.acc_depth if full else int(rng.integers(1, config.acc_depth + 1))
        runs.append((batch, [plain_layer(rng, config, batch)
                             for _ in range(int(rng.integers(1, 4)))]))
    return runs


def _mask(banks):
    return sum(1 << b for b in banks)


def check_outputs(ctx, dut, where, *, row, read, more=None):
    """Check the walker's outputs of one cycle: ``row``, the model's row in ``cur`` (None:
    no valid row); ``read``, the row whose words the banks read in this cycle (None: none);
    ``more``, ``more_chunks`` where it must be valid."""
    cur = ctx.get(dut.cur)
    if row is None:
        assert not cur.valid, (*where, "a row outside a chunk's walk")
    else:
        want_mask = _mask(row.reads)
        got = (cur.valid, cur.last, cur.final, cur.krem, cur.inrow)
        want = (1, int(row.last), int(row.final), row.krem, want_mask)
        pos = (row.nt, row.kt, row.m, row.oy, row.ox, row.count)
        assert got == want, (*where, "cur", pos, got, want)
        # The words of the row's banks (the others read nothing: their address is free).
        addr = {b: cur.addr[b] for b in row.reads}
        assert addr == row.reads, (*where, "cur.addr", pos, addr, row.reads)
    want_reads = {} if read is None else read.reads
    en = ctx.get(dut.rd_en)
    assert en == _mask(want_reads), (*where, "rd_en", en, want_reads)
    if want_reads:
        addr = ctx.get(dut.rd_addr)
        got_reads = {b: addr[b] for b in want_reads}
        assert got_reads == want_reads, (*where, "rd_addr", got_reads, want_reads)
    if more is not None:
        assert ctx.get(dut.more_chunks) == more, (*where, "more_chunks")


def run_walker(config, lookahead, runs, *, seed):
    """Walk every layer of ``runs`` as the controller and the feeder would; return how many
    rows were checked and how many chunks started with ``start_chunk``."""
    dut = PatchWalker(config, stages=PatchWalker.LOOKAHEAD if lookahead else PatchWalker.PLAIN)
    rng = np.random.default_rng(seed)
    stats = {"rows": 0, "chunks": 0}

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng)
        cycle = 0

        async def step(pulse=None, *, row=None, read=None, more=None, take=None, **layer):
            nonlocal cycle
            ctrl.drive(ctx, pulse, **layer)
            ctx.set(dut.take, int(rng.random() < 0.5) if take is None else take)
            check_outputs(ctx, dut, (cycle, pulse), row=row, read=read, more=more)
            await ctx.tick()
            cycle += 1

        for batch, layers in runs:
            for i, (desc, geom) in enumerate(layers):
                rows = walk_rows(config, desc, geom or plain_geometry(desc), batch)
                chunks = [[r for r in rows if r.chunk == c] for c in range(rows[-1].chunk + 1)]
                p_take = float(rng.choice([1.0, 0.8, 0.4]))
                # FETCH, DECODE (and GEOM): random descriptor and geometry; random takes.
                for _ in range(int(rng.integers(1, 4))):
                    await step()
                # GEOM's last cycles: a spatial layer's descriptor and geometry already hold.
                for _ in range(geometry_lead(config) if geom is not None else 0):
                    await step(desc=desc, geom=geom)
                for c, chunk in enumerate(chunks):
                    more = c < len(chunks) - 1
                    if c == 0:
                        await step("start_layer", desc=desc, geom=geom,
                                   batch=batch if i == 0 else None)
                    else:
                        await step("start_chunk")
                        stats["chunks"] += 1
                    # PRIME, PRIME2: no row yet; with look-ahead the banks read the first
                    # one in PRIME2 (`cur` holds it after).
                    await step("prime")
                    await step(read=chunk[0] if lookahead else None)
                    first_pass = sum(r.nt == 0 and r.kt == 0 for r in chunk)
                    k = 0
                    while k < len(chunk):
                        take = int(rng.random() < p_take)
                        after = chunk[k + take] if k + take < len(chunk) else None
                        read = (after if lookahead else chunk[k]) if take or lookahead else None
                        await step(row=chunk[k], read=read, take=take,
                                   more=more if k >= first_pass else None)
                        k += take
                    # RUN until the chunk's results are written: no row, random takes.
                    for _ in range(int(rng.integers(1, 5))):
                        await step(more=more)
                    stats["rows"] += len(chunk)
                ctrl.end_layer()
            ctrl.end_run()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return stats


@pytest.mark.parametrize("lookahead", [False, True], ids=["plain", "lookahead"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_compiled_cnn_layers(config, lookahead):
    """The matrix layers of random CNNs as the compiler lays them out and describes them."""
    cfg = CONFIGS[config]
    rng = np.random.default_rng(sum(map(ord, config)))
    runs = compiled_cnn_runs(rng, cfg, 3)
    stats = run_walker(cfg, lookahead, runs, seed=1)
    assert stats["rows"] > 50
    if cfg.acc_depth < 16:
        assert stats["chunks"] > 0


#: Devices for the taps layout: rows == banks (the walk rotates lanes anyway), rows < banks,
#: a kernel row's words as many as a bank holds; chunks of a few pixels.
TAPS_CONFIGS = {
    "4x4-acc5": AcceleratorConfig(rows=4, cols=4, acc_depth=5, **_BUFFERS),
    "3x5-acc4": AcceleratorConfig(rows=3, cols=5, acc_depth=4, **_BUFFERS),
    "5x3-acc7": AcceleratorConfig(rows=5, cols=3, acc_depth=7,
                                  **{**_BUFFERS, "act_depth": 100}),
}


def taps_runs(rng, config, count):
    """Runs of one random first convolution in the taps layout (kernels 1x1 to 5x4, strides 1
    to 3, padding on each side, 1..rows-1 input channels) as the compiler lays it out."""
    runs = []
    while len(runs) < count:
        h, w = (int(v) for v in rng.integers(1, 6, 2))
        c = int(rng.integers(1, config.rows))
        pads = tuple(int(v) for v in rng.integers(0, 3, 4))
        kh = int(rng.integers(1, min(5, h + pads[0] + pads[1]) + 1))
        kw = int(rng.integers(1, min(4, w + pads[2] + pads[3]) + 1))
        n = int(rng.integers(1, 7))
        conv = Conv2D(rng.integers(-8, 8, (kh, kw, c, n)), np.zeros(n, int), np.ones(n, int),
                      np.zeros(n, int), stride=tuple(int(v) for v in rng.integers(1, 4, 2)),
                      padding=pads)
        net = QuantizedNetwork([conv], input_shape=(h, w, c))
        program = hwgen.compile(net, config)
        d = dict(program.descriptors[0])
        g = d.pop("geometry")
        assert g["taps"] == 1
        runs.append((int(rng.integers(1, min(3, program.batch) + 1)), [(d, g)]))
    return runs


@pytest.mark.parametrize("lookahead", [False, True], ids=["plain", "lookahead"])
@pytest.mark.parametrize("config", list(TAPS_CONFIGS))
def test_first_convolutions_in_the_taps_layout(config, lookahead):
    """A first convolution whose input is the taps layout: each lane's tap in its bank and
    kernel row, rows above and below the image and taps past the kernel not read."""
    cfg = TAPS_CONFIGS[config]
    rng = np.random.default_rng(sum(map(ord, config)) + 5)
    stats = run_walker(cfg, lookahead, taps_runs(rng, cfg, 6), seed=4)
    assert stats["rows"] > 100
    assert stats["chunks"] > 0


@pytest.mark.parametrize("lookahead", [False, True], ids=["plain", "lookahead"])
@pytest.mark.parametrize("config", list(PLAIN_CONFIGS))
def test_plain_rows_without_spatial_layers(config, lookahead):
    """A device without spatial layers walks plain layers over rows as one with them does: a
    batch of up to ``acc_depth`` rows in one chunk (``more_chunks`` low), whatever the
    descriptor's ``spatial`` flag says."""
    cfg = PLAIN_CONFIGS[config]
    assert not cfg.spatial
    rng = np.random.default_rng(sum(map(ord, config)) + 2)
    runs = plain_runs(rng, cfg, 12)
    stats = run_walker(cfg, lookahead, runs, seed=3)
    assert stats["rows"] > 50
    assert stats["chunks"] == 0


@pytest.mark.parametrize("lookahead", [False, True], ids=["plain", "lookahead"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_random_image_and_plain_layers(config, lookahead):
    """Random geometries (kernels not square, larger than the image, all padding; several
    words per pixel, channel groups past a pixel's words) and plain layers, in runs."""
    cfg = CONFIGS[config]
    rng = np.random.default_rng(sum(map(ord, config)) + 1)
    runs = random_runs(rng, cfg, 6)
    stats = run_walker(cfg, lookahead, runs, seed=2)
    assert stats["rows"] > 100
    assert stats["chunks"] > 0


# Each device once by default, the walker's variants alternating (the rest: ``-m slow``).
@pytest.mark.parametrize(("config", "walker"), each_once(["2x3-acc5", "3x4-acc7", "icebreaker"],
                                                         ["plain", "lookahead"]))
def test_the_most_channel_groups_a_descriptor_holds(config, walker):
    """A layer of as many channel groups as the ``k_tiles`` field holds (more than any compiled
    layer has), its pixels as many words apart as ``src_stride`` holds: the last group's words
    are where they are, on devices with and without spatial layers (a plain layer; with them a
    1x1 convolution of 1x1 images too)."""
    lookahead = walker == "lookahead"
    fields = descriptor_layout(PLAIN_CONFIGS[config]).members
    groups = (1 << fields["k_tiles"].width) - 1
    stride = (1 << fields["src_stride"].width) - 1
    plain = descriptor(PLAIN_CONFIGS[config], k_tiles=groups, n_tiles=1, src_base=3,
                       src_stride=stride)
    stats = run_walker(PLAIN_CONFIGS[config], lookahead, [(2, [(plain, None)])], seed=4)
    assert stats["rows"] == 2 * groups
    if config in CONFIGS:
        cfg = CONFIGS[config]
        geom = image_geometry(cfg, h=1, w=1, kh=1, kw=1, stride=1, pad=0, words=stride,
                              cgs=groups)
        layers = [({**plain, "spatial": 1}, geom), (plain, None)]
        stats = run_walker(cfg, lookahead, [(2, layers)], seed=5)
        assert stats["rows"] == 4 * groups


@pytest.mark.parametrize("config", ["2x3-acc5", "3x2-acc4", "4x4-acc5"])
def test_no_process_holds_only_a_constant(config):
    """The walker's Verilog has no ``always @*`` block that assigns a constant and reads
    nothing: Verilator never runs such a block (its signal keeps its initial value), so a
    row's ``valid`` once stayed 0 there while the Amaranth simulator ran it."""
    from hwgen.generate import emit_verilog

    cfg = {**CONFIGS, **TAPS_CONFIGS}[config]
    for stages in (PatchWalker.PLAIN, PatchWalker.LOOKAHEAD):
        text = emit_verilog(PatchWalker(cfg, stages=stages), "walker")
        found = re.findall(r"always @\*\n\s+(\S+) = [0-9]+'[hbd][0-9a-fA-F_]+;", text)
        assert not found, found


@pytest.mark.parametrize("stages", [-1, 4, True, 1.0, "1"])
def test_stages_outside_the_levels_are_refused(stages, refused):
    """The walker's levels are 0..3 (the feeder picks one: ActivationFeeder.walk_stages_for);
    anything else is refused, naming what is allowed."""
    refused(r"PatchWalker: stages=.*; allowed: 0 \(plain\), 1 \(look-ahead\), 2 \(its step "
            r"from a register\), 3 \(and staged rows\)",
            lambda: PatchWalker(CONFIGS["2x3-acc5"], stages=stages))
