"""scikit-learn's bundled 8x8 digits, and the default small CNN trained on them.

Nothing is downloaded. The split is stratified and deterministic, and so is the training.
"""

import importlib

import numpy as np

from .cnn import CNN
from .flatten import Flatten
from .float_layers import FloatConv2D, FloatDense
from .maxpool import MaxPool2D

__all__ = ["digits_cnn", "load_digits_images", "load_digits_split", "train_digits_cnn"]

DIGITS_SHAPE = (8, 8, 1)


def load_digits_split(test_size=0.2, random_state=0):
    """Return scikit-learn's bundled 8x8 digits, split and scaled to ``[0, 1]``.

    The split is stratified and deterministic; nothing is downloaded.

    Returns
    -------
    x_train, y_train, x_test, y_test : numpy.ndarray
        ``x_*`` float64 ``(M, 64)`` with pixels divided by 16, ``y_*`` int64 labels ``0..9``.
    """
    # Imported here: scikit-learn is slow to import and only this helper needs it.
    datasets = importlib.import_module("sklearn.datasets")
    train_test_split = importlib.import_module("sklearn.model_selection").train_test_split

    digits = datasets.load_digits()
    x = digits.data.astype(np.float64) / 16.0
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=test_size, random_state=random_state, stratify=y)
    return x_train, y_train, x_test, y_test


def load_digits_images(test_size=0.2, random_state=0):
    """Return :func:`load_digits_split`'s split with the images as NHWC ``(M, 8, 8, 1)``.

    The same samples in the same order; pixel ``(y, x)`` of a row is feature ``8*y + x``.

    Returns
    -------
    x_train, y_train, x_test, y_test : numpy.ndarray
    """
    x_train, y_train, x_test, y_test = load_digits_split(test_size, random_state)
    return (x_train.reshape(-1, *DIGITS_SHAPE), y_train,
            x_test.reshape(-1, *DIGITS_SHAPE), y_test)


def digits_cnn(seed=0):
    """Return the default small CNN for the 8x8 digits, untrained (He-normal weights).

    conv 3x3 (1 -> 8, padding 1) + ReLU -> max-pool 2 -> conv 3x3 (8 -> 16, padding 1) + ReLU
    -> max-pool 2 -> flatten (64) -> dense 10 (raw logits), on ``input_shape=(8, 8, 1)``.

    Parameters
    ----------
    seed : int
        Seed of the weight initialisation.

    Returns
    -------
    CNN
    """
    rng = np.random.default_rng(seed)
    return CNN([
        FloatConv2D.random(3, 1, 8, padding=1, rng=rng),
        MaxPool2D(2),
        FloatConv2D.random(3, 8, 16, padding=1, rng=rng),
        MaxPool2D(2),
        Flatten(),
        FloatDense.random(2 * 2 * 16, 10, relu=False, rng=rng),
    ], input_shape=DIGITS_SHAPE)


def train_digits_cnn(*, epochs=30, seed=0, batch_size=32, lr=3e-3):
    """Build :func:`digits_cnn` and train it on :func:`load_digits_images`' training split.

    Adam with softmax cross-entropy (:meth:`CNN.fit`); deterministic under ``seed``, which
    seeds both the weights and the minibatch order. About a second per epoch on one core at
    most.

    Parameters
    ----------
    epochs, batch_size : int
    seed : int
    lr : float

    Returns
    -------
    CNN
        Trained; evaluate it on ``load_digits_images()[2:]``.
    """
    x_train, y_train, _, _ = load_digits_images()
    return digits_cnn(seed).fit(x_train, y_train, epochs=epochs, batch_size=batch_size, lr=lr,
                                seed=seed)
