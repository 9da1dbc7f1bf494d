"""Activation scales (hwgen.train.scales): calibrated as hwgen.nn.quantize measures them, then
following the read-out."""

import numpy as np
import pytest

from hwgen.nn import MLP, digits_cnn
from hwgen.train import ActivationScales
from hwgen.train.trainer import float_layers


def test_calibration_measures_every_output():
    rng = np.random.default_rng(0)
    mlp = MLP([6, 5, 4], seed=3)
    x = rng.normal(size=(20, 6))
    scales = ActivationScales.calibrate(float_layers(mlp)[0], x, 8)
    hidden, logits = mlp.forward_trace(x)
    assert scales.input == np.abs(x).max() / 127
    assert scales.outputs == [np.abs(hidden).max() / 127, np.abs(logits).max() / 127]
    assert scales.input_of(0) == scales.input and scales.input_of(1) == scales.outputs[0]


def test_pooling_and_flatten_keep_their_input_scale():
    cnn = digits_cnn(seed=1)
    x = np.random.default_rng(1).random((4, 8, 8, 1))
    scales = ActivationScales.calibrate(cnn.layers, x, 8)
    assert scales.carries == [False, True, False, True, True, False]
    assert scales.outputs[1] == scales.outputs[0]
    assert scales.outputs[3] == scales.outputs[4] == scales.outputs[2]
    scales.observe(2, np.array([[10, -20]]))
    assert scales.outputs[3] == scales.outputs[4] == scales.outputs[2]


def make(outputs=(1.0, 2.0), carries=(False, False), **options):
    return ActivationScales(0.5, list(outputs), list(carries), 8, **options)


def test_observe_moves_part_of_the_way():
    scales = make(rate=0.25)
    scales.observe(0, np.array([[63, -10]]))  # max 63 of 127 at scale 1: target 63/127
    assert scales.outputs[0] == pytest.approx(1.0 + 0.25 * (63 / 127 - 1.0))


def test_saturation_grows_the_scale():
    scales = make(rate=0.5, growth=3.0)
    scales.observe(0, np.array([[127, 5]]))
    assert scales.outputs[0] == pytest.approx(1.0 + 0.5 * (3.0 - 1.0))
    scales.observe(1, np.array([[-128]]))  # the lowest value saturates too
    assert scales.outputs[1] > 2.0


def test_raw_outputs_use_the_given_step():
    scales = make(rate=1.0)
    scales.observe(1, np.array([[1000, -3000]]), scale=0.01)
    assert scales.outputs[1] == pytest.approx(30.0 / 127)


def test_silent_and_empty_outputs_change_nothing():
    scales = make()
    scales.observe(0, np.zeros((3, 2), dtype=int))
    scales.observe(1, np.zeros((0, 2), dtype=int))
    assert scales.outputs == [1.0, 2.0]


def test_round_trip():
    scales = make(rate=0.3, growth=1.5)
    again = ActivationScales.from_dict(scales.to_dict())
    assert again.to_dict() == scales.to_dict()


@pytest.mark.parametrize(("options", "message"), [
    ({"rate": 0}, "rate=0"), ({"rate": 1.5}, "rate=1.5"), ({"growth": 0.5}, "growth=0.5")])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        make(**options)
