"""AcceleratorConfig: validation, JSON round trip, stable hash."""

import pytest

from hwgen import AcceleratorConfig


def test_defaults_are_valid():
    cfg = AcceleratorConfig()
    assert (cfg.rows, cfg.cols, cfg.dataflow, cfg.in_bits, cfg.w_bits) == (8, 8, "ws", 8, 8)


def test_json_round_trip_and_hash():
    cfg = AcceleratorConfig(rows=3, cols=5, dataflow="os", in_bits=4, w_bits=6, acc_bits=20)
    again = AcceleratorConfig.from_json(cfg.to_json())
    assert again == cfg
    assert again.hash == cfg.hash
    assert len(cfg.hash) == 16 and int(cfg.hash, 16) == cfg.hash_int
    assert AcceleratorConfig(rows=3, cols=5).hash != AcceleratorConfig(rows=5, cols=3).hash


def test_hash_is_stable_across_runs():
    # sha256 of the canonical JSON: a fixed value, so devices built today match hosts tomorrow.
    import hashlib

    cfg = AcceleratorConfig()
    assert cfg.hash == hashlib.sha256(cfg.to_json().encode()).hexdigest()[:16]
    assert cfg.to_json().startswith('{"acc_bits":32,')


@pytest.mark.parametrize(("field", "value", "allowed"), [
    ("rows", 0, "1..64"),
    ("cols", 65, "1..64"),
    ("in_bits", 1, "2..16"),
    ("w_bits", 17, "2..16"),
    ("rows", 2.5, "integer"),
    ("rows", True, "integer"),
])
def test_bad_values_name_field_value_and_range(field, value, allowed):
    with pytest.raises(ValueError, match=field) as info:
        AcceleratorConfig(**{field: value})
    assert allowed in str(info.value)
    assert repr(value) in str(info.value) or str(value) in str(info.value)


def test_bad_dataflow():
    with pytest.raises(ValueError, match=r"dataflow='xy'.*'ws', 'os'"):
        AcceleratorConfig(dataflow="xy")


def test_acc_bits_is_not_tied_to_max_k():
    # 1024 products of (-128)*(-128) = 2**24 need 26 signed bits, but the compiler proves each
    # layer from its weights: a design may have fewer (the proof refuses what could leave).
    assert AcceleratorConfig.min_acc_bits(8, 8, 1024) == 26
    assert AcceleratorConfig(acc_bits=20).max_k == 1024
    assert AcceleratorConfig(in_bits=16, w_bits=16).acc_bits == 32
    with pytest.raises(ValueError, match=r"acc_bits=3 is out of range; allowed: 4..64"):
        AcceleratorConfig(acc_bits=3)


def test_min_acc_bits_is_tight():
    for in_bits, w_bits, k in [(2, 2, 1), (4, 8, 3), (8, 8, 1000), (16, 16, 256)]:
        bits = AcceleratorConfig.min_acc_bits(in_bits, w_bits, k)
        worst = k * (1 << (in_bits - 1)) * (1 << (w_bits - 1))
        assert worst <= (1 << (bits - 1)) - 1
        assert worst > (1 << (bits - 2)) - 1


def test_unknown_field_in_dict():
    with pytest.raises(ValueError, match=r"unknown configuration field.*colz"):
        AcceleratorConfig.from_dict({"rows": 2, "colz": 3})


def test_post_lanes_default_keeps_the_hash_of_older_configs():
    cfg = AcceleratorConfig(rows=4, cols=4)
    assert "post_lanes" not in cfg.to_dict()
    assert (cfg.requant_lanes, cfg.requant_steps) == (4, 1)
    # All columns spelled out is the same design: one name, one hash.
    same = AcceleratorConfig(rows=4, cols=4, post_lanes=4)
    assert same == cfg and same.hash == cfg.hash and same.name == cfg.name
    fewer = AcceleratorConfig(rows=4, cols=4, post_lanes=1)
    assert (fewer.requant_lanes, fewer.requant_steps) == (1, 4)
    assert fewer.hash != cfg.hash and "post_lanes1" in fewer.name
    assert AcceleratorConfig.from_json(fewer.to_json()) == fewer


@pytest.mark.parametrize(("kwargs", "banks"), [
    ({}, 8), ({"rows": 4, "cols": 4, "post_lanes": 1}, 4), ({"rows": 8, "cols": 4}, 8),
    ({"rows": 8, "cols": 16}, 16), ({"rows": 8, "cols": 16, "post_lanes": 4}, 8),
    ({"rows": 8, "cols": 16, "post_lanes": 8}, 8), ({"rows": 2, "cols": 8, "post_lanes": 4}, 4),
    ({"rows": 2, "cols": 4, "dataflow": "os"}, 4), ({"rows": 2, "cols": 4, "depthwise": True}, 4),
    ({"rows": 2, "cols": 4, "dtype": "bf16"}, 4)])
