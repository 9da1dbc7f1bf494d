"""The requantizer: the narrow shifter's parts against the contract, the DSP blocks of the
ECP5's pipelined requantization, and the whole component on every variant against
``hwgen.nn.requantize``, cycle for cycle."""

import re

import numpy as np
import pytest
from amaranth.hdl import unsigned
from amaranth.sim import Simulator
from support import ECP5, ICE40, random_bits, without_dsp

from hwgen.config import AcceleratorConfig
from hwgen.device.accelerator import AcceleratorCore
from hwgen.device.requantizer import Requantizer
from hwgen.generate import emit_verilog
from hwgen.implementation import Implementation, Registers
from hwgen.nn import requantize


@pytest.mark.parametrize("registered", [False, True], ids=["comb", "pipelined"])
def test_narrow_requantization_matches_the_reference(registered):
    """The requantization built from a narrow shifter and an overflow flag equals the
    reference's full-width one, for every shift (past the product's width too) and products
    at the rounding and saturation boundaries."""
    from amaranth.hdl import Module, Signal, signed, unsigned

    from hwgen.device.requantizer import (
        round_saturate,
        rounded,
        scaled,
        shift_end,
        shift_stages,
        shift_start,
    )

    out_bits, prod_bits = 8, 20
    m = Module()
    prod, shift = Signal(signed(prod_bits)), Signal(unsigned(5))
    out = Signal(signed(out_bits))
    if registered:
        # As the post-processing pipeline splits it: the shifter in two parts (the pipeline
        # registers between them), rounding apart from saturation.
        sign, split = prod[-1], 2
        value, over = shift_start(prod, 5, out_bits)
        for name, stages in (("a", range(4, split - 1, -1)), ("b", range(split - 1, -1, -1))):
            value, over = shift_stages(m, value, over, shift, sign=sign, stages=stages,
                                        out_bits=out_bits, name=name)
        over = shift_end(value, over, sign)
        m.d.comb += out.eq(round_saturate(None, over, sign, out_bits,
                                           rounded_=rounded(value.as_signed())))
    else:
        t, over = scaled(m, prod, shift, out_bits)
        m.d.comb += out.eq(round_saturate(t, over, prod[-1], out_bits))
    rng = np.random.default_rng(5)
    lim = 1 << (prod_bits - 1)
    cases = {(int(v), s) for s in range(32) for v in rng.integers(-lim, lim, 24)}
    for s in range(32):
        for edge in (127.5, 128, -128.5, -129, 255.5, -256.5, 0.5, -0.5):
            for d in (-1, 0, 1):
                v = int(edge * (1 << s)) + d
                if -lim <= v < lim:
                    cases.add((v, s))
    cases |= {(v, s) for v in (-lim, lim - 1, 0, 1, -1) for s in range(32)}
    sim = Simulator(m)
    seen = []

    async def bench(ctx):
        for v, s in sorted(cases):
            ctx.set(prod, v)
            ctx.set(shift, s)
            seen.append((v, s, ctx.get(out)))

    sim.add_testbench(bench)
    sim.run()
    vals = np.array([v for v, _, _ in seen], dtype=np.int64)
    shifts = np.array([s for _, s, _ in seen], dtype=np.int64)
    want = requantize(vals, 1, shifts, out_bits)
    got = np.array([g for _, _, g in seen], dtype=np.int64)
    assert len(seen) > 1000
    bad = [(v, s, g, w) for (v, s, g), w in zip(seen, want, strict=True) if g != w]
    assert not bad, bad[:10]
    np.testing.assert_array_equal(got, want)

@pytest.mark.parametrize(("mult_bits", "in_dsp"), [(16, True), (18, False)])
def test_ecp5_requantization_products_use_the_dsp_registers(mult_bits, in_dsp):
    """With the ECP5 options each requantization slice product is a MULT18X18D whose input and
    output registers are on, clocked only when the datapath is (the gate-level smoke build runs
    it against the reference); operands wider than the block keep the fabric's registers."""
    cfg = AcceleratorConfig(rows=2, cols=3, acc_bits=32, mult_bits=mult_bits)
    acc = AcceleratorCore(cfg, Implementation(dsp_packing="mult18x18d", post_pipeline=True,
                                          split_operand=17, registers=Registers.READS))
    verilog = emit_verilog(acc, "acc")
    blocks = {name: body for name, body in re.findall(r"module (\S+)(.*?)endmodule", verilog, re.S)
              if "MULT18X18D #(" in body}
    requant = [body for name, body in blocks.items() if ".rq_mul" in name]
    assert len(blocks) == 6 + len(requant)               # the array's 6 cells...
    assert len(requant) == (6 if in_dsp else 0)          # ...and 3 lanes x 2 slices
    for body in blocks.values():
        for reg in ("INPUTA", "INPUTB", "OUTPUT"):
            assert f'.REG_{reg}_CLK("CLK0")' in body
    # The requantization's blocks hold still with the datapath (the array's run freely).
    for body in requant:
        assert ".CE0(ce)" in body
    enables = [re.search(r"\.ce\(([^)]*)\)", pins)[1]
               for pins in re.findall(r"\S +rq_mul\d+_\d+ \((.*?)\);", verilog, re.S)]
    assert len(enables) == len(requant)
    assert all(e.strip() not in ("1'h1", "1'h0") for e in enables), enables


