"""``hwgen soc``'s core carries only the optional units its model uses: each left out is one
the model compiles without, and one the user set stays."""

import dataclasses

import numpy as np
import pytest

import hwgen
from hwgen import AcceleratorConfig
from hwgen.nn import Add, Conv2D, Dense, Flatten, Node, QuantizedNetwork
from hwgen.soc.design import OPTIONAL_UNITS, units_used

CONFIG = AcceleratorConfig(rows=4, cols=4)


def _dense(k, n, **kw):
    rng = np.random.default_rng(k * 100 + n)
    return Dense(rng.integers(-3, 4, (k, n)), np.zeros(n, int), np.full(n, 3),
                 np.full(n, 4), **kw)


def _conv(c_in, c_out):
    rng = np.random.default_rng(c_in)
    return Conv2D(rng.integers(-3, 4, (3, 3, c_in, c_out)), np.zeros(c_out, int),
                  np.full(c_out, 3), np.full(c_out, 5), padding=1, activation="relu")


MLP = QuantizedNetwork([_dense(6, 5, activation="relu"), _dense(5, 3, output="raw")])
LEAKY = QuantizedNetwork([_dense(6, 5, activation="leaky_relu", mult_neg=np.ones(5, int)),
                          _dense(5, 3, output="raw")])
CNN = QuantizedNetwork([_conv(2, 3), Flatten(), _dense(48, 3, output="raw")],
                       input_shape=(4, 4, 2))
RESIDUAL = QuantizedNetwork(
    [Node("a", _dense(4, 4, activation="relu"), ("input",)),
     Node("sum", Add(mult_a=np.ones(4, int), mult_b=np.ones(4, int), shift=1,
                     activation="relu"), ("input", "a")),
     Node("out", _dense(4, 2, output="raw"), ("sum",))], input_shape=(4,))


@pytest.mark.parametrize(("network", "kept"), [
    (MLP, set()), (LEAKY, {"bounds"}), (CNN, {"spatial"}), (RESIDUAL, {"residual"})])
def test_units_left_out_are_those_the_model_does_without(network, kept):
    config, dropped = units_used(lambda design: hwgen.compile(network, design), CONFIG)
    assert set(dropped) == set(OPTIONAL_UNITS) - kept
    assert {unit for unit in OPTIONAL_UNITS if getattr(config, unit)} == kept
    # The model compiles for what is left, and for nothing less.
    hwgen.compile(network, config)
    for unit in kept:
        with pytest.raises(hwgen.compiler.CompileError):
            hwgen.compile(network, dataclasses.replace(config, **{unit: False}))


def test_units_the_user_set_stay():
    config, dropped = units_used(lambda design: hwgen.compile(MLP, design), CONFIG,
                                 given=("spatial",))
    assert config.spatial and not config.residual and not config.bounds
    assert dropped == ["residual", "bounds"]
