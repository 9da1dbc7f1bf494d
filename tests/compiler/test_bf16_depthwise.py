"""bf16 depthwise convolutions and average pools on the depthwise unit (issue 52): its pass
sums each channel's taps in ``(ky, kx)`` order in tiles of ``rows``, the contract's order, so
the programs run bit for bit (vs :meth:`hwgen.nn.Bf16Network.forward`) on the interpreter;
without the unit, and for other groupings, the compiler refuses them."""

import numpy as np
import pytest
from support.bf16_programs import bf16_config, check_program, wide

import hwgen
from hwgen.compiler import CompileError
from hwgen.memmap import PassKind
from hwgen.nn import (
    CNN,
    Flatten,
    FloatAvgPool2D,
    FloatConv2D,
    FloatDense,
    FloatGlobalAvgPool2D,
    to_bf16,
)


def _geometry(rng):
    """A random kernel ``(kh, kw)``, strides and padding ``(top, bottom, left, right)``."""
    kh, kw = (int(v) for v in rng.integers(1, 5, size=2))
    strides = tuple(int(v) for v in rng.integers(1, 3, size=2))
    pads = tuple(int(v) for v in rng.integers(0, 2, size=4))
    return (kh, kw), strides, pads


def _depthwise_cnn(seed, channels, *, scale=1.0):
    """A float CNN of ``channels``: a 1x1 convolution (so that the depthwise layers read a
    hidden image), a depthwise convolution of a random geometry, an average pool, a global
    average pool and a dense layer."""
    rng = np.random.default_rng(seed)
    (kh, kw), strides, pads = _geometry(rng)
    bounds = {"act_min": -1.5, "act_max": 2.0} if seed % 2 else {}
    return CNN([FloatConv2D(wide(rng, 1, 1, 3, channels), wide(rng, channels),
                            activation="relu"),
                FloatConv2D(wide(rng, kh, kw, 1, channels) * scale, wide(rng, channels),
                            stride=strides, padding=pads, groups=channels, **bounds),
                FloatAvgPool2D((2, 1), stride=(1, 2), activation="relu"),
                FloatGlobalAvgPool2D(act_max=0.8),
                Flatten(), FloatDense(wide(rng, channels, 3), wide(rng, 3))],
               input_shape=(9, 10, 3))


def _images(net, m, seed, *, scale=1.0, cancel=False):
    """``m`` images of :func:`wide` values, the first zero; with ``cancel`` a third of them
    ``+-2**30``, whose sums cancel in some orders and not in others (a small value added
    between two of them is lost), so that the order of the sums shows in bf16 outputs."""
    rng = np.random.default_rng(seed)
    x = wide(rng, m, *net.input_shape) * scale
    if cancel:
        big = rng.random(x.shape) < 1 / 3
        x[big] = rng.choice([-2.0 ** 30, 2.0 ** 30], size=int(big.sum()))
    x[0] = 0.0
    return net.quantize_input(x)


def _config(rows, cols, **kwargs):
    """A bf16 design with the depthwise unit, its delay lines enough for a tile of ``rows``
    taps of a narrow global pool's kernel (one kernel row each)."""
    return bf16_config(rows, cols, depthwise=True, dw_lines=8, prog_depth=64, **kwargs)


def _kinds(program):
    return [layer.kind for layer in program.layers]


_DESIGNS = [(2, 2, 3), (3, 4, 6), (4, 4, 4), (2, 8, 10), (8, 8, 5), (1, 3, 4), (4, 8, 9)]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("rows", "cols", "channels"), _DESIGNS)
def test_depthwise_convolutions_run_bit_for_bit(seed, rows, cols, channels):
    # The raw fp32 scores show every bit of the order of the sums.
    rng = np.random.default_rng(seed * 10 + rows)
    (kh, kw), strides, pads = _geometry(rng)
    model = CNN([FloatConv2D(wide(rng, kh, kw, 1, channels), wide(rng, channels),
                             stride=strides, padding=pads, groups=channels)],
                input_shape=(7, 8, channels))
    for output in ("raw", "bf16"):
        net = to_bf16(model, rows=rows, output=output)
        program, _ = check_program(net, _config(rows, cols), _images(net, 3, seed))
        assert _kinds(program) == [PassKind.DEPTHWISE]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("rows", "cols", "channels"), _DESIGNS)
def test_average_pools_run_bit_for_bit(seed, rows, cols, channels):
    rng = np.random.default_rng(seed * 10 + rows)
    size = tuple(int(v) for v in rng.integers(1, 5, size=2))
    stride = tuple(int(v) for v in rng.integers(1, 3, size=2))
    model = CNN([FloatAvgPool2D(size, stride, activation="relu", act_max=2.0 ** 20),
                 FloatGlobalAvgPool2D()], input_shape=(7, 8, channels))
    net = to_bf16(model, rows=rows, output="bf16")
    program, _ = check_program(net, _config(rows, cols),
                               _images(net, 3, seed, cancel=True))
    assert _kinds(program) == [PassKind.DEPTHWISE] * 2


