"""The bf16 finish against the contract's (:meth:`hwgen.nn.bf16_layers._Finish.finish`):
hypothesis-drawn accumulators and layer settings at every latency, the edge cases of
docs/arithmetic.md's activation, bounds and rounding (also against the independent scalar
model, :mod:`support.bf16_reference`), seeded bugs that the checks must catch, and the add
layer's datapath (the fp32 adder, then the finish) against :class:`hwgen.nn.Bf16Add`."""

import ml_dtypes
import numpy as np
import pytest
from amaranth.hdl import Cat, Const, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from support import bf16_reference as scalar
from support.cocotb_builds import SharedBuilds
from support.float_units import (
    bf16_bits_strategy,
    fp32_bits_strategy,
    fp32_of,
    ref_finish,
    run_pipeline,
)
from support.simulators import need_simulator

from hwgen.device.bf16_finish import FINISH_SETTINGS, BF16Finish
from hwgen.device.float_formats import BF16, FP32
from hwgen.device.fp32_adder import FP32Adder
from hwgen.device.systolic import delay
from hwgen.generate import emit_verilog
from hwgen.nn.bf16 import as_bf16
from hwgen.nn.bf16_layers import Bf16Add
from sim.runner import SIMULATORS

LATENCIES = range(4)


def layer_bits(relu=False, raw=False, act_min=None, act_max=None):
    """The packed :data:`FINISH_SETTINGS` of a layer (bounds as fp32 bit patterns)."""
    fields = {"relu": relu, "raw": raw, "min_en": act_min is not None,
              "max_en": act_max is not None, "act_min": act_min or 0, "act_max": act_max or 0}
    return sum(int(value) << FINISH_SETTINGS[name].offset for name, value in fields.items())


def expected(vectors):
    """The reference's finish of ``(acc, layer)`` vectors, uint32 bit patterns."""
    return np.array([ref_finish([acc], **layer)[0] for acc, layer in vectors], dtype=np.uint32)


def check(dut, vectors):
    """Run ``(acc, layer)`` vectors (``layer`` the keywords of :func:`layer_bits`) through
    ``dut``, one a cycle; compare bit for bit with the reference."""
    got = np.array(run_pipeline(dut, {"acc": [acc for acc, _ in vectors],
                                      "layer": [layer_bits(**lay) for _, lay in vectors]},
                                "y"), dtype=np.uint32)
    want = expected(vectors)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(hex(vectors[i][0]), vectors[i][1], hex(got[i]), hex(want[i]))
                          for i in bad[:5]]
    return got


# Accumulators: any pattern, or one whose dropped 16 bits sit at a rounding point (a tie,
# either side of it, none, all).
acc_strategy = st.one_of(fp32_bits_strategy, st.builds(
    lambda bits, low: (bits & 0xFFFF0000) | low, fp32_bits_strategy,
    st.sampled_from([0x8000, 0x7FFF, 0x8001, 0, 0xFFFF])))
# Bounds: any pattern, or the usual ones (0, 6, -1, 1) and bf16 values.
bound_strategy = st.one_of(st.none(), fp32_bits_strategy,
                           st.sampled_from([0, 0x40C00000, 0xBF800000, 0x3F800000]),
                           st.builds(lambda b: b << 16, bf16_bits_strategy))
layer_strategy = st.fixed_dictionaries({
    "relu": st.booleans(), "raw": st.sampled_from([False, False, False, True]),
    "act_min": bound_strategy, "act_max": bound_strategy})


@st.composite
def vector_strategy(draw):
    """An accumulator and a layer, now and then the accumulator equal to a bound."""
    acc, layer = draw(acc_strategy), draw(layer_strategy)
    bounds = [b for b in (layer["act_min"], layer["act_max"]) if b is not None]
    if bounds and draw(st.integers(0, 4)) == 0:
        acc = draw(st.sampled_from(bounds))
    return acc, layer


@settings(max_examples=100, deadline=None)
@given(latency=st.sampled_from(LATENCIES),
       vectors=st.lists(vector_strategy(), min_size=1, max_size=40))
def test_random_patterns(latency, vectors):
    """Every drawn accumulator and layer gives the contract's finish, one a cycle."""
    check(BF16Finish(latency), vectors)


def f32(value):
    """The fp32 bit pattern of an exactly representable float."""
    return int(np.array([value], dtype=np.float32).view(np.uint32)[0])


