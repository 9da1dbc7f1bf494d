"""hwgen.dse.space: value lists and ranges, the points of a space, their keys."""

import itertools

import pytest

from hwgen.dse.space import (
    DEFAULT_SPACE,
    FIELDS,
    MAX_POINTS,
    SpaceError,
    parse_values,
    point_key,
    points,
)


@pytest.mark.parametrize(("field", "text", "values"), [
    ("rows", "8", (8,)),
    ("rows", "2,4,8", (2, 4, 8)),
    ("rows", " 2, 4 ,8 ", (2, 4, 8)),
    ("rows", "2..5", (2, 3, 4, 5)),
    ("rows", "2..8:3", (2, 5, 8)),
    ("rows", "2..9:3", (2, 5, 8)),
    ("act_depth", "64..1024x2", (64, 128, 256, 512, 1024)),
    ("act_depth", "64..1000x2", (64, 128, 256, 512)),
    ("rows", "4,2..4,1", (4, 2, 3, 1)),           # duplicates dropped, order kept
    ("clock_hz", "12_000_000,24000000", (12_000_000, 24_000_000)),
    ("rows", "0,-1", (0, -1)),                    # syntax only: the config refuses them later
    ("post_lanes", "1,2,all", (1, 2, None)),
    ("dataflow", "ws,os", ("ws", "os")),
    ("dataflow", "xs", ("xs",)),
])
def test_parse_values(field, text, values):
    assert parse_values(field, text) == values


@pytest.mark.parametrize(("field", "text", "match"), [
    ("rows", "2..", r"--rows '2\.\.': malformed value; allowed: a comma list"),
    ("rows", "a", r"--rows 'a': malformed value"),
    ("rows", "2.5", r"--rows '2\.5': malformed value"),
    ("rows", "2,,4", r"--rows '2,,4': an empty item"),
    ("rows", "", r"--rows '': no values"),
    ("rows", "8..2", r"--rows '8\.\.2': the range ends before it starts"),
    ("rows", "1..8x1", r"--rows '1\.\.8x1': a factor range needs START >= 1 and FACTOR >= 2"),
    ("rows", "0..8x2", r"a factor range needs START >= 1"),
    ("rows", "1..8:0", r"--rows '1\.\.8:0': the step must be >= 1"),
    ("clock_hz", "1..1000000000", r"values; allowed: at most 100000 per option"),
    ("post_lanes", "none", r"--post-lanes 'none': malformed value"),
    ("colour", "1", r"'colour' is not a design field; allowed: rows, cols"),
])
def test_parse_values_refuses_malformed_lists(field, text, match):
    with pytest.raises(SpaceError, match=match):
        parse_values(field, text)


def test_points_are_the_product_in_field_order():
    space = {"post_lanes": [1, None], "cols": "2,4", "rows": (2, 8)}
    got = points(space)
    want = [{"rows": r, "cols": c, "post_lanes": p}
            for r, c, p in itertools.product((2, 8), (2, 4), (1, None))]
    assert got == want
    assert all(list(p) == ["rows", "cols", "post_lanes"] for p in got)


def test_rows_and_cols_default_only_when_neither_is_given():
    default = [{"rows": r, "cols": c}
               for r, c in itertools.product(DEFAULT_SPACE["rows"], DEFAULT_SPACE["cols"])]
    assert points() == default
    assert points({}) == default
    assert points({"clock_hz": [12_000_000]}) == [{**p, "clock_hz": 12_000_000}
                                                 for p in default]
    assert points({"rows": 4}) == [{"rows": 4}]


@pytest.mark.parametrize(("space", "match"), [
    ({"colour": [1]}, r"'colour' is not a design field"),
    ({"rows": []}, r"--rows: no values"),
    ({"rows": "2.."}, r"--rows '2\.\.': malformed"),
    ([("rows", 2)], r"space must be a dict"),
    ({"rows": range(1, 101), "cols": range(1, 101), "act_depth": range(101)},
     r"the space has 1,010,000 points \(100 rows x 100 cols x 101 act_depth\); allowed: at "
     r"most 1,000,000"),
])
def test_points_refuses_bad_spaces(space, match):
    with pytest.raises(SpaceError, match=match):
        points(space)
    assert MAX_POINTS == 1_000_000


def test_every_config_field_can_be_swept():
    assert FIELDS[:2] == ("rows", "cols") and "post_lanes" in FIELDS
    for field in FIELDS:
        assert points({field: "ws" if field == "dataflow" else "3"})


def test_point_keys_tell_results_apart():
    base = {"board": "icebreaker", "tier": "estimate", "model": "m", "baud": 1_000_000,
            "seed": None, "config": {"rows": 2, "cols": 2}}
    key = point_key(**base)
    assert len(key) == 16 and int(key, 16) >= 0
    assert point_key(**dict(base)) == key
    assert point_key(**{**base, "config": {"cols": 2, "rows": 2}}) == key   # order-free
    for field, other in [("board", "ulx3s-85f"), ("tier", "build"), ("model", "n"),
                         ("baud", 115_200), ("config", {"rows": 2, "cols": 4})]:
        assert point_key(**{**base, field: other}) != key, field
    # The placement seed matters to builds only.
    assert point_key(**{**base, "seed": 3}) == key
    build = {**base, "tier": "build"}
    assert point_key(**{**build, "seed": 3}) != point_key(**build)
