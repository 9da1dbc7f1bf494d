"""The program's wire fields: a raw output's wire width from the accumulator proof, the
output mode (scores, argmax, top_k) from hwgen.compile, both in the program file, and the
host's classes against NumPy."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import COMPILER_CONFIGS as CONFIGS
from support import random_dense_network, random_input_rows

from hwgen.compiler import Program, compile_network
from hwgen.compiler.classes import classes_of, output_mode
from hwgen.compiler.wire import bound_bits
from sim.netgen import random_cnn


def _bits_of(values):
    """The narrowest two's complement width holding every value (an independent count)."""
    bits = 1
    while not all(-(1 << (bits - 1)) <= int(v) < (1 << (bits - 1)) for v in values):
        bits += 1
    return bits


@pytest.mark.parametrize(("name", "seed", "style"), [("8x8", 0, "uniform"), ("8x8", 1, "sparse"),
                                                    ("2x3", 2, "uniform"), ("4x4", 3, "sparse")])
def test_raw_wire_bits_hold_the_extremes_of_the_last_layer(name, seed, style):
    config = CONFIGS[name]
    rng = np.random.default_rng(seed)
    network = random_dense_network(rng, config, [12, 7, 5], style=style, last_raw=True)
    program = compile_network(network, config, batch=4)
    last = network.layers[-1]
    # The extremes by hand: the last layer's inputs are the hidden layer's outputs, within its
    # bounds (and zero); each at the end its weight's sign picks, the bias where it adds.
    lo, hi = network.layers[-2].bounds(config.in_bits)
    lo, hi = min(lo, 0), max(hi, 0)
    ends = []
    for n in range(last.weight.shape[1]):
        w, b = last.weight[:, n], int(last.bias[n])
        ends += [sum(max(int(v) * lo, int(v) * hi) for v in w) + max(b, 0),
                 sum(min(int(v) * lo, int(v) * hi) for v in w) + min(b, 0)]
    assert program.output.wire_bits == _bits_of(ends)
    low = -(1 << (config.in_bits - 1))
    x = np.full((4, 12), low)
    x[1] = -low - 1
    assert _bits_of(network.forward(x).ravel()) <= program.output.wire_bits
    assert program.input.wire_bits == config.in_bits


def test_a_small_last_layer_goes_at_a_few_bits():
    from hwgen.nn import Dense, QuantizedNetwork

    config = CONFIGS["8x8"]
    weight = np.array([[1, -1], [1, 0], [-1, 1]])
    network = QuantizedNetwork([Dense(weight, np.array([5, -3]), np.ones(2, int),
                                      np.zeros(2, int), output="raw")])
    program = compile_network(network, config, batch=2)
    # 128 * 3 + 5 = 389 needs 10 bits of two's complement; the lane is 32.
    assert program.output.wire_bits == 10 and program.output.lane_bits == 32


def test_requantized_output_goes_at_its_lane_width():
    config = CONFIGS["4x4"]
    network = random_dense_network(np.random.default_rng(1), config, [6, 5], style="uniform",
                                   last_raw=False)
    program = compile_network(network, config, batch=2)
    assert program.output.kind == "requant"
    assert program.output.wire_bits == program.output.lane_bits == config.in_bits


def test_bound_bits():
    assert [bound_bits(b) for b in (0, 1, 2, 127, 128, 255)] == [1, 2, 3, 8, 9, 9]


def test_output_mode_is_compiled_and_saved(tmp_path):
    config = CONFIGS["4x4"]
    rng = np.random.default_rng(2)
    network = random_dense_network(rng, config, [9, 6, 5], style="uniform", last_raw=True)
    assert compile_network(network, config, batch=3).output_mode == "scores"
    for output, k, mode in (("argmax", None, "argmax"), ("top_k", 3, ("top_k", 3)),
                            (("top_k", 5), None, ("top_k", 5))):
        program = compile_network(network, config, batch=3, output=output, k=k)
        assert program.output_mode == mode
        path = tmp_path / "p.npz"
        program.save(path)
        loaded = Program.load(path)
        assert loaded == program and loaded.output_mode == mode
        assert loaded.output.wire_bits == program.output.wire_bits


@pytest.mark.parametrize(("output", "k", "fragment"), [
    ("best", None, "output='best'; allowed: 'scores', 'argmax', or ('top_k', k)"),
    ("top_k", None, "output='top_k' with k=None; allowed: k an integer >= 1"),
    ("top_k", 0, "k=0; allowed"),
    ("top_k", 6, "more classes than the 5 scores per sample; allowed: k in 1..5"),
    ("argmax", 2, "k=2 is for output='top_k', not output='argmax'"),
])
def test_bad_output_modes_are_refused(output, k, fragment):
    config = CONFIGS["4x4"]
    network = random_dense_network(np.random.default_rng(2), config, [9, 5], style="uniform",
                                   last_raw=True)
    with pytest.raises(ValueError, match="compile: ") as info:
        compile_network(network, config, batch=3, output=output, k=k)
    assert fragment in str(info.value), str(info.value)


def test_classes_of_an_image_output_are_refused():
    config = CONFIGS["4x4"]
    network = random_cnn(np.random.default_rng(3), config, input_shape=(6, 6, 2), blocks=1,
                         max_channels=3, dense=False, raw=True)
    assert len(network.output_shape) == 3
    with pytest.raises(ValueError, match="rows \\(pixels\\) per sample") as info:
        compile_network(network, config, batch=2, output="argmax")
    assert "allowed: output='scores' for it" in str(info.value)


def test_a_file_without_an_output_mode_holds_scores_and_a_bad_one_is_refused(tmp_path):
    config = CONFIGS["4x4"]
    network = random_dense_network(np.random.default_rng(2), config, [9, 5], style="uniform",
                                   last_raw=True)
    path = tmp_path / "p.npz"
    compile_network(network, config, batch=3, output="argmax").save(path)
    with np.load(path) as npz:
        meta = json.loads(npz["meta"].tobytes())
    assert meta["output_mode"] == "argmax" and meta["version"] >= 7
    meta["output_mode"] = ["top_k", 9]
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(ValueError, match=r"allowed: k in 1\.\.5"):
        Program.load(path)
    del meta["output_mode"]
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    assert Program.load(path).output_mode == "scores"


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 8), st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_classes_are_numpy_s_argmax_and_stable_argsort(m, n, seed, spread):
    # A small range of values makes ties frequent: they go to the lowest index.
    scores = np.random.default_rng(seed).integers(-spread, spread + 1, (m, n))
    np.testing.assert_array_equal(classes_of(scores, "argmax"), np.argmax(scores, axis=1))
    for k in range(1, n + 1):
        expect = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(classes_of(scores, ("top_k", k)), expect)
    assert classes_of(scores, "scores") is scores


def test_output_mode_takes_json_s_list_and_keeps_what_it_is_given():
    assert output_mode(["top_k", 2], "x") == ("top_k", 2)
    assert output_mode("top_k", "x", k=np.int64(3)) == ("top_k", 3)
    assert output_mode("scores", "x") == "scores"


def test_compiled_argmax_program_runs_like_the_reference():
    config = CONFIGS["4x4"]
    rng = np.random.default_rng(7)
    network = random_dense_network(rng, config, [10, 6, 5], style="uniform", last_raw=True)
    program = compile_network(network, config, batch=4, output="argmax")
    x = random_input_rows(rng, config, 4, 10)
    from support import run_on_interpreter

    interpreted, _ = run_on_interpreter(program, x)
    np.testing.assert_array_equal(classes_of(interpreted, program.output_mode),
                                  np.argmax(network.forward(x), axis=1))