MAX = 0x7F7F0000                # the largest finite bf16, as fp32
INF, NINF, NAN = 0x7F800000, 0xFF800000, 0x7FC00000
ONE, SIX = f32(1.0), f32(6.0)
RELU, RELU6 = {"relu": True}, {"relu": True, "act_min": 0, "act_max": SIX}
# name: (acc, layer, the expected bits).
EDGES = {
    "zero": (0, {}, 0),
    "minus-zero": (0x80000000, {}, 0),
    "subnormal": (0x00000001, {}, 0),
    "negative-subnormal": (0x807FFFFF, {}, 0),
    "smallest-normal": (0x00800000, {}, 0x00800000),
    "lowest-exponent-carries": (0x00FFFFFF, {}, 0x01000000),
    "tie-even-stays": (ONE | 0x8000, {}, ONE),
    "tie-odd-rounds-up": (ONE | 0x18000, {}, ONE | 0x20000),
    "above-tie": (ONE | 0x8001, {}, ONE | 0x10000),
    "below-tie": (ONE | 0x7FFF, {}, ONE),
    "negative-tie-odd": (0xBF818000, {}, 0xBF820000),
    "round-carries-exponent": (0x3FFFFFFF, {}, f32(2.0)),
    "largest-finite": (MAX, {}, MAX),
    "below-half-beyond-max": (MAX | 0x7FFF, {}, MAX),
    "half-beyond-max-to-inf": (MAX | 0x8000, {}, INF),
    "largest-fp32-to-inf": (0x7F7FFFFF, {}, INF),
    "minus-largest-fp32-to-minus-inf": (0xFF7FFFFF, {}, NINF),
    "inf": (INF, {}, INF),
    "minus-inf": (NINF, {}, NINF),
    "nan-payload": (0xFFC12345, {}, NAN),
    "nan-signalling": (0x7F800001, {}, NAN),
    "relu-negative": (f32(-2.5), RELU, 0),
    "relu-minus-inf": (NINF, RELU, 0),
    "relu-positive": (f32(2.5), RELU, f32(2.5)),
    "relu-nan": (0xFFFFFFFF, RELU, NAN),
    "relu6-above": (f32(7.0), RELU6, SIX),
    "relu6-inf": (INF, RELU6, SIX),
    "relu6-negative": (f32(-7.0), RELU6, 0),
    "relu6-nan": (0x7FC00001, RELU6, NAN),
    "relu6-exactly-six": (SIX, RELU6, SIX),
    "bound-not-bf16-rounds": (f32(9.0), {"act_max": 0x40C0C000}, 0x40C10000),
    "min-only": (f32(-3.0), {"act_min": f32(-1.0)}, f32(-1.0)),
    "max-only-negative": (f32(-3.0), {"act_max": f32(-4.0)}, f32(-4.0)),
    "bounds-equal": (f32(5.0), {"act_min": ONE, "act_max": ONE}, ONE),
    "bounds-equal-below": (f32(-5.0), {"act_min": ONE, "act_max": ONE}, ONE),
    "bounds-crossed": (f32(-5.0), {"act_min": SIX, "act_max": ONE}, ONE),
    "bounds-crossed-between": (f32(3.0), {"act_min": SIX, "act_max": ONE}, ONE),
    "minus-zero-bound": (f32(-3.0), {"act_min": 0x80000000}, 0),
    "subnormal-bound": (f32(-3.0), {"act_min": 0x80000001}, 0),
    "nan-bound-min": (ONE, {"act_min": 0xFFC00000}, NAN),
    "nan-bound-max": (ONE, {"act_max": 0x7F800001}, NAN),
    "nan-bound-disabled": (ONE, {"act_min": None}, ONE),
    "inf-bound": (INF, {"act_max": INF}, INF),
    "nan-between-bounds": (NAN, {"act_min": 0, "act_max": SIX}, NAN),
    "raw-keeps-bits": (0x3F812345, {"raw": True, "relu": True, "act_max": 0}, 0x3F812345),
    "raw-negative": (f32(-2.5), {"raw": True, "relu": True}, f32(-2.5)),
    "raw-nan-unchanged": (0xFFC12345, {"raw": True}, 0xFFC12345),
}


def _model(acc, layer):
    """The scalar model's finish (raw aside): ReLU, bounds, then bf16 by exact fractions."""
    x = scalar.zero_rule(scalar.from_bits32(acc))
    bounds = [None if layer.get(k) is None else scalar.zero_rule(scalar.from_bits32(layer[k]))
              for k in ("act_min", "act_max")]
    if layer.get("relu") and not x > 0 and not np.isnan(x):
        x = np.float32(0.0)
    for bound, pick in zip(bounds, (max, min), strict=True):
        if bound is not None:
            x = np.float32("nan") if np.isnan(x) or np.isnan(bound) else pick(x, bound)
    return scalar.bf16_bits_of(float(x)) << 16


@pytest.mark.parametrize("latency", LATENCIES)
def test_edge_cases(latency):
    """The zero rule, ties to even, the carry into the exponent, overflow to Inf, NaN payloads,
    the ReLU of negatives, -Inf and NaN, the bounds (equal, crossed, NaN, zero of either sign,
    between bf16 values) and raw: the expected bits, the reference's and the scalar model's."""
    got = check(BF16Finish(latency), [case[:2] for case in EDGES.values()])
    for (name, (acc, layer, want)), bits in zip(EDGES.items(), got, strict=True):
        assert bits == want, (name, hex(bits), hex(want))
        if not layer.get("raw"):
            assert _model(acc, layer) == want, name


class _HalfUp(BF16Finish):
    """Seeded bug: rounds half a unit up, never to even."""

    @staticmethod
    def _increment(value):
        return value[15]


