"""The element stream of a MatrixSpec (SPEC33 section 1): the codec packs and unpacks by it,
and the per-pixel defaults give exactly the words of before."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hwgen
from hwgen.compiler import MatrixSpec
from hwgen.compiler.codec import pack_input, unpack_output
from hwgen.compiler.words import unpack_words
from hwgen.memmap import Region
from sim.netgen import random_cnn


def per_pixel_words(spec, x):
    """The per-pixel layout, written out: row r, feature f at lane f % lanes of word
    r * stride + f // lanes (independent of the codec's stream)."""
    m = x.shape[0]
    rows = x.reshape(m * spec.pixels, spec.features)
    lanes = np.zeros((m * spec.pixels * spec.stride, spec.lanes), dtype=np.int64)
    for r, row in enumerate(rows):
        for f, value in enumerate(row):
            lanes[r * spec.stride + f // spec.lanes, f % spec.lanes] = value
    mask = (1 << spec.lane_bits) - 1
    return [sum((int(v) & mask) << (j * spec.lane_bits) for j, v in enumerate(word))
            for word in lanes]


def test_defaults_are_the_per_pixel_layout():
    spec = MatrixSpec(Region.ACT, 0, 2, 5, 4, 8, "input", pixels=6, sample_shape=(2, 3, 5))
    assert (spec.runs, spec.run, spec.lead, spec.pitch) == (6, 5, 0, 8)
    assert spec.per_pixel
    assert spec.words(3) == 3 * spec.words_per_sample == 36
    assert "pitch" not in spec.to_dict()
    assert MatrixSpec.from_dict(spec.to_dict()) == spec


def _programs():
    rng = np.random.default_rng(4)
    configs = [hwgen.AcceleratorConfig(), hwgen.AcceleratorConfig(rows=4, cols=4, in_bits=4),
               hwgen.AcceleratorConfig(rows=5, cols=5)]
    for index, config in enumerate(configs):
        net = random_cnn(np.random.default_rng(index), config)
        yield hwgen.compile(net, config, batch=3), rng
    net = hwgen.nn.QuantizedNetwork([hwgen.nn.Dense(
        rng.integers(-128, 128, (13, 5)), np.zeros(5, int), mult=np.ones(5, int),
        shift=np.zeros(5, int), output="raw")])
    yield hwgen.compile(net, configs[0], batch=3), rng


@pytest.mark.parametrize("index", range(4))
def test_every_program_packs_the_words_of_before(index):
    program, rng = list(_programs())[index]
    spec = program.input
    bound = 1 << (spec.lane_bits - 1)
    for m in (0, 1, 3):
        x = rng.integers(-bound, bound, (m, *spec.sample_shape))
        if not spec.per_pixel:
            continue
        assert program.pack_input(x) == per_pixel_words(spec, x)
    out = program.output
    words = [int(w) for w in rng.integers(0, 1 << 62, out.words(2))]
    lanes = unpack_words(words, out.lanes, out.lane_bits)
    want = lanes.reshape(2 * out.pixels, out.stride * out.lanes)[:, :out.features]
    got = program.unpack_output(words, 2)
    assert np.array_equal(got.reshape(want.shape), want)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_stream_places_each_value_at_its_element(data):
    lanes = data.draw(st.integers(1, 9))
    runs = data.draw(st.integers(1, 5))
    run = data.draw(st.integers(1, 12))
    lead = data.draw(st.integers(0, 5))
    pitch = data.draw(st.integers(lead + run, lead + run + 9))
    m = data.draw(st.integers(0, 3))
    spec = MatrixSpec(Region.ACT, 0, 1, run, lanes, 6, "input", pixels=runs,
                      sample_shape=(runs, 1, run), runs=runs, run=run, lead=lead, pitch=pitch)
    rng = np.random.default_rng(data.draw(st.integers(0, 1 << 16)))
    x = rng.integers(-32, 32, (m, runs, 1, run))
    words = pack_input(spec, 3, x)
    assert len(words) == math.ceil(m * runs * pitch / lanes) == spec.words(m)
    stream = unpack_words(words, lanes, 6).reshape(-1)
    want = np.zeros(len(words) * lanes, dtype=np.int64)
    for s in range(m):
        for j in range(runs):
            for i in range(run):
                want[(s * runs + j) * pitch + lead + i] = x[s, j, 0, i]
    assert np.array_equal(stream, want)
    assert np.array_equal(unpack_output(spec, 3, words, m), x)


@pytest.mark.parametrize(("fields", "fragment"), [
    ({"runs": 3}, "runs=3"),
    ({"lead": 2, "pitch": 5}, "lead + run <= pitch"),
])
def test_bad_stream_is_named(fields, fragment):
    with pytest.raises(ValueError, match="MatrixSpec") as info:
        MatrixSpec(Region.ACT, 0, 1, 4, 4, 8, "input", pixels=2, **fields)
    assert fragment in str(info.value)
