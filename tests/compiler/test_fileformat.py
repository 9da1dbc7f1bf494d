"""The program file (hwgen.compiler.fileformat): round trips (of dense and convolutional
programs), refusals of damaged and foreign files, a file of format version 2 saved before
the compiler became a package and one of version 3 saved before descriptors held a pass kind."""

import dataclasses
import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from support import COMPILER_CONFIGS as CONFIGS
from support import random_dense_network as random_network
from support import random_input_rows as random_input
from support import run_on_interpreter as run_on_device

from hwgen import AcceleratorConfig
from hwgen.compiler import Program, compile_network
from hwgen.memmap import PassKind, Region, regions
from hwgen.nn import Conv2D, Dense, Flatten, MaxPool2D, QuantizedNetwork
from sim.interpreter import ProgramInterpreter
from sim.netgen import random_cnn

DATA = Path(__file__).parent.parent / "data"


def test_save_load_round_trip(tmp_path):
    config = CONFIGS["4x4"]
    rng = np.random.default_rng(5)
    network = random_network(rng, config, [30, 20, 9], style="extreme", last_raw=True)
    program = compile_network(network, config, batch=6)
    path = tmp_path / "model.hwprog"
    program.save(path)
    loaded = Program.load(path)
    assert loaded == program
    x = random_input(rng, config, 6, 30)
    interpreted, unpacked = run_on_device(loaded, x)
    np.testing.assert_array_equal(interpreted, network.forward(x))
    np.testing.assert_array_equal(unpacked, network.forward(x))


def test_save_load_round_trip_of_a_cnn(tmp_path):
    # Sample shapes and the spatial layers' geometry survive the file.
    config = dataclasses.replace(CONFIGS["3x2"], prog_depth=32)
    rng = np.random.default_rng(12)
    network = random_cnn(rng, config, input_shape=(6, 5, 3), blocks=2, dense=True, raw=True)
    program = compile_network(network, config, readout=True)
    path = tmp_path / "cnn.hwprog"
    program.save(path)
    loaded = Program.load(path)
    assert loaded == program
    assert loaded.input.sample_shape == (6, 5, 3)
    assert loaded.output.sample_shape == network.output_shape
    assert [s.sample_shape for s in loaded.layer_outputs] == [o for _, o in network.shapes]
    assert all("geometry" in d for d in loaded.descriptors)
    x = random_input(rng, config, 4, 6 * 5 * 3).reshape(4, 6, 5, 3)
    interpreted, unpacked = run_on_device(loaded, x, out_shape=network.output_shape)
    np.testing.assert_array_equal(interpreted, network.forward(x))
    np.testing.assert_array_equal(unpacked, network.forward(x))


@pytest.mark.parametrize("bounds", [True, False])
def test_save_load_round_trip_of_bounds_and_leaky_layers(tmp_path, bounds):
    # Version 5 holds the bounds and mult_neg (a design without bounds: the relu flag).
    config = dataclasses.replace(CONFIGS["3x2"], prog_depth=32, bounds=bounds)
    for seed in range(40):
        network = random_cnn(np.random.default_rng(seed), config, input_shape=(5, 5, 2))
        kinds = {layer.activation for layer in network.layers if hasattr(layer, "activation")}
        if not bounds or "leaky_relu" in kinds:
            break
    assert ("leaky_relu" in kinds) == bounds
    program = compile_network(network, config)
    path = tmp_path / "p.hwprog"
    program.save(path)
    loaded = Program.load(path)
    assert loaded == program
    x = random_input(np.random.default_rng(0), config, 3, 50).reshape(3, 5, 5, 2)
    interpreted, unpacked = run_on_device(loaded, x, out_shape=network.output_shape,
                                          channels=network.output_shape[-1])
    np.testing.assert_array_equal(interpreted, network.forward(x))
    np.testing.assert_array_equal(unpacked, network.forward(x))


def rewrite(path, **changes):
    """Rewrite a saved program with some metadata fields or arrays replaced."""
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta = json.loads(arrays["meta"].tobytes())
    for key, value in changes.items():
        if key in meta:
            meta[key] = value
        else:
            arrays[key] = value
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.fixture
def saved(tmp_path, program):
    path = tmp_path / "p.npz"
    program.save(path)
    return path