def test_a_pool_over_its_whole_input_runs_bit_for_bit_whatever_its_stride():
    # KWS's shape of pool: its stride (its size, 17 x 2) past the geometry's 15 is never taken.
    model = CNN([FloatAvgPool2D((17, 2), activation="relu")], input_shape=(18, 3, 4))
    assert model.output_shape == (1, 1, 4)
    net = to_bf16(model, rows=4, output="bf16")
    program, _ = check_program(net, _config(4, 4), _images(net, 2, seed=7, cancel=True))
    assert _kinds(program) == [PassKind.DEPTHWISE]


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize(("rows", "cols", "channels"), _DESIGNS[:4])
def test_depthwise_layers_in_a_cnn_run_bit_for_bit(seed, rows, cols, channels):
    net = to_bf16(_depthwise_cnn(seed * 7 + rows, channels), rows=rows)
    program, _ = check_program(net, _config(rows, cols), _images(net, 3, seed))
    assert _kinds(program)[1:4] == [PassKind.DEPTHWISE] * 3


@pytest.mark.parametrize(("last", "output"), [(2, "raw"), (2, "bf16"), (3, "bf16"),
                                              (4, "bf16")])
def test_a_depthwise_layer_last_runs_bit_for_bit(last, output):
    # A depthwise convolution (raw fp32 scores or bf16), an average pool, a global pool last.
    model = CNN(_depthwise_cnn(5, 6).layers[:last], input_shape=(9, 10, 3))
    net = to_bf16(model, rows=2, output=output)
    program, _ = check_program(net, _config(2, 4), _images(net, 2, seed=1))
    assert _kinds(program)[-1] is PassKind.DEPTHWISE


def test_inf_and_nan_through_the_depthwise_unit_run_bit_for_bit():
    # Products beyond fp32 give Inf, a channel's Infs of both signs NaN; the pools average them.
    net = to_bf16(_depthwise_cnn(2, 4, scale=1e30), rows=4, output="bf16")
    x = _images(net, 4, seed=3, scale=1e10)
    check_program(net, _config(4, 4), x)
    tensors = [np.asarray(v, np.float32) for v in net.forward_tensors(x).values()]
    assert any(np.isinf(v).any() for v in tensors) and any(np.isnan(v).any() for v in tensors)


def test_depthwise_reductions_need_the_depthwise_unit():
    net = to_bf16(_depthwise_cnn(0, 4), rows=2)
    with pytest.raises(CompileError) as info:
        hwgen.compile(net, bf16_config(2, 4, prog_depth=64))
    message = str(info.value)
    for index, kind in ((1, "Bf16Conv2D"), (2, "Bf16AvgPool2D"), (3, "Bf16AvgPool2D")):
        assert (f"layer {index} ({kind}: a depthwise reduction, which needs the depthwise "
                "unit") in message, message
    assert "allowed: a design with depthwise=True" in message
    assert "layer 0" not in message and "layer 5" not in message


@pytest.mark.parametrize(("groups", "outputs"), [(2, 4), (4, 8)])
def test_other_grouped_convolutions_are_refused(groups, outputs):
    # Two channels a group, or two outputs a channel: no depthwise convolution, nor groups
    # of whole tiles of rows (tests/compiler/test_bf16_groups.py).
    rng = np.random.default_rng(groups)
    c_group = 4 // groups
    model = CNN([FloatConv2D(wide(rng, 3, 3, c_group, outputs), wide(rng, outputs),
                             groups=groups)], input_shape=(5, 5, 4))
    with pytest.raises(CompileError, match=r"layer 0 \(Bf16Conv2D: a grouped convolution of "
                                           r"\d input channels a group.*allowed: a group's "
                                           r"input channels a multiple of rows=4.*or a "
                                           r"depthwise convolution"):
        hwgen.compile(to_bf16(model, rows=4), bf16_config(4, 4, depthwise=True))


def test_a_depthwise_layer_the_unit_cannot_walk_is_refused_with_its_reason():
    rng = np.random.default_rng(1)
    model = CNN([FloatConv2D(wide(rng, 1, 1, 4, 4), wide(rng, 4)),
                 FloatConv2D(wide(rng, 3, 3, 1, 4), wide(rng, 4), groups=4)],
                input_shape=(5, 12, 4))
    config = bf16_config(4, 4, depthwise=True, dw_depth=4)
    with pytest.raises(CompileError, match=r"layer 1 \(Bf16Conv2D: a depthwise reduction the "
                                           r"depthwise unit cannot run: an output row spans "
                                           r"12 input pixels; the delay lines hold "
                                           r"dw_depth=4"):
        hwgen.compile(to_bf16(model, rows=4), config)


def test_the_zero_rule_and_the_canonical_nan_in_raw_depthwise_sums():
    # Products below 2**-126 are +0.0 (tiny values), Inf - Inf is the canonical NaN (huge
    # ones): the raw fp32 scores show both.
    rng = np.random.default_rng(4)
    for scale, want in ((2.0 ** -70, "zero"), (2.0 ** 100, "nan")):
        model = CNN([FloatConv2D(wide(rng, 3, 3, 1, 4) * scale, np.zeros(4), padding=1,
                                 groups=4)], input_shape=(5, 6, 4))
        net = to_bf16(model, rows=4, output="raw")
        x = _images(net, 2, seed=6, scale=scale)
        _, scores = check_program(net, _config(4, 4), x)
        assert (scores == 0).any() if want == "zero" else np.isnan(scores).any()
