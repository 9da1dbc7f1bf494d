"""The layer kinds the compiler takes (hwgen.compiler.kinds)."""

import numpy as np
import pytest
from support import small_dense_network as small_network

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError
from hwgen.compiler.kinds import LOWERINGS, lower
from hwgen.nn import Dense


def test_a_dense_layer_runs_as_itself():
    config = AcceleratorConfig()
    layer = small_network(config).layers[0]
    assert lower(0, layer, config) is layer


def test_a_kind_without_lowering_is_refused_by_name():
    class Pool:
        pass

    with pytest.raises(CompileError) as info:
        lower(3, Pool(), AcceleratorConfig())
    assert str(info.value) == ("layer 3: Pool layers cannot be compiled yet; allowed: "
                               + ", ".join(kind.__name__ for kind in LOWERINGS))
    assert (info.value.layer, info.value.resource) == (3, "layer")
    assert Dense in LOWERINGS


def test_lowering_proves_the_layer():
    config = AcceleratorConfig(max_k=4)
    layer = Dense(np.ones((5, 2), int), [0, 0], [1, 1], [0, 0])
    with pytest.raises(CompileError, match="K=5"):
        lower(1, layer, config)
