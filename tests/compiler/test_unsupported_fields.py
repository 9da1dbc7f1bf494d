"""Interim (issue 31): the fields of section 3.2 the device does not run yet are refused by
``hwgen.compile`` with a CompileError naming the layer and the field, never run wrongly.

The guard is ``_refuse_unsupported`` in ``hwgen/passes/matrix.py``; remove a case here when the
device gains its field.
"""

import numpy as np
import pytest

import hwgen
from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError
from hwgen.nn import Conv2D, Dense, Flatten, QuantizedNetwork


def conv_net(**fields):
    cg = 1 if fields.get("groups", 1) != 1 else 2
    conv = Conv2D(np.ones((3, 3, cg, 2), int), np.zeros(2, int), np.ones(2, int),
                  np.zeros(2, int), **fields)
    oh, ow, c = conv.output_shape((6, 6, 2))
    dense = Dense(np.ones((oh * ow * c, 2), int), np.zeros(2, int), np.ones(2, int),
                  np.zeros(2, int), output="raw")
    return QuantizedNetwork([conv, Flatten(), dense], input_shape=(6, 6, 2))


@pytest.mark.parametrize(("fields", "pattern"), [
    ({"activation": "leaky_relu", "mult_neg": [1, 1]},
     r"layer 0: Conv2D has activation='leaky_relu' \(allowed: 'relu', 'identity'\)"),
    ({"act_max": 6}, r"layer 0: Conv2D has act_min=None, act_max=6 \(allowed: the bounds of "
                     r"the activation, \(0, 127\)\)"),
])
def test_new_fields_are_refused(fields, pattern):
    with pytest.raises(CompileError, match=pattern + ", which the device does not run yet"):
        hwgen.compile(conv_net(**fields), AcceleratorConfig())


@pytest.mark.parametrize(("fields", "old"), [
    # the uniform forms of the old fields
    ({"stride": (2, 2), "padding": (1, 1, 1, 1)}, {"stride": 2, "padding": 1}),
    ({"padding": (1, 1)}, {"padding": 1}),
    # the activation's own bounds, explicit
    ({"act_min": 0, "act_max": 127}, {}),
])
def test_uniform_forms_compile_as_the_old_fields(fields, old):
    config = AcceleratorConfig()
    got, want = hwgen.compile(conv_net(**fields), config), hwgen.compile(conv_net(**old), config)
    assert got.descriptors == want.descriptors
