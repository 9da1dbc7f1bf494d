"""The accumulator bank alone, fed result rows as the engine delivers them (at most one per
cycle, with gaps): each finished row equals the sum of its reduction tiles, leaves stage B a
fixed number of cycles after its last tile with where it goes and whether it ends the layer,
and the datapath holds still while ``en`` is low; plain and registered reads, batches of 1..5
rows, 1..4 reduction tiles, 1..3 output tiles."""

import numpy as np
import pytest
from amaranth.sim import Simulator
from support import SMALL, ControllerOutputs, descriptor, random_bits

from hwgen.config import AcceleratorConfig
from hwgen.device.accumulators import AccumulatorBank


def _config(shape, **kw):
    return AcceleratorConfig(rows=shape[0], cols=shape[1], **{**SMALL, **kw})


def random_runs(rng, config, count):
    """``count`` runs of 1..5 rows, each of 1..3 layers of 1..4 reduction and 1..3 output
    tiles (the first run: one row, four tiles, the read-modify-write's closest case)."""
    runs = []
    for r in range(count):
        batch = 1 if r == 0 else int(rng.integers(1, 6))
        layers = []
        for _ in range(int(rng.integers(1, 4))):
            layers.append(descriptor(
                config, k_tiles=4 if r == 0 else int(rng.integers(1, 5)),
                n_tiles=int(rng.integers(1, 4)), dst_base=int(rng.integers(0, 40)),
                dst_stride=int(rng.integers(1, 6)), raw=int(rng.integers(2)),
                relu=int(rng.integers(2)), n=random_bits(rng, 3),
                src_base=random_bits(rng, 5), src_stride=random_bits(rng, 3),
                w_base=random_bits(rng, 5), p_base=random_bits(rng, 3)))
        runs.append((batch, layers))
    return runs


def expected_rows(config, desc, batch, rows):
    """What stage B must show for each of a layer's result rows, delivered in the engine's
    order (output tile, reduction tile, batch row) with data ``rows``: ``(final, end, sum,
    position)``, the sum and position of a row of the last reduction tile only."""
    cols, lanes = config.cols, config.act_lanes
    k_tiles, n_tiles = desc["k_tiles"], desc["n_tiles"]
    out, sums, i = [], {}, 0
    for nt in range(n_tiles):
        for kt in range(k_tiles):
            for m in range(batch):
                sums[m] = list(rows[i]) if kt == 0 else [a + b for a, b in zip(sums[m], rows[i],
                                                                              strict=True)]
                i += 1
                final = kt == k_tiles - 1
                if not final:
                    out.append((False, False, None, None))
                    continue
                n0 = nt * cols
                pos = {"nt": nt, "n0": n0, "oword": n0 // lanes, "orem": n0 % lanes,
                       "dst": desc["dst_base"] + m * desc["dst_stride"]}
                out.append((True, m == batch - 1 and nt == n_tiles - 1, sums[m], pos))
    return out


def run_bank(config, registered, runs, *, seed):
    """Deliver every layer's result rows with random gaps, ``en`` low between runs and in some
    long pauses; return the stage-B rows seen in cycles with ``en`` (``(cycle, final, end, sum,
    position)``), what was expected of each row with the cycle it was delivered, the cycles in
    which the accumulator memory read the word it wrote, ``{cycle: (en, param_nt)}`` and
    counts of the cycles ``en`` was low and stage B was seen holding."""
    dut = AccumulatorBank(config, registered_reads=registered)
    rng = np.random.default_rng(seed)
    cols = config.cols
    limit = 1 << (config.acc_bits - 4)       # four tiles' sums stay in range
    seen, expected, collisions, param_nts = [], [], [], {}
    stats = {"en_low": 0, "held": 0}

    def schedule():
        """Per cycle: (en, start descriptor or None, a run's batch at its first layer's start
        or "between" runs or None, delivery or None)."""
        plan = []
        for batch, layers in runs:
            plan += [(0, None, "between", None)] * int(rng.integers(1, 4))
            for i, desc in enumerate(layers):
                plan.append((1, desc, batch if i == 0 else None, None))
                plan += [(1, None, None, None)] * int(rng.integers(1, 4))
                rows = [[int(v) for v in rng.integers(-limit, limit, cols)]
                        for _ in range(desc["k_tiles"] * desc["n_tiles"] * batch)]
                want = expected_rows(config, desc, batch, rows)
                for n, row in enumerate(rows):
                    plan.append((1, None, None, (row, int(n % batch == batch - 1), want[n])))
                    if rng.random() < 0.05:
                        # A pause of the engine long enough that no row is in flight, with
                        # `en` low in some of it.
                        plan += [(1, None, None, None)] * 6
                        plan += [(0, None, None, None)] * int(rng.integers(1, 4))
                    plan += [(1, None, None, None)] * int(rng.choice([0, 0, 0, 1, 2, 3]))
                plan += [(1, None, None, None)] * 5
        return [*plan, (0, None, "between", None), (0, None, "between", None)]

    async def bench(ctx):
        ctrl = ControllerOutputs(dut, rng)
        rd, wr = dut.memory.read_ports[0], dut.memory.write_ports[0]
        held = None
        for cycle, (en, start, run, delivery) in enumerate(schedule()):
            if run == "between":
                ctrl.end_run()          # the bounds are random bits between runs
            ctrl.drive(ctx, start, batch=None if run == "between" else run)
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
            out = (ctx.get(dut.row_valid), ctx.get(dut.row_final), ctx.get(dut.row_end),
                   [ctx.get(dut.row_sum[j]) for j in range(cols)],
                   ctx.get(dut.row_pos.as_value()))
            param_nts[cycle] = (en, ctx.get(dut.param_nt))
            if en:
                if out[0]:
                    pos = ctx.get(dut.row_pos)
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


SHAPES = [(2, 3), (3, 2), (1, 1), (4, 2), (2, 5)]


@pytest.mark.parametrize("registered", [False, True], ids=["plain", "registered"])
@pytest.mark.parametrize("shape", SHAPES)
def test_sums_positions_and_ends(shape, registered):
    cfg = _config(shape)
    rng = np.random.default_rng(shape[0] * 10 + shape[1])
    runs = random_runs(rng, cfg, 6)
    seen, expected, collisions, param_nts, stats = run_bank(cfg, registered, runs, seed=4)
    check(cfg, registered, seen, expected, param_nts)
    assert sum(final for _, final, *_ in seen) > 20
    assert stats["held"] > 5
    if registered:
        # The memory never reads a word as it is written (collision_free_memories says so).
        assert not collisions
    else:
        # Plain reads rely on the read port's transparency: a one-row batch reads the word
        # written in the same cycle.
        assert collisions


def test_narrow_accumulators():
    """Sums near the ends of a 20-bit range, with registered reads."""
    cfg = _config((2, 3), in_bits=4, w_bits=4, acc_bits=20, mult_bits=8, max_k=64)
    rng = np.random.default_rng(8)
    runs = random_runs(rng, cfg, 4)
    for registered in (False, True):
        seen, expected, _, param_nts, _ = run_bank(cfg, registered, runs, seed=9)
        check(cfg, registered, seen, expected, param_nts)
