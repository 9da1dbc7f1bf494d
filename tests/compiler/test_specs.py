"""The records of a program (hwgen.compiler.specs)."""

import dataclasses
import json

import pytest

from hwgen.compiler import LayerSpec, MatrixSpec
from hwgen.memmap import Region


@pytest.mark.parametrize("region", list(Region))
def test_matrix_spec_round_trips_through_json(region):
    spec = MatrixSpec(region, 3, 2, 5, 4, 8, "requant")
    text = json.dumps(spec.to_dict())
    assert json.loads(text)["region"] == region.name
    assert MatrixSpec.from_dict(json.loads(text)) == spec


def test_specs_are_read_only():
    layer = LayerSpec(k=3, n=2, k_tiles=1, n_tiles=1, activation="relu", output="requant",
                      w_base=0, w_words=4, p_base=0, p_words=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        layer.k = 4