def load_fails(path, fragment):
    with pytest.raises(ValueError) as info:
        Program.load(path)
    assert str(path) in str(info.value) and fragment in str(info.value), str(info.value)


@pytest.mark.parametrize("version", [1, 12])
def test_load_refuses_other_version(saved, version):
    # Version 1 files hold descriptors of the fixed 171-bit layout; 12 is a future one.
    rewrite(saved, version=version)
    load_fails(saved, f"version {version}")


def test_load_refuses_other_format(saved):
    rewrite(saved, format="something-else")
    load_fails(saved, "something-else")


def test_load_refuses_damaged_image(saved, program):
    with np.load(saved) as npz:
        weight = npz["WEIGHT"].copy()
    weight[0, 0] ^= 1
    rewrite(saved, WEIGHT=weight)
    load_fails(saved, "WEIGHT")


def test_load_refuses_damaged_config(saved):
    rewrite(saved, config_hash="0" * 16)
    load_fails(saved, "hash")


def test_load_refuses_garbage(tmp_path, saved):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a program at all")
    load_fails(garbage, "not an")
    data = bytearray(saved.read_bytes())
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(bytes(data[:len(data) // 2]))
    load_fails(truncated, "not a readable")
    with zipfile.ZipFile(saved) as z:
        assert "meta.npy" in z.namelist()
    # A single .npy array is not a program either.
    single = tmp_path / "single.npz"
    with open(single, "wb") as f:
        np.savez(f, other=np.zeros(3))
    load_fails(single, "meta")
    with pytest.raises(OSError):
        Program.load(tmp_path / "missing.npz")



def saved_network(path):
    """Return ``(network, config, batch, x, y)`` stored next to a saved program: the network
    and the reference's output ``y`` on ``x``, computed when the file was saved."""
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta = json.loads(arrays["meta"].tobytes())
    layers = [Dense(*(arrays[f"layer{i}_{f}"] for f in ("weight", "bias", "mult", "shift")),
                    activation=layer["activation"], output=layer["output"])
              for i, layer in enumerate(meta["layers"])]
    network = QuantizedNetwork(layers, **{k: meta[k] for k in
                                          ("in_bits", "w_bits", "acc_bits", "mult_bits")})
    config = AcceleratorConfig.from_dict(meta["config"])
    return network, config, meta["batch"], arrays["x"], arrays["y"]


@pytest.mark.parametrize("name", ["raw", "requant"])
def test_file_of_format_version_2_loads_and_runs(name):
    # Saved by hwgen/compiler.py (the module before the package) at format version 2.
    network, config, batch, x, y = saved_network(DATA / f"program_v2_{name}_network.npz")
    loaded = Program.load(DATA / f"program_v2_{name}.npz")
    assert loaded == compile_network(network, config, batch=batch, taps=False,
                                     fuse_pool=False)
    np.testing.assert_array_equal(network.forward(x), y)
    interpreted, unpacked = run_on_device(loaded, x)
    np.testing.assert_array_equal(interpreted, y)
    np.testing.assert_array_equal(unpacked, y)


def rewrite_image(path, region, array):
    """Replace a saved program's image ``region`` by ``array``, its digest with it (so that
    only the cross-checks after the digest can find the damage)."""
    with np.load(path) as npz:
        digests = json.loads(npz["meta"].tobytes())["digests"]
    digests[region] = hashlib.sha256(array.tobytes()).hexdigest()
    rewrite(path, digests=digests, **{region: array})


@pytest.fixture
def saved_v2(tmp_path):
    path = tmp_path / "v2.npz"
    shutil.copyfile(DATA / "program_v2_raw.npz", path)
    return path


def test_file_of_format_version_2_with_todays_word_width_is_refused(saved_v2):
    # The file's PROGRAM words as wide as today's descriptors: not what version 2 wrote.
    with np.load(saved_v2) as npz:
        image = npz["PROGRAM"]
    wider = np.concatenate([image, np.zeros((len(image), 1), np.uint8)], axis=1)
    rewrite_image(saved_v2, "PROGRAM", wider)
    load_fails(saved_v2, f"image PROGRAM has uint8 {wider.shape}; expected uint8 {image.shape}")
    load_fails(saved_v2, "format version 2); damaged")


@pytest.mark.parametrize("bit", [0, 4, 11])
def test_file_of_format_version_2_with_a_damaged_descriptor_is_refused(saved_v2, bit):
    # The digest made to match: the PROGRAM words themselves must decode to the descriptors.
    with np.load(saved_v2) as npz:
        image = npz["PROGRAM"].copy()
    image[1, bit // 8] ^= 1 << (bit % 8)
    rewrite_image(saved_v2, "PROGRAM", image)
    load_fails(saved_v2, "the PROGRAM image does not match the stored descriptors (format "
                         "version 2); damaged")


def test_file_of_format_version_11_with_narrower_words_is_refused(saved, program):
    with np.load(saved) as npz:
        image = npz["PROGRAM"]
    narrower = image[:, :-1].copy()
    rewrite_image(saved, "PROGRAM", narrower)
    load_fails(saved, f"image PROGRAM has uint8 {narrower.shape}; expected uint8 {image.shape}")
    load_fails(saved, "format version 11); damaged")


def _v10_bf16_network():
    """The bf16 network of program_v10_bf16_cnn.npz, as it was made when it was saved: a
    first convolution in the taps layout, a Flatten, a dense layer."""
    from hwgen.nn import CNN, FloatConv2D, FloatDense, to_bf16

    rng = np.random.default_rng(0)
    model = CNN([FloatConv2D(rng.normal(size=(3, 3, 1, 4)), rng.normal(size=4), padding=1),
                 Flatten(), FloatDense(rng.normal(size=(4 * 5 * 5, 3)), rng.normal(size=3))],
                input_shape=(5, 5, 1))
    return to_bf16(model, rows=4), AcceleratorConfig(dtype="bf16", rows=4, cols=4)


def test_file_of_format_version_10_of_a_bf16_design_loads_and_runs():
    # Saved at format version 10: a bf16 design's descriptors without the stream fields
    # (version 11), narrower PROGRAM words; they load with the fields 0 and run the same.
    path = DATA / "program_v10_bf16_cnn.npz"
    with np.load(path) as npz:
        meta = json.loads(npz["meta"].tobytes())
    assert meta["version"] == 10 and "dst_run" not in meta["descriptors"][0]
    net, config = _v10_bf16_network()
    loaded = Program.load(path)
    assert loaded == compile_network(net, config)
    assert {d["dst_run"] for d in loaded.descriptors} == {0}
    x = net.quantize_input(np.random.default_rng(1).normal(size=(2, 5, 5, 1)))
    _, unpacked = run_on_device(loaded, x)
    np.testing.assert_array_equal(np.asarray(unpacked).view(np.uint32),
                                  np.asarray(net.forward(x)).view(np.uint32))


def saved_cnn(path):
    """Return ``(network, config, batch, x, y)`` stored next to a saved CNN program: each
    layer's kind, attributes and arrays, and the reference's ``y`` on ``x`` when it was
    saved."""
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta = json.loads(arrays["meta"].tobytes())
    layers = []
    for i, layer in enumerate(meta["layers"]):
        kind = layer.pop("kind")
        if kind in ("Dense", "Conv2D"):
            params = (arrays[f"layer{i}_{f}"] for f in ("weight", "bias", "mult", "shift"))
            layers.append({"Dense": Dense, "Conv2D": Conv2D}[kind](*params, **layer))
        else:
            layers.append({"MaxPool2D": MaxPool2D, "Flatten": Flatten}[kind](**layer))
    network = QuantizedNetwork(layers, input_shape=tuple(meta["input_shape"]),
                               **{k: meta[k] for k in ("in_bits", "w_bits", "acc_bits",
                                                       "mult_bits")})
    config = AcceleratorConfig.from_dict(meta["config"])
    return network, config, meta["batch"], arrays["x"], arrays["y"]


def test_file_of_format_version_3_loads_and_runs():
    # Saved at format version 3: conv, max-pool, conv, max-pool, flatten, dense; its
    # descriptors had a pool flag where they now hold the pass kind.
    network, config, batch, x, y = saved_cnn(DATA / "program_v3_cnn_network.npz")
    loaded = Program.load(DATA / "program_v3_cnn.npz")
    assert loaded == compile_network(network, config, batch=batch, taps=False,
                                     fuse_pool=False)
    assert [d["kind"] for d in loaded.descriptors] == [
        PassKind.MATRIX.value, PassKind.MAXPOOL.value, PassKind.MATRIX.value,
        PassKind.MAXPOOL.value, PassKind.MATRIX.value]
    np.testing.assert_array_equal(network.forward(x), y)
    interpreted, unpacked = run_on_device(loaded, x, out_shape=network.output_shape)
    np.testing.assert_array_equal(interpreted, y)
    np.testing.assert_array_equal(unpacked, y)


def test_file_of_format_version_4_geometry_loads_and_runs():
    # Saved at format version 4 (the same network as version 3's): one stride and one pad per
    # layer where the geometry now has sy, sx, pad_top, pad_left, and no channel window.
    network, config, batch, x, y = saved_cnn(DATA / "program_v3_cnn_network.npz")
    with np.load(DATA / "program_v4_cnn.npz") as npz:
        meta = json.loads(npz["meta"].tobytes())
    assert meta["version"] == 4 and "stride" in meta["descriptors"][0]["geometry"]
    loaded = Program.load(DATA / "program_v4_cnn.npz")
    assert loaded == compile_network(network, config, batch=batch, taps=False,
                                     fuse_pool=False)
    stored = meta["descriptors"][0]["geometry"]
    geometry = loaded.descriptors[0]["geometry"]
    assert (geometry["sy"], geometry["sx"], geometry["pad_top"], geometry["pad_left"]) == \
        (stored["stride"],) * 2 + (stored["pad"],) * 2
    interpreted, unpacked = run_on_device(loaded, x, out_shape=network.output_shape)
    np.testing.assert_array_equal(interpreted, y)
    np.testing.assert_array_equal(unpacked, y)


def test_file_of_format_version_4_with_a_damaged_geometry_is_refused(tmp_path):
    path = tmp_path / "v4.npz"
    shutil.copyfile(DATA / "program_v4_cnn.npz", path)
    with np.load(path) as npz:
        image = npz["PROGRAM"].copy()
    image[1, 0] ^= 1   # the first layer's geometry: its input's height
    rewrite_image(path, "PROGRAM", image)
    load_fails(path, "the PROGRAM image does not match the stored descriptors (format "
                     "version 4); damaged")


def test_file_of_format_version_3_with_a_damaged_descriptor_is_refused(tmp_path):
    path = tmp_path / "v3.npz"
    shutil.copyfile(DATA / "program_v3_cnn.npz", path)
    with np.load(path) as npz:
        image = npz["PROGRAM"].copy()
    image[1, 0] ^= 1   # the second layer's relu flag
    rewrite_image(path, "PROGRAM", image)
    load_fails(path, "the PROGRAM image does not match the stored descriptors (format "
                     "version 3); damaged")


def test_file_of_format_version_4_loads_and_runs():
    # Saved at format version 4: a relu flag where descriptors now hold the bounds and the
    # leaky flag, PARAM lanes without mult_neg.
    network, config, batch, x, y = saved_cnn(DATA / "program_v4_relu_cnn_network.npz")
    loaded = Program.load(DATA / "program_v4_relu_cnn.npz")
    assert loaded == compile_network(network, config, batch=batch, taps=False,
                                     fuse_pool=False)
    matrices = [d for d in loaded.descriptors if d["kind"] == PassKind.MATRIX.value]
    activations = [layer.activation for layer in network.layers
                   if isinstance(layer, Dense | Conv2D)]
    assert activations == ["identity", "relu", "identity"]
    assert [(d["leaky"], d["act_min"], d["act_max"]) for d in matrices] == [
        (0, -128, 127), (0, 0, 127), (0, -128, 127)]
    assert all("relu" not in d for d in loaded.descriptors)
    device = ProgramInterpreter(config)
    base, words = loaded.images[Region.PARAM]
    for i, word in enumerate(words):
        device.write(Region.PARAM, base + i, word)
    assert {device.params(base + i, j)[3] for i in range(len(words))
            for j in range(config.cols)} == {0}
    np.testing.assert_array_equal(network.forward(x), y)
    interpreted, unpacked = run_on_device(loaded, x, out_shape=network.output_shape)
    np.testing.assert_array_equal(interpreted, y)
    np.testing.assert_array_equal(unpacked, y)


def test_file_of_format_version_5_loads_and_runs():
    # Saved at format version 5 (the network of version 4's relu file): descriptors without
    # src2_base, which a design with residual now has (0 outside an ADD pass).
    network, config, batch, x, y = saved_cnn(DATA / "program_v4_relu_cnn_network.npz")
    assert config.residual
    with np.load(DATA / "program_v5_relu_cnn.npz") as npz:
        meta = json.loads(npz["meta"].tobytes())
    assert meta["version"] == 5 and "src2_base" not in meta["descriptors"][0]
    loaded = Program.load(DATA / "program_v5_relu_cnn.npz")
    assert loaded == compile_network(network, config, batch=batch, taps=False,
                                     fuse_pool=False)
    assert [d["src2_base"] for d in loaded.descriptors] == [0] * len(loaded.descriptors)
    assert [(d["act_min"], d["act_max"]) for d in loaded.descriptors
            if d["kind"] == PassKind.MATRIX.value] == [(-128, 127), (0, 127), (-128, 127)]
    interpreted, unpacked = run_on_device(loaded, x, out_shape=network.output_shape)
    np.testing.assert_array_equal(interpreted, y)
    np.testing.assert_array_equal(unpacked, y)


def test_file_of_format_version_5_with_a_damaged_descriptor_is_refused(tmp_path):
    path = tmp_path / "v5.npz"
    shutil.copyfile(DATA / "program_v5_relu_cnn.npz", path)
    with np.load(path) as npz:
        image = npz["PROGRAM"].copy()
    image[0, 0] ^= 1   # the first layer's leaky flag
    rewrite_image(path, "PROGRAM", image)
    load_fails(path, "the PROGRAM image does not match the stored descriptors (format "
                     "version 5); damaged")


@pytest.fixture
def saved_v4(tmp_path):
    path = tmp_path / "v4.npz"
    shutil.copyfile(DATA / "program_v4_relu_cnn.npz", path)
    return path


def test_file_of_format_version_4_with_a_damaged_descriptor_is_refused(saved_v4):
    with np.load(saved_v4) as npz:
        image = npz["PROGRAM"].copy()
    image[0, 0] ^= 1   # the first layer's relu flag
    rewrite_image(saved_v4, "PROGRAM", image)
    load_fails(saved_v4, "the PROGRAM image does not match the stored descriptors (format "
                         "version 4); damaged")


def test_file_of_format_version_4_with_today_s_param_lanes_is_refused(saved_v4):
    # Version 4 wrote PARAM lanes without mult_neg: words as wide as today's are damage.
    config = Program.load(saved_v4).config
    with np.load(saved_v4) as npz:
        image = npz["PARAM"]
    wider = np.zeros((len(image), regions(config)[Region.PARAM].word_bytes), np.uint8)
    assert wider.shape[1] > image.shape[1]
    rewrite_image(saved_v4, "PARAM", wider)
    load_fails(saved_v4, f"image PARAM has uint8 {wider.shape}; expected uint8 {image.shape}")
    load_fails(saved_v4, "format version 4); damaged")


def _saved_pooling_program(tmp_path):
    config = dataclasses.replace(CONFIGS["3x2"], prog_depth=32)
    network = random_cnn(np.random.default_rng(2), config, input_shape=(6, 6, 2), blocks=2)
    program = compile_network(network, config, fuse_pool=False)
    assert PassKind.MAXPOOL in {layer.kind for layer in program.layers}
    path = tmp_path / "cnn.hwprog"
    program.save(path)
    return program, path


def test_layer_kinds_are_stored_by_name_and_the_old_names_still_load(tmp_path):
    program, path = _saved_pooling_program(tmp_path)
    with np.load(path) as npz:
        layers = json.loads(npz["meta"].tobytes())["layers"]
    assert [layer["kind"] for layer in layers] == [s.kind.name for s in program.layers]
    # Files of versions 2 and 3 (and the first of version 4) said "matrix" and "pool".
    old = {"MATRIX": "matrix", "MAXPOOL": "pool"}
    rewrite(path, layers=[{**layer, "kind": old[layer["kind"]]} for layer in layers])
    assert Program.load(path) == program


def test_load_refuses_a_layer_kind_that_is_no_pass_kind(tmp_path):
    _, path = _saved_pooling_program(tmp_path)
    with np.load(path) as npz:
        layers = json.loads(npz["meta"].tobytes())["layers"]
    rewrite(path, layers=[{**layers[0], "kind": "CONV3D"}, *layers[1:]])
    load_fails(path, "layer kind 'CONV3D' is not a pass kind; allowed: MATRIX, MAXPOOL")


#: The design the CNN programs of format versions 6 to 8 were saved for.
SAVED_CNN_CONFIG = AcceleratorConfig(rows=4, cols=4, act_depth=1024, weight_depth=1024,
                                     param_depth=64, out_depth=256, prog_depth=16)


def saved_meta(name):
    """Return the metadata of the saved program ``name`` in tests/data."""
    with np.load(DATA / name) as npz:
        return json.loads(npz["meta"].tobytes())


def _v6_network(seed=606):
    """The network of ``program_v6_cnn.npz`` (saved at format version 6 by the compiler of
    before the taps layout; ``seed`` 707: of ``program_v7_cnn.npz``, saved at version 7
    before fused pools): a 3x2 convolution of a one-channel 6x6 image, strides (1, 2),
    padding (1, 2, 0, 1), a 2x2 max pooling, a Flatten and a raw Dense."""
    rng = np.random.default_rng(seed)
    n = 4
    conv = Conv2D(rng.integers(-128, 128, (3, 2, 1, n)), rng.integers(-500, 500, n),
                  rng.integers(1, 1 << 12, n), rng.integers(10, 16, n), stride=(1, 2),
                  padding=(1, 2, 0, 1))
    dense = Dense(rng.integers(-128, 128, (3 * n, 5)), rng.integers(-500, 500, 5),
                  np.ones(5, int), np.zeros(5, int), output="raw")
    return QuantizedNetwork([conv, MaxPool2D(2), Flatten(), dense], input_shape=(6, 6, 1))


def test_file_of_format_version_6_loads_and_runs_pixel_by_pixel():
    # Saved at format version 6: geometries without the taps fields, the input pixel by
    # pixel. It loads with the taps fields 0 and runs as it did; today's compiler packs the
    # same convolution's taps (ceil(6 / 4) = 2 tiles instead of 6).
    network = _v6_network()
    config = SAVED_CNN_CONFIG
    meta = saved_meta("program_v6_cnn.npz")
    assert meta["version"] == 6 and "taps" not in meta["descriptors"][0]["geometry"]
    assert "pitch" not in meta["input"]
    loaded = Program.load(DATA / "program_v6_cnn.npz")
    assert loaded == compile_network(network, config, batch=3, taps=False,
                                     fuse_pool=False)
    assert loaded.descriptors[0]["geometry"]["taps"] == 0 and loaded.input.per_pixel
    assert compile_network(network, config, batch=3).layers[0].k_tiles == 2
    x = np.random.default_rng(6).integers(-128, 128, (3, 6, 6, 1))
    interpreted, unpacked = run_on_device(loaded, x, out_shape=network.output_shape)
    np.testing.assert_array_equal(interpreted, network.forward(x))
    np.testing.assert_array_equal(unpacked, network.forward(x))


def test_file_of_format_version_7_loads_and_runs_its_pool_as_a_pass():
    # Saved at format version 7 (before fused pools): geometries without the pool fields, a
    # taps convolution, its 2x2 max pool a pass of its own. It loads with the pool fields 0
    # and runs as it did; today's compiler fuses the pool into the convolution's pass.
    network = _v6_network(seed=707)
    config = SAVED_CNN_CONFIG
    meta = saved_meta("program_v7_cnn.npz")
    assert meta["version"] == 7 and "pool" not in meta["descriptors"][0]["geometry"]
    loaded = Program.load(DATA / "program_v7_cnn.npz")
    today = compile_network(network, config, batch=3, fuse_pool=False)
    # Its raw output's wire width is the one it was saved with, from the worst case of any
    # signed input; today's proof starts from the Flatten's values, the convolution's bounds,
    # and sends the scores a bit narrower. Both widths hold every score.
    assert (loaded.output.wire_bits, today.output.wire_bits) == (18, 17)
    assert loaded == dataclasses.replace(today, output=dataclasses.replace(
        today.output, wire_bits=loaded.output.wire_bits))
    assert [d["kind"] for d in loaded.descriptors] == [0, 1, 0]
    assert all(d["geometry"]["pool"] == 0 for d in loaded.descriptors)
    assert len(compile_network(network, config, batch=3).descriptors) == 2
    x = np.random.default_rng(7).integers(-128, 128, (3, 6, 6, 1))
    interpreted, unpacked = run_on_device(loaded, x, out_shape=network.output_shape)
    np.testing.assert_array_equal(interpreted, network.forward(x))
    np.testing.assert_array_equal(unpacked, network.forward(x))


def _v8_network(seed=808):
    """The network of ``program_v8_depthwise.npz`` (saved at format version 8, before
    diagonal tiles): a 1x1 convolution of a two-channel 5x5 image to four channels with ReLU,
    a 3x3 depthwise convolution padded by one, a Flatten and a raw Dense."""
    rng = np.random.default_rng(seed)
    n = 4
    point = Conv2D(rng.integers(-128, 128, (1, 1, 2, n)), rng.integers(-500, 500, n),
                   rng.integers(1, 1 << 12, n), rng.integers(10, 16, n), activation="relu")
    depth = Conv2D(rng.integers(-128, 128, (3, 3, 1, n)), rng.integers(-500, 500, n),
                   rng.integers(1, 1 << 12, n), rng.integers(10, 16, n), padding=1, groups=n)
    dense = Dense(rng.integers(-128, 128, (5 * 5 * n, 3)), rng.integers(-500, 500, 3),
                  np.ones(3, int), np.zeros(3, int), output="raw")
    return QuantizedNetwork([point, depth, Flatten(), dense], input_shape=(5, 5, 2))


def test_file_of_format_version_8_loads_and_runs_its_depthwise_tiles_whole():
    # Saved at format version 8 (before diagonal tiles): geometries without wdiag, the
    # depthwise layer's nine tiles four words each. It loads with wdiag 0 and runs as it did;
    # today's compiler stores each of those tiles as one word, its diagonal.
    network = _v8_network()
    config = SAVED_CNN_CONFIG
    meta = saved_meta("program_v8_depthwise.npz")
    assert meta["version"] == 8 and "wdiag" not in meta["descriptors"][1]["geometry"]
    loaded = Program.load(DATA / "program_v8_depthwise.npz")
    assert [d["geometry"]["wdiag"] for d in loaded.descriptors] == [0, 0, 0]
    assert loaded.layers[1].w_words == 9 * config.rows
    today = compile_network(network, config, batch=3)
    assert [d["geometry"]["wdiag"] for d in today.descriptors] == [0, 1, 0]
    assert today.layers[1].w_words == 9
    x = np.random.default_rng(8).integers(-128, 128, (3, 5, 5, 2))
    for program in (loaded, today):
        interpreted, unpacked = run_on_device(program, x, out_shape=network.output_shape)
        np.testing.assert_array_equal(interpreted, network.forward(x))
        np.testing.assert_array_equal(unpacked, network.forward(x))