def test_act_lanes_are_a_tile_row_and_a_requantization_step(kwargs, banks):
    """The banks are as many as a tile's ``rows`` the array reads and the ``requant_lanes``
    the write-back writes in a cycle: fewer than ``cols`` only with fewer requantization lanes
    (never on an output-stationary array, with the depthwise unit or bf16, which take every
    column at once)."""
    cfg = AcceleratorConfig(**kwargs)
    assert cfg.act_lanes == banks == max(cfg.rows, cfg.requant_lanes)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cols": 6, "post_lanes": 4}, r"post_lanes=4 does not divide cols=6; allowed: 1, 2, 3, 6"),
    ({"cols": 4, "post_lanes": 0}, r"post_lanes=0 is out of range; allowed: 1..64"),
    ({"cols": 4, "post_lanes": 2, "dataflow": "os"}, r"post_lanes=2 needs dataflow='ws'.*: 4"),
    ({"cols": 4, "post_lanes": "2"}, r"post_lanes='2' must be an integer"),
])
def test_bad_post_lanes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AcceleratorConfig(**kwargs)


def _old_json(cfg):
    """The canonical JSON of a configuration as written before ``spatial`` (and ``bounds``,
    ``residual``, ``taps``, ``fuse_pool``, ``depthwise`` and its sizes, ``dtype``) existed:
    every other field, ``post_lanes`` and ``act_spram_depth`` (newer still) only when set."""
    import dataclasses
    import json

    fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
              if f.name not in ("spatial", "bounds", "residual", "taps", "fuse_pool",
                                "depthwise", "dw_lines", "dw_depth", "dw_extra_rows", "dtype")
              and not (f.name == "post_lanes" and cfg.post_lanes is None)
              and not (f.name == "act_spram_depth" and not cfg.act_spram_depth)}
    return json.dumps({k: str(v) if k == "dataflow" else v for k, v in fields.items()},
                      sort_keys=True, separators=(",", ":"))


@pytest.mark.parametrize("kwargs", [{}, {"rows": 4, "cols": 4, "post_lanes": 1},
                                    {"rows": 3, "cols": 5, "dataflow": "os", "in_bits": 4,
                                     "w_bits": 6, "acc_bits": 20}])
def test_spatial_default_keeps_the_json_and_hash_of_older_configs(kwargs):
    import hashlib

    cfg = AcceleratorConfig(**kwargs)
    assert cfg.spatial is True
    assert "spatial" not in cfg.to_dict()
    assert cfg.to_json() == _old_json(cfg)
    assert cfg.hash == hashlib.sha256(_old_json(cfg).encode()).hexdigest()[:16]
    # A file from before the field loads as a device with spatial layers.
    assert AcceleratorConfig.from_json(_old_json(cfg)) == cfg
    assert "spatial" not in cfg.name


def test_spatial_false_round_trips_and_is_another_device():
    cfg = AcceleratorConfig(rows=4, cols=4, spatial=False)
    assert cfg.spatial is False
    assert cfg.to_dict()["spatial"] is False
    assert '"spatial":false' in cfg.to_json()
    again = AcceleratorConfig.from_json(cfg.to_json())
    assert again == cfg and again.hash == cfg.hash and again.spatial is False
    other = AcceleratorConfig(rows=4, cols=4)
    assert cfg != other and cfg.hash != other.hash and cfg.name != other.name
    assert cfg.name.endswith("_spatial0")
    # Spelled out, True is the default design: one spelling, one hash.
    assert AcceleratorConfig(rows=4, cols=4, spatial=True).hash == other.hash


@pytest.mark.parametrize(("value", "want"), [(1, True), (0, False), (True, True),
                                             (False, False)])
def test_spatial_takes_booleans_and_0_or_1(value, want):
    cfg = AcceleratorConfig(spatial=value)
    assert cfg.spatial is want
    assert AcceleratorConfig.from_dict({"spatial": value}) == cfg
    assert cfg == AcceleratorConfig(spatial=want) and cfg.hash == AcceleratorConfig(
        spatial=want).hash


@pytest.mark.parametrize("value", [2, -1, "1", "true", None, 1.0, 0.5, [True]])
def test_bad_spatial_names_the_field_the_value_and_what_is_allowed(value):
    with pytest.raises(ValueError, match="spatial") as info:
        AcceleratorConfig(spatial=value)
    assert repr(value) in str(info.value)
    assert "True or False" in str(info.value)


