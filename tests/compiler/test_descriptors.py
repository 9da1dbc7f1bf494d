"""Layer descriptors (hwgen.compiler.descriptors) against the field order and widths documented
in hwgen.memmap (tests/support/networks.py writes them down independently)."""

import numpy as np
import pytest
from support import COMPILER_CONFIGS as CONFIGS
from support import compile_refused as refused
from support import documented_descriptor_fields as descriptor_fields
from support import documented_geometry_fields as geometry_fields
from support import run_on_interpreter

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, compile_network
from hwgen.compiler.descriptors import (
    activation_fields,
    check_field,
    pack_layer,
    unpack_program,
)
from hwgen.memmap import (
    PassKind,
    Region,
    descriptor_layout,
    geometry_layout,
    geometry_words,
    param_lane_layout,
    reduction_limits,
    regions,
)
from hwgen.nn import Dense, QuantizedNetwork
from sim.interpreter import ProgramInterpreter as Device


@pytest.mark.parametrize("config_name", list(CONFIGS))
def test_descriptor_layout_as_documented(config_name):
    config = CONFIGS[config_name]
    offset = 0
    layout = descriptor_layout(config)
    for (name, width), (field_name, field) in zip(descriptor_fields(config), layout, strict=True):
        assert (name, width, offset) == (field_name, field.width, field.offset)
        offset += width
    assert Device(config).p_lane == param_lane_layout(config).size
    assert {r: g.word_bits for r, g in regions(config).items()} == Device(config).word_bits


@pytest.mark.parametrize("config_name", list(CONFIGS))
def test_geometry_layout_as_documented(config_name):
    config = CONFIGS[config_name]
    offset = 0
    for (name, width), (field_name, field) in zip(geometry_fields(config),
                                                   geometry_layout(config), strict=True):
        assert (name, width, offset) == (field_name, field.width, field.offset)
        offset += width
    assert geometry_words(config) == Device(config).geom_words


def test_spatial_layers_carry_their_geometry_words():
    # A plain layer is one word; a spatial one its descriptor and then its geometry, the
    # geometry's low bits in the first word.
    config = CONFIGS["3x2"]
    count = Device(config).geom_words
    top = {name: (1 << width) - 1 for name, width in geometry_fields(config)}
    plain = {name: 0 for name, _ in descriptor_fields(config)} | {"k_tiles": 3}
    spatial = plain | {"spatial": 1, "last": 1, "geometry": top}
    words = pack_layer(config, plain) + pack_layer(config, spatial)
    assert len(words) == 2 + count
    device = Device(config)
    for i, word in enumerate(words):
        device.write(Region.PROGRAM, i, word)
    assert device.descriptor(0) == plain and device.descriptor(1)["spatial"] == 1
    assert device.geometry(2) == top
    assert unpack_program(config, words) == (plain, spatial)
    with pytest.raises(ValueError, match=f"without its {count} geometry words"):
        unpack_program(config, words[:-1])


def test_descriptor_fields_reach_their_bounds():
    # The widest layer a configuration takes fills its count fields to the top: the layout is
    # as narrow as it can be, and whatever the checks before it allow still fits. max_k = 40
    # sizes k_tiles for 20 tiles of 2 rows (5 bits: 31) and src_stride for 10 words of 4
    # lanes (4 bits: 15): a row takes up to 60 inputs, in 30 tiles and 15 words.
    config = AcceleratorConfig(rows=2, cols=4, max_k=40, act_depth=256, weight_depth=1024,
                               param_depth=16, out_depth=64, acc_depth=4)
    assert reduction_limits(config) == (31, 15)
    n = 16 * config.cols  # every PARAM word
    wide = Dense(np.ones((60, n), int), np.zeros(n, int), np.ones(n, int), np.zeros(n, int),
                 output="raw")
    (d,) = compile_network(QuantizedNetwork([wide]), config, batch=1).descriptors
    assert (d["k_tiles"], d["src_stride"], d["n_tiles"], d["n"], d["dst_stride"]) == \
        (30, 15, 16, 64, 16)
    widths = dict(descriptor_fields(config))
    for name in ("k_tiles", "src_stride", "n_tiles", "n", "dst_stride"):
        assert d[name].bit_length() == widths[name], name
    error = refused(QuantizedNetwork([Dense(np.ones((61, 4), int), np.zeros(4, int),
                                            np.ones(4, int), np.zeros(4, int))]), config,
                    "K=61", "16 ACT words of act_lanes=4", "src_stride field (4 bits, sized by "
                    "max_k=40) holds 15 words", "K <= 60", "max_k >= 61")
    assert (error.resource, error.need, error.limit) == ("max_k", 61, 60)



