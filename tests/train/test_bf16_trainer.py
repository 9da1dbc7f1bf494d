"""Training on bf16 devices (hwgen.train.bf16_trainer): one step equals an independent NumPy
computation bit for bit; N devices give the weights of one after every step; the model learns
as the float one does; the work is counted; what it does not take is refused."""

import numpy as np
import pytest
from support.bf16_tiled import bf16, tiled_matmul

from hwgen import AcceleratorConfig
from hwgen.nn import MLP, digits_cnn, load_digits_split, to_bf16
from hwgen.nn.float_training import softmax_cross_entropy
from hwgen.train import Bf16Trainer, Trainer, make_trainer

CONFIG = AcceleratorConfig(dtype="bf16", rows=3, cols=2)


@pytest.fixture(scope="module")
def digits():
    x_train, y_train, x_test, y_test = load_digits_split()
    return x_train[:240], y_train[:240], x_test[:90], y_test[:90]


def bits(arrays):
    return [np.asarray(a, dtype=np.float32).view(np.uint32).copy() for a in arrays]


def steps_on(devices, digits, batches, sizes=(64, 8, 10)):
    """Train a fresh MLP on ``batches``; return the parameters' bits after each step."""
    trainer = Bf16Trainer(MLP(list(sizes), seed=1), CONFIG, devices, lr=0.1, momentum=0.9)
    after = []
    for batch in batches:
        trainer.step(digits[0][batch], digits[1][batch])
        after.append(bits(trainer.optimizer.params))
    return after


@pytest.mark.parametrize("wide", [False, True])
def test_one_step_equals_numpy(interpreted, digits, wide):
    x, y = digits[0][:20], digits[1][:20]
    if wide:   # exponents over a wide range: the order of every fp32 sum shows in the bits
        x = x * np.exp2(np.random.default_rng(2).integers(-8, 8, size=x.shape))
    mlp = MLP([64, 8, 10], seed=3)
    (w0, b0), (w1, b1) = [(w.astype(np.float32), b.astype(np.float32)) for w, b in mlp.layers]
    trainer = Bf16Trainer(mlp, CONFIG, interpreted(CONFIG, 2), lr=0.1, momentum=0.9)
    trainer.step(x, y)
    # The step, in float32 NumPy and ml_dtypes: bf16 operands, fp32 sums in tiles of rows.
    r = CONFIG.rows
    xb, w0b, w1b = bf16(x), bf16(w0), bf16(w1)
    h = bf16(np.maximum(tiled_matmul(xb, w0b, b0, r), 0))
    scores = tiled_matmul(h, w1b, b1, r)
    _, d1 = softmax_cross_entropy(scores, np.eye(10, dtype=np.float32)[y])
    d0 = tiled_matmul(bf16(d1), w1b.T, 0.0, r) * (h > 0)
    grads = [tiled_matmul(xb.T, bf16(d0), 0.0, r), d0.sum(axis=0),
             tiled_matmul(h.T, bf16(d1), 0.0, r), d1.sum(axis=0)]
    want = [p - np.float32(0.1) * g for p, g in zip((w0, b0, w1, b1), grads, strict=True)]
    assert all(g.dtype == np.float32 for g in grads)
    got = [mlp.layers[0][0], mlp.layers[0][1], mlp.layers[1][0], mlp.layers[1][1]]
    for index, (a, b) in enumerate(zip(bits(got), bits(want), strict=True)):
        assert np.array_equal(a, b), f"parameter {index}"
    assert not np.array_equal(bits([w0])[0], bits(got[:1])[0])


@pytest.mark.parametrize("sizes", [(64, 8, 10), (64, 9, 5, 10)])
def test_n_devices_give_the_weights_of_one_after_every_step(interpreted, sizes):
    # Inputs over a wide range of exponents, so that fp32 sums round and their order shows
    # (the digits' sums are mostly exact); batches of 20, 13 and 7 rows: tiles of 3 split
    # over 2 and 3 devices unevenly.
    rng = np.random.default_rng(0)
    data = (rng.normal(size=(60, 64)) * np.exp2(rng.integers(-8, 8, size=(60, 64))),
            rng.integers(0, 10, size=60))
    order = rng.permutation(60)
    batches = [order[:20], order[20:33], order[33:53], order[53:]]
    runs = [steps_on(interpreted(CONFIG, n), data, batches, sizes) for n in (1, 2, 3)]
    for step, (first, *others) in enumerate(zip(*runs, strict=True)):
        for other in others:
            for a, b in zip(first, other, strict=True):
                assert np.array_equal(a, b), f"step {step}: weights differ"