def test_bounds_default_keeps_the_hash_and_false_is_another_device():
    # True, the default, is left out of the JSON (configurations from before the field keep
    # their hash and load as devices with bounds); False round-trips and names the design.
    cfg = AcceleratorConfig(rows=4, cols=4)
    assert cfg.bounds is True and "bounds" not in cfg.to_dict()
    assert cfg.to_json() == _old_json(cfg) and "bounds" not in cfg.name
    plain = AcceleratorConfig(rows=4, cols=4, bounds=False)
    assert plain.to_dict()["bounds"] is False and '"bounds":false' in plain.to_json()
    again = AcceleratorConfig.from_json(plain.to_json())
    assert again == plain and again.hash == plain.hash and again.bounds is False
    assert plain.hash != cfg.hash and plain.name.endswith("_bounds0")
    assert AcceleratorConfig(rows=4, cols=4, bounds=1).hash == cfg.hash


@pytest.mark.parametrize("value", [2, "0", None, 0.0])
def test_bad_bounds_names_the_field_the_value_and_what_is_allowed(value):
    with pytest.raises(ValueError, match="bounds") as info:
        AcceleratorConfig(bounds=value)
    assert repr(value) in str(info.value) and "True or False" in str(info.value)


def test_residual_default_keeps_the_hash_and_false_is_another_device():
    # True, the default (the adder), is left out of the JSON: configurations from before the
    # field keep their hash; False round-trips, names the design and drops src2_base.
    from hwgen.memmap import descriptor_layout

    cfg = AcceleratorConfig(rows=4, cols=4)
    assert cfg.residual is True and "residual" not in cfg.to_dict()
    assert cfg.to_json() == _old_json(cfg) and "residual" not in cfg.name
    plain = AcceleratorConfig(rows=4, cols=4, residual=0)
    assert plain.residual is False and '"residual":false' in plain.to_json()
    again = AcceleratorConfig.from_json(plain.to_json())
    assert again == plain and again.hash == plain.hash and plain.hash != cfg.hash
    assert plain.name.endswith("_residual0")
    assert "src2_base" in descriptor_layout(cfg).members
    assert "src2_base" not in descriptor_layout(plain).members
    with pytest.raises(ValueError, match="residual=2; allowed: True or False"):
        AcceleratorConfig(residual=2)


def test_act_spram_depth_default_keeps_the_hash_and_is_checked():
    cfg = AcceleratorConfig(rows=4, cols=4, spatial=False)
    assert "act_spram_depth" not in cfg.to_dict()
    split = AcceleratorConfig(rows=4, cols=4, spatial=False, act_depth=1536,
                              act_spram_depth=1024)
    assert split.hash != cfg.hash and AcceleratorConfig.from_json(split.to_json()) == split
    for depth in (768, 512, 2048):   # not a power of two; below half of act_depth; past it
        with pytest.raises(ValueError, match=rf"act_spram_depth={depth} with act_depth=1536; "
                                             r"allowed: 0 or a power of two in 768..1535"):
            AcceleratorConfig(rows=4, cols=4, spatial=False, act_depth=1536,
                              act_spram_depth=depth)
    for kw in ({"spatial": True}, {"dataflow": "os"}, {"rows": 2}):
        with pytest.raises(ValueError, match=r"act_spram_depth=1024 needs spatial=False, "
                                             r"dataflow='ws' and rows >= cols"):
            AcceleratorConfig(**{"rows": 4, "cols": 4, "spatial": False, "act_depth": 1536,
                                 "act_spram_depth": 1024, **kw})


def test_depthwise_is_off_by_default_and_on_is_another_device():
    # False, the default, is left out of the JSON with the unit's sizes (a manifest from
    # before the field loads as a device without the unit); True names the design, and its
    # sizes are in the JSON only where they are not the defaults.
    cfg = AcceleratorConfig(rows=4, cols=4)
    assert cfg.depthwise is False and cfg.to_json() == _old_json(cfg)
    unit = AcceleratorConfig(rows=4, cols=4, depthwise=True)
    assert '"depthwise":true' in unit.to_json() and "dw_lines" not in unit.to_json()
    assert unit.hash != cfg.hash and unit.name.endswith("_depthwise1")
    assert AcceleratorConfig.from_json(unit.to_json()) == unit
    sized = AcceleratorConfig(rows=4, cols=4, depthwise=True, dw_lines=3, dw_depth=100)
    assert '"dw_depth":100' in sized.to_json() and '"dw_lines":3' in sized.to_json()
    assert AcceleratorConfig.from_json(sized.to_json()) == sized and sized.hash != unit.hash
    # Without the unit its sizes are nothing: one spelling, one hash.
    assert AcceleratorConfig(rows=4, cols=4, dw_lines=5) == cfg
    assert AcceleratorConfig(rows=4, cols=4, dw_extra_rows=1) == cfg and cfg.array_rows == 4


