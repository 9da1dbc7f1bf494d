"""The depthwise pass (hwgen.passes.depthwise): which layers it takes and why it leaves the
others to the matrix pass, its tile plan against a brute-force one, its weights and geometry as
documented, and depthwise convolutions and average pools compiled and run on the program
interpreter bit-exact against hwgen.nn."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import assert_interpreted

from hwgen import AcceleratorConfig
from hwgen.compiler import compile_network
from hwgen.cycles import layer_busy_rows
from hwgen.memmap import PassKind, Region
from hwgen.nn import AvgPool2D, Conv2D, GlobalAvgPool2D, QuantizedNetwork
from hwgen.passes import for_layer
from hwgen.passes.depthwise import refusal, tile_plan
from sim.interpreter import ProgramInterpreter
from sim.netgen import random_image

DW = PassKind.DEPTHWISE
#: A design with the depthwise unit, small buffers so that chunks and tiles are many.
SMALL = AcceleratorConfig(rows=4, cols=4, depthwise=True, acc_depth=16, act_depth=1 << 12,
                          weight_depth=1 << 12, dw_depth=32)
WIDE = AcceleratorConfig(rows=3, cols=8, depthwise=True, act_depth=1 << 13,
                         weight_depth=1 << 12, acc_depth=64)


def _depthwise(rng, c, k=(3, 3), **kwargs):
    return Conv2D(rng.integers(-128, 128, (*k, 1, c)), rng.integers(-900, 900, c),
                  rng.integers(1, 1 << 14, c), rng.integers(12, 17, c), groups=c, **kwargs)


def _pool(rng, c, cls=AvgPool2D, **kwargs):
    return cls(mult=rng.integers(1, 1 << 14, c), shift=rng.integers(10, 15, c), **kwargs)


def _exact(net, config, rng, m=2):
    program = compile_network(net, config)
    x = random_image(rng, config, min(m, program.batch), net.input_shape)
    return assert_interpreted(program, net, x)


# -- which layers, and why not -------------------------------------------------------------

def test_depthwise_layers_take_the_unit_and_others_stay_matrix_passes():
    rng = np.random.default_rng(0)
    shape = (6, 6, 8)
    takes = [_depthwise(rng, 8, padding=1), _depthwise(rng, 8, stride=2),
             _pool(rng, 8, size=2, stride=2), _pool(rng, 8, cls=GlobalAvgPool2D)]
    for layer in takes:
        assert refusal(layer, shape, WIDE) is None
        assert for_layer(layer, shape, WIDE).kind is DW
        # Without the unit, a matrix pass as before.
        assert for_layer(layer, shape, AcceleratorConfig()).kind is PassKind.MATRIX
    grouped = Conv2D(rng.integers(-8, 8, (3, 3, 2, 8)), np.zeros(8, int), np.ones(8, int),
                     np.zeros(8, int), groups=4)
    multiplier = Conv2D(rng.integers(-8, 8, (3, 3, 1, 16)), np.zeros(16, int),
                        np.ones(16, int), np.zeros(16, int), groups=8)
    for layer in (grouped, multiplier):
        assert "no depthwise convolution" in refusal(layer, shape, WIDE)
        assert for_layer(layer, shape, WIDE).kind is PassKind.MATRIX


def test_a_layer_beyond_the_unit_is_a_matrix_pass_and_says_why():
    rng = np.random.default_rng(1)
    wide = (4, 60, 4)           # an output row spans 60 pixels: past dw_depth=32
    assert "dw_depth=32" in refusal(_depthwise(rng, 4, padding=1), wide, SMALL)
    tall = _depthwise(rng, 4, k=(5, 1))   # a tile of 4 taps spans 4 kernel rows
    assert "dw_lines=2" in refusal(tall, (8, 8, 4), SMALL)
    config = AcceleratorConfig(rows=4, cols=4, depthwise=True, acc_depth=4, dw_depth=64)
    assert "acc_depth=4" in refusal(_depthwise(rng, 4, padding=1), (6, 6, 4), config)
    for layer, shape in ((_depthwise(rng, 4, padding=1), wide), (tall, (8, 8, 4))):
        net = QuantizedNetwork([layer], input_shape=shape)
        program = _exact(net, SMALL, rng)
        assert [d["kind"] for d in program.descriptors] == [PassKind.MATRIX.value]


# -- the tile plan ---------------------------------------------------------------------------

@given(rows=st.integers(1, 12), kh=st.integers(1, 6), kw=st.integers(1, 6))
def test_tile_plan_against_brute_force(rows, kh, kw):
    for kt in range(math.ceil(kh * kw / rows)):
        plan = tile_plan(kt, rows, kh, kw)
        taps = [(t // kw, t % kw) if t < kh * kw else None
                for t in range(kt * rows, (kt + 1) * rows)]
        kys = [tap[0] for tap in taps if tap]
        assert (plan.ky_min, plan.kx0) == (kys[0], taps[0][1])
        assert plan.span == max(kys) - min(kys) + 1
        assert plan.lines == tuple(None if tap is None else max(kys) - tap[0] for tap in taps)


def test_the_first_output_comes_lag_cycles_into_the_stream():
    """A tile's first output cell's first-tap element is ``(span - 1) * wp + kx0`` into its
    stream and its last kernel row's first tap ``i0`` rows down: lag minus the latency is
    ``(span - 1) * (wp - kw) + kx0``, the identity the unit counts with."""
    for rows, kh, kw, wp in ((8, 3, 3, 50), (4, 3, 3, 9), (5, 5, 5, 12), (8, 3, 3, 7)):
        for kt in range(math.ceil(kh * kw / rows)):
            plan = tile_plan(kt, rows, kh, kw)
            top = plan.ky_min + plan.span - 1
            i0 = plan.lines.index(0)          # the first row on the stream itself
            kx_top = 0 if plan.span > 1 else plan.kx0
            assert (plan.span - 1) * wp + kx_top - i0 == plan.lag(wp - kw, 0)
            assert top == (kt * rows + i0) // kw


# -- layout ------------------------------------------------------------------------------------

def test_weights_are_taps_by_channels_and_a_pool_stores_one_tile():
    rng = np.random.default_rng(2)
    conv = _depthwise(rng, 6, padding=1)
    program = compile_network(QuantizedNetwork([conv], input_shape=(5, 5, 6)), WIDE)
    (d,) = program.descriptors
    assert (d["kind"], d["k_tiles"], d["n_tiles"]) == (DW.value, 3, 1)
    device = ProgramInterpreter(WIDE)
    device.load(program, random_image(rng, WIDE, 1, (5, 5, 6)))
    for t in range(9):
        word = device.lanes(Region.WEIGHT, d["w_base"] + t)
        assert word[:6] == list(conv.weight.reshape(9, 6)[t]) and word[6:] == [0, 0]
    g = d["geometry"]
    assert (g["dw_wp"], g["dw_delay"], g["dw_tq"], g["dw_tr"], g["wrep"]) == (7, 4, 1, 0, 0)
    assert (g["col_step"], g["row_step"], g["img_step"], g["cgs"]) == (1, 5, 25, 0)
    assert g["dw_rows"] == 5       # one tile too many to hold a sample's rows: 64 // 5 rows
    pool = compile_network(QuantizedNetwork([_pool(rng, 16, size=3, stride=3)],
                                            input_shape=(9, 9, 16)), WIDE)
    (d,) = pool.descriptors
    assert d["geometry"]["wrep"] == 1 and pool.images[Region.WEIGHT][1] == [
        sum(1 << (8 * j) for j in range(8))] * WIDE.rows


def test_busy_rows_are_every_output_pixel_once_per_tile():
    rng = np.random.default_rng(3)
    net = QuantizedNetwork([_depthwise(rng, 12, stride=2, padding=(0, 1, 0, 1))],
                           input_shape=(8, 10, 12))
    program = compile_network(net, SMALL)
    (d,) = program.descriptors
    assert layer_busy_rows(d, 2) == 2 * 4 * 5 * d["k_tiles"] * d["n_tiles"] == 2 * 20 * 3 * 3


# -- bit-exact on the interpreter ------------------------------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 1 << 16), c=st.integers(1, 11),
       kernel=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       walk=st.tuples(st.integers(1, 3), st.integers(0, 2)),
       size=st.tuples(st.integers(4, 9), st.integers(4, 9)))
def test_random_depthwise_convolutions_are_exact(seed, c, kernel, walk, size):
    rng = np.random.default_rng(seed)
    (kh, kw), (stride, pad), (h, w) = kernel, walk, size
    if (h + 2 * pad - kh) // stride < 0 or (w + 2 * pad - kw) // stride < 0:
        return
    net = QuantizedNetwork([_depthwise(rng, c, (kh, kw), stride=stride, padding=pad)],
                           input_shape=(h, w, c))
    for config in (SMALL, WIDE):
        program = _exact(net, config, rng)
        assert {d["kind"] for d in program.descriptors} <= {DW.value, PassKind.MATRIX.value}


def test_a_pool_as_large_as_its_input_takes_the_unit_whatever_its_stride():
    """KWS's pool: 24 x 5 over a 25 x 5 image, stride 24 x 5, one output pixel. Its stride,
    past the geometry's 15, is never taken, so the unit walks it as 1 (its output stays one
    pixel) and the reference's outputs come out; a stride that is taken still refuses."""
    rng = np.random.default_rng(5)
    pool = _pool(rng, 8, size=(24, 5))
    assert pool.output_shape((25, 5, 8)) == (1, 1, 8)
    assert refusal(pool, (25, 5, 8), WIDE) is None
    program = _exact(QuantizedNetwork([pool], input_shape=(25, 5, 8)), WIDE, rng)
    (d,) = program.descriptors
    assert d["kind"] == DW.value and (d["geometry"]["sy"], d["geometry"]["oh"]) == (1, 1)
    taken = _pool(rng, 8, size=(2, 2), stride=(16, 1))     # (34 - 2) // 16 + 1 = 3 rows
    assert "strides" in refusal(taken, (34, 5, 8), WIDE)


@pytest.mark.parametrize("config", [SMALL, WIDE], ids=["4x4", "3x8"])
def test_average_pools_are_exact(config):
    rng = np.random.default_rng(4)
    for layer, shape in ((_pool(rng, 5, size=(2, 3), stride=(2, 1)), (6, 7, 5)),
                         (_pool(rng, 9, cls=GlobalAvgPool2D), (5, 3, 9)),
                         (_pool(rng, 4, size=3, stride=3), (9, 9, 4))):
        program = _exact(QuantizedNetwork([layer], input_shape=shape), config, rng, m=3)
        assert program.descriptors[0]["kind"] == DW.value
