"""The taps layout of a first convolution (hwgen.passes.taps): random first convolutions
(strides, padding on each side, kernels from 1x1, 1..rows-1 input channels) compiled for
several designs, run on the program interpreter bit-exact against hwgen.nn, with the layout,
the tile count and the input's element stream checked against an independent computation."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hwgen
from hwgen import AcceleratorConfig
from hwgen.memmap import Region
from hwgen.nn import Conv2D, Dense, Flatten, MaxPool2D, QuantizedNetwork
from sim.interpreter import run_on_interpreter

_BUFFERS = {"act_depth": 1 << 12, "weight_depth": 1 << 13, "param_depth": 256,
            "out_depth": 1 << 11, "prog_depth": 32}
DESIGNS = {"8x8": (8, 8), "5x5": (5, 5), "8x16": (8, 16), "16x8": (16, 8), "4x4": (4, 4),
           "3x2": (3, 2)}


def _conv(rng, shape, *, stride, padding, output="requant"):
    kh, kw, c, n = shape
    return Conv2D(rng.integers(-128, 128, (kh, kw, c, n)), rng.integers(-900, 900, n),
                  rng.integers(1, 1 << 12, n), rng.integers(10, 18, n), stride=stride,
                  padding=padding, output=output)


def _exact(net, config, rng, m=3, **kwargs):
    program = hwgen.compile(net, config, **kwargs)
    x = rng.integers(-128, 128, (m, *net.input_shape))
    got, unpacked = run_on_interpreter(program, x, out_shape=net.output_shape)
    want = net.forward(x)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(unpacked, want)
    return program


@settings(max_examples=40, deadline=None)
@given(case=st.fixed_dictionaries({
    "design": st.sampled_from(sorted(DESIGNS)), "h": st.integers(1, 9), "w": st.integers(1, 9),
    "kh": st.integers(1, 6), "kw": st.integers(1, 6), "sy": st.integers(1, 3),
    "sx": st.integers(1, 3), "pads": st.tuples(*[st.integers(0, 3)] * 4),
    "c": st.integers(1, 15), "n": st.integers(1, 10), "raw": st.booleans(),
    "seed": st.integers(0, 999)}))
def test_first_convolution_packs_taps_bit_exact(case):
    rows, cols = DESIGNS[case["design"]]
    c = 1 + (case["c"] - 1) % max(1, rows - 1)
    top, bottom, left, right = case["pads"]
    kh = min(case["kh"], case["h"] + top + bottom)
    kw = min(case["kw"], case["w"] + left + right)
    config = AcceleratorConfig(rows=rows, cols=cols, **_BUFFERS)
    rng = np.random.default_rng(case["seed"])
    conv = _conv(rng, (kh, kw, c, case["n"]), stride=(case["sy"], case["sx"]),
                 padding=case["pads"], output="raw" if case["raw"] else "requant")
    net = QuantizedNetwork([conv], input_shape=(case["h"], case["w"], c))
    program = _exact(net, config, rng)
    spec = program.input
    if c >= rows:   # a 1-row design: no fewer channels than rows
        assert spec.per_pixel
        return
    # The kernel flattened, ceil(K / rows) tiles; the input one image row per run.
    assert program.layers[0].k_tiles == math.ceil(kh * kw * c / rows)
    assert (spec.runs, spec.run, spec.lead) == (case["h"], case["w"] * c, left * c)
    ow = net.output_shape[1]
    assert spec.pitch >= max(left + case["w"], (ow - 1) * case["sx"] + kw) * c
    assert spec.pitch % config.act_lanes == kw * c % config.act_lanes
    assert spec.pitch < max(left + case["w"], (ow - 1) * case["sx"] + kw) * c \
        + config.act_lanes
    assert program.descriptors[0]["geometry"]["taps"] == 1


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_taps_layout_only_for_the_inputs_convolution(design):
    # The first convolution packs taps; a second one reads its input pixel by pixel.
    rows, cols = DESIGNS[design]
    config = AcceleratorConfig(rows=rows, cols=cols, **_BUFFERS)
    rng = np.random.default_rng(1)
    c = max(1, rows - 1)
    net = QuantizedNetwork([_conv(rng, (3, 3, c, 2), stride=1, padding=1),
                            MaxPool2D(2), _conv(rng, (2, 2, 2, 3), stride=1, padding=0),
                            Flatten(), Dense(rng.integers(-128, 128, (27, 4)), np.zeros(4, int),
                                             np.ones(4, int), np.zeros(4, int),
                                             output="raw")], input_shape=(8, 8, c))
    # With the pool a pass of its own, and fused into the first convolution's pass.
    for fuse_pool, passes in ((False, 4), (True, 3)):
        program = _exact(net, config, rng, fuse_pool=fuse_pool)
        taps = [d.get("geometry", {}).get("taps", 0) for d in program.descriptors]
        assert taps == [int(c < rows)] + [0] * (passes - 1)


@pytest.mark.parametrize("design", ["8x8", "16x8", "4x4"])
def test_taps_off_keeps_the_programs_of_before(design):
    rows, cols = DESIGNS[design]
    rng = np.random.default_rng(2)
    net = QuantizedNetwork([_conv(rng, (3, 3, 1, 4), stride=1, padding=1, output="raw")],
                           input_shape=(6, 6, 1))
    on = AcceleratorConfig(rows=rows, cols=cols, **_BUFFERS)
    off = AcceleratorConfig(rows=rows, cols=cols, taps=False, **_BUFFERS)
    packed, kept, plain = (_exact(net, on, rng), _exact(net, on, rng, taps=False),
                           _exact(net, off, rng))
    assert packed.layers[0].k_tiles == math.ceil(9 / rows)
    assert kept.layers[0].k_tiles == plain.layers[0].k_tiles == 9
    assert kept.input.per_pixel and plain.input.per_pixel
    assert "taps" not in plain.descriptors[0]["geometry"]
    assert kept.descriptors[0]["geometry"]["taps"] == 0


def test_stream_words_hold_each_row_at_its_pitch():
    # 8x8 design (8 banks), a 1-channel 5x4 image, 3x2 kernel, left padding 1: P = 6 (>= 5
    # padded columns, = 2 mod 8); row j of sample s starts at element (s * 5 + j) * 6 + 1.
    rng = np.random.default_rng(3)
    net = QuantizedNetwork([_conv(rng, (3, 2, 1, 2), stride=1, padding=(1, 1, 1, 0))],
                           input_shape=(5, 4, 1))
    program = hwgen.compile(net, AcceleratorConfig(**_BUFFERS))
    assert program.input.pitch == 10   # need 5 columns; 5 + (2 - 5) % 8 = 10
    x = rng.integers(-128, 128, (2, 5, 4, 1))
    words = program.pack_input(x)
    assert program.input.region is Region.ACT and len(words) == math.ceil(2 * 5 * 10 / 8)
    lanes = [(w >> (8 * j)) & 0xFF for w in words for j in range(8)]
    stream = [v - 256 if v > 127 else v for v in lanes]
    want = np.zeros(len(stream), dtype=np.int64)
    for s in range(2):
        for j in range(5):
            want[(s * 5 + j) * 10 + 1:(s * 5 + j) * 10 + 5] = x[s, j, :, 0]
    np.testing.assert_array_equal(stream, want)
