"""Softmax cross-entropy, the label checks and the minibatch optimizers."""

import numpy as np
import pytest

from hwgen.nn.float_training import (
    check_labels,
    check_optimizer,
    minibatch_descent,
    softmax_cross_entropy,
)


def test_softmax_cross_entropy():
    logits = np.array([[1.0, 2.0, 3.0], [1000.0, 0.0, -1000.0]])  # the second would overflow exp
    onehot = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    loss, delta = softmax_cross_entropy(logits, onehot)
    p = np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum()
    assert loss == pytest.approx(-np.log(p[2]) / 2)
    np.testing.assert_allclose(delta[0], (p - onehot[0]) / 2)
    np.testing.assert_allclose(delta[1], [0.0, 0.0, 0.0], atol=1e-300)
    # delta is the gradient of the loss: check it by central differences.
    rng = np.random.default_rng(0)
    logits, onehot = rng.normal(size=(4, 3)), np.eye(3)[[0, 2, 1, 1]]
    _, delta = softmax_cross_entropy(logits, onehot)
    for index in np.ndindex(logits.shape):
        step = np.zeros_like(logits)
        step[index] = 1e-6
        up = softmax_cross_entropy(logits + step, onehot)[0]
        down = softmax_cross_entropy(logits - step, onehot)[0]
        assert delta[index] == pytest.approx((up - down) / 2e-6, abs=1e-8)


def quadratic(target):
    """Loss 0.5 * mean((p - target)**2) over the batch rows' weights, its gradient."""
    def gradients(params, xb):
        diff = params[0] - target
        return 0.5 * float(np.sum(diff ** 2)) * len(xb), [diff * len(xb) / 8]
    return gradients


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_optimizers_minimise_a_quadratic(optimizer):
    target = np.array([1.0, -2.0, 3.0])
    params = [np.zeros(3)]
    grads = quadratic(target)
    history = minibatch_descent(params, lambda xb, hb: grads(params, xb), np.zeros((8, 1)),
                                np.zeros((8, 1)), epochs=200, batch_size=4, lr=0.05,
                                optimizer=optimizer, momentum=0.5,
                                rng=np.random.default_rng(0))
    assert len(history) == 200 and history[-1] < history[0]
    np.testing.assert_allclose(params[0], target, atol=1e-2)


def test_adam_first_step_is_lr_per_coordinate():
    # Bias-corrected Adam moves every coordinate by lr * sign(grad) on its first step.
    params = [np.array([0.0, 0.0, 0.0])]
    minibatch_descent(params, lambda xb, hb: (0.0, [np.array([5.0, -0.001, 2.0])]),
                      np.zeros((1, 1)), np.zeros((1, 1)), epochs=1, batch_size=1, lr=0.1,
                      optimizer="adam", momentum=0.0, rng=np.random.default_rng(0))
    np.testing.assert_allclose(params[0], [-0.1, 0.1, -0.1], rtol=1e-4)


def test_checks():
    assert check_labels([0, 2], 2, 3, "f").tolist() == [0, 2]
    with pytest.raises(ValueError, match=r"f: y has shape \(3,\) and dtype int64; allowed: "
                                         r"integer labels of shape \(2,\)"):
        check_labels(np.array([0, 1, 2]), 2, 3, "f")
    with pytest.raises(ValueError, match=r"f: labels outside 0\.\.2"):
        check_labels([0, -1], 2, 3, "f")
    with pytest.raises(ValueError, match="f: optimizer='lbfgs'; allowed: 'adam', 'sgd'"):
        check_optimizer("lbfgs", 32, "f")
    for bad in (0, 2.0, True):
        with pytest.raises(ValueError, match=r"f: batch_size=.*; allowed: an integer >= 1"):
            check_optimizer("sgd", bad, "f")
