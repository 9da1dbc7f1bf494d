"""The host's update (hwgen.train.sgd) against MLP.fit's SGD with momentum."""

import numpy as np
import pytest

from hwgen.nn import MLP
from hwgen.train.sgd import SGD


def test_same_update_as_float_training():
    # Float training with SGD on one minibatch per epoch (the whole set, in a shuffled order:
    # its sums differ in the last bits): the same gradients in, the same weights out.
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 5)), rng.integers(0, 3, size=16)
    reference = MLP([5, 4, 3], seed=1).fit(x, y, epochs=3, batch_size=16, lr=0.1,
                                           optimizer="sgd", momentum=0.8, seed=2)
    mlp = MLP([5, 4, 3], seed=1)
    params = [p for layer in mlp.layers for p in layer]
    sgd = SGD(params, lr=0.1, momentum=0.8)
    onehot = np.eye(3)[y]
    for _ in range(3):
        _, grads = mlp._gradients(x, onehot, 0.0)
        sgd.step(grads)
    for (w, b), (w_ref, b_ref) in zip(mlp.layers, reference.layers, strict=True):
        np.testing.assert_allclose(w, w_ref, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(b, b_ref, rtol=1e-12, atol=1e-14)


def test_momentum_accumulates():
    p = np.array([1.0])
    sgd = SGD([p], lr=0.5, momentum=0.5)
    sgd.step([np.array([1.0])])  # v = 1
    sgd.step([np.array([1.0])])  # v = 1.5
    assert p[0] == pytest.approx(1.0 - 0.5 - 0.75)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"lr": 0, "momentum": 0.9}, "lr=0; allowed: a number > 0"),
    ({"lr": float("nan"), "momentum": 0.9}, "lr=nan"),
    ({"lr": 0.1, "momentum": 1.0}, r"momentum=1.0; allowed: a number in \[0, 1\)"),
    ({"lr": True, "momentum": 0.5}, "lr=True"),
])
def test_bad_hyperparameters_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SGD([np.zeros(2)], **kwargs)


def test_gradients_must_match_the_parameters():
    sgd = SGD([np.zeros(2), np.zeros((2, 3))], lr=0.1, momentum=0.0)
    with pytest.raises(ValueError, match="1 gradients for 2 parameters"):
        sgd.step([np.zeros(2)])
    with pytest.raises(ValueError, match=r"gradient 1 has shape \(3, 2\); allowed: \(2, 3\)"):
        sgd.step([np.zeros(2), np.zeros((3, 2))])
