"""Data-parallel training on the devices (hwgen.train.trainer): N devices give bit-identical
weights after every step to one; the loss falls; the work is counted; bad input is refused."""

import itertools

import numpy as np
import pytest
from support import BOARD_WS, COMPILER_CONFIGS

from hwgen import AcceleratorConfig
from hwgen.compiler import compile_network
from hwgen.nn import (
    CNN,
    MLP,
    FloatConv2D,
    MaxPool2D,
    digits_cnn,
    load_digits_images,
    load_digits_split,
)
from hwgen.nn.float_training import softmax_cross_entropy
from hwgen.train import Trainer

CONFIG = COMPILER_CONFIGS["3x2"]


@pytest.fixture(scope="module")
def digits():
    x_train, y_train, x_test, y_test = load_digits_split()
    return x_train[:240], y_train[:240], x_test[:60], y_test[:60]


def params(trainer):
    return [p.copy() for p in trainer.optimizer.params]


def steps_on(devices, config, digits, batches, sizes=(64, 8, 10)):
    """Train a fresh MLP on ``batches`` (index arrays); return the parameters after each step."""
    x, y = digits[0], digits[1]
    trainer = Trainer(MLP(list(sizes), seed=1), config, devices, lr=0.1, momentum=0.9)
    trainer.calibrate(x)
    after = []
    for batch in batches:
        trainer.step(x[batch], y[batch])
        after.append(params(trainer))
    return after


def assert_identical(runs):
    for step, (first, *others) in enumerate(zip(*runs, strict=True)):
        for other in others:
            for a, b in zip(first, other, strict=True):
                assert np.array_equal(a, b), f"step {step}: weights differ"


def test_n_devices_give_the_weights_of_one_after_every_step(interpreted, digits):
    batches = np.array_split(np.random.default_rng(0).permutation(60), 3)  # 20 rows each
    runs = [steps_on(interpreted(CONFIG, n), CONFIG, digits, batches) for n in (1, 2, 3)]
    assert_identical(runs)
    assert not np.array_equal(runs[0][0][0], runs[0][-1][0])  # the weights did change


def test_sixteen_bit_operands_too(interpreted, digits):
    wide = AcceleratorConfig(rows=3, cols=2, in_bits=16, w_bits=16, acc_bits=48)
    batches = np.array_split(np.arange(30), 2)
    runs = [steps_on(interpreted(wide, n), wide, digits, batches) for n in (1, 2)]
    assert_identical(runs)
    # Finer operands: the first step's weights are closer to the float model's.
    mlp = MLP([64, 8, 10], seed=1).fit(digits[0][:15], digits[1][:15], epochs=1, batch_size=15,
                                       lr=0.1, optimizer="sgd", momentum=0.9, seed=0)
    narrow = steps_on(interpreted(CONFIG, 1), CONFIG, digits, [np.arange(15)])
    wide_first = steps_on(interpreted(wide, 1), wide, digits, [np.arange(15)])
    error = [np.abs(run[0][0] - mlp.layers[0][0]).max() for run in (narrow, wide_first)]
    assert error[1] < error[0]


def test_n_boards_give_the_weights_of_one_after_every_step(boards, digits):
    batches = np.array_split(np.random.default_rng(1).permutation(45), 3)
    one = steps_on(boards(1), BOARD_WS, digits, batches, sizes=(64, 12, 10))
    two = steps_on(boards(2), BOARD_WS, digits, batches, sizes=(64, 12, 10))
    assert_identical([one, two])


def test_boards_and_interpreter_agree(boards, interpreted, digits):
    batches = [np.arange(16)]
    on_board = steps_on(boards(1), BOARD_WS, digits, batches, sizes=(64, 12, 10))
    interpreted_run = steps_on(interpreted(BOARD_WS, 1), BOARD_WS, digits, batches,
                               sizes=(64, 12, 10))
    assert_identical([on_board, interpreted_run])


def expected_macs(sizes, rows):
    """MACs of the training's products for ``rows`` samples: forward, dW, dX (not layer 0)."""
    layers = list(itertools.pairwise(sizes))
    return rows * (2 * sum(k * n for k, n in layers) + sum(k * n for k, n in layers[1:]))


