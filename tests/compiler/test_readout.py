"""Per-layer read-out (``compile_network(..., readout=True)``): every layer's output of a run
stays where :attr:`Program.layer_outputs` says, bit-exact with ``forward_trace``; the batch
shrinks to what fits; programs without read-out, and files saved before it, say so clearly."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from support import COMPILER_CONFIGS as CONFIGS
from support import random_dense_network as random_network
from support import random_input_rows as random_input

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, Program, compile_network
from hwgen.memmap import Region
from hwgen.nn import Conv2D, Dense, Flatten, MaxPool2D, QuantizedNetwork
from sim.interpreter import ProgramInterpreter
from sim.netgen import random_cnn

DATA = Path(__file__).parent.parent / "data"


def read_layers(program, x, seed=0):
    """Run ``program`` on ``x`` in the interpreter; return each layer's output as read from
    the memory at the places the program names."""
    device = ProgramInterpreter(program.config, seed)
    device.load(program, x)
    device.run(len(x))
    outputs = []
    for index in range(len(program.layer_outputs)):
        region, base, count = program.layer_output_words(index, len(x))
        words = [device.read(region, base + i) for i in range(count)]
        outputs.append(program.unpack_layer_output(index, words, len(x)))
    return outputs


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("last_raw", [False, True])
def test_every_layer_output_matches_forward_trace(name, last_raw):
    config = CONFIGS[name]
    rng = np.random.default_rng(11)
    sizes = [int(s) for s in rng.integers(1, 3 * max(config.rows, config.cols), size=4)]
    network = random_network(rng, config, sizes, style="uniform", last_raw=last_raw)
    program = compile_network(network, config, readout=True)
    x = random_input(rng, config, min(program.batch, 7), sizes[0])
    trace = network.forward_trace(x)
    outputs = read_layers(program, x)
    assert len(outputs) == len(trace) == 3
    for got, expected in zip(outputs, trace, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert program.layer_outputs[-1] == program.output


@pytest.mark.parametrize("seed", range(4))
def test_every_layer_output_of_a_cnn_matches_forward_trace(seed):
    # Images, pooled images, a Flatten's flat rows (the words of its input) and the dense end.
    config = dataclasses.replace(CONFIGS["2x3"], prog_depth=32, acc_depth=20)
    rng = np.random.default_rng(seed)
    network = random_cnn(rng, config, max_channels=9, dense=True)
    program = compile_network(network, config, readout=True)
    x = random_input(rng, config, min(program.batch, 5), network.in_features)
    x = x.reshape(len(x), *network.shapes[0][0])
    trace = network.forward_trace(x)
    outputs = read_layers(program, x)
    assert len(outputs) == len(trace) == len(network.layers)
    for got, expected in zip(outputs, trace, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert program.layer_outputs[-1] == program.output


def test_batch_shrinks_to_all_areas():
    config = AcceleratorConfig(rows=2, cols=2, act_depth=120, acc_depth=256)
    network = random_network(np.random.default_rng(3), config, [5, 7, 3, 4], style="uniform",
                             last_raw=False)
    # act_lanes = 2: the matrices take 3, 4, 2 and 2 words per row.
    plain = compile_network(network, config)
    kept = compile_network(network, config, readout=True)
    assert plain.batch == 120 // (max(3, 2) + max(4, 2))
    assert kept.batch == 120 // (3 + 4 + 2 + 2)
    bases = [spec.base for spec in kept.layer_outputs]
    assert bases == [kept.batch * 3, kept.batch * 7, kept.batch * 9]
    assert {spec.region for spec in kept.layer_outputs} == {Region.ACT}


def test_raw_single_layer_reads_out_its_accumulators():
    config = CONFIGS["3x2"]
    rng = np.random.default_rng(8)
    network = random_network(rng, config, [7, 5], style="extreme", last_raw=True)
    program = compile_network(network, config, readout=True)
    assert program.batch == compile_network(network, config).batch
    x = random_input(rng, config, 4, 7)
    np.testing.assert_array_equal(read_layers(program, x)[0], network.forward(x))


def test_refuses_what_does_not_fit_with_the_reason():
    config = AcceleratorConfig(rows=1, cols=1, act_depth=64, max_k=64, acc_bits=24)
    network = random_network(np.random.default_rng(1), config, [10, 30, 30], style="uniform",
                             last_raw=False, acc_bits=24)
    assert compile_network(network, config).batch == 1  # 30 + 30 words per row
    with pytest.raises(CompileError) as info:
        compile_network(network, config, readout=True)
    message = str(info.value)
    for fragment in ("(10 + 30 + 30)", "3 areas of the read-out", "not even batch=1 fits",
                     "act_depth=64"):
        assert fragment in message, message


def test_readout_must_be_a_bool():
    config = CONFIGS["8x8"]
    network = random_network(np.random.default_rng(0), config, [4, 3], style="uniform",
                             last_raw=True)
    with pytest.raises(TypeError, match="readout='all'; allowed: True or False"):
        compile_network(network, config, readout="all")


def test_program_without_readout_says_how_to_compile_one():
    config = CONFIGS["8x8"]
    network = random_network(np.random.default_rng(0), config, [4, 3, 2], style="uniform",
                             last_raw=True)
    program = compile_network(network, config)
    assert program.layer_outputs == ()
    for call in (lambda: program.layer_output_words(0, 1),
                 lambda: program.unpack_layer_output(0, [], 0)):
        with pytest.raises(ValueError, match=r"readout=True"):
            call()


def test_layer_index_out_of_range():
    config = CONFIGS["8x8"]
    network = random_network(np.random.default_rng(0), config, [4, 3, 2], style="uniform",
                             last_raw=True)
    program = compile_network(network, config, readout=True)
    for index in (2, -1, True, 0.0):
        with pytest.raises(ValueError, match=r"allowed: an integer in 0\.\.1"):
            program.layer_output_words(index, 1)


def test_save_load_keeps_the_layer_outputs(tmp_path):
    config = CONFIGS["2x3"]
    rng = np.random.default_rng(2)
    network = random_network(rng, config, [6, 5, 4], style="uniform", last_raw=True)
    program = compile_network(network, config, readout=True)
    path = tmp_path / "kept.npz"
    program.save(path)
    loaded = Program.load(path)
    assert loaded == program and len(loaded.layer_outputs) == 2
    x = random_input(rng, config, 3, 6)
    for got, expected in zip(read_layers(loaded, x), network.forward_trace(x), strict=True):
        np.testing.assert_array_equal(got, expected)


def test_damaged_layer_outputs_are_refused(tmp_path):
    config = CONFIGS["2x3"]
    network = random_network(np.random.default_rng(2), config, [6, 5, 4], style="uniform",
                             last_raw=True)
    path = tmp_path / "kept.npz"
    compile_network(network, config, readout=True).save(path)
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta = json.loads(arrays["meta"].tobytes())
    meta["layer_outputs"] = meta["layer_outputs"][:1]
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    with pytest.raises(ValueError, match=r"the last layer output .* is not the output .*damaged"):
        Program.load(path)


def resave(path, layer_outputs):
    """Rewrite the saved program at ``path`` with the metadata's ``layer_outputs`` replaced."""
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta = json.loads(arrays["meta"].tobytes())
    meta["layer_outputs"] = layer_outputs
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def test_a_missing_middle_layer_output_is_refused(tmp_path):
    config = CONFIGS["2x3"]
    network = random_network(np.random.default_rng(5), config, [6, 5, 4, 3], style="uniform",
                             last_raw=True)
    path = tmp_path / "kept.npz"
    compile_network(network, config, readout=True).save(path)
    with np.load(path) as npz:
        kept = json.loads(npz["meta"].tobytes())["layer_outputs"]
    resave(path, [kept[0], kept[2]])
    with pytest.raises(ValueError, match=r"layer_outputs has 2 entries; expected 3 .*damaged"):
        Program.load(path)


