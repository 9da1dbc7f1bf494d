"""The float CNN: gradients of the whole network, training, shapes and errors."""

import numpy as np
import pytest

from hwgen.nn import CNN, MLP, Flatten, FloatConv2D, FloatDense, MaxPool2D


def small_cnn(seed=0):
    rng = np.random.default_rng(seed)

    def bias(n):
        return rng.normal(0, 0.1, n)

    return CNN([
        FloatConv2D(rng.normal(size=(3, 3, 2, 3)), bias(3), stride=2, padding=1),
        MaxPool2D(2, 1),
        FloatConv2D(rng.normal(size=(1, 1, 3, 4)), bias(4), relu=False),
        Flatten(),
        FloatDense(rng.normal(size=(16, 5)), bias(5)),
        FloatDense(rng.normal(size=(5, 3)), bias(3), relu=False),
    ], input_shape=(5, 6, 2))


def loss_of(model, x, onehot):
    logits = model.forward(x)
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -np.mean(np.sum(onehot * log_probs, axis=1))


def test_gradients_match_finite_differences():
    model = small_cnn()
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 5, 6, 2))
    onehot = np.eye(3)[rng.integers(0, 3, 4)]
    loss, grads = model._gradients(x, onehot)
    assert loss == pytest.approx(loss_of(model, x, onehot))
    assert [g.shape for g in grads] == [p.shape for p in model.params]
    eps = 1e-6
    for param, grad in zip(model.params, grads, strict=True):
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
    # Weight decay adds decay * W to the weights' gradients only.
    _, decayed = model._gradients(x, onehot, weight_decay=0.5)
    for param, grad, old in zip(model.params, decayed, grads, strict=True):
        expected = old + 0.5 * param if param.ndim > 1 else old
        np.testing.assert_allclose(grad, expected, rtol=1e-12, atol=1e-15)


def test_shapes_and_trace():
    model = small_cnn()
    assert model.shapes == [((5, 6, 2), (3, 3, 3)), ((3, 3, 3), (2, 2, 3)),
                            ((2, 2, 3), (2, 2, 4)), ((2, 2, 4), (16,)), ((16,), (5,)),
                            ((5,), (3,))]
    assert (model.output_shape, model.out_features) == ((3,), 3)
    x = np.random.default_rng(2).normal(size=(7, 5, 6, 2))
    trace = model.forward_trace(x)
    assert [t.shape for t in trace] == [(7, *out) for _, out in model.shapes]
    # The pool and flatten outputs are what their layers compute from the previous output.
    np.testing.assert_array_equal(trace[1], MaxPool2D(2, 1).forward(trace[0]))
    np.testing.assert_array_equal(trace[3], trace[2].reshape(7, -1))
    assert np.all(trace[0] >= 0) and np.any(trace[2] < 0)  # ReLU where asked only
    np.testing.assert_array_equal(model.predict(x), np.argmax(trace[-1], axis=1))
    assert model.accuracy(x, model.predict(x)) == 1.0
    assert "CNN([FloatConv2D(3x3, 2 -> 3" in repr(model)
    assert len(model.params) == 8


def test_dense_only_chain_equals_the_mlp():
    mlp = MLP([6, 5, 3], seed=4)
    cnn = CNN([FloatDense(w, b, relu=r) for (w, b), r in zip(mlp.layers, mlp.relu, strict=True)])
    x = np.random.default_rng(0).normal(size=(9, 6))
    np.testing.assert_array_equal(cnn.forward(x), mlp.forward(x))
    assert cnn.shapes[0][0] == (6,)


def test_fit_learns_and_is_deterministic():
    # Two classes told apart by where a bright blob sits: left or right half of the image.
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    x = rng.normal(0, 0.3, size=(200, 6, 6, 1))
    for i, label in enumerate(y):
        x[i, 2:4, 3 * label:3 * label + 2, 0] += 2.0
    a = small_cnn_for(1).fit(x, y, epochs=8, seed=3)
    b = small_cnn_for(1).fit(x, y, epochs=8, seed=3)
    for pa, pb in zip(a.params, b.params, strict=True):
        np.testing.assert_array_equal(pa, pb)
    assert len(a.history) == 8 and a.history[-1] < a.history[0] / 2
    assert a.accuracy(x, y) >= 0.95
    other = small_cnn_for(1).fit(x, y, epochs=1, seed=4)
    assert not np.array_equal(other.params[0], small_cnn_for(1).fit(x, y, epochs=1,
                                                                    seed=3).params[0])
    sgd = small_cnn_for(1).fit(x, y, epochs=8, optimizer="sgd", lr=0.05, seed=3)
    assert sgd.accuracy(x, y) >= 0.9