# -- the Requantizer component against hwgen.nn.requantize, on every variant the simulator runs --

#: Each implementation whose requantization has no DSP instance (the Amaranth simulator cannot
#: run one), and the cycles from a step's ``valid`` to its ``o_valid``: two, and the stages its
#: options add.
VARIANTS = {
    "plain": (Implementation(), 2),
    "pipelined": (Implementation(post_pipeline=True), 5),
    "split-multiplier": (Implementation(split_multiplier=3), 3),
    "ice40": (without_dsp(ICE40), 6),
    "split-operand": (Implementation(split_operand=7), 4),
    "ecp5": (without_dsp(ECP5), 7),
    "pipelined-operand-5": (Implementation(post_pipeline=True, split_operand=5), 7),
}
CONFIGS = {
    "int8": AcceleratorConfig(rows=2, cols=3),
    "narrow-2-lanes": AcceleratorConfig(rows=2, cols=4, post_lanes=2, in_bits=6, w_bits=5,
                                        acc_bits=20, mult_bits=9, max_k=64),
    "wide-1-lane": AcceleratorConfig(rows=2, cols=2, post_lanes=1, acc_bits=40, mult_bits=20),
    # ReLU or identity only (the relu flag), no mult_neg.
    "no-bounds": AcceleratorConfig(rows=2, cols=4, post_lanes=2, bounds=False),
}
POS_BITS = 11


def random_lane(rng, cfg, leaky=False):
    """A biased accumulator, its multipliers and shift: anywhere in their ranges, at their
    extremes (0, -1, the most negative), or with a shift that brings the product (by the
    multiplier the lane uses) near the output range (rounding and saturation boundaries)."""
    lo, hi = -(1 << (cfg.acc_bits - 1)), (1 << (cfg.acc_bits - 1)) - 1
    kind = rng.integers(4)
    if kind == 0:
        value = int(rng.choice([lo, hi, 0, -1, 1, lo + 1]))
    elif kind == 1:
        value = int(rng.integers(-1000, 1001))
    else:
        value = random_bits(rng, cfg.acc_bits) + lo
    mult, mult_neg = (int(rng.choice([0, 1, (1 << cfg.mult_bits) - 1,
                                      random_bits(rng, cfg.mult_bits),
                                      random_bits(rng, cfg.mult_bits)])) for _ in range(2))
    used = mult_neg if leaky and value < 0 else mult
    top = cfg.acc_bits + cfg.mult_bits - 1       # shifts 0 .. acc_bits + mult_bits - 1
    if rng.random() < 0.4:
        shift = int(rng.integers(0, top + 1))
    else:
        fit = abs(value * used).bit_length() - (cfg.in_bits - 1)
        shift = min(top, max(0, fit + int(rng.integers(-2, 3))))
    return value, mult, shift, mult_neg


def expected_step(cfg, lanes, layer):
    """The contract (section 3.2), from ``hwgen.nn.requantize`` of each lane's multiplier:
    ``mult_neg`` for a negative value of a leaky layer, then the clamp to the bounds."""
    leaky, low, high = layer
    values, mults, shifts, mult_negs = zip(*lanes, strict=True)
    used = [mn if leaky and v < 0 else mu for v, mu, mn in zip(values, mults, mult_negs,
                                                               strict=True)]
    ys = requantize(np.array(values, dtype=object), np.array(used), np.array(shifts),
                    cfg.in_bits)
    return [min(max(int(y), low), high) for y in ys]


