"""Flatten: NHWC to rows, feature (y*W + x)*C + c."""

import numpy as np
import pytest

from hwgen.nn import Flatten


def test_order_is_h_w_c(naive):
    x = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5) * 7 - 100
    got = Flatten().forward(x)
    assert got.shape == (2, 60)
    assert got.tolist() == naive.flatten(x.tolist())
    assert got[1, (2 * 4 + 3) * 5 + 1] == x[1, 2, 3, 1]


def test_shapes():
    assert Flatten().output_shape((3, 4, 5)) == (60,)
    assert Flatten().forward(np.zeros((0, 2, 2, 2))).shape == (0, 8)
    assert repr(Flatten()) == "Flatten()"
    with pytest.raises(ValueError, match=r"Flatten needs a spatial input \(H, W, C\) but the "
                                         r"input gives \(60,\)"):
        Flatten().output_shape((60,))