def test_the_units_extra_rows_are_the_arrays_in_depthwise_tiles():
    # Rows below the array that only depthwise passes use: a tile of rows + extra taps, a
    # design of its own (its hash and name), the same JSON as before without them.
    plain = AcceleratorConfig(rows=8, cols=8, depthwise=True)
    tall = AcceleratorConfig(rows=8, cols=8, depthwise=True, dw_extra_rows=1)
    assert (plain.array_rows, tall.array_rows) == (8, 9)
    assert "dw_extra_rows" not in plain.to_json() and '"dw_extra_rows":1' in tall.to_json()
    assert AcceleratorConfig.from_json(tall.to_json()) == tall and tall.hash != plain.hash


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"rows": 9}, "rows=9 (allowed: <= cols=8)"),
    ({"spatial": False}, "spatial=False (allowed: True)"),
    ({"dataflow": "os"}, "dataflow=<Dataflow.OS: 'os'> (allowed: 'ws')"),
    ({"post_lanes": 4}, "post_lanes=4 (allowed: all 8 columns)"),
    ({"dw_lines": 0}, "dw_lines=0 is out of range; allowed: 1..8"),
    ({"dw_depth": 1 << 13}, "dw_depth=8192 is out of range; allowed: 1..4096"),
    ({"dw_extra_rows": 9}, "dw_extra_rows=9 is out of range; allowed: 0..8"),
    ({"dw_extra_rows": 1, "dtype": "bf16", "acc_bits": 32},
     "dtype='bf16' (allowed: 'int8' with dw_extra_rows)"),
])
def test_depthwise_needs_what_the_unit_runs_on(kwargs, fragment):
    with pytest.raises(ValueError) as info:
        AcceleratorConfig(depthwise=True, **kwargs)
    assert fragment in str(info.value), str(info.value)


def test_int8_is_the_default_dtype_and_keeps_every_hash():
    # Hashes computed before dtype existed: "int8" is left out of the JSON.
    assert AcceleratorConfig().dtype == "int8"
    assert AcceleratorConfig().hash == "8eb279894b3d45f2"
    assert AcceleratorConfig(dtype="int8").hash == "8eb279894b3d45f2"
    assert AcceleratorConfig(rows=4, cols=4, spatial=False).hash == "46b12fb06763c16d"
    assert AcceleratorConfig(depthwise=True).hash == "8148cbeb48bd0309"
    assert "dtype" not in AcceleratorConfig().to_json()


def test_bf16_is_another_design_with_16_bit_values():
    cfg = AcceleratorConfig(dtype="bf16")
    assert (cfg.in_bits, cfg.w_bits, cfg.acc_bits) == (16, 16, 32)
    assert '"dtype":"bf16"' in cfg.to_json() and cfg.hash != AcceleratorConfig().hash
    assert AcceleratorConfig.from_json(cfg.to_json()) == cfg
    assert cfg.name.startswith("hwgen_ws_8x8_i16w16") and "dtypebf16" in cfg.name
    # The widths spelled out, and mult_bits (unused), are the same design.
    assert AcceleratorConfig(dtype="bf16", in_bits=16, w_bits=16, mult_bits=12) == cfg
    # The depthwise unit, which the bf16 compiler gives depthwise convolutions and pools.
    unit = AcceleratorConfig(dtype="bf16", depthwise=True)
    assert unit.depthwise and AcceleratorConfig.from_json(unit.to_json()) == unit


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"dtype": "fp8"}, "dtype='fp8' is not supported; allowed: 'int8', 'bf16'"),
    ({"dtype": "bf16", "in_bits": 12}, "in_bits=12 with dtype='bf16'"),
    ({"dtype": "bf16", "w_bits": 4}, "allowed: w_bits=16 (or left out)"),
    ({"dtype": "bf16", "acc_bits": 48}, "whose sums are fp32; allowed: acc_bits=32"),
    ({"dtype": "bf16", "dataflow": "os"}, "does not cover yet dataflow='os' (allowed: 'ws')"),
    ({"dtype": "bf16", "bounds": False}, "bounds=False (allowed: True)"),
    ({"dtype": "bf16", "post_lanes": 4}, "post_lanes=4 (allowed: all 8 columns)"),
    ({"dtype": "bf16", "spatial": False, "act_spram_depth": 2048},
     "act_spram_depth=2048 (allowed: 0)"),
])
def test_bf16_refuses_what_it_does_not_cover(kwargs, fragment):
    with pytest.raises(ValueError) as info:
        AcceleratorConfig(**kwargs)
    assert fragment in str(info.value), str(info.value)
