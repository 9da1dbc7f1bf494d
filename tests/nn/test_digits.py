"""The bundled digits and the default CNN trained on them (the demo's CNN)."""

import importlib

import numpy as np
import pytest

from hwgen.nn import (
    CNN,
    Flatten,
    FloatConv2D,
    FloatDense,
    MaxPool2D,
    digits_cnn,
    load_digits_images,
    load_digits_split,
    quantize,
    train_digits_cnn,
)


@pytest.fixture(scope="module")
def digits():
    return load_digits_split()


@pytest.fixture(scope="module")
def images():
    return load_digits_images()


@pytest.fixture(scope="module")
def trained():
    return train_digits_cnn(seed=0)


def test_digits_split(digits):
    x_train, y_train, x_test, y_test = digits
    assert x_train.shape == (1437, 64) and x_test.shape == (360, 64)
    assert x_train.dtype == np.float64 and y_train.dtype == np.int64
    assert x_train.min() >= 0.0 and x_train.max() == 1.0
    # Stratified: every class is in the test set in proportion.
    assert np.bincount(y_test).min() >= 35
    again = load_digits_split()
    assert all(np.array_equal(a, b) for a, b in zip(digits, again, strict=True))


def test_images_are_the_same_split_in_nhwc(digits, images):
    x_train, y_train, x_test, y_test = images
    assert x_train.shape == (1437, 8, 8, 1) and x_test.shape == (360, 8, 8, 1)
    np.testing.assert_array_equal(y_train, digits[1])
    np.testing.assert_array_equal(y_test, digits[3])
    # Pixel (y, x) is scikit-learn's image row y, column x: compare with its own 8x8 images.
    bunch = importlib.import_module("sklearn.datasets").load_digits()
    index = {row.tobytes(): i for i, row in enumerate(bunch.data / 16.0)}
    for sample in (0, 17, 359):
        original = bunch.images[index[digits[2][sample].tobytes()]] / 16.0
        np.testing.assert_array_equal(x_test[sample, :, :, 0], original)


def test_the_default_architecture():
    model = digits_cnn(seed=3)
    assert isinstance(model, CNN)
    assert [type(layer) for layer in model.layers] == [
        FloatConv2D, MaxPool2D, FloatConv2D, MaxPool2D, Flatten, FloatDense]
    assert model.shapes == [((8, 8, 1), (8, 8, 8)), ((8, 8, 8), (4, 4, 8)),
                            ((4, 4, 8), (4, 4, 16)), ((4, 4, 16), (2, 2, 16)),
                            ((2, 2, 16), (64,)), ((64,), (10,))]
    conv1, _, conv2, _, _, dense = model.layers
    assert (conv1.padding, conv2.padding, conv1.relu, conv2.relu, dense.relu) == (
        1, 1, True, True, False)
    np.testing.assert_array_equal(conv1.weight, digits_cnn(seed=3).layers[0].weight)
    assert not np.array_equal(conv1.weight, digits_cnn(seed=4).layers[0].weight)


def test_trained_cnn_float_and_int8(images, trained):
    x_train, _, x_test, y_test = images
    float_acc = trained.accuracy(x_test, y_test)
    assert float_acc >= 0.95
    assert trained.history[-1] < trained.history[0] / 10
    net = quantize(trained, x_train)
    assert net.input_shape == (8, 8, 1) and net.layers[-1].output == "raw"
    int8_acc = float(np.mean(net.predict(x_test) == y_test))
    assert int8_acc >= float_acc - 0.02
    assert np.mean(net.predict(x_test) == trained.predict(x_test)) >= 0.97


def test_training_is_deterministic(trained):
    again = train_digits_cnn(seed=0, epochs=2)
    once = train_digits_cnn(seed=0, epochs=2)
    for a, b in zip(again.params, once.params, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len(trained.history) == 30