def test_learns_as_the_float_training_does_and_counts_the_work(interpreted, digits):
    x, y, x_test, y_test = digits
    mlp = MLP([64, 16, 10], seed=0)
    config = AcceleratorConfig(dtype="bf16")   # the default 8x8: fewer, longer tiles
    trainer = make_trainer(mlp, config, interpreted(config, 1), lr=0.1, momentum=0.9)
    assert isinstance(trainer, Bf16Trainer)
    reports = trainer.fit(x, y, epochs=3, batch_size=32, x_test=x_test, y_test=y_test)
    assert reports[-1].loss < reports[0].loss / 2
    reference = MLP([64, 16, 10], seed=0).fit(x, y, epochs=3, batch_size=32, lr=0.1,
                                              optimizer="sgd", momentum=0.9, seed=0)
    assert abs(reports[-1].test_accuracy - reference.accuracy(x_test, y_test)) <= 0.05
    # evaluate runs the whole network on the devices: the reference network's predictions.
    net = to_bf16(mlp, rows=config.rows)
    assert reports[-1].test_accuracy == np.mean(net.predict(x_test) == y_test)
    # Forward 64x16 + 16x10, dW as much again, dX of the second layer: all on the devices.
    forward = 64 * 16 + 16 * 10
    assert reports[1].device_macs == 240 * (2 * forward + 16 * 10)
    assert reports[1].host_macs == 0 and reports[0].host_macs == 0
    assert reports[1].eval_macs == 90 * forward
    assert mlp.layers[0][0].dtype == np.float32 and mlp.layers[1][1].dtype == np.float32


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda d: Bf16Trainer(digits_cnn(), CONFIG, d), TypeError,
     "allowed on bf16 devices: hwgen.nn.MLP"),
    (lambda d: Bf16Trainer(MLP([4, 3], relu=[True]), CONFIG, d), ValueError, "relu=True"),
    (lambda d: Trainer(MLP([4, 3]), CONFIG, d), ValueError,
     "dtype='bf16' and Trainer trains on dtype='int8' devices; allowed: "
     r"hwgen.train.make_trainer"),
    (lambda d: Bf16Trainer(MLP([5000, 3]), CONFIG, d), ValueError,
     "needs a reduction of 5000 in one program"),
    (lambda d: make_trainer(MLP([4, 3]), "bf16", d), TypeError, "config is a str"),
])
def test_what_it_does_not_take_is_refused(interpreted, make, error, message):
    with pytest.raises(error, match=message):
        make(interpreted(CONFIG, 1))


def test_make_trainer_picks_the_trainer_of_the_dtype(interpreted):
    int8 = AcceleratorConfig(rows=3, cols=2)
    assert type(make_trainer(MLP([4, 3]), int8, interpreted(int8, 1))) is Trainer
    assert type(make_trainer(MLP([4, 3]), CONFIG, interpreted(CONFIG, 1))) is Bf16Trainer


def test_an_int8_config_is_refused(interpreted):
    int8 = AcceleratorConfig(rows=3, cols=2)
    with pytest.raises(ValueError, match="dtype='int8' and Bf16Trainer trains on dtype='bf16'"):
        Bf16Trainer(MLP([4, 3]), int8, interpreted(int8, 1))


def test_a_diverged_training_is_refused(interpreted, digits):
    mlp = MLP([64, 8, 10])
    trainer = Bf16Trainer(mlp, CONFIG, interpreted(CONFIG, 1))
    mlp.layers[0][0][0, 0] = np.inf
    with pytest.raises(ValueError, match="layer 0: the weights hold NaN or values beyond bf16"):
        trainer.step(digits[0][:4], digits[1][:4])
