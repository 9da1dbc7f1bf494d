"""The bf16 residual add (issue 52): the lane unit against :class:`hwgen.nn.Bf16Add`, and bf16
graphs with Add nodes on :class:`~hwgen.device.bf16_core.BF16AcceleratorCore` in the Amaranth
simulator, bit for bit with ``Bf16Network.forward`` and cycle for cycle with the model."""

import ml_dtypes
import numpy as np
import pytest
from device.test_bf16_core import _check
from hypothesis import given, settings
from hypothesis import strategies as st
from support.accelerator_sim import ECP5, ICE40, SMALL, without_dsp
from support.float_units import bf16_bits_strategy, run_pipeline

from hwgen.config import AcceleratorConfig
from hwgen.device.bf16_add import BF16AddLane
from hwgen.memmap import PassKind
from hwgen.nn import CNN, INPUT, Flatten, FloatAdd, FloatConv2D, FloatDense, Node, to_bf16
from hwgen.nn.bf16 import as_bf16
from hwgen.nn.bf16_layers import Bf16Add
from sim.bf16_runs import bf16_rows

# Operands (bf16 patterns, as the bounds) that overflow (the largest finite), cancel, are
# Inf, NaN, zeros of either sign or a subnormal.
_SPECIALS = [0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x0000, 0x8000, 0x3F80, 0xBF80,
             0x0001]


def _value(pattern):
    """The float of a bf16 pattern."""
    return float(np.array([pattern << 16], np.uint32).view(np.float32)[0])


def _lane_check(a, b, low, high):
    """Run pairs ``a``, ``b`` of bf16 patterns through a lane with bounds ``low``, ``high``
    (bf16 patterns): Bf16Add.forward's bits, the operands read as the reference reads bf16."""
    n = len(a)
    got = np.array(run_pipeline(BF16AddLane(), {"a": a, "b": b, "act_min": [low] * n,
                                                "act_max": [high] * n}, "y"), dtype=np.uint16)
    ref = Bf16Add(act_min=_value(low), act_max=_value(high))
    want = ref.forward(*(as_bf16(np.array(v, np.uint16).view(ml_dtypes.bfloat16))
                         for v in (a, b)))
    want = (want.view(np.uint32) >> 16).astype(np.uint16)
    bad = np.flatnonzero(got != want)
    assert not bad.size, [(hex(a[i]), hex(b[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


def test_the_lane_on_inf_nan_zeros_and_overflow():
    # Every pair of the specials: Inf - Inf is NaN, the largest finite values overflow to
    # Inf, x + (-x) is +0.0, a subnormal is +0.0.
    pairs = [(a, b) for a in _SPECIALS for b in _SPECIALS]
    a, b = (list(v) for v in zip(*pairs, strict=True))
    for low, high in [(0xFF80, 0x7F80), (0, 0x40C0), (0xBF80, 0x3F80)]:
        _lane_check(a, b, low, high)


@settings(max_examples=15, deadline=None)
@given(bounds=st.sampled_from([(0xFF80, 0x7F80), (0, 0x7F80), (0xBF80, 0x40C0),
                               (0x3F80, 0xBF80)]),
       pairs=st.lists(st.tuples(bf16_bits_strategy, bf16_bits_strategy), min_size=1,
                      max_size=30))
def test_the_lane_against_bf16add(bounds, pairs):
    a, b = (list(v) for v in zip(*pairs, strict=True))
    _lane_check(a, b, *bounds)


def _config(rows, cols, *, spatial=False):
    extra = {"act_depth": 512, "out_depth": 128, "weight_depth": 512} if spatial else {}
    return AcceleratorConfig(dtype="bf16", rows=rows, cols=cols, **{
        **SMALL, "spatial": spatial, "residual": True, "prog_depth": 32, **extra})


def _wide(rng, *shape):
    return rng.normal(size=shape) * 2.0 ** rng.integers(-6, 6, size=shape)


def _residual(seed, *, image, c, scale=1.0):
    """A float graph of two residual adds of ``c`` channels (conv -> conv, + skip, ReLU),
    over images or rows."""
    rng = np.random.default_rng(seed)
    if image:
        def layer(**kw):
            return FloatConv2D(_wide(rng, 3, 3, c, c) * scale, _wide(rng, c), padding=1, **kw)
        tail = [Node("flat", Flatten(), "sum2"),
                Node("out", FloatDense(_wide(rng, 4 * 3 * c, 3), _wide(rng, 3)), "flat")]
    else:
        def layer(**kw):
            return FloatDense(_wide(rng, c, c) * scale, _wide(rng, c), **kw)
        tail = [Node("out", FloatDense(_wide(rng, c, 3), _wide(rng, 3)), "sum2")]
    # b and c without an activation (the layers' default is a ReLU): negative sums for the
    # adds' ReLU and bounds.
    nodes = [Node("a", layer(activation="relu"), INPUT),
             Node("b", layer(activation="identity"), "a"),
             Node("sum", FloatAdd(activation="relu", act_max=1.2), ("a", "b")),
             Node("c", layer(activation="identity"), "sum"),
             Node("sum2", FloatAdd(act_min=-0.4), ("c", "sum")), *tail]
    return CNN(nodes, input_shape=(4, 3, c) if image else (c,))


@pytest.mark.parametrize(("rows", "cols", "c"), [(2, 2, 3), (4, 4, 5), (2, 4, 9)])
def test_adds_of_rows_run_bit_for_bit(rows, cols, c):
    net = to_bf16(_residual(rows + c, image=False, c=c), rows=rows, output="bf16")
    config = _config(rows, cols)
    program = _check(net, config, [bf16_rows(net, 3, seed=c), bf16_rows(net, 1, seed=1)],
                     batch=3)
    assert [PassKind(d["kind"]) for d in program.descriptors].count(PassKind.ADD) == 2


@pytest.mark.parametrize(("rows", "cols", "c"), [(2, 2, 2), (4, 2, 4)])
def test_adds_of_images_run_bit_for_bit(rows, cols, c):
    # A ResNet-style block: conv -> conv, + the skip, ReLU (and a second, bounded add).
    net = to_bf16(_residual(rows * c, image=True, c=c), rows=rows)
    config = _config(rows, cols, spatial=True)
    _check(net, config, [bf16_rows(net, 2, seed=3)], batch=2)


def test_adds_of_inf_and_nan():
    # Sums past bf16's range: Inf, Inf - Inf = NaN and cancellations to +0.0 in the adds.
    net = to_bf16(_residual(5, image=False, c=4, scale=1e30), rows=2, output="bf16")
    x = bf16_rows(net, 4, seed=2, scale=1e30)
    tensors = [np.asarray(v, np.float32) for v in net.forward_tensors(x).values()]
    assert any(np.isinf(v).any() for v in tensors) and any(np.isnan(v).any() for v in tensors)
    _check(net, _config(2, 2), [x])


@pytest.mark.parametrize(("implementation", "gate_idle"), [
    (without_dsp(ICE40), False), (without_dsp(ECP5), False), (None, True)])
def test_adds_on_the_boards_implementations(implementation, gate_idle):
    # Registered reads (the ECP5's): the words a cycle later, the layer's end a cycle sooner;
    # the simulated board's gated clock stops the adder between runs too.
    net = to_bf16(_residual(7, image=True, c=2), rows=2)
    xs = [bf16_rows(net, 1, seed=4), bf16_rows(net, 2, seed=5)]
    _check(net, _config(2, 2, spatial=True), xs, implementation=implementation,
           gate_idle=gate_idle)