def random_layer(rng, cfg):
    """``(leaky, act_min, act_max)``: the saturation range, ReLU's, a ReLU6-like clamp, an
    arbitrary one or a single value (a design without bounds: identity or ReLU)."""
    lo, hi = -(1 << (cfg.in_bits - 1)), (1 << (cfg.in_bits - 1)) - 1
    if not cfg.bounds:
        return 0, (lo, 0)[int(rng.integers(2))], hi
    a, b = sorted(int(v) for v in rng.integers(lo, hi + 1, 2))
    bounds = [(lo, hi), (0, hi), (0, int(rng.integers(1, hi + 1))), (a, b), (a, a)]
    return int(rng.integers(2)), *bounds[int(rng.integers(len(bounds)))]


def set_layer(ctx, dut, cfg, layer):
    """Give the requantizer a layer's ``(leaky, act_min, act_max)``: the three fields, or on a
    design without bounds the relu flag that stands for them."""
    if cfg.bounds:
        ctx.set(dut.leaky, layer[0])
        ctx.set(dut.act_min, layer[1])
        ctx.set(dut.act_max, layer[2])
    else:
        assert layer[0] == 0 and layer[2] == (1 << (cfg.in_bits - 1)) - 1
        ctx.set(dut.relu, layer[1] == 0)


def lane_params(cfg, bias, mult, shift, mult_neg):
    """A lane's ``params``; ``mult_neg`` only where the design has it."""
    return {"bias": bias, "mult": mult, "shift": shift,
            **({"mult_neg": mult_neg} if cfg.bounds else {})}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_requantizer_against_the_reference(variant, config):
    """Random steps (a gap now and then) leave exactly ``latency`` cycles after they enter, as
    section 3.2 says of their layer's ``leaky`` and bounds, with their ``end`` and ``pos``;
    while ``en`` is low every stage holds (the steps it is offered meanwhile are not taken).
    A layer's fields hold while its steps are in flight (the descriptor's); between layers
    the pipeline empties. The biases in ``params`` are not used."""
    impl, latency = VARIANTS[variant]
    cfg = CONFIGS[config]
    impl.check(cfg)
    dut = Requantizer(cfg, impl, pos_shape=unsigned(POS_BITS))
    assert dut.latency == latency
    lanes = cfg.requant_lanes
    rng = np.random.default_rng(len(variant) * 7 + len(config))
    stats = {"steps": 0, "saturated": 0, "inside": 0, "held": 0, "negative": 0, "clamped": 0}
    limit = 1 << (cfg.in_bits - 1)

    async def bench(ctx):
        entries = []            # what entered, one per cycle with `en`
        want = {"valid": 0, "end": 0}
        layer, drain = random_layer(rng, cfg), 0
        for cycle in range(700):
            # `en` always on at first (exact cycles), then low a cycle in four.
            en = int(cycle < 120 or rng.random() < 0.75)
            if drain == 0 and rng.random() < 0.03:
                drain = latency + 1             # the layer's last steps leave
            if drain == 1:
                layer = random_layer(rng, cfg)  # the next layer: the pipeline is empty
            valid, end = int(rng.random() < 0.8 and not drain), int(rng.random() < 0.15)
            step = [random_lane(rng, cfg, layer[0]) for _ in range(lanes)]
            pos = random_bits(rng, POS_BITS)
            ctx.set(dut.en, en)
            set_layer(ctx, dut, cfg, layer)
            ctx.set(dut.valid, valid)
            ctx.set(dut.end, end)
            ctx.set(dut.values, [v for v, _, _, _ in step])
            ctx.set(dut.params, [lane_params(cfg, random_bits(rng, cfg.acc_bits), mult, shift,
                                             mult_neg) for _, mult, shift, mult_neg in step])
            ctx.set(dut.pos, pos)
            if en:
                drain = max(0, drain - 1)
                entries.append((valid, end, step, pos))
                k = len(entries) - latency
                if k >= 0:
                    v, e, s, p = entries[k]
                    want = {"valid": v, "end": e}
                    if v:
                        want.update(y=expected_step(cfg, s, layer), pos=p)
                        stats["steps"] += 1
                        stats["negative"] += sum(layer[0] and value < 0 and mult != mult_neg
                                                 for value, mult, _, mult_neg in s)
            else:
                stats["held"] += bool(want["valid"])
            await ctx.tick()
            got_valid, got_end = ctx.get(dut.o_valid), ctx.get(dut.o_end)
            assert (got_valid, got_end) == (want["valid"], want["end"]), (cycle, want)
            if want["valid"]:
                got = [ctx.get(dut.o_y[j]) for j in range(lanes)]
                assert got == want["y"], (cycle, entries[len(entries) - latency], layer)
                assert ctx.get(dut.o_pos) == want["pos"]
                # At the layer's bounds (the saturation range's ends among them), or inside.
                stats["saturated"] += sum(y in layer[1:] for y in got)
                stats["inside"] += sum(layer[1] < y < layer[2] and y != 0 for y in got)
                stats["clamped"] += sum(y in layer[1:] and y not in (-limit, limit - 1)
                                        for y in got)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert stats["steps"] > 250 and stats["held"] > 20
    assert stats["saturated"] > 30 and stats["inside"] > 30, stats
    if cfg.bounds:
        assert stats["negative"] > 20 and stats["clamped"] > 20, stats


