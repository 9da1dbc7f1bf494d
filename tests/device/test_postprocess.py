"""The post-processing alone, fed summed rows as the accumulator bank hands them on and its
parameters from a Python list read as the accelerator reads the parameter memory: a raw layer's
rows written to the output memory with the biases added, at their address; a requantized row
split into ``requant_steps`` steps with their channels, parameters and positions, as
``hwgen.nn.requantize`` says, a fixed number of cycles later; ``param_hold`` while a row's steps
are not done; and everything held while ``en`` is low."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import ECP5, ICE40, SMALL, descriptor, random_bits, without_dsp

from hwgen.config import AcceleratorConfig
from hwgen.device.postprocess import PostProcessor
from hwgen.implementation import Implementation, Registers
from hwgen.memmap import descriptor_layout
from hwgen.nn import requantize
from sim.interpreter import signed

VARIANTS = {
    "plain": Implementation(),
    "pipelined": Implementation(post_pipeline=True),
    "registered-reads": Implementation(registers=Registers.READS),
    "ice40": without_dsp(ICE40),
    "ecp5": without_dsp(ECP5),
}
CONFIGS = {
    "2x3": AcceleratorConfig(rows=2, cols=3, **SMALL),
    "2x4-steps2": AcceleratorConfig(rows=2, cols=4, post_lanes=2, **SMALL),
    "3x6-steps3": AcceleratorConfig(rows=3, cols=6, post_lanes=2, **SMALL),
    "2x4-steps4": AcceleratorConfig(rows=2, cols=4, post_lanes=1, **SMALL),
    "2x4-no-bounds": AcceleratorConfig(rows=2, cols=4, post_lanes=2, bounds=False, **SMALL),
}


def random_params(rng, cfg):
    """One parameter word per output tile: biases, multipliers, and shifts that put most
    results inside the output range and some at its ends."""
    nt_bits = descriptor_layout(cfg).members["n_tiles"].width
    bias = 1 << (cfg.acc_bits - 4)
    fit = cfg.acc_bits - 4 + cfg.mult_bits - (cfg.in_bits - 1)
    return [[{"bias": int(rng.integers(-bias, bias)),
              "mult": int(rng.integers(0, 1 << cfg.mult_bits)),
              "shift": int(min(cfg.acc_bits + cfg.mult_bits - 1,
                               max(0, fit + rng.integers(-3, 4)))),
              **({"mult_neg": int(rng.integers(0, 1 << cfg.mult_bits))} if cfg.bounds else {})}
             for _ in range(cfg.cols)] for _ in range(1 << nt_bits)]


def random_activation(rng, cfg):
    """The descriptor fields of a random activation: leaky or not, and bounds that are the
    saturation range, ReLU's, or an arbitrary clamp; on a design without bounds the relu
    flag."""
    lo, hi = -(1 << (cfg.in_bits - 1)), (1 << (cfg.in_bits - 1)) - 1
    if not cfg.bounds:
        return {"relu": int(rng.integers(2))}
    a, b = sorted(int(v) for v in rng.integers(lo, hi + 1, 2))
    act_min, act_max = [(lo, hi), (0, hi), (a, b)][int(rng.integers(3))]
    return {"leaky": int(rng.integers(2)), "act_min": act_min, "act_max": act_max}


def layer_activation(cfg, desc):
    """``(leaky, act_min, act_max)`` of a descriptor, the relu flag's on a design without
    bounds."""
    if cfg.bounds:
        return desc["leaky"], desc["act_min"], desc["act_max"]
    hi = (1 << (cfg.in_bits - 1)) - 1
    return 0, 0 if desc["relu"] else -hi - 1, hi


def random_layers(rng, cfg, count):
    """Layers of 1..4 rows, 1..2 reduction tiles and 1..3 output tiles, raw or requantized
    (leaky or not, random bounds), with ``n`` anywhere in the last output tile (lanes past it
    are not written)."""
    layers = []
    for i in range(count):
        n_tiles = int(rng.integers(1, 4))
        layers.append((int(rng.integers(1, 5)), descriptor(
            cfg, raw=int(i % 3 == 2 or rng.random() < 0.15), **random_activation(rng, cfg),
            k_tiles=int(rng.integers(1, 3)), n_tiles=n_tiles,
            n=(n_tiles - 1) * cfg.cols + int(rng.integers(1, cfg.cols + 1)),
            dst_base=int(rng.integers(0, 30)), dst_stride=int(rng.integers(1, 5)),
            src_base=random_bits(rng, 5), src_stride=random_bits(rng, 3),
            w_base=random_bits(rng, 5), p_base=0)))
    return layers


class Slots:
    """The post-processing's inputs, one entry per cycle with ``en`` (a slot), and what it must
    put out in each slot."""

    def __init__(self, cfg, latency, addr_width, raw_registered):
        self.cfg = cfg
        self.latency = latency
        self.addr_width = addr_width
        self.raw_delay = 2 if raw_registered else 1
        self.inputs = []         # per slot: (desc, row or None)
        self.outputs = {}        # slot -> {"raw": ..., "raw_end": 1, "o": ..., "hold": 1}

    def add(self, desc, row=None):
        self.inputs.append((desc, row))
        return len(self.inputs) - 1

    def idle(self, desc, count):
        for _ in range(count):
            self.add(desc)

    def expect(self, slot, key, value):
        assert key not in self.outputs.setdefault(slot, {}), (slot, key)
        self.outputs[slot][key] = value

    def final_row(self, desc, params, *, nt, m, end, rng):
        """A row of the last reduction tile; record what it must give."""
        cfg = self.cfg
        cols, lanes, n_req = cfg.cols, cfg.act_lanes, cfg.requant_lanes
        limit = 1 << (cfg.acc_bits - 4)
        row_sum = [int(v) for v in rng.integers(-limit, limit, cols)]
        n0 = nt * cols
        dst = desc["dst_base"] + m * desc["dst_stride"]
        pos = {"nt": nt, "n0": n0, "oword": n0 // lanes, "orem": n0 % lanes, "dst": dst}
        slot = self.add(desc, {"valid": 1, "final": 1, "end": end, "sum": row_sum, "pos": pos})
        par = params[nt]
        biased = [signed(s + p["bias"], cfg.acc_bits) for s, p in zip(row_sum, par,
                                                                       strict=True)]
        if desc["raw"]:
            self.expect(slot + 1, "raw_end", end)
            width = (cfg.out_depth - 1).bit_length()
            self.expect(slot + self.raw_delay, "raw", ((dst + nt) % (1 << width), biased))
            return
        # Section 3.2: mult_neg for a negative biased sum of a leaky layer, then the bounds.
        leaky, act_min, act_max = layer_activation(cfg, desc)
        mults = [p["mult_neg"] if leaky and b < 0 else p["mult"]
                 for b, p in zip(biased, par, strict=True)]
        ys = requantize(np.array(biased, dtype=object), np.array(mults),
                        np.array([p["shift"] for p in par]), cfg.in_bits)
        ys = [min(max(int(y), act_min), act_max) for y in ys]
        for c in range(cfg.requant_steps):
            first = n0 + c * n_req
            step = {"y": ys[c * n_req:(c + 1) * n_req],
                    "base": (dst + first // lanes) % (1 << self.addr_width),
                    "rem": first % lanes,
                    "ok": sum(1 << j for j in range(n_req) if first + j < desc["n"]),
                    "end": int(end and c == cfg.requant_steps - 1)}
            self.expect(slot + 1 + c + self.latency, "o", step)
            if c < cfg.requant_steps - 1:
                self.expect(slot + 1 + c, "hold", 1)

    def other_row(self, desc, rng):
        """A row of an earlier reduction tile: not finished, ignored here."""
        cfg = self.cfg
        return self.add(desc, {"valid": 1, "final": 0, "end": 0,
                               "sum": [random_bits(rng, cfg.acc_bits) - (1 << (cfg.acc_bits - 1))
                                       for _ in range(cfg.cols)], "pos": None})


def plan(cfg, layers, params, *, latency, addr_width, raw_registered, rng):
    """Every layer's rows as the accumulators hand them on (a requantized layer's last-tile rows
    at least ``requant_steps`` slots apart, the others with random gaps), each layer after the
    previous one's results all left."""
    slots = Slots(cfg, latency, addr_width, raw_registered)
    steps = cfg.requant_steps
    for batch, desc in layers:
        slots.idle(desc, int(rng.integers(1, 4)))
        for nt in range(desc["n_tiles"]):
            for kt in range(desc["k_tiles"]):
                for m in range(batch):
                    final = kt == desc["k_tiles"] - 1
                    if final:
                        end = int(m == batch - 1 and nt == desc["n_tiles"] - 1)
                        slots.final_row(desc, params, nt=nt, m=m, end=end, rng=rng)
                        gap = 0 if desc["raw"] else steps - 1
                    else:
                        slots.other_row(desc, rng)
                        gap = 0
                    slots.idle(desc, gap + int(rng.choice([0, 0, 1, 3])))
        slots.idle(desc, steps + latency + 3)
    return slots


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_rows_steps_and_raw_writes(variant, config):
    cfg, impl = CONFIGS[config], VARIANTS[variant]
    dut = PostProcessor(cfg, impl)
    latency = dut.requantizer.latency
    rng = np.random.default_rng(sum(map(ord, variant + config)))
    params = random_params(rng, cfg)
    layers = random_layers(rng, cfg, 16)
    slots = plan(cfg, layers, params, latency=latency, addr_width=dut.addr_width,
                 raw_registered=impl.registers >= Registers.READS, rng=rng)
    nt_bits = descriptor_layout(cfg).members["n_tiles"].width
    stats = {"raw": 0, "steps": 0, "en_low": 0, "holds": 0, "inside": 0}

    def may_pause(s):
        """Whether `en` may be low before slot ``s``: the parameter memory then reads the output
        tile of the row the bank holds (slot ``s``'s), so no row in P1 may need the parameters
        read in the slot before: a raw row's only cycle there, a requantized row's last step.
        (Earlier steps hold the parameters; everything else holds with the datapath.)"""
        for t in range(max(0, s - cfg.requant_steps), s):
            desc, row = slots.inputs[t]
            if row and row["valid"] and row["final"] and \
                    s == t + (1 if desc["raw"] else cfg.requant_steps):
                return False
        return True

    async def bench(ctx):
        params_out = params[0]
        s = 0
        while s < len(slots.inputs):
            desc, row = slots.inputs[s]
            en = 0 if may_pause(s) and rng.random() < 0.2 else 1
            ctx.set(dut.en, en)
            ctx.set(dut.desc, desc)
            ctx.set(dut.params, params_out)
            if row is None:
                # The bank's stage B holds no row; its position registers show the next one's.
                row = {"valid": 0, "final": int(rng.integers(2)), "end": 0,
                       "sum": [0] * cfg.cols,
                       "pos": {"nt": random_bits(rng, nt_bits), "n0": 0, "oword": 0,
                               "orem": 0, "dst": 0}}
                slots.inputs[s] = (desc, row)       # the same while `en` is low
            elif row["pos"] is None:
                row["pos"] = {"nt": random_bits(rng, nt_bits), "n0": 0, "oword": 0, "orem": 0,
                              "dst": 0}
            ctx.set(dut.i_row.valid, row["valid"])
            ctx.set(dut.i_row.payload, {name: row[name] for name in ("final", "end", "sum",
                                                                      "pos")})
            want = slots.outputs.get(s, {})
            # The raw write and its end.
            assert ctx.get(dut.raw_we) == ("raw" in want), s
            if "raw" in want:
                addr, data = want["raw"]
                assert ctx.get(dut.raw_addr) == addr
                assert [ctx.get(dut.raw_data[j]) for j in range(cfg.cols)] == data
                stats["raw"] += en
            if desc["raw"]:          # (what it says in a requantized layer is not used)
                assert ctx.get(dut.raw_end) == want.get("raw_end", 0), s
            # The requantized steps.
            o = dut.o_step
            assert ctx.get(o.valid) == ("o" in want), s
            if "o" in want:
                step = want["o"]
                assert [ctx.get(o.payload.y[j]) for j in range(cfg.requant_lanes)] == step["y"], s
                pos = ctx.get(o.payload.pos)
                assert (pos.base, pos.rem, pos.ok) == (step["base"], step["rem"],
                                                       step["ok"]), s
                stats["steps"] += en
                stats["inside"] += sum(0 < y < (1 << (cfg.in_bits - 1)) - 1 for y in step["y"])
            assert ctx.get(o.payload.end) == want.get("o", {}).get("end", 0), s
            hold = ctx.get(dut.param_hold)
            assert hold == want.get("hold", 0), s
            stats["holds"] += hold and en
            # The parameter memory reads the output tile of the bank's row unless held.
            if not hold:
                params_out = params[row["pos"]["nt"]]
            stats["en_low"] += not en
            s += en
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert stats["raw"] > 3 and stats["steps"] > 10 and stats["en_low"] > 8, stats
    assert stats["inside"] > 8, stats
    assert (stats["holds"] > 0) == (cfg.requant_steps > 1)
