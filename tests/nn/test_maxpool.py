"""MaxPool2D against a per-element model, on ints and floats."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import MaxPool2D

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.data())
def test_pool_matches_per_element_model(naive, data):
    h, w, c = data.draw(st.integers(1, 7)), data.draw(st.integers(1, 7)), data.draw(
        st.integers(1, 3))
    size = data.draw(st.sampled_from([1, min(h, w)]) | st.integers(1, min(h, w)))
    stride = data.draw(st.none() | st.integers(1, 4))  # overlapping windows too
    m = data.draw(st.integers(1, 3))
    x = data.draw(st.lists(st.integers(-128, 127), min_size=m * h * w * c,
                           max_size=m * h * w * c))
    x = np.array(x, dtype=np.int64).reshape(m, h, w, c)
    pool = MaxPool2D(size, stride)
    got = pool.forward(x)
    expected = naive.maxpool(x.tolist(), size, size if stride is None else stride)
    assert got.tolist() == expected
    assert got.shape == (m, *pool.output_shape((h, w, c)))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(pool.forward(x.astype(np.float64)), got)


def test_defaults_and_shapes():
    pool = MaxPool2D(2)
    assert (pool.size, pool.stride) == (2, 2)
    assert pool.output_shape((5, 4, 3)) == (2, 2, 3)  # floor: the last row is dropped
    assert MaxPool2D(3, 1).output_shape((5, 4, 3)) == (3, 2, 3)
    assert repr(MaxPool2D(3, 1)) == "MaxPool2D(size=3, stride=1)"
    assert MaxPool2D(2).forward(np.zeros((0, 4, 4, 2), int)).shape == (0, 2, 2, 2)


@pytest.mark.parametrize(("args", "pattern"), [
    ((0,), r"MaxPool2D: field 'size' is 0; allowed: an integer >= 1"),
    (((2, 2),), r"'size' is \(2, 2\); allowed: an integer >= 1, the same on both axes"),
    ((2.0,), r"'size' is 2.0"),
    ((2, 0), r"'stride' is 0"),
    ((2, True), r"'stride' is True"),
])
def test_errors(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        MaxPool2D(*args)


@pytest.mark.parametrize(("shape", "pattern"), [
    ((16,), r"MaxPool2D needs a spatial input \(H, W, C\) but the input gives \(16,\)"),
    ((3, 2, 1), r"field 'size' is 3 but the input gives \(3, 2, 1\); allowed: size <= 2 "
                r"\(no padding\)"),
])
def test_output_shape_errors(shape, pattern):
    with pytest.raises(ValueError, match=pattern):
        MaxPool2D(3).output_shape(shape)
