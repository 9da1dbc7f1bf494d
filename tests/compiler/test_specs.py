"""The records of a program (hwgen.compiler.specs)."""

import dataclasses
import json

import pytest

from hwgen.compiler import LayerSpec, MatrixSpec
from hwgen.memmap import PassKind, Region


@pytest.mark.parametrize("region", list(Region))
def test_matrix_spec_round_trips_through_json(region):
    spec = MatrixSpec(region, 3, 2, 5, 4, 8, "requant")
    text = json.dumps(spec.to_dict())
    assert json.loads(text)["region"] == region.name
    assert MatrixSpec.from_dict(json.loads(text)) == spec


@pytest.mark.parametrize("kind", list(PassKind))
def test_layer_spec_round_trips_through_json_its_kind_by_name(kind):
    spec = LayerSpec(k=0, n=5, k_tiles=0, n_tiles=0, activation="identity", output="requant",
                     w_base=0, w_words=0, p_base=0, p_words=0, kind=kind, pixels=4, source=2)
    text = json.dumps(spec.to_dict())
    assert json.loads(text)["kind"] == kind.name
    assert LayerSpec.from_dict(json.loads(text)) == spec
    # Without a kind (files of version 2), a matrix pass's.
    assert LayerSpec.from_dict({k: v for k, v in spec.to_dict().items() if k != "kind"}) == \
        dataclasses.replace(spec, kind=PassKind.MATRIX)


def test_specs_are_read_only():
    layer = LayerSpec(k=3, n=2, k_tiles=1, n_tiles=1, activation="relu", output="requant",
                      w_base=0, w_words=4, p_base=0, p_words=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        layer.k = 4
