"""support.sweeps: which pairs of a two-axis sweep the default run takes."""

import pytest
from support.sweeps import each_once


def _split(params):
    default = [p.values for p in params if not p.marks]
    slow = [p.values for p in params if [m.name for m in p.marks] == ["slow"]]
    return default, slow


def test_each_case_and_each_variant_run_by_default_the_rest_slow():
    cases, variants = ["a", "b", "c", "d", "e"], ["x", "y"]
    params = each_once(cases, variants)
    default, slow = _split(params)
    assert sorted(default + slow) == sorted((c, v) for c in cases for v in variants)
    assert [c for c, _ in default] == cases                   # every case once
    assert {v for _, v in default} == set(variants)           # every variant
    assert [p.id for p in params][:2] == ["a-x", "a-y"]


def test_fewer_cases_than_variants_are_refused():
    with pytest.raises(ValueError, match="1 cases cannot take each of 2 variants"):
        each_once(["a"], ["x", "y"])
