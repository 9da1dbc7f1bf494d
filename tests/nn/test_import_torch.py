"""The PyTorch importer; every test skips with the reason when PyTorch is absent."""

import sys
from collections import OrderedDict

import numpy as np
import pytest

from hwgen.nn import (
    CNN,
    MLP,
    Flatten,
    FloatConv2D,
    MaxPool2D,
    UnsupportedModelError,
    from_torch,
    quantize,
)


@pytest.fixture
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed")


def run_torch(torch, model, x_nhwc):
    """The torch model's output for NHWC images (given to torch as NCHW)."""
    x = torch.tensor(np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2)), dtype=torch.float32)
    with torch.no_grad():
        out = model(x).numpy()
    return out.transpose(0, 2, 3, 1) if out.ndim == 4 else out


def images(shape, count=20, seed=0):
    return np.random.default_rng(seed).normal(size=(count, *shape))


# -- dense models (the MLP path) ----------------------------------------------------------------

def mlp_model(torch):
    nn = torch.nn
    torch.manual_seed(0)
    return nn.Sequential(OrderedDict([
        ("flat", nn.Flatten()),
        ("fc1", nn.Linear(64, 32)),
        ("act1", nn.ReLU()),
        ("drop", nn.Dropout(0.5)),
        ("block", nn.Sequential(nn.Linear(32, 16, bias=False), nn.Identity())),
        ("fc3", nn.Linear(16, 10)),
    ])).eval()


def test_mlp_outputs_match(torch):
    model = mlp_model(torch)
    mlp = from_torch(model)
    assert isinstance(mlp, MLP)
    assert mlp.sizes == [64, 32, 16, 10] and mlp.relu == [True, False, False]
    assert np.all(mlp.layers[1][1] == 0)  # Linear(bias=False) imports a zero bias
    x = np.random.default_rng(0).uniform(0.0, 1.0, size=(50, 64))
    expected = model(torch.tensor(x, dtype=torch.float32)).detach().numpy()
    np.testing.assert_allclose(mlp.forward(x), expected, rtol=1e-4, atol=1e-5)
    assert isinstance(from_torch(model, input_shape=(64,)), MLP)


def test_single_linear(torch):
    linear = torch.nn.Linear(3, 2)
    mlp = from_torch(linear)
    np.testing.assert_array_equal(mlp.layers[0][0], linear.weight.detach().double().numpy().T)
    assert mlp.relu == [False]


def test_empty_and_leading_relu(torch):
    with pytest.raises(UnsupportedModelError, match="no dense layer"):
        from_torch(torch.nn.Sequential())
    with pytest.raises(UnsupportedModelError, match=r"0 \(ReLU\): a ReLU before the first"):
        from_torch(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(2, 2)))
    with pytest.raises(UnsupportedModelError, match=r"1 \(Linear\): takes 5 inputs but the "
                                                    r"previous layer gives 4"):
        from_torch(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(5, 2)))


# -- convolutional models -----------------------------------------------------------------------

def cnn_model(torch):
    nn = torch.nn
    torch.manual_seed(1)
    return nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(2, 6, 3, padding=1)),
        ("act1", nn.ReLU()),
        ("pool1", nn.MaxPool2d(2)),
        ("block", nn.Sequential(
            nn.Conv2d(6, 8, (3, 3), stride=(2, 2), padding=(1, 1), bias=False),
            nn.MaxPool2d(2, stride=1),
            nn.ReLU(),  # after the pool: folded into the convolution, with which it commutes
        )),
        ("conv3", nn.Conv2d(8, 8, 1, padding="valid")),
        ("conv4", nn.Conv2d(8, 4, 3, padding="same")),
        ("drop", nn.Dropout(0.3)),
        ("flat", nn.Flatten()),
        ("fc1", nn.Linear(4 * 2 * 1, 12)),  # (10, 9) -> (5, 4) -> (3, 2) -> (2, 1)
        ("act2", nn.ReLU()),
        ("fc2", nn.Linear(12, 5)),
    ])).eval()


