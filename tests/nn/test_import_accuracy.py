"""Issue 31, item 2: models trained with BatchNorm keep their predictions when quantized.

On the bundled digits, a Conv-BN-ReLU-AvgPool CNN and a Linear-BN-LeakyReLU MLP are trained
with torch (seeded, one thread, a few epochs), imported (BatchNorm folded before calibration)
and quantized to int8; the integer network's top-1 class equals the float model's on at least
97 % of the test images. Skips with the reason when torch is absent.
"""

import numpy as np
import pytest

from hwgen.nn import from_torch, load_digits_images, quantize

AGREEMENT = 0.97
CALIBRATION = 300


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed")


@pytest.fixture(scope="module")
def digits():
    return load_digits_images()


def train(torch, net, x, y, *, epochs, seed):
    """Adam on cross-entropy, minibatches of 32 in a seeded order, on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
        optimizer = torch.optim.Adam(net.parameters(), lr=0.01)
        order = np.random.default_rng(seed)
        net.train()
        for _ in range(epochs):
            for batch in np.array_split(order.permutation(len(x)), len(x) // 32):
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(net(x[batch]), y[batch]).backward()
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return net.eval()


def agreement(torch, net, model, x_float, x_int8):
    """Share of samples whose int8 class is the torch model's float class."""
    with torch.no_grad():
        expected = net(torch.tensor(x_float, dtype=torch.float32)).argmax(1).numpy()
    return float(np.mean(model.predict(x_int8) == expected))


def test_conv_bn_relu_avgpool_cnn(torch, digits):
    nn = torch.nn
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.AvgPool2d(2),                                              # 8x8 -> 4x4
        nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    x_train, y_train, x_test, _ = digits
    nchw = x_train.transpose(0, 3, 1, 2)
    net = train(torch, net, nchw, y_train, epochs=12, seed=0)
    cnn = from_torch(net, input_shape=(8, 8, 1))
    assert not any(type(layer).__name__.startswith("BatchNorm") for layer in cnn.layers)
    q = quantize(cnn, x_train[:CALIBRATION])
    assert agreement(torch, net, q, x_test.transpose(0, 3, 1, 2), x_test) >= AGREEMENT


def test_linear_bn_leaky_mlp(torch, digits):
    nn = torch.nn
    torch.manual_seed(1)
    net = nn.Sequential(
        nn.Linear(64, 32), nn.BatchNorm1d(32), nn.LeakyReLU(0.1), nn.Dropout(0.1),
        nn.Linear(32, 16), nn.BatchNorm1d(16), nn.LeakyReLU(0.1),
        nn.Linear(16, 10), nn.Softmax(dim=1))
    x_train, y_train, x_test, _ = digits
    rows_train, rows_test = x_train.reshape(-1, 64), x_test.reshape(-1, 64)
    # Train on the logits (the Softmax is for inference), then evaluate the whole model.
    train(torch, net[:-1], rows_train, y_train, epochs=15, seed=1)
    net.eval()
    model = from_torch(net)
    assert model.output_function == "softmax"
    q = quantize(model, rows_train[:CALIBRATION])
    assert q.output_function == "softmax"
    assert agreement(torch, net, q, rows_test, rows_test) >= AGREEMENT
    # The host's probabilities follow torch's Softmax closely.
    with torch.no_grad():
        probs = net(torch.tensor(rows_test[:50], dtype=torch.float32)).numpy()
    got = q.probabilities(q.forward(q.quantize_input(rows_test[:50])))
    assert np.abs(got - probs).max() < 0.1
