"""Issue 31's fields in their uniform forms (a stride pair of one value, padding the same on
every side, the activation's own bounds given) compile to the same descriptors as the fields
of before. (Every field of section 3.2 runs on the device now: the interim refusals are gone;
tests/passes/test_matrix.py and tests/compiler/test_bounds.py run the new fields.)
"""

import numpy as np
import pytest

import hwgen
from hwgen import AcceleratorConfig
from hwgen.nn import Conv2D, Dense, Flatten, QuantizedNetwork


def conv_net(**fields):
    cg = 1 if fields.get("groups", 1) != 1 else 2
    conv = Conv2D(np.ones((3, 3, cg, 2), int), np.zeros(2, int), np.ones(2, int),
                  np.zeros(2, int), **fields)
    oh, ow, c = conv.output_shape((6, 6, 2))
    dense = Dense(np.ones((oh * ow * c, 2), int), np.zeros(2, int), np.ones(2, int),
                  np.zeros(2, int), output="raw")
    return QuantizedNetwork([conv, Flatten(), dense], input_shape=(6, 6, 2))


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