def test_cnn_outputs_match(torch):
    model = cnn_model(torch)
    cnn = from_torch(model, input_shape=(10, 9, 2))
    assert isinstance(cnn, CNN) and cnn.input_shape == (10, 9, 2)
    kinds = [type(layer).__name__ for layer in cnn.layers]
    assert kinds == ["FloatConv2D", "MaxPool2D", "FloatConv2D", "MaxPool2D", "FloatConv2D",
                     "FloatConv2D", "Flatten", "FloatDense", "FloatDense"]
    convs = [layer for layer in cnn.layers if isinstance(layer, FloatConv2D)]
    assert [(c.stride, c.padding, c.relu) for c in convs] == [
        (1, 1, True), (2, 1, True), (1, 0, False), (1, 1, False)]
    assert not convs[1].bias.any()
    x = images((10, 9, 2))
    np.testing.assert_allclose(cnn.forward(x), run_torch(torch, model, x), rtol=1e-5, atol=1e-5)


def test_flatten_order_is_converted(torch):
    # torch feature (c*H + y)*W + x must land on our feature (y*W + x)*C + c.
    nn = torch.nn
    linear = nn.Linear(3 * 2 * 4, 5)
    cnn = from_torch(nn.Sequential(nn.Flatten(), linear), input_shape=(2, 4, 3))
    assert [type(layer) for layer in cnn.layers[:1]] == [Flatten]
    ours = cnn.layers[1].weight
    theirs = linear.weight.detach().double().numpy().T
    for y, xx, c in np.ndindex(2, 4, 3):
        np.testing.assert_array_equal(ours[(y * 4 + xx) * 3 + c], theirs[(c * 2 + y) * 4 + xx])
    x = images((2, 4, 3))
    np.testing.assert_allclose(cnn.forward(x), run_torch(torch, nn.Sequential(nn.Flatten(),
                                                                              linear), x),
                               rtol=1e-5, atol=1e-5)


def test_spatial_output_and_one_pixel_flatten(torch):
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 3, 2), nn.ReLU(), nn.MaxPool2d(2)).eval()
    cnn = from_torch(model, input_shape=(5, 5, 1))
    assert cnn.output_shape == (2, 2, 3)
    x = images((5, 5, 1))
    np.testing.assert_allclose(cnn.forward(x), run_torch(torch, model, x), rtol=1e-5, atol=1e-5)
    # A flatten of a single pixel needs no following dense layer: both orders agree.
    one = nn.Sequential(nn.Conv2d(1, 3, 5), nn.Flatten()).eval()
    np.testing.assert_allclose(from_torch(one, input_shape=(5, 5, 1)).forward(x),
                               run_torch(torch, one, x), rtol=1e-5, atol=1e-5)


def test_quantized_import_tracks_torch(torch):
    model = cnn_model(torch)
    cnn = from_torch(model, input_shape=(10, 9, 2))
    calib, x = images((10, 9, 2), 200, seed=1), images((10, 9, 2), 50, seed=2)
    net = quantize(cnn, calib)
    expected = run_torch(torch, model, x)
    got = net.forward(net.quantize_input(x)) * net.output_scale
    assert np.abs(got - expected).max() < 0.1 * np.abs(expected).max()


