"""The accumulator bank alone, fed result rows as the engine delivers them (at most one per
cycle, with gaps), a layer's output pixels in chunks of at most ``acc_depth`` (``start_layer``,
then ``start_chunk`` for each later one): each finished row equals the sum of its reduction
tiles, leaves stage B a fixed number of cycles after its last tile with where it goes (the
destination going on from chunk to chunk) and whether it ends its chunk, and the datapath holds
still while ``en`` is low; plain and registered reads, layers of 1..3 chunks, 1..4 reduction
tiles, 1..3 output tiles."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import SMALL, ControllerOutputs, descriptor, random_bits

from hwgen.config import AcceleratorConfig
from hwgen.device.accumulators import AccumulatorBank


def _config(shape, **kw):
    return AcceleratorConfig(rows=shape[0], cols=shape[1], **{**SMALL, **kw})


def random_runs(rng, config, count):
    """``count`` runs of 1..3 layers, each of 1..3 chunks' worth of output pixels, 1..4
    reduction and 1..3 output tiles, their output rows inside ACT (the first layer: a last
    chunk of one pixel, four tiles, the read-modify-write's closest case)."""
    depth = max(config.act_depth, config.out_depth)
    runs = []
    for r in range(count):
        layers = []
        for i in range(int(rng.integers(1, 4))):
            first = r == 0 and i == 0
            pixels = config.acc_depth + 1 if first else int(rng.integers(1, 3 * config.acc_depth))
            stride = int(rng.integers(1, max(1, min(5, depth // pixels)) + 1))
            layers.append((pixels, descriptor(
                config, k_tiles=4 if first else int(rng.integers(1, 5)),
                n_tiles=int(rng.integers(1, 4)),
                dst_base=int(rng.integers(0, depth - pixels * stride + 1)),
                dst_stride=stride, raw=int(rng.integers(2)), spatial=int(rng.integers(2)),
                leaky=int(rng.integers(2)), n=random_bits(rng, 3),
                src_base=random_bits(rng, 5), src_stride=random_bits(rng, 3),
                w_base=random_bits(rng, 5), p_base=random_bits(rng, 3))))
        runs.append(layers)
    return runs


def chunk_rows(config, desc, pixels, chunk, rows):
    """What stage B must show for each of a chunk's result rows, delivered in the engine's
    order (output tile, reduction tile, the chunk's pixels) with data ``rows``: ``(last,
    (final, end, sum, position))``, the sum and position of a row of the last reduction tile
    only. The chunk holds the layer's output pixels ``chunk * acc_depth ..``."""
    cols, lanes = config.cols, config.act_lanes
    k_tiles, n_tiles = desc["k_tiles"], desc["n_tiles"]
    first = chunk * config.acc_depth
    count = min(config.acc_depth, pixels - first)
    out, sums, i = [], {}, 0
    for nt in range(n_tiles):
        for kt in range(k_tiles):
            for m in range(count):
                sums[m] = list(rows[i]) if kt == 0 else [a + b for a, b in zip(sums[m], rows[i],
                                                                              strict=True)]
                i += 1
                last = m == count - 1
                final = kt == k_tiles - 1
                if not final:
                    out.append((last, (False, False, None, None)))
                    continue
                n0 = nt * cols
                pos = {"nt": nt, "n0": n0, "oword": n0 // lanes, "orem": n0 % lanes,
                       "dst": desc["dst_base"] + (first + m) * desc["dst_stride"]}
                out.append((last, (True, last and nt == n_tiles - 1, sums[m], pos)))
    return out


def run_bank(config, registered, runs, *, seed):
    """Deliver every chunk's result rows with random gaps, ``en`` low between runs and in some
    long pauses; return the stage-B rows seen in cycles with ``en`` (``(cycle, final, end, sum,
    position)``), what was expected of each row with the cycle it was delivered, the cycles in
    which the accumulator memory read the word it wrote, ``{cycle: (en, param_nt)}`` and
    counts of the cycles ``en`` was low, stage B was seen holding, and chunks."""
    dut = AccumulatorBank(config, registered_reads=registered)
    rng = np.random.default_rng(seed)
    cols = config.cols
    limit = 1 << (config.acc_bits - 4)       # four tiles' sums stay in range
    seen, expected, collisions, param_nts = [], [], [], {}
    stats = {"en_low": 0, "held": 0, "chunks": 0}

    def idle(cycles, en=1):
        return [(en, None, None, None)] * cycles

    def schedule():
        """Per cycle: (en, a pulse with its descriptor or None, "between" runs or None,
        delivery or None)."""
        plan = []
        for layers in runs:
            plan += [(0, None, "between", None), *idle(int(rng.integers(0, 3)), en=0)]
            for pixels, desc in layers:
                for chunk in range(-(-pixels // config.acc_depth)):
                    pulse = ("start_layer", desc) if chunk == 0 else ("start_chunk", None)
                    stats["chunks"] += chunk > 0
                    plan.append((1, pulse, None, None))
                    plan += idle(int(rng.integers(1, 4)))
                    count = min(config.acc_depth, pixels - chunk * config.acc_depth)
                    rows = [[int(v) for v in rng.integers(-limit, limit, cols)]
                            for _ in range(desc["k_tiles"] * desc["n_tiles"] * count)]
                    for row, (last, want) in zip(rows, chunk_rows(config, desc, pixels, chunk,
                                                                  rows), strict=True):
                        plan.append((1, None, None, (row, int(last), want)))
                        if rng.random() < 0.05:
                            # A pause of the engine long enough that no row is in flight, with
                            # `en` low in some of it.
                            plan += idle(6) + idle(int(rng.integers(1, 4)), en=0)
                        plan += idle(int(rng.choice([0, 0, 0, 1, 2, 3])))
                    plan += idle(5)
                plan.append((1, None, "end_layer", None))
        return [*plan, (0, None, "between", None), (0, None, "between", None)]

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng)
        rd, wr = dut.memory.read_ports[0], dut.memory.write_ports[0]
        held = None
        for cycle, (en, pulse, mark, delivery) in enumerate(schedule()):
            if mark == "between":
                ctrl.end_run()          # the bounds are random bits between runs
            elif mark == "end_layer":
                ctrl.end_layer()
            name, desc = pulse or (None, None)
            ctrl.drive(ctx, name, desc=desc, batch=1 if name == "start_layer" else None)
            ctx.set(dut.en, en)
            ctx.set(dut.i_result.valid, delivery is not None)
            if delivery is not None:
                row, last, want = delivery
                ctx.set(dut.i_result.payload, {"data": row, "last": last})
                expected.append((cycle, *want))
            else:
                ctx.set(dut.i_result.payload, {"data": [random_bits(rng, config.acc_bits)
                                                        for _ in range(cols)], "last": 1})
            assert ctx.get(dut.i_result.ready)
            row = dut.o_row.payload
            assert ctx.get(dut.o_row.ready)     # always_ready: the post-processing never waits
            out = (ctx.get(dut.o_row.valid), ctx.get(row.final), ctx.get(row.end),
                   [ctx.get(row.sum[j]) for j in range(cols)],
                   ctx.get(row.pos.as_value()))
            param_nts[cycle] = (en, ctx.get(dut.param_nt))
            if en:
                if out[0]:
                    pos = ctx.get(row.pos)
                    seen.append((cycle, out[1], out[2], out[3],
                                 {f: getattr(pos, f) for f in ("nt", "n0", "oword", "orem",
                                                               "dst")}))
                held = None
            else:
                # The datapath holds still: stage B shows the same as when `en` fell.
                stats["en_low"] += 1
                if held is not None:
                    assert out == held, cycle
                    stats["held"] += 1
                held = out
            if ctx.get(rd.en) and ctx.get(wr.en) and ctx.get(rd.addr) == ctx.get(wr.addr):
                collisions.append(cycle)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen, expected, collisions, param_nts, stats


def check(config, registered, seen, expected, param_nts):
    latency = 2 if registered else 1    # the engine's rows pass a register first
    assert [s[0] for s in seen] == [e[0] + latency for e in expected]
    for (cycle, final, end, got_sum, got_pos), (_, w_final, w_end, w_sum, w_pos) in zip(
            seen, expected, strict=True):
        assert (final, end) == (w_final, w_end), cycle
        if final:
            assert (got_sum, got_pos) == (w_sum, w_pos), cycle
        # The parameters of the row's output tile are read in its cycle in stage B, or a cycle
        # ahead with registered reads.
        if final:
            ahead = 1 if registered else 0
            en, nt = param_nts[cycle - ahead]
            assert en and nt == w_pos["nt"], cycle


CASES = {
    # (shape, acc_depth): chunks of many rows, of a few, of one (every row a chunk's last).
    "2x3": ((2, 3), 16),
    "3x2-acc5": ((3, 2), 5),
    "1x1-acc1": ((1, 1), 1),
    "4x2-acc3": ((4, 2), 3),
    "2x5-acc8": ((2, 5), 8),
}


@pytest.mark.parametrize("registered", [False, True], ids=["plain", "registered"])
@pytest.mark.parametrize("case", list(CASES))
def test_sums_positions_and_ends(case, registered):
    shape, acc_depth = CASES[case]
    cfg = _config(shape, acc_depth=acc_depth)
    rng = np.random.default_rng(shape[0] * 10 + shape[1])
    runs = random_runs(rng, cfg, 5)
    seen, expected, collisions, param_nts, stats = run_bank(cfg, registered, runs, seed=4)
    check(cfg, registered, seen, expected, param_nts)
    assert sum(final for _, final, *_ in seen) > 20
    assert sum(end for _, _, end, *_ in seen) > stats["chunks"] > 3
    assert stats["held"] > 5
    if registered:
        # The memory never reads a word as it is written (collision_free_memories says so).
        assert not collisions
    else:
        # Plain reads rely on the read port's transparency: a chunk of one row reads the word
        # written in the same cycle.
        assert collisions


def test_narrow_accumulators():
    """Sums near the ends of a 20-bit range, with registered reads."""
    cfg = _config((2, 3), in_bits=4, w_bits=4, acc_bits=20, mult_bits=8, max_k=64, acc_depth=6)
    rng = np.random.default_rng(8)
    runs = random_runs(rng, cfg, 4)
    for registered in (False, True):
        seen, expected, _, param_nts, _ = run_bank(cfg, registered, runs, seed=9)
        check(cfg, registered, seen, expected, param_nts)
