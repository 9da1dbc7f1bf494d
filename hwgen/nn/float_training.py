"""Minibatch training shared by the float models: softmax cross-entropy, SGD and Adam.

Deterministic: the only random numbers are the minibatch orders drawn from the given generator.
"""

import numbers

import numpy as np

__all__ = ["check_labels", "check_optimizer", "minibatch_descent", "softmax_cross_entropy"]

OPTIMIZERS = ("adam", "sgd")


def softmax_cross_entropy(logits, onehot):
    """Return the mean cross-entropy loss and its gradient with respect to ``logits``.

    Parameters
    ----------
    logits : numpy.ndarray, shape (M, N)
    onehot : numpy.ndarray, shape (M, N)
        One-hot labels.

    Returns
    -------
    loss : float
    delta : numpy.ndarray, shape (M, N)
        ``(softmax(logits) - onehot) / M``.
    """
    shifted = logits - logits.max(axis=1, keepdims=True)  # avoids overflow in exp
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -float(np.mean(np.sum(onehot * log_probs, axis=1)))
    delta = (np.exp(log_probs) - onehot) / logits.shape[0]
    return loss, delta


def check_labels(y, count, classes, where):
    """Return the labels ``y`` as an array, checked to be ``count`` integers in ``0..classes-1``.

    Raises
    ------
    ValueError
        Naming ``where``, for a wrong shape, a non-integer dtype or a label out of range.
    """
    y = np.asarray(y)
    if y.shape != (count,) or y.dtype.kind not in "iu":
        raise ValueError(f"{where}: y has shape {y.shape} and dtype {y.dtype}; "
                         f"allowed: integer labels of shape ({count},)")
    if y.size and (y.min() < 0 or y.max() >= classes):
        raise ValueError(f"{where}: labels outside 0..{classes - 1}")
    return y


def check_optimizer(optimizer, batch_size, where):
    """Raise ``ValueError`` for an unknown optimizer or a batch size that is not an int >= 1."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"{where}: optimizer={optimizer!r}; allowed: "
                         + ", ".join(repr(o) for o in OPTIMIZERS))
    if not isinstance(batch_size, numbers.Integral) or isinstance(batch_size, bool) \
            or batch_size < 1:
        raise ValueError(f"{where}: batch_size={batch_size!r}; allowed: an integer >= 1")


def minibatch_descent(params, gradients, x, onehot, *, epochs, batch_size, lr, optimizer,
                      momentum, rng):
    """Train ``params`` in place by minibatch gradient descent; return each epoch's mean loss.

    Parameters
    ----------
    params : list of numpy.ndarray
        The arrays to update, in place.
    gradients : callable
        ``gradients(x_batch, onehot_batch) -> (loss, grads)``, ``grads`` in the order of
        ``params``.
    x, onehot : numpy.ndarray
        Inputs and one-hot labels, indexed by sample along the first axis.
    epochs, batch_size : int
    lr : float
        Learning rate.
    optimizer : {"adam", "sgd"}
        Adam (``beta1 = 0.9, beta2 = 0.999``) or SGD with ``momentum``.
    momentum : float
    rng : numpy.random.Generator
        Draws one permutation of the samples per epoch.

    Returns
    -------
    list of float
    """
    first = [np.zeros_like(p) for p in params]  # momentum / Adam's first moment
    second = [np.zeros_like(p) for p in params]  # Adam's second moment
    step = 0
    history = []
    for _ in range(epochs):
        order = rng.permutation(x.shape[0])
        losses = []
        for start in range(0, x.shape[0], batch_size):
            batch = order[start:start + batch_size]
            loss, grads = gradients(x[batch], onehot[batch])
            losses.append(loss * batch.size)
            step += 1
            for i, grad in enumerate(grads):
                if optimizer == "adam":
                    first[i] = 0.9 * first[i] + 0.1 * grad
                    second[i] = 0.999 * second[i] + 0.001 * grad * grad
                    m_hat = first[i] / (1 - 0.9 ** step)
                    v_hat = second[i] / (1 - 0.999 ** step)
                    params[i] -= lr * m_hat / (np.sqrt(v_hat) + 1e-8)
                else:
                    first[i] = momentum * first[i] + grad
                    params[i] -= lr * first[i]
        history.append(float(np.sum(losses) / max(x.shape[0], 1)))
    return history
