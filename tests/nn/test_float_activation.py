"""Float activations: folding a chain of ReLU, leaky ReLU and clamps into one layer computes the
chain (hypothesis), and the host's output functions."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import FloatDense
from hwgen.nn.output_function import apply_output_function

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

bound = st.one_of(st.none(), st.floats(-3, 3))
op = st.one_of(
    st.tuples(st.just("relu"), st.none(), st.none()),
    st.tuples(st.just("leaky_relu"), st.floats(0, 2), st.none()),
    st.tuples(st.just("clamp"), bound, bound).filter(
        lambda t: None in t[1:] or t[1] <= t[2]))


def apply(name, value, a):
    """One activation, element by element."""
    if name == "relu":
        return np.maximum(a, 0)
    if name == "leaky_relu":
        return np.where(a >= 0, a, value[0] * a)
    low, high = value
    return np.clip(a, -np.inf if low is None else low, np.inf if high is None else high)


@FAST
@given(st.lists(op, min_size=1, max_size=4), st.integers(0, 2**16))
def test_folded_activations_compute_the_chain(ops, seed):
    a = np.random.default_rng(seed).normal(scale=3, size=(1, 200))
    layer = FloatDense(np.eye(200), activation="identity")
    expected = a
    for name, first, second in ops:
        reason = layer.then(name, alpha=first, low=first, high=second)
        if reason is not None:  # only clamps that leave a constant are refused
            assert "constant" in reason
            return
        expected = apply(name, (first, second) if name == "clamp" else (first,), expected)
    np.testing.assert_allclose(layer.forward(a), expected, atol=1e-12)


def test_relu6_and_leaky_fields():
    layer = FloatDense(np.eye(2), activation="identity")
    assert layer.then("relu") is None and layer.then("clamp", high=6.0) is None
    assert (layer.activation, layer.act_min, layer.act_max) == ("relu", None, 6.0)
    layer = FloatDense(np.eye(2), activation="identity")
    layer.then("clamp", low=-1.0, high=2.0)
    layer.then("leaky_relu", alpha=0.5)
    assert (layer.activation, layer.alpha, layer.act_min, layer.act_max) == \
        ("leaky_relu", 0.5, -0.5, 2.0)


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"activation": "gelu"}, r"FloatDense: field 'activation' is 'gelu'; allowed: 'identity'"),
    ({"relu": True, "activation": "identity"}, r"relu=True contradicts activation='identity'"),
    ({"alpha": -1.0}, r"field 'alpha' is -1.0; allowed: a float >= 0"),
    ({"act_min": 2.0, "act_max": 1.0}, r"act_min=2.0 > act_max=1.0"),
    ({"act_max": float("nan")}, r"field 'act_max' is nan"),
])
def test_activation_errors(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        FloatDense(np.eye(2), **kwargs)


def test_output_functions():
    logits = np.array([[1.0, 2.0, -1.0], [1000.0, 0.0, -1000.0]])
    probs = apply_output_function("softmax", logits)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    np.testing.assert_allclose(probs[0], np.exp(logits[0]) / np.exp(logits[0]).sum())
    np.testing.assert_allclose(apply_output_function("log_softmax", logits[:1]),
                               np.log(probs[:1]))
    np.testing.assert_allclose(apply_output_function("sigmoid", logits),
                               1 / (1 + np.exp(-np.clip(logits, -700, 700))), atol=1e-300)
    np.testing.assert_array_equal(apply_output_function(None, logits), logits)
    with pytest.raises(ValueError, match=r"field 'output_function' is 'tanh'; allowed: None, "
                                         r"'softmax', 'log_softmax', 'sigmoid'"):
        apply_output_function("tanh", logits)