def _layer(kind, rng, c, n, k=3, **kwargs):
    """A small Conv2D (``k x k``, ``c -> n`` channels) or Dense (``c -> n``) of unit scales."""
    shape = (k, k, c, n) if kind is Conv2D else (c, n)
    return kind(rng.integers(-2, 3, shape), rng.integers(-3, 4, n), np.ones(n, int),
                np.zeros(n, int), **kwargs)


def _flattening_networks():
    """Networks whose Flattens are in the middle, first and last; each with its name."""
    rng = np.random.default_rng(9)
    return {
        "conv-pool-flatten": ([_layer(Conv2D, rng, 2, 3), MaxPool2D(2), Flatten()], (6, 6, 2)),
        "conv-flatten (1x1 image)": ([_layer(Conv2D, rng, 2, 3), Flatten()], (3, 3, 2)),
        "flatten-dense": ([Flatten(), _layer(Dense, rng, 2 * 2 * 2, 3)], (2, 2, 2)),
        "conv-flatten-dense": ([_layer(Conv2D, rng, 2, 3, padding=1), Flatten(),
                                _layer(Dense, rng, 3 * 3 * 3, 4)], (3, 3, 2)),
        "conv-pool": ([_layer(Conv2D, rng, 1, 2), MaxPool2D(2)], (5, 5, 1)),
    }