def test_every_pass_kind_is_within_the_kind_field_s_bound():
    # The kind holds any PassKind, not one bit as a flag does.
    config = CONFIGS["2x3"]
    for kind in PassKind:
        check_field(config, 0, "kind", kind.value)
    with pytest.raises(CompileError, match="descriptor field kind"):
        check_field(config, 0, "kind", max(kind.value for kind in PassKind) + 1)
    with pytest.raises(CompileError, match="descriptor field leaky=2"):
        check_field(config, 0, "leaky", 2)


@pytest.mark.parametrize("name", ["act_min", "act_max"])
def test_bounds_are_signed_in_bits_fields(name):
    # in_bits=4: -8..7 fit, one past either end does not; negative values round-trip.
    config = CONFIGS["2x3"]
    for value in (-8, -1, 0, 7):
        check_field(config, 0, name, value)
    for value in (-9, 8):
        with pytest.raises(CompileError, match=f"descriptor field {name}={value} exceeds its "
                                               "bounds; allowed: -8..7"):
            check_field(config, 0, name, value)
    plain = {n: 0 for n, _ in descriptor_fields(config)} | {"act_min": -8, "act_max": -1}
    assert unpack_program(config, pack_layer(config, plain)) == (plain,)
    device = Device(config)
    device.write(Region.PROGRAM, 0, pack_layer(config, plain)[0])
    assert device.descriptor(0) == plain


def test_a_design_without_bounds_has_the_relu_flag_and_refuses_other_activations():
    # bounds=False: the descriptor of before (relu, no act_min/act_max), PARAM lanes without
    # mult_neg; ReLU and identity compile (the interpreter runs them), a clamp or a leaky
    # layer is refused naming the layer and the design field.
    sizes = {"rows": 2, "cols": 3, "act_depth": 256, "weight_depth": 256, "param_depth": 16,
             "out_depth": 64}
    config = AcceleratorConfig(**sizes, bounds=False)
    layout = descriptor_layout(config)
    assert "relu" in layout.members and "act_min" not in layout.members
    assert "leaky" not in layout.members and "mult_neg" not in param_lane_layout(config).members
    assert layout.size == descriptor_layout(AcceleratorConfig(**sizes)).size - 2 * 8
    rng = np.random.default_rng(3)
    network = QuantizedNetwork([
        Dense(rng.integers(-128, 128, (5, 4)), rng.integers(-99, 99, 4), np.full(4, 300),
              np.full(4, 9), activation="relu"),
        Dense(rng.integers(-128, 128, (4, 3)), rng.integers(-99, 99, 3), np.full(3, 300),
              np.full(3, 9), activation="identity")])
    program = compile_network(network, config)
    assert [d["relu"] for d in program.descriptors] == [1, 0]
    x = rng.integers(-128, 128, (4, 5))
    interpreted, _ = run_on_interpreter(program, x)
    np.testing.assert_array_equal(interpreted, network.forward(x))
    with pytest.raises(CompileError, match=r"layer 0: activation bounds \[-5, 7\]: the design "
                                           r"has no bounds \(bounds=False\)"):
        activation_fields(config, 0, 0, -5, 7)
    with pytest.raises(CompileError, match="leaky ReLU: the design has no bounds"):
        activation_fields(config, 0, 1, -128, 127)
