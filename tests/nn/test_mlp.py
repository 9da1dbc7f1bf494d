"""The float MLP: gradients, deterministic training, accuracy on scikit-learn's digits."""

import numpy as np
import pytest

from hwgen.nn import MLP, load_digits_split


@pytest.fixture(scope="module")
def digits():
    return load_digits_split()


@pytest.fixture(scope="module")
def trained(digits):
    x_train, y_train, _, _ = digits
    return MLP([64, 32, 10], seed=0).fit(x_train, y_train)


def test_digits_accuracy(digits, trained):
    _, _, x_test, y_test = digits
    assert trained.accuracy(x_test, y_test) >= 0.90
    assert trained.history[-1] < trained.history[0]


def test_same_seed_same_weights(digits, trained):
    x_train, y_train, _, _ = digits
    again = MLP([64, 32, 10], seed=0).fit(x_train, y_train)
    for (w1, b1), (w2, b2) in zip(trained.layers, again.layers, strict=True):
        assert np.array_equal(w1, w2) and np.array_equal(b1, b2)
    other = MLP([64, 32, 10], seed=0).fit(x_train[:200], y_train[:200], epochs=1, seed=1)
    same = MLP([64, 32, 10], seed=0).fit(x_train[:200], y_train[:200], epochs=1, seed=0)
    assert not np.array_equal(other.layers[0][0], same.layers[0][0])


def test_initialisation():
    a, b = MLP([5, 4, 3], seed=3), MLP([5, 4, 3], seed=3)
    assert a.sizes == [5, 4, 3] and a.relu == [True, False]
    assert np.array_equal(a.layers[0][0], b.layers[0][0])
    assert not np.array_equal(a.layers[0][0], MLP([5, 4, 3], seed=4).layers[0][0])
    assert [w.shape for w, _ in a.layers] == [(5, 4), (4, 3)]
    assert all(np.all(bias == 0) for _, bias in a.layers)


def test_forward_against_explicit_computation():
    w0 = np.array([[1.0, -2.0], [0.5, 1.0]])
    w1 = np.array([[1.0], [3.0]])
    model = MLP.from_layers([(w0, [0.0, 1.0]), (w1, [-1.0])], relu=[True, False])
    x = np.array([[1.0, 2.0], [-1.0, 1.0]])
    # Row 0: hidden (2, 1) -> logit 2 + 3 - 1 = 4. Row 1: hidden (-0.5, 4) -> (0, 4) -> 11.
    assert model.forward(x).tolist() == [[4.0], [11.0]]
    linear = MLP.from_layers([(w0, [0.0, 1.0]), (w1, [-1.0])], relu=[False, False])
    assert linear.forward(x).tolist() == [[4.0], [-0.5 + 12.0 - 1.0]]
    trace = model.forward_trace(x)
    assert trace[0].tolist() == [[2.0, 1.0], [0.0, 4.0]]


def loss_of(model, x, onehot):
    logits = model.forward(x)
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -np.mean(np.sum(onehot * log_probs, axis=1))


def test_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    # Non-zero biases and a ReLU on the logits exercise every term of the backward pass.
    layers = [(rng.normal(size=(k, n)), rng.normal(0, 0.1, n)) for k, n in [(4, 5), (5, 3), (3, 3)]]
    model = MLP.from_layers(layers, relu=[True, False, True])
    x = rng.normal(size=(6, 4))
    onehot = np.eye(3)[rng.integers(0, 3, 6)]
    loss, grads = model._gradients(x, onehot, weight_decay=0.0)
    assert loss == pytest.approx(loss_of(model, x, onehot))
    params = [p for layer in model.layers for p in layer]
    eps = 1e-6
    for param, grad in zip(params, grads, strict=True):
        numeric = np.zeros_like(param)
        for index in np.ndindex(param.shape):
            saved = param[index]
            param[index] = saved + eps
            up = loss_of(model, x, onehot)
            param[index] = saved - eps
            down = loss_of(model, x, onehot)
            param[index] = saved
            numeric[index] = (up - down) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, atol=1e-7, rtol=1e-5)


def test_sgd_with_momentum_learns(digits):
    x_train, y_train, x_test, y_test = digits
    model = MLP([64, 32, 10], seed=2).fit(x_train, y_train, epochs=10, optimizer="sgd",
                                          lr=0.05, momentum=0.9)
    assert model.accuracy(x_test, y_test) >= 0.90


@pytest.mark.parametrize(("call", "pattern"), [
    (lambda: MLP([64]), "at least two positive integers"),
    (lambda: MLP([64, 0]), "at least two positive integers"),
    (lambda: MLP.from_layers([]), "no layers"),
    (lambda: MLP.from_layers([(np.ones((2, 3)), np.ones(2))]), r"layer 0: W has shape \(2, 3\)"),
    (lambda: MLP.from_layers([(np.ones((2, 3)), np.ones(3)), (np.ones((2, 1)), np.ones(1))]),
     "layer 1: W has 2 inputs but layer 0 has 3 outputs"),
    (lambda: MLP.from_layers([(np.ones((2, 3)), np.ones(3))], relu=[True, False]),
     "2 relu flags for 1 layers"),
    (lambda: MLP([2, 2]).forward(np.ones((1, 3))), r"x has shape \(1, 3\); allowed: \(M, 2\)"),
    (lambda: MLP([2, 2]).fit(np.ones((2, 2)), np.array([0, 2])), r"labels outside 0..1"),
    (lambda: MLP([2, 2]).fit(np.ones((2, 2)), np.array([0.0, 1.0])), "integer labels"),
    (lambda: MLP([2, 2]).fit(np.ones((2, 2)), np.array([0, 1]), optimizer="rmsprop"),
     "optimizer='rmsprop'"),
    (lambda: MLP([2, 2]).fit(np.ones((2, 2)), np.array([0, 1]), batch_size=0),
     "batch_size=0"),
])
def test_errors(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()