def test_loss_falls_on_two_boards_and_the_work_is_counted(boards, digits):
    x, y, x_test, y_test = digits
    mlp = MLP([64, 12, 10], seed=0)
    trainer = Trainer(mlp, BOARD_WS, boards(2), lr=0.1, momentum=0.9, calibration_rows=50)
    seen = []
    reports = trainer.fit(x[:160], y[:160], epochs=4, batch_size=32, seed=0, x_test=x_test,
                          y_test=y_test, on_step=seen.append)
    assert [r.epoch for r in reports] == [1, 2, 3, 4] and trainer.history == reports
    losses = [r.loss for r in reports]
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.7 * losses[0], losses
    assert reports[-1].train_accuracy > reports[0].train_accuracy
    assert len(seen) == 20 and sum(s.rows for s in seen) == 640
    assert 0 <= reports[-1].test_accuracy <= 1
    for report in reports:
        assert report.steps == 5
        assert report.device_macs == expected_macs([64, 12, 10], 160)
        assert report.issued_macs >= report.device_macs  # partial tiles are padded
        assert report.cycles > 0 and report.wire_bytes > 0 and report.seconds > 0
        assert report.eval_macs == 60 * (64 * 12 + 12 * 10)
    assert reports[0].host_macs == 50 * (64 * 12 + 12 * 10)  # the calibration, once
    assert reports[1].host_macs == 0
    assert trainer.optimizer.params[0] is mlp.layers[0][0]  # the MLP is trained in place


def test_evaluate_matches_the_reference(interpreted, digits):
    x, y = digits[0], digits[1]
    trainer = Trainer(MLP([64, 8, 10], seed=2), CONFIG, interpreted(CONFIG, 2))
    trainer.calibrate(x)
    network = trainer.network()
    expected = np.mean(np.argmax(network.forward(network.quantize_input(x[:50])), 1) == y[:50])
    assert trainer.evaluate(x[:50], y[:50]) == expected


def cnn_steps(devices, config, x, y, steps):
    """Train a fresh digits CNN for ``steps`` steps of ``x``; return the parameters after
    each."""
    trainer = Trainer(digits_cnn(seed=3), config, devices, lr=0.05)
    trainer.calibrate(x)
    after = []
    for batch in np.array_split(np.arange(len(x)), steps):
        trainer.step(x[batch], y[batch])
        after.append(params(trainer))
    return after


def test_cnn_forward_runs_on_the_devices_with_read_out(interpreted):
    # The step's loss and hits come from the devices' read-out; the reference's logits give
    # the same floats (the same operations on the same integers).
    x, y = load_digits_images()[0][:12], load_digits_images()[1][:12]
    devices = interpreted(CONFIG, 2)
    trainer = Trainer(digits_cnn(seed=3), CONFIG, devices)
    trainer.calibrate(x)
    network = trainer.network()
    program = compile_network(network, CONFIG, readout=True)
    assert len(program.layer_outputs) == len(network.layers) == 6
    logits = network.forward(network.quantize_input(x)) * network.output_scale
    loss, _ = softmax_cross_entropy(logits, np.eye(10)[y])
    result = trainer.step(x, y)
    assert result.loss == loss and result.correct == np.sum(np.argmax(logits, 1) == y)
    assert all(d.device_counters().runs > 0 for d in devices)  # both devices ran


def test_cnn_n_devices_give_the_weights_of_one_after_every_step(interpreted):
    x, y = load_digits_images()[0][:12], load_digits_images()[1][:12]
    runs = [cnn_steps(interpreted(CONFIG, n), CONFIG, x, y, 2) for n in (1, 2)]
    assert_identical(runs)
    assert not np.array_equal(runs[0][0][0], runs[0][-1][0])  # the weights did change


def test_cnn_n_boards_give_the_weights_of_one_after_every_step(boards):
    x, y = load_digits_images()[0][:16], load_digits_images()[1][:16]
    runs = [cnn_steps(boards(n), BOARD_WS, x, y, 2) for n in (1, 2)]
    assert_identical(runs)