@pytest.mark.parametrize("name", sorted(_flattening_networks()))
def test_layer_outputs_are_one_per_network_layer_in_the_file(tmp_path, name):
    # A Flatten is no pass but has an entry: the file's count is the network's layers, no
    # more and no fewer.
    layers, input_shape = _flattening_networks()[name]
    network = QuantizedNetwork(layers, input_shape=input_shape, in_bits=4, w_bits=6,
                               acc_bits=24, mult_bits=8)
    config = dataclasses.replace(CONFIGS["2x3"], prog_depth=32)
    program = compile_network(network, config, readout=True)
    path = tmp_path / "kept.npz"
    program.save(path)
    assert Program.load(path) == program
    kept = [spec.to_dict() for spec in program.layer_outputs]
    count = len(network.layers)
    damaged = [kept[:i] + kept[i + 1:] for i in range(count - 1)] + [[kept[0], *kept]]
    for entries in damaged:
        resave(path, entries)
        with pytest.raises(ValueError, match=rf"layer_outputs has {len(entries)} entries; "
                                             rf"expected {count} "):
            Program.load(path)


def test_file_saved_before_readout_loads_without_it():
    loaded = Program.load(DATA / "program_v2_requant.npz")
    assert loaded.layer_outputs == ()
    with pytest.raises(ValueError, match="compiled without read-out"):
        loaded.layer_output_words(0, 1)


def test_interpreter_sees_no_area_reused():
    # With ping-pong areas the first layer's output is overwritten by the third layer's;
    # with read-out it is still there after the run.
    config = AcceleratorConfig(rows=2, cols=2, act_depth=1 << 12)
    rng = np.random.default_rng(4)
    network = random_network(rng, config, [4, 6, 5, 6], style="uniform", last_raw=False)
    x = random_input(rng, config, 3, 4)
    first = network.forward_trace(x)[0]
    plain = compile_network(network, config, batch=3)
    device = ProgramInterpreter(config)
    device.load(plain, x)
    device.run(3)
    spec = plain.output  # layer 2 writes where layer 0 wrote
    lanes = config.act_lanes
    words = [device.read(Region.ACT, spec.base + i) for i in range(3 * math.ceil(6 / lanes))]
    kept = compile_network(network, config, batch=3, readout=True)
    assert plain.unpack_output(words, 3).tolist() != first.tolist()
    np.testing.assert_array_equal(read_layers(kept, x)[0], first)
