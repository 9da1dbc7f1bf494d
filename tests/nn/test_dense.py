"""The integer Dense layer: its checks, its output shape and the accumulator-range bound."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import Dense, MaxPool2D, accumulator_bound

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_dense_attributes():
    weight = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int8)
    layer = Dense(weight, [1, 2, 3], [1, 1, 1], [0, 0, 0])
    weight[0, 0] = 99  # the layer keeps its own copy
    assert layer.weight.dtype == np.int64 and layer.weight[0, 0] == 1
    assert all(a.dtype == np.int64 for a in (layer.bias, layer.mult, layer.shift))
    assert (layer.in_features, layer.out_features) == (2, 3)
    assert (layer.activation, layer.output) == ("relu", "requant")
    assert repr(layer) == "Dense(2 -> 3, activation='relu', output='requant')"


def test_output_shape():
    layer = Dense(np.ones((6, 4), int), np.zeros(4, int), np.ones(4, int), np.zeros(4, int))
    assert layer.output_shape((6,)) == (4,)
    with pytest.raises(ValueError, match=r"Dense: field 'weight' has 6 inputs but the input "
                                         r"gives \(5,\); allowed: weight of shape \(5, N\)"):
        layer.output_shape((5,))
    with pytest.raises(ValueError, match=r"Dense needs a flat input \(K,\) but the input gives "
                                         r"\(1, 2, 3\); allowed: a Flatten before the Dense"):
        layer.output_shape((1, 2, 3))


def dense(k=2, n=2, **kw):
    args = {"weight": np.ones((k, n), dtype=int), "bias": np.zeros(n, dtype=int),
            "mult": np.ones(n, dtype=int), "shift": np.zeros(n, dtype=int)}
    args.update(kw)
    return args


@pytest.mark.parametrize(("args", "pattern"), [
    (dense(weight=np.ones((2, 2))), r"Dense: field 'weight' has dtype float64.*integer"),
    (dense(bias=np.array([True, False])), r"'bias' has dtype bool.*integer"),
    (dense(mult=np.array([1, 2.5])), r"'mult' has dtype float64"),
    (dense(shift=np.array([1, "a"], dtype=object)), r"'shift' holds str"),
    (dense(weight=np.ones(3, dtype=int)), r"'weight' has shape \(3,\).*\(K, N\)"),
    (dense(weight=np.ones((0, 2), dtype=int)), r"'weight' has shape \(0, 2\)"),
    (dense(weight=[[1, 2], [3]]), r"'weight' is not an array"),
    (dense(bias=np.zeros(3, dtype=int)), r"'bias' has shape \(3,\); allowed: \(2,\)"),
    (dense(mult=np.ones((1, 2), dtype=int)), r"'mult' has shape \(1, 2\); allowed: \(2,\)"),
    (dense(shift=np.zeros(1, dtype=int)), r"'shift' has shape \(1,\); allowed: \(2,\)"),
    (dense(activation="sigmoid"), r"'activation' is 'sigmoid'; allowed: 'relu', 'identity'"),
    (dense(output="float"), r"'output' is 'float'; allowed: 'requant', 'raw'"),
    (dense(bias=np.array([2 ** 70, 0], dtype=object)), r"'bias' holds .* does not fit int64"),
])
def test_dense_errors(args, pattern):
    positional = [args.pop(f) for f in ("weight", "bias", "mult", "shift")]
    with pytest.raises(ValueError, match=pattern):
        Dense(*positional, **args)


def test_accumulator_bound():
    w = np.array([[3, -4], [-128, 7], [0, 127]])
    b = np.array([-1000, 5])
    layer = Dense(w, b, [1, 1], [0, 0])
    # Column sums of |W| are 131 and 138: 128 * 131 + 1000 = 17768, 128 * 138 + 5 = 17669.
    assert accumulator_bound(layer, 8) == 17768
    assert accumulator_bound(layer, 2) == 2 * 131 + 1000


def test_accumulator_bound_needs_an_accumulator():
    with pytest.raises(TypeError, match="accumulator_bound: a MaxPool2D has no accumulator; "
                                        "allowed: Dense, Conv2D"):
        accumulator_bound(MaxPool2D(2), 8)


def test_accumulator_bound_beyond_int64():
    w = np.array([[2 ** 62, -(2 ** 62)], [2 ** 62, 1]])
    layer = Dense(w, [0, 2 ** 62], [1, 1], [0, 0])
    assert accumulator_bound(layer, 16) == 2 ** 15 * 2 ** 63
    assert isinstance(accumulator_bound(layer, 16), int)


@FAST
@given(st.data())
def test_accumulator_bound_covers_every_partial_sum(data):
    in_bits = data.draw(st.integers(2, 8))
    k = data.draw(st.integers(1, 4))
    w = np.array([[data.draw(st.integers(-128, 127))] for _ in range(k)])
    b = data.draw(st.integers(-1000, 1000))
    layer = Dense(w, [b], [1], [0])
    extremes = (-(2 ** (in_bits - 1)), 2 ** (in_bits - 1) - 1)
    # Every subset of products at extreme inputs, the bias added or not.
    sums = {0}
    for row in w[:, 0].tolist():
        sums |= {s + x * row for s in sums for x in extremes}
    worst = max(abs(s + extra) for s in sums for extra in (0, b))
    bound = accumulator_bound(layer, in_bits)
    assert bound >= worst
    assert bound == 2 ** (in_bits - 1) * sum(abs(v) for v in w[:, 0].tolist()) + abs(b)
