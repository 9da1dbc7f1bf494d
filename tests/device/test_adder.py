"""The adder alone, its banks and its PARAM memory Python models read as the accelerator reads
them (plain, or through the register of registered reads): each ADD pass's output words
against a NumPy model of the contract (``p = a * mult_a + b * mult_b``, the rounding shift,
saturation, the bounds or, without ``bounds``, the ``relu`` flag), for random tensors (images or
rows, batches of 1..3, 1..3 words per pixel), parameters and areas; the walk of SPEC32 section
3 to the cycle: per channel word its ``2P`` PARAM words, then per row a's word and b's, one read
a cycle from the cycle after ``go`` ends; each output word written once, in the walk's order,
nothing read outside the inputs, ``done`` once with the last write. Several passes one after
the other, their inputs driven as the controller drives them."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import ControllerOutputs, ReadPortModel, descriptor, image_geometry, random_bits

from hwgen.config import AcceleratorConfig
from hwgen.device.adder import PIPELINE, Adder, param_words
from hwgen.memmap import PassKind

CONFIGS = {
    # P = 1: a PARAM word per parameter of a channel word.
    "3-banks": AcceleratorConfig(rows=2, cols=3, act_depth=256, acc_depth=4),
    "1-bank": AcceleratorConfig(rows=1, cols=1, act_depth=256, acc_depth=3, mult_bits=8),
    # P = 2 (4 banks, 3 columns: the second word's last two lanes are past the banks); 200
    # words, an 8-bit address that does not cover 256 words.
    "4-banks": AcceleratorConfig(rows=4, cols=3, in_bits=6, act_depth=200, acc_depth=8),
    # No bounds: the relu flag.
    "no-bounds": AcceleratorConfig(rows=2, cols=2, act_depth=256, acc_depth=4, bounds=False),
}


def add_reference(config, a, b, params, bounds):
    """The contract in NumPy, lane-wise over equal shapes: ``params`` is ``(mult_a, mult_b,
    shift)``, ``bounds`` ``(low, high)``."""
    mult_a, mult_b, shift = params
    p = a.astype(np.int64) * mult_a + b.astype(np.int64) * mult_b
    half = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
    r = np.where(shift > 0, (p + half) >> shift, p)
    lo, hi = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    return np.clip(np.clip(r, lo, hi), *bounds)


def random_bounds(rng, config):
    """Return ``(desc fields, (low, high))``: random bounds, or the relu flag without them."""
    lo, hi = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    if not config.bounds:
        relu = int(rng.integers(2))
        return {"relu": relu}, (0 if relu else lo, hi)
    low, high = sorted(int(v) for v in rng.integers(lo, hi + 1, 2))
    if rng.random() < 0.4:
        low, high = lo, hi
    return {"act_min": low, "act_max": high}, (low, high)


def random_params(rng, config, words):
    """Return ``(mult_a, mult_b, shift)``, each ``[words, act_lanes]``: multipliers anywhere
    in their range (now and then 0 or the largest), shifts mostly where the sums stay in
    range, now and then 0 or the largest the contract allows."""
    shape = (words, config.act_lanes)
    top = (1 << config.mult_bits) - 1
    mult_a, mult_b = (rng.choice([0, top, *rng.integers(0, top + 1, 6)], shape)
                      for _ in range(2))
    most = config.in_bits + config.mult_bits + 1
    shift = np.where(rng.random(shape) < 0.8, rng.integers(most - 9, most + 1, shape),
                     rng.choice([0, 1, config.acc_bits + config.mult_bits - 1], shape))
    return mult_a, mult_b, shift


def param_image(config, p_base, mult_a, mult_b, shift):
    """Return ``{PARAM address: lanes}`` of the parameters as SPEC32 section 3 lays them out:
    per channel word ``cw`` ``2P`` words from ``p_base + 2P * cw``, lanes past the banks zero,
    biases and ``mult_neg`` random (the adder must not use them)."""
    n_words, cols = param_words(config), config.cols
    rng = np.random.default_rng(int(mult_a.sum()) % 1000)
    image = {}
    for cw in range(len(mult_a)):
        for j in range(2 * n_words):
            lanes = []
            for col in range(cols):
                lane = (j % n_words) * cols + col
                inside = lane < config.act_lanes
                mult = (mult_a if j < n_words else mult_b)[cw, lane] if inside else 0
                word = {"bias": int(rng.integers(-99, 99)), "mult": int(mult),
                        "shift": int(shift[cw, lane]) if inside else 0}
                if config.bounds:
                    word["mult_neg"] = int(rng.integers(0, 99))
                lanes.append(word)
            image[p_base + 2 * n_words * cw + j] = lanes
    return image


def random_add_pass(rng, config):
    """Return ``(desc, src2_base, geom, batch, rows, words, params, bounds)``: an ADD pass
    over 1..3 (at most ``acc_depth``) images or batches of rows, of 1..3 words per pixel, its
    three areas apart in any order somewhere in the banks, fields the adder must not use
    random."""
    while True:
        batch = int(rng.integers(1, min(3, config.acc_depth) + 1))
        words = int(rng.integers(1, 4))
        spatial = rng.random() < 0.6
        h, w = (int(v) for v in rng.integers(1, 5, 2)) if spatial else (1, 1)
        rows = batch * h * w
        if 3 * rows * words <= config.act_depth:
            break
    size = rows * words
    gap = config.act_depth - 3 * size
    cuts = sorted(int(v) for v in rng.integers(0, gap + 1, 3))
    starts = [cuts[i] + i * size for i in range(3)]
    src, src2, dst = (starts[i] for i in rng.permutation(3))
    geom = image_geometry(config, h=h, w=w, kh=1, kw=1, stride=1, pad=0, words=words,
                          cgs=words)
    n_words = param_words(config)
    p_base = int(rng.integers(0, config.param_depth - 2 * n_words * words + 1))
    fields, bounds = random_bounds(rng, config)
    noise = {f: random_bits(rng, 3) for f in ("k_tiles", "n_tiles", "w_base")}
    desc = descriptor(config, spatial=int(spatial), kind=PassKind.ADD.value,
                      last=int(rng.integers(2)),
                      src_base=src, src_stride=words, dst_base=dst, dst_stride=words,
                      p_base=p_base, n=int(rng.integers(1, words * config.act_lanes + 1)),
                      **fields, **noise)
    return desc, src2, geom, batch, rows, words, random_params(rng, config, words), bounds


def expected_output(config, banks, layer):
    """``{address: lanes}`` of the output area of ``layer`` (:func:`random_add_pass`'s)."""
    desc, src2, _, _, rows, words, (mult_a, mult_b, shift), bounds = layer
    lanes = config.act_lanes

    def area(base):
        return np.array([banks[base + i] for i in range(rows * words)]).reshape(rows, words,
                                                                               lanes)

    y = add_reference(config, area(desc["src_base"]), area(src2), (mult_a, mult_b, shift),
                      bounds)
    return {desc["dst_base"] + i: [int(v) for v in lane]
            for i, lane in enumerate(y.reshape(-1, lanes))}


def walk_order(desc, rows, words):
    """The output words in the order the walk writes them: channel word, then row."""
    return [desc["dst_base"] + r * words + cw for cw in range(words) for r in range(rows)]


def run_adder(config, read_latency, count, *, seed, logic_products=False):
    """Run ``count`` random ADD passes, each started as the controller starts one (LOAD, then
    PRIME and PRIME2, here now and then a cycle or two later); check each and return how many
    words were written."""
    dut = Adder(config, read_latency=read_latency, logic_products=logic_products)
    rng = np.random.default_rng(seed)
    lanes, bits = config.act_lanes, config.in_bits
    lo, hi = -(1 << (bits - 1)), 1 << (bits - 1)
    banks = {a: [int(v) for v in rng.choice([lo, hi - 1, *rng.integers(lo, hi, 6)], lanes)]
             for a in range(config.act_depth)}
    registered = read_latency == 2
    port = ReadPortModel(banks, registered=registered, poison=[lo] * lanes)
    poison = {"bias": 0, "mult": (1 << config.mult_bits) - 1, "shift": 0}
    poison = [{**poison, "mult_neg": 0} if config.bounds else poison] * config.cols
    params = {}
    p_port = ReadPortModel(params, registered=registered, poison=poison)
    written = []

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng, ports={"start": "start_layer", "go": "prime"})
        cycle = 0
        for _ in range(count):
            layer = random_add_pass(rng, config)
            desc, src2, geom, batch, rows, words, (ma, mb, sh), _ = layer
            params.clear()
            params.update(param_image(config, desc["p_base"], ma, mb, sh))
            want = expected_output(config, banks, layer)
            n_par = 2 * param_words(config)
            n_reads = words * (n_par + 2 * rows)
            pulses = ["start_layer", *[None] * int(rng.choice([0, 0, 0, 1, 2])), "prime"]
            reads, p_reads, writes, done = [], [], [], []
            go = go_end = None
            while go_end is None or cycle <= go_end + n_reads + read_latency + PIPELINE + 3:
                pulse = pulses.pop(0) if pulses else None
                start = pulse == "start_layer"
                phase = ctrl.drive(ctx, pulse, desc=desc if start else None,
                                   geom=geom if start else None, batch=batch if start else None)
                ctx.set(dut.src2_base, src2 if ctrl.desc is not None else
                        random_bits(rng, len(dut.src2_base)))
                go = cycle if phase == 1 else go
                go_end = cycle if phase == ControllerOutputs.PRIME_CYCLES else go_end
                rd_en, rd_addr = ctx.get(dut.rd_en), ctx.get(dut.rd_addr)
                p_en, p_addr = ctx.get(dut.p_en), ctx.get(dut.p_addr)
                if rd_en:
                    reads.append((cycle, rd_addr))
                if p_en:
                    p_reads.append((cycle, p_addr))
                if ctx.get(dut.wr_en):
                    data = ctx.get(dut.wr_data)
                    writes.append((cycle, ctx.get(dut.wr_addr), [data[b] for b in range(lanes)]))
                if ctx.get(dut.done):
                    done.append(cycle)
                data = port.clock(rd_addr, rd_en, take=True)
                p_data = p_port.clock(p_addr, p_en, take=True)
                await ctx.tick()
                ctx.set(dut.rd_data, data)
                ctx.set(dut.p_data, p_data)
                cycle += 1
            for _, addr, lanes_ in writes:
                banks[addr] = lanes_
            where = (desc, src2, geom, batch)
            # The walk: per channel word its PARAM words, then a's and b's word of each row.
            first = go_end + 1
            want_reads, want_p = [], []
            for cw in range(words):
                want_p += [(first + i, desc["p_base"] + n_par * cw + i) for i in range(n_par)]
                first += n_par
                for r in range(rows):
                    want_reads += [(first, desc["src_base"] + r * words + cw),
                                   (first + 1, src2 + r * words + cw)]
                    first += 2
            assert p_reads == want_p, where
            assert reads == want_reads, where
            assert [a for _, a, _ in writes] == walk_order(desc, rows, words), where
            assert {a: v for _, a, v in writes} == want, where
            # `done` once, with the last write, PIPELINE cycles after the last word arrives.
            assert done == [writes[-1][0]] == [go_end + n_reads + read_latency + PIPELINE], \
                where
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
def test_add_against_numpy(config, read_latency):
    cfg = CONFIGS[config]
    words = run_adder(cfg, read_latency, 16, seed=sum(map(ord, config)) + read_latency)
    assert words > 100


