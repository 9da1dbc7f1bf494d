"""The pooler alone, its banks a Python model read as the accelerator reads them (plain, or
through the register of registered reads): each pooling layer's output words against NumPy's
max pooling of the images in the banks, for random images (batches of 1..3, 1..3 words per
pixel), windows and strides of 1..3 (not always square), one word read per cycle from the cycle
after ``go`` (the controller's ``prime``: two cycles, PRIME and PRIME2) ends, each output word
written once, in order, nothing written outside the output area and nothing read outside the
input, ``done`` exactly once, with the layer's last write; several layers one after the other,
their inputs driven as the controller drives them.

A one-pixel window (``MaxPool2D(1, stride)``, a subsampling) also has a test of its own: its
first position is its last, so a read in PRIME2 taken for part of the walk would write a word
early (as 4f0d58f's pooler did)."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from numpy.lib.stride_tricks import sliding_window_view
from support import ControllerOutputs, ReadPortModel, descriptor, image_geometry, random_bits

from hwgen.config import AcceleratorConfig
from hwgen.device.pooler import Pooler
from hwgen.memmap import PassKind

CONFIGS = {
    "3-banks": AcceleratorConfig(rows=2, cols=3, act_depth=256, acc_depth=4),
    "1-bank": AcceleratorConfig(rows=1, cols=1, act_depth=256, acc_depth=3),
    # 4 banks of 200 words: a 8-bit address that does not cover 256 words.
    "4-banks": AcceleratorConfig(rows=2, cols=4, in_bits=6, act_depth=200, acc_depth=8),
}


def random_pool_layer(rng, config, *, one_pixel=False):
    """Return ``(desc, geom, batch, images)``: a pooling layer over 1..3 (at most
    ``acc_depth``) images of 1..3 words per pixel, a window of 1..3 by 1..3 pixels
    (``one_pixel``: 1 by 1), strides 1..3 per axis, its input and output areas apart, somewhere in
    the banks, fields the pooler must not use random; ``images`` says where the input is:
    ``(base, h, w, words)``."""
    while True:
        batch = int(rng.integers(1, min(3, config.acc_depth) + 1))
        kh, kw, sy, sx, words = (int(v) for v in rng.integers(1, 4, 5))
        if one_pixel:
            kh = kw = 1
        h, w = int(rng.integers(kh, kh + 4)), int(rng.integers(kw, kw + 4))
        geom = image_geometry(config, h=h, w=w, kh=kh, kw=kw, stride=(sy, sx), pad=0,
                              words=words, cgs=words)
        size_in = batch * h * w * words
        size_out = batch * geom["oh"] * geom["ow"] * words
        if size_in + size_out <= config.act_depth and size_in * kh * kw <= 1500:
            break
    # Input and output apart, in either order, anywhere.
    gap = config.act_depth - size_in - size_out
    cut = sorted(int(v) for v in rng.integers(0, gap + 1, 2))
    if rng.random() < 0.5:
        base, dst = cut[0], cut[0] + size_in + cut[1] - cut[0]
    else:
        dst, base = cut[0], cut[0] + size_out + cut[1] - cut[0]
    desc = descriptor(config, spatial=1, kind=PassKind.MAXPOOL.value,
                      last=int(rng.integers(2)), src_base=base, src_stride=words,
                      dst_base=dst, dst_stride=words,
                      **{f: random_bits(rng, 3) for f in ("k_tiles", "n_tiles", "n", "w_base",
                                                          "p_base", "leaky")})
    return desc, geom, batch, (base, h, w, words)


def expected_output(config, banks, layer):
    """``{address: lanes}`` of the output area of ``layer`` (:func:`random_pool_layer`'s):
    NumPy's max pooling of the images in the banks (every lane of a pixel's words a channel,
    the padding lanes too)."""
    desc, geom, batch, (base, h, w, words) = layer
    lanes = config.act_lanes
    flat = np.array([banks[base + a] for a in range(batch * h * w * words)], dtype=np.int64)
    x = flat.reshape(batch, h, w, words * lanes)
    windows = sliding_window_view(x, (geom["kh"], geom["kw"]), axis=(1, 2))
    y = windows[:, ::geom["sy"], ::geom["sx"]].max(axis=(-2, -1))
    assert y.shape[1:3] == (geom["oh"], geom["ow"])
    out = y.reshape(-1, lanes)
    return {desc["dst_base"] + i: [int(v) for v in lane] for i, lane in enumerate(out)}


def run_pooler(config, read_latency, count, *, seed, one_pixel=False):
    """Run ``count`` random pooling layers (``one_pixel``: of 1x1 windows), each started as
    the controller starts one (LOAD, then PRIME and PRIME2, here now and then a cycle or two
    later); check each and return how many words were written."""
    dut = Pooler(config, read_latency=read_latency)
    rng = np.random.default_rng(seed)
    lanes, bits = config.act_lanes, config.in_bits
    lo, hi = -(1 << (bits - 1)), 1 << (bits - 1)
    banks = {a: [int(v) for v in rng.integers(lo, hi, lanes)] for a in range(config.act_depth)}
    port = ReadPortModel(banks, registered=read_latency == 2, poison=[lo] * lanes)
    written = []

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng, ports={"start": "start_layer", "go": "prime"})
        cycle = 0
        for _ in range(count):
            layer = random_pool_layer(rng, config, one_pixel=one_pixel)
            want = expected_output(config, banks, layer)
            desc, geom, batch, (base, h, w, words) = layer
            reads_expected = len(want) * geom["kh"] * geom["kw"]
            pulses = ["start_layer", *[None] * int(rng.choice([0, 0, 0, 1, 2])), "prime"]
            reads, writes, done = [], [], []
            go = go_end = None      # the first and the last cycle of `go` (the two of PRIME)
            # Until a few cycles after the last word is due (or a bound, should it never be).
            while go_end is None or cycle <= go_end + reads_expected + read_latency + 4:
                pulse = pulses.pop(0) if pulses else None
                phase = ctrl.drive(ctx, pulse, desc=desc if pulse == "start_layer" else None,
                                   geom=geom if pulse == "start_layer" else None,
                                   batch=batch if pulse == "start_layer" else None)
                go = cycle if phase == 1 else go
                go_end = cycle if phase == ControllerOutputs.PRIME_CYCLES else go_end
                rd_en, rd_addr = ctx.get(dut.rd_en), ctx.get(dut.rd_addr)
                if rd_en:
                    reads.append((cycle, rd_addr))
                if ctx.get(dut.wr_en):
                    data = ctx.get(dut.wr_data)
                    writes.append((cycle, ctx.get(dut.wr_addr), [data[b] for b in range(lanes)]))
                if ctx.get(dut.done):
                    done.append(cycle)
                data = port.clock(rd_addr, rd_en, take=True)
                await ctx.tick()
                ctx.set(dut.rd_data, data)
                cycle += 1
            # The pooler's writes land in the banks (after its reads of this cycle).
            for _, addr, lanes_ in writes:
                banks[addr] = lanes_
            where = (desc, geom, batch)
            # One word read per cycle from the cycle after `go` ends, all of the input area
            # (and nothing read before `go`; a read in its last cycle reads there too).
            walk = [c for c, _ in reads if c > go_end]
            assert walk == list(range(go_end + 1, go_end + 1 + reads_expected)), where
            assert all(c > go for c, _ in reads), where
            area = range(base, base + batch * h * w * words)
            assert all(a in area for _, a in reads), where
            # Each output word once, in order, the window's maximum; nothing else.
            assert [a for _, a, _ in writes] == sorted(want), where
            assert {a: v for _, a, v in writes} == want, where
            # `done` once, with the last write, which comes from a register a cycle after the
            # last read's word (`read_latency` after the read; registered reads' words pass a
            # register of the pooler's first).
            due = go_end + reads_expected + read_latency + 1 + (read_latency == 2)
            assert done == [writes[-1][0]] == [due], where
            written.extend(writes)
            ctrl.end_layer()
            for _ in range(int(rng.integers(0, 3))):      # FETCH, DECODE, GEOM of the next
                ctrl.drive(ctx)
                assert not ctx.get(dut.wr_en) and not ctx.get(dut.done)
                await ctx.tick()
                cycle += 1
            if rng.random() < 0.3:
                ctrl.end_run()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return len(written)


@pytest.mark.parametrize("read_latency", [1, 2], ids=["plain", "registered"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_max_pooling_against_numpy(config, read_latency):
    cfg = CONFIGS[config]
    words = run_pooler(cfg, read_latency, 30, seed=sum(map(ord, config)) + read_latency)
    assert words > 150


@pytest.mark.parametrize("read_latency", [1, 2], ids=["plain", "registered"])
def test_one_pixel_windows(read_latency):
    """1x1 windows with strides of 1..3 (subsampling), 1..3 words per pixel."""
    cfg = CONFIGS["3-banks"]
    words = run_pooler(cfg, read_latency, 12, seed=7 + read_latency, one_pixel=True)
    assert words > 50