class _NoClamp(BF16Finish):
    """Seeded bug: drops the bounds."""

    @staticmethod
    def _clamp(m, v):
        return {"value": v["value"], "raw": v["raw"], "nan": v["nan"]}


class _NoBoundNaN(BF16Finish):
    """Seeded bug: a NaN bound is ignored (only a NaN accumulator gives NaN)."""

    def _compare(self, m, acc, layer):
        values = super()._compare(m, acc, layer)
        nan = (acc.exponent == 0xFF) & (acc.fraction != 0) & ~layer.raw
        return {**values, "nan": nan}


@pytest.mark.parametrize("bug", [_HalfUp, _NoClamp, _NoBoundNaN])
def test_seeded_bugs_caught(bug):
    """A finish with a seeded bug fails the edge cases: the checks can see it."""
    with pytest.raises(AssertionError):
        check(bug(1), [case[:2] for case in EDGES.values()])


@pytest.mark.parametrize("latency", [-1, 4, 1.0, True, None])
def test_refused_latency(refused, latency):
    """A latency outside 0..3 is refused, naming the parameter and what is allowed."""
    refused(r"latency=.*allowed: an int in 0\.\.3", lambda: BF16Finish(latency))


class _AddLayer(wiring.Component):
    """The bf16 add layer's datapath: the operands widened to fp32 (exact), the fp32 adder,
    then the finish; the layer's settings delayed beside the sum."""

    def __init__(self, add_latency, finish_latency):
        self.adder, self.finish = FP32Adder(add_latency), BF16Finish(finish_latency)
        super().__init__({"a": In(BF16), "b": In(BF16), "layer": In(FINISH_SETTINGS),
                          "y": Out(FP32)})

    @property
    def latency(self):
        return self.adder.latency + self.finish.latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.adder, m.submodules.finish = self.adder, self.finish
        m.d.comb += [self.adder.a.as_value().eq(Cat(Const(0, 16), self.a)),
                     self.adder.b.as_value().eq(Cat(Const(0, 16), self.b)),
                     self.finish.acc.eq(self.adder.s),
                     self.finish.layer.as_value().eq(
                         delay(m, self.layer.as_value(), self.adder.latency, name="layer")),
                     self.y.eq(self.finish.y)]
        return m


add_layer_strategy = st.fixed_dictionaries({
    "relu": st.booleans(), "act_min": st.sampled_from([None, 0, f32(-1.0)]),
    "act_max": st.sampled_from([None, SIX, f32(1.0)])})


@settings(max_examples=40, deadline=None)
@given(add_latency=st.integers(0, 4), finish_latency=st.sampled_from(LATENCIES),
       layer=add_layer_strategy,
       pairs=st.lists(st.tuples(bf16_bits_strategy, bf16_bits_strategy), min_size=1,
                      max_size=40))
def test_add_layer(add_latency, finish_latency, layer, pairs):
    """The fp32 adder on bf16 operands, then the finish, is :class:`~hwgen.nn.Bf16Add`'s
    ``forward`` (``finish(flush(a + b))``) bit for bit, the operands read as the reference
    reads bf16 values (:func:`~hwgen.nn.bf16.as_bf16`: the zero rule)."""
    a, b = (np.array(v, dtype=np.uint16) for v in zip(*pairs, strict=True))
    got = np.array(run_pipeline(_AddLayer(add_latency, finish_latency),
                                {"a": a, "b": b, "layer": [layer_bits(**layer)] * len(a)},
                                "y"), dtype=np.uint32)
    bounds = {k: None if layer[k] is None else float(fp32_of([layer[k]])[0])
              for k in ("act_min", "act_max")}
    ref = Bf16Add(activation="relu" if layer["relu"] else "identity", **bounds)
    want = ref.forward(*(as_bf16(v.view(ml_dtypes.bfloat16)) for v in (a, b))).view(np.uint32)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(hex(a[i]), hex(b[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The finish of latency 2, built once per simulator."""
    return SharedBuilds(tmp_path_factory.mktemp("bf16_finish"))


@pytest.mark.parametrize("simulator", SIMULATORS)
# Each example is a simulator run: few of them, derandomized, no shrinking (see
# tests/sim/test_tb_bf16_network.py).
@settings(max_examples=3, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.generate))
@given(vectors=st.lists(vector_strategy(), min_size=1, max_size=200))
def test_finish_on_simulator(builds, simulator, vectors):
    """Latency 2 as Verilog, the drawn accumulators and layers and the edge cases: the cocotb
    bench ``sim/tb_bf16_finish.py`` compares every result with the reference's, bit for
    bit."""
    need_simulator(simulator)
    vectors = vectors + [case[:2] for case in EDGES.values()]
    cases = [{"acc": acc, "layer": layer_bits(**layer), "want": int(want)}
             for (acc, layer), want in zip(vectors, expected(vectors), strict=True)]
    ran = builds.run("finish", lambda: emit_verilog(BF16Finish(2), "bf16_finish"), simulator,
                     "sim.tb_bf16_finish", top="bf16_finish",
                     cases={"latency": 2, "cases": cases}, cases_env="HWGEN_BF16_FINISH")
    assert ran == 1
