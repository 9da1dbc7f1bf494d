"""The matrix pass's general convolution: grouped and depthwise layers fed their own groups'
channels only (block-diagonal tiles, checked against the weights element by element), per-axis
strides, padding on each side and the average pools (one weight tile for all), compiled and run
on the program interpreter bit-exact against hwgen.nn, and the refusals of what does not fit."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import assert_interpreted
from support import compile_refused as refused

import hwgen
from hwgen import AcceleratorConfig
from hwgen.nn import AvgPool2D, Conv2D, Flatten, GlobalAvgPool2D, QuantizedNetwork
from hwgen.passes.matrix import grouped_matrix
from sim.netgen import random_image

_BUFFERS = {"act_depth": 1 << 12, "weight_depth": 1 << 14, "param_depth": 512,
            "out_depth": 1 << 11, "prog_depth": 64}


def _conv(rng, shape, groups, **kwargs):
    """A random Conv2D of ``shape`` ``(KH, KW, C_in, N)`` in ``groups``."""
    kh, kw, c_in, n = shape
    weight = rng.integers(-128, 128, (kh, kw, c_in // groups, n))
    return Conv2D(weight, rng.integers(-500, 500, n), rng.integers(1, 1 << 12, n),
                  rng.integers(8, 16, n), groups=groups, **kwargs)


def _pool_params(c):
    return {"mult": np.full(c, 3), "shift": np.full(c, 4)}


def _exact(net, config, rng, m=2):
    """Compile ``net`` for ``config``, run it on the interpreter, compare with hwgen.nn;
    return the program."""
    program = hwgen.compile(net, config)
    x = random_image(rng, config, m, net.input_shape)
    return assert_interpreted(program, net, x)


@settings(max_examples=40, deadline=None)
@given(case=st.fixed_dictionaries({
    "rows": st.integers(1, 5), "cols": st.integers(1, 5), "groups": st.integers(1, 4),
    "c_group": st.integers(1, 3), "n_group": st.integers(1, 3), "kh": st.integers(1, 2),
    "kw": st.integers(1, 2), "seed": st.integers(0, 99)}))
def test_each_output_channel_reads_its_own_groups_inputs(case):
    """Column ``n`` of output tile ``nt`` holds, at each kernel position, the weights of its
    group's inputs where the tile's window (from channel ``nt * window``, down to a multiple
    of the banks on a square array, whose feeder does not rotate lanes) has them, zeros
    elsewhere; a group's outputs dividing ``cols`` give the window of the tile's groups (fewer
    than all), anything else all channels."""
    rows, cols, groups, c_group, n_group, kh, kw = (
        case[k] for k in ("rows", "cols", "groups", "c_group", "n_group", "kh", "kw"))
    config = AcceleratorConfig(rows=rows, cols=cols)
    n = groups * n_group
    weight = np.random.default_rng(case["seed"]).integers(-9, 10, (kh, kw, c_group, n))
    matrix, window = grouped_matrix(weight, groups, config)
    windowed = cols % n_group == 0 and cols // n_group < groups
    assert window == (cols // n_group * c_group if windowed else 0)
    per_position = matrix.shape[0] // (kh * kw)
    assert per_position % rows == 0
    lanes = max(rows, cols)
    # The feeder rotates lanes unless the array is square (with spatial layers).
    rotates = rows != cols
    need = 0
    for col in range(n):
        start = col // cols * window
        if not rotates:
            start -= start % lanes
        group = col // n_group
        for i in range(per_position):
            channel = start + i
            inside = group * c_group <= channel < (group + 1) * c_group
            want = weight[:, :, channel - group * c_group, col] if inside else 0
            np.testing.assert_array_equal(
                matrix.reshape(kh, kw, per_position, n)[:, :, i, col], want)
        need = max(need, (group + 1) * c_group - start)
    # No more channel groups per kernel position than the windows need.
    assert per_position == math.ceil(need / rows) * rows


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.fixed_dictionaries({
    "shape": st.sampled_from([(2, 2), (2, 3), (3, 2), (4, 4), (1, 3)]),
    "h": st.integers(1, 6), "w": st.integers(1, 6), "c_group": st.integers(1, 3),
    "groups": st.integers(1, 4), "mult": st.integers(1, 2), "kh": st.integers(1, 3),
    "kw": st.integers(1, 3), "sy": st.integers(1, 3), "sx": st.integers(1, 3),
    "pads": st.tuples(*[st.integers(0, 2)] * 4), "seed": st.integers(0, 999)}))
def test_general_convolution_on_the_interpreter(case):
    """Any kernel that fits the padded input, strides per axis, each padding side and any
    grouping: bit-exact with hwgen.nn."""
    shape, h, w, kh, kw, pads = (case[k] for k in ("shape", "h", "w", "kh", "kw", "pads"))
    c_group, groups, mult, seed = (case[k] for k in ("c_group", "groups", "mult", "seed"))
    sy, sx = case["sy"], case["sx"]
    top, bottom, left, right = pads
    if kh > h + top + bottom or kw > w + left + right:
        return
    rng = np.random.default_rng(seed)
    config = AcceleratorConfig(rows=shape[0], cols=shape[1], **_BUFFERS)
    c = c_group * groups
    net = QuantizedNetwork([_conv(rng, (kh, kw, c, groups * mult), groups, stride=(sy, sx),
                                  padding=pads, activation="relu")],
                           input_shape=(h, w, c))
    _exact(net, config, rng)


@pytest.mark.parametrize(("rows", "cols"), [(8, 8), (4, 4), (2, 4)])
def test_depthwise_costs_one_cols_th_of_the_array(rows, cols):
    """A depthwise 3x3 over 16 channels takes one reduction tile per kernel position of each
    output tile's ``cols`` channels (``ceil(cols / rows)``), not a full convolution's
    ``ceil(16 / rows)``: ``cols`` useful products of each row's ``rows * cols``."""
    rng = np.random.default_rng(rows * cols)
    config = AcceleratorConfig(rows=rows, cols=cols, **_BUFFERS)
    net = QuantizedNetwork([_conv(rng, (3, 3, 16, 16), 16, padding=1)], input_shape=(5, 6, 16))
    program = _exact(net, config, rng)
    d = program.descriptors[0]
    assert d["k_tiles"] == 9 * math.ceil(cols / rows)
    assert d["n_tiles"] == 16 // cols
    assert program.macs_per_row == 5 * 6 * 9 * 16
    assert program.macs_per_row * rows * math.ceil(cols / rows) == \
        program.padded_macs_per_row


