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


def test_acc_bits_checked_against_largest_reduction():
    # 1024 products of (-128)*(-128) = 2**24 needs 26 signed bits.
    assert AcceleratorConfig.min_acc_bits(8, 8, 1024) == 26
    AcceleratorConfig(acc_bits=26)
    with pytest.raises(ValueError, match=r"acc_bits=25 .* acc_bits >= 26"):
        AcceleratorConfig(acc_bits=25)
    with pytest.raises(ValueError, match="acc_bits >= 42"):
        AcceleratorConfig(in_bits=16, w_bits=16)


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


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"cols": 6, "post_lanes": 4}, r"post_lanes=4 does not divide cols=6; allowed: 1, 2, 3, 6"),
    ({"cols": 4, "post_lanes": 0}, r"post_lanes=0 is out of range; allowed: 1..64"),
    ({"cols": 4, "post_lanes": 2, "dataflow": "os"}, r"post_lanes=2 needs dataflow='ws'.*: 4"),
    ({"cols": 4, "post_lanes": "2"}, r"post_lanes='2' must be an integer"),
])
def test_bad_post_lanes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AcceleratorConfig(**kwargs)
