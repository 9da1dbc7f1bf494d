"""The bf16 maximum against the reference's max pool (:class:`hwgen.nn.MaxPool2D` on bf16 values
read as :func:`hwgen.nn.bf16.as_bf16` reads them): hypothesis-drawn bit patterns at both
latencies, a 2x2 window as a tree of three, the edge cases (NaN payloads, zeros of either
sign, subnormals, Inf) and a seeded bug."""

import ml_dtypes
import numpy as np
import pytest
from amaranth.hdl import Const, Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from hypothesis import given, settings
from hypothesis import strategies as st
from support.float_units import bf16_bits_strategy, run_pipeline

from hwgen.device.bf16_max import BF16Max
from hwgen.device.float_formats import BF16
from hwgen.nn import MaxPool2D
from hwgen.nn.bf16 import as_bf16, bf16_bits


def ref_max(windows):
    """The reference's maximum of each row of ``windows`` (bf16 bit patterns, 4 a row, a 2x2
    window in row order), as bf16 bit patterns."""
    values = as_bf16(np.asarray(windows, dtype=np.uint16).view(ml_dtypes.bfloat16))
    return bf16_bits(MaxPool2D(2).forward(values.reshape(-1, 2, 2, 1))).reshape(-1)


def check(dut, pairs):
    """Run the pairs through ``dut``, compare bit for bit with the max pool of the window
    ``[[a, b], [b, a]]`` (whose maximum is theirs)."""
    a, b = (np.array(v, dtype=np.uint16) for v in zip(*pairs, strict=True))
    got = np.array(run_pipeline(dut, {"a": a, "b": b}, "y"), dtype=np.uint16)
    want = ref_max(np.stack([a, b, b, a], axis=1))
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(hex(a[i]), hex(b[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]
    return got


@settings(max_examples=100, deadline=None)
@given(latency=st.integers(0, 1),
       pairs=st.lists(st.tuples(bf16_bits_strategy, bf16_bits_strategy), min_size=1,
                      max_size=60))
def test_random_patterns(latency, pairs):
    """Every drawn pair gives the max pool's maximum, one pair a cycle."""
    check(BF16Max(latency), pairs)


class _Window(wiring.Component):
    """A 2x2 window's maximum: a tree of three maxima (the second level registered)."""

    def __init__(self):
        self.maxes = [BF16Max(0), BF16Max(0), BF16Max(1)]
        super().__init__({"x": In(data.ArrayLayout(BF16, 4)), "y": Out(BF16)})

    latency = 1

    def elaborate(self, platform):
        m = Module()
        first, second, top = self.maxes
        m.submodules += self.maxes
        m.d.comb += [first.a.eq(self.x[0]), first.b.eq(self.x[1]),
                     second.a.eq(self.x[2]), second.b.eq(self.x[3]),
                     top.a.eq(first.y), top.b.eq(second.y), self.y.eq(top.y)]
        return m


@settings(max_examples=40, deadline=None)
@given(windows=st.lists(st.lists(bf16_bits_strategy, min_size=4, max_size=4), min_size=1,
                        max_size=40))
def test_window_tree(windows):
    """Three maxima in a tree give a 2x2 window's max pool, whichever place holds the NaN."""
    packed = [sum(v << (16 * i) for i, v in enumerate(w)) for w in windows]
    got = np.array(run_pipeline(_Window(), {"x": packed}, "y"), dtype=np.uint16)
    want = ref_max(windows)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [([hex(v) for v in windows[i]], hex(got[i]), hex(want[i]))
                          for i in bad[:5]]


MAX, ONE = 0x7F7F, 0x3F80
INF, NINF, NAN = 0x7F80, 0xFF80, 0x7FC0
# name: (a, b, the expected bits).
EDGES = {
    "larger-first": (0x4000, ONE, 0x4000),
    "larger-second": (ONE, 0x4000, 0x4000),
    "negatives": (0xC000, 0xBF80, 0xBF80),
    "signs-differ": (0xBF80, 0x0080, 0x0080),
    "equal": (0x4049, 0x4049, 0x4049),
    "zero-and-minus-zero": (0x8000, 0x0000, 0),
    "minus-zero-and-negative": (0x8000, 0xBF80, 0),
    "minus-zero-twice": (0x8000, 0x8000, 0),
    "subnormal-and-negative": (0x0001, 0xBF80, 0),
    "negative-subnormal-and-zero": (0x807F, 0x0000, 0),
    "subnormal-not-above-zero": (0x0040, 0x0000, 0),
    "largest-finite-and-inf": (MAX, INF, INF),
    "minus-inf": (NINF, 0xFF7F, 0xFF7F),
    "nan-first": (0xFFC1, INF, NAN),
    "nan-second": (INF, 0x7F81, NAN),
    "nan-and-minus-inf": (NINF, 0xFFFF, NAN),
    "nan-twice": (0x7F81, 0xFFC0, NAN),
}


@pytest.mark.parametrize("latency", [0, 1])
def test_edge_cases(latency):
    """NaN (any payload, either place) gives the canonical NaN; -0.0 and subnormals are +0.0;
    Inf and the largest finite value: the expected bits and the reference's."""
    got = check(BF16Max(latency), [case[:2] for case in EDGES.values()])
    for (name, (_, _, want)), bits in zip(EDGES.items(), got, strict=True):
        assert bits == want, (name, hex(bits), hex(want))


class _NaNCompared(BF16Max):
    """Seeded bug: no NaN rule (a NaN compares as the magnitude its bits spell)."""

    @staticmethod
    def _nan(a, b):
        return Const(0)


class _NoZeroRule(BF16Max):
    """Seeded bug: the operands unflushed (-0.0 beats a negative value)."""

    @staticmethod
    def _operand(m, x, name):
        return x.as_value()


@pytest.mark.parametrize("bug", [_NaNCompared, _NoZeroRule])
def test_seeded_bugs_caught(bug):
    """A maximum with a seeded bug fails the edge cases: the checks can see it."""
    with pytest.raises(AssertionError):
        check(bug(0), [case[:2] for case in EDGES.values()])


@pytest.mark.parametrize("latency", [-1, 2, 1.0, True, None])
def test_refused_latency(refused, latency):
    """A latency other than 0 or 1 is refused, naming the parameter and what is allowed."""
    refused(r"latency=.*allowed: an int in 0\.\.1", lambda: BF16Max(latency))