def edge_lanes(cfg):
    """Lanes at the edges of section 3.2's arithmetic: acc 0 (not negative: ``mult``), -1,
    the most negative and the most positive accumulator, by multipliers 0, 1 and the largest
    (the products that saturate), each with shift 0, 1, the largest, and one that brings the
    product just inside the output range."""
    lo, hi = -(1 << (cfg.acc_bits - 1)), (1 << (cfg.acc_bits - 1)) - 1
    top_mult, top_shift = (1 << cfg.mult_bits) - 1, cfg.acc_bits + cfg.mult_bits - 1
    lanes = []
    for value in (0, -1, 1, lo, lo + 1, hi):
        for mult, mult_neg in ((1, top_mult), (top_mult, 1), (0, top_mult), (top_mult, 0),
                               (top_mult, top_mult)):
            used = mult_neg if value < 0 else mult
            fit = max(0, abs(value * used).bit_length() - (cfg.in_bits - 1))
            for shift in sorted({0, 1, top_shift, min(fit, top_shift)}):
                lanes.append((value, mult, shift, mult_neg))
    return lanes


@pytest.mark.parametrize("config", ["int8", "narrow-2-lanes", "no-bounds"])
@pytest.mark.parametrize("variant", ["plain", "ecp5", "ice40"])
def test_requantizer_at_the_edges(variant, config):
    """The sign-selected multiplier and the bounds at the edges (:func:`edge_lanes`), in
    leaky and plain layers, bounds from a single value to the saturation range: exactly as
    the contract, step after step."""
    impl, latency = VARIANTS[variant]
    cfg = CONFIGS[config]
    dut = Requantizer(cfg, impl, pos_shape=unsigned(POS_BITS))
    n_req = cfg.requant_lanes
    lo, hi = -(1 << (cfg.in_bits - 1)), (1 << (cfg.in_bits - 1)) - 1
    lanes = edge_lanes(cfg)
    layers = [(leaky, low, high) for leaky in (1, 0)
              for low, high in ((lo, hi), (0, hi), (0, 6), (-3, 5), (lo, lo), (hi, hi), (-1, -1))]
    if not cfg.bounds:
        layers = [(0, lo, hi), (0, 0, hi)]
    seen = {"negative": 0, "zero": 0}

    async def bench(ctx):
        ctx.set(dut.en, 1)
        for layer in layers:
            set_layer(ctx, dut, cfg, layer)
            steps = [lanes[i:i + n_req] for i in range(0, len(lanes), n_req)]
            steps[-1] = steps[-1] + lanes[:n_req - len(steps[-1])]
            # Every step, then the empty pipeline before the next layer's fields.
            for cycle in range(len(steps) + latency + 1):
                step = steps[cycle] if cycle < len(steps) else None
                ctx.set(dut.valid, step is not None)
                if step is not None:
                    ctx.set(dut.values, [v for v, _, _, _ in step])
                    ctx.set(dut.params, [lane_params(cfg, 0, mu, sh, mn)
                                         for _, mu, sh, mn in step])
                    ctx.set(dut.pos, cycle)
                await ctx.tick()
                k = cycle + 1 - latency
                if 0 <= k < len(steps):
                    assert ctx.get(dut.o_valid) and ctx.get(dut.o_pos) == k
                    got = [ctx.get(dut.o_y[j]) for j in range(n_req)]
                    assert got == expected_step(cfg, steps[k], layer), (layer, steps[k], got)
                    seen["negative"] += sum(layer[0] and v < 0 for v, _, _, _ in steps[k])
                    seen["zero"] += sum(v == 0 for v, _, _, _ in steps[k])

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # Every value 0 went through every layer.
    assert seen["zero"] == len(layers) * sum(v == 0 for v, _, _, _ in lanes), seen
    assert seen["negative"] > 100 or not cfg.bounds, seen