def test_cnn_loss_falls_and_the_work_is_counted(interpreted):
    x, y, x_test, y_test = load_digits_images()
    trainer = Trainer(digits_cnn(seed=0), CONFIG, interpreted(CONFIG, 2), calibration_rows=32)
    reports = trainer.fit(x[:64], y[:64], epochs=2, batch_size=32, seed=0, x_test=x_test[:20],
                          y_test=y_test[:20])
    assert reports[1].loss < 0.95 * reports[0].loss, [r.loss for r in reports]
    # Per sample: the forward pass (conv 8x8 pixels x 9 x 8, conv 4x4 x 72 x 16, dense
    # 64 x 10), dW as much again, dX of every layer but the first; all of it on the devices.
    forward = 64 * 9 * 8 + 16 * 72 * 16 + 64 * 10
    assert reports[1].device_macs == 64 * (2 * forward + 16 * 72 * 16 + 64 * 10)
    assert reports[1].host_macs == 0 and reports[0].host_macs == 32 * forward
    assert reports[1].issued_macs >= reports[1].device_macs
    assert reports[1].eval_macs == 20 * forward


@pytest.mark.parametrize(("model", "error", "message"), [
    ("mlp", TypeError, "model is a str; allowed: hwgen.nn.MLP or hwgen.nn.CNN"),
    (MLP([4, 3], relu=[True]), ValueError, "last layer is FloatDense.*relu=True"),
    (CNN([FloatConv2D(np.ones((3, 3, 1, 2))), MaxPool2D(2)], input_shape=(8, 8, 1)),
     ValueError, "last layer is MaxPool2D"),
])
def test_bad_models_are_refused(interpreted, model, error, message):
    with pytest.raises(error, match=message):
        Trainer(model, CONFIG, interpreted(CONFIG, 1))


@pytest.mark.parametrize(("call", "message"), [
    (lambda t, x, y: t.fit(x[:, :10], y), r"x has shape \(20, 10\); allowed: \(M, 64\)"),
    (lambda t, x, y: t.fit(x, y[:5]), r"y has shape \(5,\)"),
    (lambda t, x, y: t.fit(x, y + 10), r"labels outside 0\.\.9"),
    (lambda t, x, y: t.fit(x, y, epochs=0), "epochs=0; allowed: an integer >= 1"),
    (lambda t, x, y: t.fit(x, y, batch_size=1.5), "batch_size=1.5"),
    (lambda t, x, y: t.fit(x, y, x_test=x), "both x_test and y_test"),
    (lambda t, x, y: t.fit(x[:0], y[:0]), "x has no samples"),
    (lambda t, x, y: t.fit(x * np.nan, y), "NaN or infinity"),
    (lambda t, x, y: t.step(x[:0], y[:0]), "calibrated|empty"),
])
def test_bad_inputs_are_refused(interpreted, digits, call, message):
    trainer = Trainer(MLP([64, 8, 10]), CONFIG, interpreted(CONFIG, 1))
    with pytest.raises((ValueError, RuntimeError), match=message):
        call(trainer, digits[0][:20], digits[1][:20])


def test_network_needs_calibration(interpreted):
    trainer = Trainer(MLP([64, 8, 10]), CONFIG, interpreted(CONFIG, 1))
    with pytest.raises(RuntimeError, match=r"not calibrated yet; call calibrate\(x\)"):
        trainer.network()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"lr": -1}, "lr=-1"), ({"momentum": 2}, "momentum=2"),
    ({"calibration_rows": 0}, "calibration_rows=0"), ({"scale_rate": 0}, "scale_rate=0")])
def test_bad_hyperparameters_are_refused(interpreted, kwargs, message):
    with pytest.raises(ValueError, match=message):
        Trainer(MLP([64, 8, 10]), CONFIG, interpreted(CONFIG, 1), **kwargs)


def test_no_devices(interpreted):
    with pytest.raises(ValueError, match="at least one device"):
        Trainer(MLP([64, 8, 10]), CONFIG, [])
