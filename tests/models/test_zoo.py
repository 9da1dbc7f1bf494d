"""The zoo's definitions: registry, shapes, parameter and MAC counts, data and BatchNorm state.

The counts are checked three ways: the module's own (``count_params``, ``count_macs`` from a
forward pass), the figure each model records (its docstring cites where it comes from), and an
independent sum over the architecture written out here layer by layer.
"""

import itertools

import numpy as np
import pytest

from hwgen.models import MODELS, count_macs, count_params, get


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="PyTorch is not installed")


def _dense(widths):
    """(params, MACs) of a chain of Linear layers."""
    pairs = list(itertools.pairwise(widths))
    return sum(k * n + n for k, n in pairs), sum(k * n for k, n in pairs)


def _conv(h, w, c_in, c_out, kernel, *, groups=1):
    """(params, MACs) of a convolution with an ``h x w`` output and a ``kernel`` (KH, KW)."""
    kh, kw = kernel
    return kh * kw * c_in // groups * c_out + c_out, h * w * c_out * kh * kw * c_in // groups


def _total(*parts, bn=0):
    return sum(p for p, _ in parts) + 2 * bn, sum(m for _, m in parts)


def _kws():
    parts = [_conv(25, 5, 1, 64, (10, 4))]
    for _ in range(4):
        parts += [_conv(25, 5, 64, 64, (3, 3), groups=64), _conv(25, 5, 64, 64, (1, 1))]
    return _total(*parts, _dense([64, 12]), bn=64 * 9)


def _vww():
    size, c = 48, 8
    parts, bn = [_conv(48, 48, 3, 8, (3, 3))], 8
    for filters, stride in ((16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), (128, 1),
                            (128, 1), (128, 1), (128, 1), (128, 1), (256, 2), (256, 1)):
        size //= stride
        parts += [_conv(size, size, c, c, (3, 3), groups=c),
                  _conv(size, size, c, filters, (1, 1))]
        bn += c + filters
        c = filters
    return _total(*parts, _dense([256, 2]), bn=bn)


def _resnet8():
    k3, k1 = (3, 3), (1, 1)
    parts = [_conv(32, 32, 3, 16, k3), _conv(32, 32, 16, 16, k3), _conv(32, 32, 16, 16, k3),
             _conv(16, 16, 16, 32, k3), _conv(16, 16, 32, 32, k3), _conv(16, 16, 16, 32, k1),
             _conv(8, 8, 32, 64, k3), _conv(8, 8, 64, 64, k3), _conv(8, 8, 32, 64, k1)]
    return _total(*parts, _dense([64, 10]), bn=16 * 3 + 32 * 2 + 64 * 2)


#: (params, MACs) of each model, summed layer by layer from its architecture.
EXPECTED = {
    "ad": _total(_dense([640, 128, 128, 128, 128, 8, 128, 128, 128, 128, 640]), bn=8 * 128 + 8),
    "kws": _kws(),
    "vww": _vww(),
    "resnet8": _resnet8(),
    "lenet5": _total(_conv(28, 28, 1, 6, (5, 5)), _conv(10, 10, 6, 16, (5, 5)),
                     _dense([400, 120, 84, 10])),
    "tutorial_cnn": _total(_conv(28, 28, 1, 8, (3, 3)), _conv(14, 14, 8, 16, (3, 3)),
                           _dense([784, 10]), bn=8 + 16),
}

#: Output features of each model.
OUTPUTS = {"ad": 640, "kws": 12, "vww": 2, "resnet8": 10, "lenet5": 10, "tutorial_cnn": 10}


def test_registry_names_every_model_and_refuses_unknown_ones():
    assert list(MODELS) == ["ad", "kws", "vww", "resnet8", "lenet5", "tutorial_cnn"]
    assert [name for name, zoo in MODELS.items() if zoo.graph] == ["resnet8"]
    assert get("kws") is MODELS["kws"]
    with pytest.raises(KeyError, match=r"no model 'kws2'.*allowed: ad, kws, vww"):
        get("kws2")


def test_recorded_counts_are_the_architectures():
    for name, zoo in MODELS.items():
        assert (zoo.params, zoo.macs) == EXPECTED[name], name


def test_keras_totals():
    """The Keras reference's ``model.summary()`` totals: the trainable parameters and
    BatchNorm's moving means and variances (as many as its scales and shifts)."""
    moving = {"ad": 2064, "kws": 1152, "vww": 5472, "resnet8": 480}
    keras = {"ad": 269_992, "kws": 24_908, "vww": 221_794, "resnet8": 78_666}
    for name, total in keras.items():
        assert MODELS[name].params + moving[name] == total, name


@pytest.mark.parametrize("name", list(MODELS))
def test_module_shapes_and_counts(torch, name):
    zoo = get(name)
    module = zoo.model()
    assert not module.training
    x = torch.from_numpy(zoo.calibration(3, layout="nchw"))
    with torch.no_grad():
        y = module(x)
    assert tuple(y.shape) == (3, OUTPUTS[name])
    assert count_params(module) == zoo.params
    assert count_macs(torch, module, zoo.torch_input_shape) == zoo.macs
    assert isinstance(module, torch.nn.Sequential) != zoo.graph


@pytest.mark.parametrize("name", list(MODELS))
def test_batchnorm_statistics_are_the_data_seen(torch, name):
    """Every BatchNorm's running mean is the mean of what reaches it in the settling batches:
    not PyTorch's reset state (0 and 1)."""
    module = get(name).model()
    norms = [m for m in module.modules()
             if isinstance(m, torch.nn.BatchNorm1d | torch.nn.BatchNorm2d)]
    assert bool(norms) == (name not in ("lenet5",))
    for bn in norms:
        assert float(bn.running_mean.abs().max()) > 0
        assert not np.allclose(bn.running_var.numpy(), 1.0)
        assert bn.momentum == 0.1


def test_models_are_seeded(torch):
    zoo = get("tutorial_cnn")
    a, b, c = zoo.model(0), zoo.model(0), zoo.model(1)
    for (_, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(pa, pb)
    assert not torch.equal(a[0].weight, c[0].weight)


def test_calibration_shape_layout_and_seed():
    zoo = get("vww")
    x = zoo.calibration(5, seed=3)
    assert x.shape == (5, 96, 96, 3) and x.dtype == np.float32
    np.testing.assert_array_equal(zoo.calibration(5, seed=3, layout="nchw"),
                                  x.transpose(0, 3, 1, 2))
    assert not np.array_equal(zoo.calibration(5, seed=4), x)
    assert get("ad").calibration(2, layout="nchw").shape == (2, 640)
    assert zoo.torch_input_shape == (3, 96, 96) and get("ad").torch_input_shape == (640,)
    with pytest.raises(ValueError, match=r"n=0; allowed: an integer >= 1"):
        zoo.calibration(0)
    with pytest.raises(ValueError, match=r"layout='chw'; allowed: 'nhwc' or 'nchw'"):
        zoo.calibration(1, layout="chw")
