"""The bf16 matrix datapath against the contract's dense layer
(:meth:`hwgen.nn.bf16_layers.Bf16Dense.forward`): layers fed in the int8 device's order
(chunk, output tile, reduction tile, rows) by producers that wait for ``ready``, with random
gaps; every finished row bit for bit with its ``m`` and ``nt``; the bank's row-rule check on;
the timing :meth:`~BF16MatrixDatapath.entry_cycles` gives; seeded bugs that the checks must
catch."""

import ml_dtypes
import numpy as np
import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st
from support.float_units import (
    bf16_bits_strategy,
    bf16_moderate,
    bf16_special,
    bf16_tiny,
    fp32_bias_strategy,
    fp32_of,
)
from support.gapped_streams import GappedSources

from hwgen.device.bf16_datapath import BF16MatrixDatapath
from hwgen.generate import emit_verilog
from hwgen.nn.bf16 import flush
from hwgen.nn.bf16_layers import Bf16Dense

# Mostly moderate values, now and then any pattern, tiny ones, zeros, Inf and NaN.
values = st.one_of(bf16_moderate, bf16_moderate, bf16_moderate, bf16_tiny, bf16_special,
                   bf16_bits_strategy)
bounds = st.one_of(st.none(), bf16_moderate.map(lambda v: v << 16),
                   st.sampled_from([0, 0x7F800000, 0xFF800000]))