@pytest.mark.parametrize("config", list(CONFIGS))
def test_logic_products_against_numpy(config):
    """The multipliers built from logic cells (for designs whose DSP blocks the array takes)
    give the same words at the same cycles."""
    cfg = CONFIGS[config]
    words = run_adder(cfg, 2, 12, seed=sum(map(ord, config)) + 7, logic_products=True)
    assert words > 50


def test_reference_rounds_ties_up_and_saturates():
    """The test's own model, on values worked by hand: 3*1 + 2*1 = 5, >> 1 rounds 2.5 up to
    3; -5 >> 1 rounds -2.5 up to -2; 127*65535 + 127*65535 saturates to 127; bounds clamp."""
    cfg = CONFIGS["3-banks"]
    ones = np.ones(1, np.int64)
    assert add_reference(cfg, 3 * ones, 2 * ones, (1, 1, 1,), (-128, 127)).tolist() == [3]
    assert add_reference(cfg, -3 * ones, -2 * ones, (1, 1, 1,), (-128, 127)).tolist() == [-2]
    assert add_reference(cfg, 127 * ones, 127 * ones, (65535, 65535, 0,), (-128, 127)).tolist() \
        == [127]
    assert add_reference(cfg, -9 * ones, 0 * ones, (1, 7, 0,), (0, 5)).tolist() == [0]