def test_unsupported_lists_every_offender(torch):
    nn = torch.nn
    model = nn.Sequential(OrderedDict([
        ("lead", nn.ReLU()),
        ("dilated", nn.Conv2d(1, 4, 3, dilation=2)),
        ("grouped", nn.Conv2d(2, 4, 3, groups=2, padding_mode="reflect", padding=(1, 0))),
        ("ceil", nn.MaxPool2d(2, ceil_mode=True)),
        ("padded", nn.MaxPool2d(3, padding=1, dilation=2)),
        ("oblong", nn.MaxPool2d((2, 3), return_indices=True)),
        ("avg", nn.AvgPool2d(2, padding=1, ceil_mode=True, divisor_override=3)),
        ("squash", nn.Sigmoid()),
        ("flat0", nn.Flatten(start_dim=0)),
        ("gelu", nn.GELU()),
    ]))
    with pytest.raises(UnsupportedModelError) as info:
        from_torch(model, input_shape=(8, 8, 1))
    assert isinstance(info.value, ValueError)
    assert [(name, kind) for name, kind, _ in info.value.offenders] == [
        ("lead", "ReLU"), ("dilated", "Conv2d"), ("grouped", "Conv2d"), ("ceil", "MaxPool2d"),
        ("padded", "MaxPool2d"), ("oblong", "MaxPool2d"), ("avg", "AvgPool2d"),
        ("squash", "Sigmoid"), ("flat0", "Flatten"), ("gelu", "GELU")]
    message = str(info.value)
    for text in ("10 unsupported", "dilated (Conv2d): dilation=(2, 2); supported: 1",
                 "grouped (Conv2d): padding_mode='reflect'; supported: 'zeros'",
                 "ceil (MaxPool2d): ceil_mode=True", "padded (MaxPool2d): padding=1; supported: 0;"
                 " dilation=2; supported: 1", "oblong (MaxPool2d): kernel_size=(2, 3); supported:"
                 " the same on both axes", "return_indices=True", "avg (AvgPool2d): padding=1; "
                 "supported: 0; ceil_mode=True; supported: False (the output size rounds down); "
                 "divisor_override=3; supported: None", "squash (Sigmoid): supported only as the "
                 "model's last layer, but flat0 (Flatten) follows it", "flat0 (Flatten): "
                 "start_dim=0", "gelu (GELU): not a supported layer type (Linear, Conv2d, "
                 "ZeroPad2d before a Conv2d, BatchNorm1d"):
        assert text in message


def test_shape_offenders(torch):
    nn = torch.nn
    model = nn.Sequential(OrderedDict([
        ("conv", nn.Conv2d(1, 4, 3)),
        ("big", nn.Conv2d(4, 4, 5)),    # 4x4 after conv: a 5x5 kernel does not fit
    ]))
    with pytest.raises(UnsupportedModelError, match=r"big \(Conv2d\): field 'weight' has KH=5 "
                                                    r"but 'conv' gives \(4, 4, 4\)"):
        from_torch(model, input_shape=(6, 6, 1))
    for model, pattern in [
        (nn.Sequential(nn.Conv2d(1, 2, 3), nn.Linear(2, 2)),
         r"1 \(Linear\): takes a spatial input \(4, 4, 2\) \('0'\); supported: a Flatten"),
        (nn.Sequential(nn.Conv2d(3, 2, 3)), r"0 \(Conv2d\): field 'weight' has C_in=3 but "
                                            r"the input gives 1 channels"),
        (nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten()),
         r"1 \(Flatten\): flattens \(4, 4, 2\) in \(c, h, w\) order but no dense layer follows"),
        (nn.Sequential(nn.Conv2d(1, 2, 3), nn.MaxPool2d(5)), r"1 \(MaxPool2d\): field 'size' "
                                                             r"is 5"),
        (nn.Sequential(nn.Flatten(), nn.Linear(6 * 6, 2), nn.Conv2d(1, 2, 1)),
         r"2 \(Conv2d\): Conv2d needs a spatial input \(H, W, C\) but '1' gives \(2,\)"),
    ]:
        with pytest.raises(UnsupportedModelError, match=pattern):
            from_torch(model, input_shape=(6, 6, 1))


def test_input_shape_errors(torch):
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3))
    with pytest.raises(ValueError, match=r"from_torch: input_shape=None but 0 \(Conv2d\) needs "
                                         r"the image size; allowed: input_shape=\(H, W, C\)"):
        from_torch(model)
    with pytest.raises(ValueError, match=r"from_torch: field 'input_shape' is \(8, 8\); "
                                         r"allowed: \(H, W, C\)"):
        from_torch(model, input_shape=(8, 8))
    with pytest.raises(ValueError, match=r"input_shape=\(64,\) but 0 \(Conv2d\)"):
        from_torch(model, input_shape=(64,))


def test_missing_dependency_is_explained(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    with pytest.raises(ImportError, match=r"torch is needed.*pip install torch"):
        from_torch(object())


def test_pool_layer_is_shared_with_the_integer_side(torch):
    cnn = from_torch(torch.nn.Sequential(torch.nn.Conv2d(1, 1, 1), torch.nn.MaxPool2d(3, 2)),
                     input_shape=(7, 7, 1))
    pool = cnn.layers[1]
    assert isinstance(pool, MaxPool2D) and (pool.size, pool.stride) == (3, 2)