class Layer:
    """A dense layer's bits: ``x`` (``rows_total x K`` bf16), ``w`` (``K x N`` bf16), ``bias``
    (``N`` fp32), ``relu``, the bounds (fp32 bits or ``None``), ``raw``, and the chunks'
    sizes."""

    def __init__(self, x, w, bias, chunks, *, relu=False, act_min=None, act_max=None, raw=False):
        self.x = np.asarray(x, dtype=np.uint16).reshape(sum(chunks), -1)
        self.w = np.asarray(w, dtype=np.uint16).reshape(self.x.shape[1], -1)
        self.bias = np.asarray(bias, dtype=np.uint32)
        self.chunks, self.relu, self.raw = list(chunks), relu, raw
        self.act_min, self.act_max = act_min, act_max

    def tiles(self, dp):
        """``(k_tiles, n_tiles)`` on ``dp``'s array."""
        (k, n), rows, cols = self.w.shape, dp.rows, dp.cols
        return -(-k // rows), -(-n // cols)

    def padded(self, dp):
        """``x``, ``w`` and ``bias`` padded with zeros to whole tiles (+0.0 products)."""
        k_tiles, n_tiles = self.tiles(dp)
        kp, np_ = k_tiles * dp.rows, n_tiles * dp.cols
        x = np.zeros((self.x.shape[0], kp), dtype=np.uint16)
        w = np.zeros((kp, np_), dtype=np.uint16)
        bias = np.zeros(np_, dtype=np.uint32)
        x[:, :self.x.shape[1]], w[:self.w.shape[0], :self.w.shape[1]] = self.x, self.w
        bias[:len(self.bias)] = self.bias
        return x, w, bias

    def reference(self, dp):
        """The contract's output rows (uint32 bits), from the unpadded layer."""
        def bound(bits):
            return None if bits is None else float(flush(fp32_of([bits]))[0])
        layer = Bf16Dense(weight=self.w.view(ml_dtypes.bfloat16), bias=fp32_of(self.bias),
                          activation="relu" if self.relu else "identity",
                          act_min=bound(self.act_min), act_max=bound(self.act_max),
                          raw=self.raw)
        with np.errstate(over="ignore", invalid="ignore"):
            return layer.forward(self.x.view(ml_dtypes.bfloat16), dp.rows).view(np.uint32)

    def streams(self, dp):
        """The weight rows and activation rows in the int8 order, packed."""
        x, w, _ = self.padded(dp)
        k_tiles, n_tiles = self.tiles(dp)
        rows, cols = dp.rows, dp.cols
        w_items, a_items, start = [], [], 0
        for size in self.chunks:
            for nt in range(n_tiles):
                for kt in range(k_tiles):
                    w_items += [pack(w[kt * rows + r, nt * cols:(nt + 1) * cols], 16)
                                for r in range(rows)]
                    a_items += [pack(x[start + i, kt * rows:(kt + 1) * rows], 16, i == size - 1)
                                for i in range(size)]
            start += size
        return w_items, a_items

    def expected(self, dp):
        """The finished rows in the order they leave: ``(m, nt, values)`` of the real
        columns, in hex."""
        ref, (_, n_tiles), cols, n = self.reference(dp), self.tiles(dp), dp.cols, self.w.shape[1]
        want, start = [], 0
        for size in self.chunks:
            for nt in range(n_tiles):
                want += [(i, nt, [hex(ref[start + i, j]) for j in range(nt * cols,
                                                                        min(n, nt * cols + cols))])
                         for i in range(size)]
            start += size
        return want

    def settings(self):
        """The layer's ``FINISH_SETTINGS`` fields."""
        return {"relu": int(self.relu), "raw": int(self.raw),
                "min_en": int(self.act_min is not None), "max_en": int(self.act_max is not None),
                "act_min": self.act_min or 0, "act_max": self.act_max or 0}


def pack(words, bits, last=None):
    """``words`` packed lowest first, ``bits`` each, with ``last`` above them if given."""
    value = sum(int(v) << (bits * i) for i, v in enumerate(words))
    return value if last is None else value | (int(last) << (bits * len(words)))


def run(dp, layer, w_gaps=(), a_gaps=()):
    """Drive ``layer`` into ``dp``: item ``i`` of a stream waits ``gaps[i]`` idle cycles, then
    until ``ready``; ``bias`` follows ``bias_nt`` a cycle late (a read port). Return the
    activation transfers' cycles and the finished rows as ``(cycle, m, nt, values)``."""
    w_items, a_items = layer.streams(dp)
    _, bias = layer.padded(dp)[1:]
    k_tiles, n_tiles = layer.tiles(dp)
    cols, real = dp.cols, layer.w.shape[1]
    want = sum(layer.chunks) * n_tiles
    a_cycles, got = [], []
    budget = 40 * (len(w_items) + len(a_items)) + 4 * dp.latency + 200

    async def bench(ctx):
        ctx.set(dp.k_tiles, k_tiles)
        ctx.set(dp.n_tiles, n_tiles)
        for name, value in layer.settings().items():
            ctx.set(Value.cast(getattr(dp.layer, name)), value)
        sources = GappedSources([(dp.i_weight, w_items, w_gaps, []),
                                 (dp.i_act, a_items, a_gaps, a_cycles)])
        bias_nt, drain = 0, dp.latency + 4
        for cycle in range(budget):
            if len(got) >= want:
                if drain == 0:
                    return
                drain -= 1
            for c in range(cols):
                ctx.set(dp.bias[c].as_value(), int(bias[bias_nt * cols + c]))
            bias_nt = ctx.get(dp.bias_nt)
            offered = sources.offer(ctx)
            if ctx.get(dp.o_valid):
                nt = ctx.get(dp.o_row.nt)
                got.append((cycle, ctx.get(dp.o_row.m), nt,
                            [hex(ctx.get(dp.o_row.data[c].as_value()))
                             for c in range(min(cols, real - nt * cols))]))
            assert ctx.get(dp.issue) == (offered[1] and ctx.get(dp.i_act.ready))
            sources.advance(ctx, cycle)
            await ctx.tick()
        raise AssertionError(f"{len(got)} of {want} rows in {budget} cycles")

    sim = Simulator(dp)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return a_cycles, got


def check(dp, layer, w_gaps=(), a_gaps=()):
    """Run ``layer``; every finished row, its ``m`` and ``nt`` as the reference's, in order.
    Return the activation transfers' cycles and the finished rows."""
    a_cycles, got = run(dp, layer, w_gaps, a_gaps)
    assert [(m, nt, v) for _, m, nt, v in got] == layer.expected(dp)
    return a_cycles, got


@st.composite
def cases(draw):
    """A datapath's shape and latencies, a layer of up to 3 x 3 tiles in one or two chunks
    (1 row, around ``row_interval`` or more), its finish, and the gaps' seed and rate."""
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    mul_latency, add_latency = draw(st.integers(0, 3)), draw(st.integers(0, 4))
    interval = add_latency + 2
    depth = draw(st.integers(1, interval + 3))
    size = st.one_of(st.integers(1, depth), st.sampled_from(
        [s for s in (1, interval - 1, interval, interval + 1) if 1 <= s <= depth]))
    chunks = draw(st.lists(size, min_size=1, max_size=2))
    k, n = draw(st.integers(1, 3 * rows)), draw(st.integers(1, 3 * cols))
    x = draw(st.lists(values, min_size=sum(chunks) * k, max_size=sum(chunks) * k))
    w = draw(st.lists(values, min_size=k * n, max_size=k * n))
    bias = draw(st.lists(fp32_bias_strategy, min_size=n, max_size=n))
    layer = Layer(x, w, bias, chunks, relu=draw(st.booleans()), act_min=draw(bounds),
                  act_max=draw(bounds), raw=draw(st.booleans()))
    shape = (rows, cols, depth, mul_latency, add_latency, draw(st.integers(0, 3)))
    return shape, layer, draw(st.sampled_from([0.0, 0.3])), draw(st.integers(0, 2 ** 16))


def datapath(shape, checked=True, kind=BF16MatrixDatapath):
    rows, cols, depth, mul_latency, add_latency, finish_latency = shape
    return kind(rows, cols, depth, mul_latency=mul_latency, add_latency=add_latency,
                finish_latency=finish_latency, checked=checked)


def random_layer(case):
    """Run one of :func:`cases`' layers with its gaps on both inputs (the check's)."""
    shape, layer, rate, seed = case
    # Made after the draws: an example hypothesis drops leaves no unused component behind.
    dp = datapath(shape)
    rng = np.random.default_rng(seed)
    w_gaps, a_gaps = ([int(g) for g in (rng.random(300) < rate) * rng.integers(1, 4, 300)]
                      for _ in range(2))
    check(dp, layer, w_gaps, a_gaps)


# A dozen examples in the default run (each draws the shape, latencies, chunks, finish and gaps
# together; Inf, NaN and flushing products have fixed tests below), many more in the slow run.
@settings(max_examples=12, deadline=None)
@given(case=cases())
def test_random_layers(case):
    """Random shapes, latencies and layers, gaps on both inputs: the reference's rows, in
    order, the bank's row-rule check quiet."""
    random_layer(case)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(case=cases())
def test_random_layers_many(case):
    """:func:`test_random_layers` with more examples."""
    random_layer(case)


INF, NAN, TINY = 0x7F80, 0x7FC0, 0x0080     # TINY = 2**-126: its products by x flush


def fixed_layer(m_rows, k, n, chunks=None, **finish):
    """A layer of ``m_rows`` rows (one chunk unless ``chunks``), ``k`` inputs and ``n``
    outputs whose values differ in every place, with a zero, a flushing product, Inf and NaN
    among them, and a bias that differs per output."""
    x = [[0x3F00 + (i * 7 + j * 3) % 128 for j in range(k)] for i in range(m_rows)]
    w = [[0xBE80 + (j * 5 + c * 11) % 96 for c in range(n)] for j in range(k)]
    x[0][0], w[0][-1], w[-1][0] = 0, INF, TINY
    if m_rows > 1:
        x[1][-1] = NAN
    bias = [0x3F800000 + (c << 20) for c in range(n)]
    return Layer(x, w, bias, chunks or [m_rows], **finish)


SHAPE = (2, 2, 8, 1, 2, 2)      # row_interval 5


@pytest.mark.parametrize("m_rows", [1, 4])
def test_bubbles_needed(m_rows):
    """M = 1 and M = row_interval - 1 rows over three reduction tiles and two output tiles,
    the bank's check on: the rows come as the reference says, with the bubbles
    :meth:`entry_cycles` counts."""
    dp = datapath(SHAPE)
    assert dp.row_interval == 5
    layer = fixed_layer(m_rows, 6, 4, relu=True, act_max=0x40000000)
    a_cycles, _ = check(dp, layer)
    assert a_cycles == dp.entry_cycles([m_rows], 3, 2)
    # Between reduction tiles the row waits row_interval cycles for itself.
    assert a_cycles[m_rows] - a_cycles[0] >= dp.row_interval


@pytest.mark.parametrize(("shape", "m_rows"), [(SHAPE, 1), (SHAPE, 4), (SHAPE, 5),
                                               (SHAPE, 7), ((3, 1, 12, 2, 4, 0), 10),
                                               ((1, 3, 6, 0, 0, 3), 2)])
def test_cycles(shape, m_rows):
    """Producers that never wait: the rows enter when :meth:`entry_cycles` says, the pass
    takes :meth:`pass_cycles` and its last row leaves ``latency`` cycles after its last
    activation row; with rows enough, ``rows + N * K * M``."""
    dp = datapath(shape)
    layer = fixed_layer(m_rows, 2 * dp.rows + 1, 3 * dp.cols, raw=m_rows % 2 == 0)
    a_cycles, got = check(dp, layer)
    assert a_cycles == dp.entry_cycles([m_rows], 3, 3)
    assert a_cycles[-1] + 1 == dp.pass_cycles(m_rows, 3, 3)
    assert got[-1][0] == a_cycles[-1] + dp.latency
    if m_rows >= max(dp.row_interval, dp.rows + dp.engine.rewrite_wait - 1):
        assert dp.pass_cycles(m_rows, 3, 3) == dp.rows + 9 * m_rows


def test_chunks_back_to_back():
    """Three chunks of a layer (the middle one of one row) follow each other."""
    dp = datapath(SHAPE)
    layer = fixed_layer(6, 5, 3, chunks=[3, 1, 2], act_min=0x3F800000)
    a_cycles, _ = check(dp, layer)
    assert a_cycles == dp.entry_cycles([3, 1, 2], 3, 2)


class _ShortBubbles(BF16MatrixDatapath):
    """Seeded bug: the bubbles one short."""

    def _spacing(self):
        return self.row_interval - 1


class _FeederBias(BF16MatrixDatapath):
    """Seeded bug: the bias of the feeders' output tile, not of the row reaching the bank."""

    def _bias_tile(self, out_nt, in_nt):
        return in_nt


@pytest.mark.parametrize(("bug", "k", "match"), [(_ShortBubbles, 6, "row_interval"),
                                                 (_FeederBias, 2, None)])
def test_seeded_bugs_caught(bug, k, match):
    """One-row chunks and six output tiles: the bank's check sees the missing bubble (three
    reduction tiles), the comparison the wrong bias (one reduction tile: the feeders run
    output tiles ahead of the engine's output)."""
    dp = datapath(SHAPE, kind=bug)
    with pytest.raises(AssertionError, match=match):
        check(dp, fixed_layer(2, k, 12, chunks=[1, 1]))


def test_verilog_deterministic():
    """The same parameters give the same Verilog."""
    texts = [emit_verilog(datapath((2, 2, 4, 1, 1, 1), checked=False), "bf16_datapath")
             for _ in range(2)]
    assert texts[0] == texts[1]