@pytest.mark.parametrize(("rows", "cols", "tiles"), [(8, 8, 1), (4, 4, 1), (2, 4, None)])
def test_average_pools_take_one_weight_tile(rows, cols, tiles):
    """A 25x5 average pool and an 8x8 global one store one weight tile (the window's identity,
    read for every kernel position and output tile) where the window fits a tile of rows;
    otherwise every tile (the fallback), and bit-exact either way."""
    rng = np.random.default_rng(rows + cols)
    config = AcceleratorConfig(rows=rows, cols=cols, **_BUFFERS)
    for layers, shape in (([AvgPool2D((25, 5), **_pool_params(12))], (25, 6, 12)),
                          ([GlobalAvgPool2D(**_pool_params(12)), Flatten()], (8, 8, 12))):
        net = QuantizedNetwork(layers, input_shape=shape)
        program = _exact(net, config, rng)
        spec, d = program.layers[0], program.descriptors[0]
        kh, kw = shape[0], 5 if shape[0] == 25 else 8
        assert spec.k == kh * kw
        assert d["k_tiles"] == kh * kw * math.ceil(cols / rows)
        want = rows if tiles == 1 else d["k_tiles"] * d["n_tiles"] * rows
        assert spec.w_words == want
        assert d["geometry"]["wrep"] == (tiles == 1)


def test_geometry_of_strides_and_padding_per_axis():
    config = AcceleratorConfig(rows=2, cols=2, **_BUFFERS)
    rng = np.random.default_rng(3)
    net = QuantizedNetwork([_conv(rng, (3, 2, 2, 2), 1, stride=(2, 3), padding=(2, 0, 1, 3))],
                           input_shape=(7, 9, 2))
    g = _exact(net, config, rng).descriptors[0]["geometry"]
    assert (g["sy"], g["sx"], g["pad_top"], g["pad_left"]) == (2, 3, 2, 1)
    assert (g["oh"], g["ow"]) == ((7 + 2 - 3) // 2 + 1, (9 + 4 - 2) // 3 + 1)


def test_refuses_a_grouped_window_beyond_the_k_tiles_field():
    # Depthwise 4x4 on a 4x4 array: each position's window is a tile of 4 rows, 16 tiles, 64
    # rows padded; max_k = 48 sizes k_tiles for 12 tiles, 4 bits, which hold 15: K = 16 but
    # not the padded reduction.
    config = AcceleratorConfig(rows=4, cols=4, max_k=48, **_BUFFERS)
    rng = np.random.default_rng(4)
    net = QuantizedNetwork([_conv(rng, (4, 4, 8, 8), 8)], input_shape=(4, 4, 8))
    error = refused(net, config, "layer 0", "16 tiles", "k_tiles field (4 bits, sized by "
                    "max_k=48) holds 15 tiles", "<= 60", "max_k >= 64")
    assert (error.layer, error.resource, error.need, error.limit) == (0, "max_k", 64, 60)


def test_refuses_a_stride_per_axis_beyond_the_walk():
    config = AcceleratorConfig(rows=2, cols=2, **_BUFFERS)
    rng = np.random.default_rng(5)
    net = QuantizedNetwork([_conv(rng, (1, 1, 2, 2), 1, stride=(1, 16))], input_shape=(3, 40, 2))
    error = refused(net, config, "layer 0", "stride=16 (sx)", "stride <= 15")
    assert (error.resource, error.need, error.limit) == ("stride", 16, 15)