def small_cnn_for(seed):
    rng = np.random.default_rng(seed)
    return CNN([FloatConv2D.random(3, 1, 4, padding=1, rng=rng), MaxPool2D(2), Flatten(),
                FloatDense.random(36, 2, relu=False, rng=rng)], input_shape=(6, 6, 1))


def conv(c_in=1, c_out=2, k=3):
    return FloatConv2D(np.ones((k, k, c_in, c_out)))


@pytest.mark.parametrize(("make", "pattern"), [
    (lambda: CNN([]), r"CNN: field 'layers' is empty"),
    (lambda: CNN([conv()]), r"CNN: field 'input_shape' is None but layer 0 is a FloatConv2D"),
    (lambda: CNN([conv()], input_shape=(4, 4)), r"field 'input_shape' is \(4, 4\); allowed"),
    (lambda: CNN([conv()], input_shape=(4, 4, 1.0)), r"field 'input_shape' is"),
    (lambda: CNN([conv(), FloatDense(np.ones((8, 2)))], input_shape=(4, 4, 1)),
     r"layer 1: FloatDense needs a flat input \(K,\) but layer 0 gives \(2, 2, 2\); allowed: "
     r"a Flatten before the FloatDense"),
    (lambda: CNN([conv(), conv(c_in=3)], input_shape=(6, 6, 1)),
     r"layer 1: field 'weight' has C_in=3 but layer 0 gives 2 channels"),
    (lambda: CNN([conv(k=5)], input_shape=(4, 4, 1)), r"layer 0: field 'weight' has KH=5"),
    (lambda: CNN([FloatDense(np.ones((4, 4))), conv()]),
     r"layer 1: FloatConv2D needs a spatial input"),
    (lambda: CNN([conv(), MaxPool2D(3)], input_shape=(4, 4, 1)),
     r"layer 1: field 'size' is 3"),
    (lambda: CNN([conv(), Flatten(), FloatDense(np.ones((7, 2)))], input_shape=(4, 4, 1)),
     r"layer 2: field 'weight' has 7 inputs but layer 1 has 8 outputs"),
    (lambda: small_cnn().forward(np.ones((2, 60))), r"CNN.forward: x has shape \(2, 60\); "
                                                    r"allowed: \(M, 5, 6, 2\)"),
    (lambda: small_cnn().fit(np.ones((2, 5, 6, 2)), np.array([0, 3])), r"labels outside 0..2"),
    (lambda: small_cnn().fit(np.ones((2, 5, 6, 2)), np.array([0.0, 1.0])), "integer labels"),
    (lambda: small_cnn().fit(np.ones((2, 5, 6, 2)), np.array([0, 1]), optimizer="rmsprop"),
     "optimizer='rmsprop'"),
    (lambda: small_cnn().fit(np.ones((2, 5, 6, 2)), np.array([0, 1]), batch_size=0),
     "batch_size=0"),
    (lambda: CNN([conv()], input_shape=(4, 4, 1)).fit(np.ones((1, 4, 4, 1)), np.array([0])),
     r"CNN.fit: the output has shape \(2, 2, 2\); allowed: flat logits"),
    (lambda: CNN([conv()], input_shape=(4, 4, 1)).predict(np.ones((1, 4, 4, 1))),
     r"CNN.predict: the output has shape \(2, 2, 2\)"),
])
def test_errors(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()


def test_type_error():
    with pytest.raises(TypeError, match="layer 1: str is not a FloatConv2D, FloatDense, "
                                        "MaxPool2D, FloatAvgPool2D, FloatGlobalAvgPool2D, "
                                        "Flatten or FloatAdd layer"):
        CNN([FloatDense(np.ones((2, 2))), "relu"])
