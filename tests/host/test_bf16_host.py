"""bf16 programs (issue 52) through the real host driver and byte protocol, on the in-process
device: the inputs as bf16 bit patterns (2 bytes an element), the fp32 scores (4 bytes) and
bf16 outputs back as floats, the classes ranked as floats (a NaN above +Inf), pools, and the
refusals (another dtype, Inf and NaN inputs, floats that are not bf16 values).

Every expectation comes from :meth:`hwgen.nn.Bf16Network.forward`; the classes' from a plain
Python sort of the reference's floats.
"""

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest

import hwgen
from host import Accelerator, AcceleratorPool, IncompatibleDevice
from hwgen.nn import CNN, MLP, Flatten, FloatConv2D, FloatDense, MaxPool2D, quantize, to_bf16
from hwgen.protocol import Features
from sim.inprocess import InProcessDevice

#: The device's optional commands: classes on the device; FETCH with the classes picked by
#: the host; words only (WRITE and READ), the host picking.
FEATURES = [Features.ALL, Features.PACKED, Features.NONE]


def _config(rows, cols, **kwargs):
    return hwgen.AcceleratorConfig(dtype="bf16", rows=rows, cols=cols, **kwargs)


def _wide(rng, *shape):
    """Normal values times powers of two over a wide range (fp32 sums round), some zero."""
    return (rng.normal(size=shape) * 2.0 ** rng.integers(-8, 8, size=shape)
            * (rng.random(shape) > 0.2))


def _mlp(sizes, seed, *, scale=1.0, last_bias=None):
    """A float MLP of wide weights; ``last_bias`` shifts every score (all negative for a
    large negative one, where integer order of the patterns is the reverse of the floats')."""
    mlp = MLP(sizes, seed=seed)
    rng = np.random.default_rng(seed)
    for weight, bias in mlp.layers:
        weight[:] = _wide(rng, *weight.shape) * scale
        bias[:] = rng.normal(size=bias.shape) * scale
    if last_bias is not None:
        mlp.layers[-1][1][:] += last_bias
    return mlp


def _cnn(rows, seed, *, last="dense"):
    """Conv2D (channels a multiple of ``rows``), MaxPool2D, then Flatten and Dense (``last=
    "dense"``) or a 1x1 Conv2D (``"conv"``: a spatial output)."""
    rng = np.random.default_rng(seed)
    layers = [FloatConv2D(_wide(rng, 3, 3, rows, 2 * rows), _wide(rng, 2 * rows), padding=1,
                          activation="relu"),
              MaxPool2D(2)]
    if last == "dense":
        layers += [Flatten(), FloatDense(_wide(rng, 3 * 2 * 2 * rows, 7), _wide(rng, 7))]
    else:
        layers += [FloatConv2D(_wide(rng, 1, 1, 2 * rows, 3), _wide(rng, 3))]
    return CNN(layers, input_shape=(6, 5, rows))


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    view = np.uint16 if want.dtype == ml_dtypes.bfloat16 else np.uint32
    np.testing.assert_array_equal(got.view(view), want.view(view))


def _ranked(scores, k):
    """The reference's classes: per sample, the indices of the ``k`` largest floats, a NaN
    above every number (+Inf too), ties to the lowest index."""
    out = []
    for sample in np.asarray(scores, dtype=np.float64).reshape(len(scores), -1):
        row = sample.tolist()
        out.append(sorted(range(len(row)), key=lambda j, r=row: (
            not math.isnan(r[j]), 0.0 if math.isnan(r[j]) else -r[j], j))[:k])
    return np.array(out, dtype=np.int64).reshape(len(scores), k)


def _pattern_order(scores, k):
    """The classes of the scores' bit patterns taken as signed integers (not the device's
    order: a test whose scores rank alike both ways would not tell them apart)."""
    scores = np.asarray(scores)
    patterns = scores.view(np.int16 if scores.dtype == ml_dtypes.bfloat16 else np.int32)
    patterns = patterns.astype(np.int64).reshape(len(scores), -1)
    return np.argsort(-patterns, axis=1, kind="stable")[:, :k]


def _open(config, program, **device):
    acc = Accelerator(InProcessDevice(config, **device), config=config)
    acc.load(program)
    return acc


@pytest.mark.parametrize("features", FEATURES)
@pytest.mark.parametrize(("rows", "cols", "sizes", "batch"), [
    (4, 4, [12, 9, 5], None), (3, 5, [7, 6, 4], 3), (2, 7, [9, 15, 8], 2)])
def test_mlp_scores_and_classes_equal_the_reference(rows, cols, sizes, batch, features):
    # Negative scores in half the samples: ranked as the integers of their patterns, the
    # most negative would win.
    net = to_bf16(_mlp(sizes, seed=rows * cols, last_bias=-40.0), rows=rows)
    config = _config(rows, cols)
    program = hwgen.compile(net, config, **({} if batch is None else {"batch": batch}))
    rng = np.random.default_rng(rows)
    x = net.quantize_input(_wide(rng, 7, sizes[0]))
    want = net.forward(x)
    k = sizes[-1] - 1
    assert (_ranked(want, k) != _pattern_order(want, k)).any()
    with _open(config, program, features=features) as acc:
        _same_bits(acc.infer(x), want)
        # float32 holding the same bf16 values is the same input.
        _same_bits(acc.infer(x.astype(np.float32)), want)
        np.testing.assert_array_equal(acc.infer(x, output="argmax"), _ranked(want, 1)[:, 0])
        np.testing.assert_array_equal(acc.infer(x, output=("top_k", k)), _ranked(want, k))
        assert acc.infer(x[:0]).shape == (0, sizes[-1])


def test_the_wire_carries_two_bytes_an_input_and_four_a_score():
    net = to_bf16(_mlp([10, 6, 5], seed=2), rows=2)
    config = _config(2, 4)
    with _open(config, hwgen.compile(net, config)) as acc:
        x = net.quantize_input(_wide(np.random.default_rng(0), 3, 10))
        _same_bits(acc.infer(x), net.forward(x))
        assert acc.counters().payload_bytes == 3 * 10 * 2 + 3 * 5 * 4
        acc.infer(x, output="argmax")
        assert acc.counters().payload_bytes == 3 * 10 * 2 + 3   # one index byte a sample


def test_a_saved_program_loads_from_its_file(tmp_path):
    net = to_bf16(_mlp([5, 4, 3], seed=8), rows=2)
    config = _config(2, 2)
    path = tmp_path / "bf16.npz"
    hwgen.compile(net, config).save(path)
    x = net.quantize_input(_wide(np.random.default_rng(8), 4, 5))
    with _open(config, path) as acc:
        _same_bits(acc.infer(x), net.forward(x))


@pytest.mark.parametrize("features", FEATURES)
def test_inf_and_nan_scores_rank_as_the_contract_says(features):
    # Products beyond fp32 give Inf, Inf - Inf NaN: the scores carry both, and the classes
    # put a NaN above +Inf.
    net = to_bf16(_mlp([6, 5, 6], seed=3, scale=1e16), rows=2)
    config = _config(2, 3)
    rng = np.random.default_rng(3)
    x = net.quantize_input(_wide(rng, 16, 6) * 10.0 ** np.linspace(-4, 10, 16)[:, None])
    want = net.forward(x)
    # Samples with a NaN beside +Inf, and -Inf beside finite negative scores.
    assert (np.isnan(want).any(axis=1) & (want == np.inf).any(axis=1)).any()
    assert ((want == -np.inf).any(axis=1) & (np.isfinite(want) & (want < 0)).any(axis=1)).any()
    assert (_ranked(want, 6) != _pattern_order(want, 6)).any()
    with _open(config, hwgen.compile(net, config), features=features) as acc:
        _same_bits(acc.infer(x), want)
        np.testing.assert_array_equal(acc.infer(x, output="argmax"), _ranked(want, 1)[:, 0])
        np.testing.assert_array_equal(acc.infer(x, output=("top_k", 6)), _ranked(want, 6))


@pytest.mark.parametrize("features", FEATURES)
def test_a_bf16_output_comes_back_as_bf16_values(features):
    net = to_bf16(_mlp([8, 7, 6], seed=4, last_bias=-3.0), rows=4, output="bf16")
    config = _config(4, 2)
    x = net.quantize_input(_wide(np.random.default_rng(4), 9, 8))
    want = net.forward(x)
    assert want.dtype == ml_dtypes.bfloat16
    assert (_ranked(want, 5) != _pattern_order(want, 5)).any()
    with _open(config, hwgen.compile(net, config), features=features) as acc:
        _same_bits(acc.infer(x), want)
        np.testing.assert_array_equal(acc.infer(x, output=("top_k", 5)), _ranked(want, 5))


@pytest.mark.parametrize("features", [Features.ALL, Features.NONE])
@pytest.mark.parametrize(("rows", "cols"), [(2, 3), (4, 4)])
def test_a_cnn_runs_bit_for_bit(rows, cols, features):
    net = to_bf16(_cnn(rows, seed=rows + cols), rows=rows)
    config = _config(rows, cols, prog_depth=32)
    x = net.quantize_input(_wide(np.random.default_rng(cols), 5, *net.input_shape))
    want = net.forward(x)
    with _open(config, hwgen.compile(net, config, batch=2), features=features) as acc:
        _same_bits(acc.infer(x), want)
        np.testing.assert_array_equal(acc.infer(x, output="argmax"), _ranked(want, 1)[:, 0])
        np.testing.assert_array_equal(acc.infer(x, output=("top_k", 4)), _ranked(want, 4))


@pytest.mark.parametrize("output", ["raw", "bf16"])
def test_a_spatial_output_comes_back_as_images(output):
    net = to_bf16(_cnn(2, seed=9, last="conv"), rows=2, output=output)
    config = _config(2, 3, prog_depth=32)
    x = net.quantize_input(_wide(np.random.default_rng(9), 3, *net.input_shape))
    want = net.forward(x)
    assert want.ndim == 4
    with _open(config, hwgen.compile(net, config)) as acc:
        _same_bits(acc.infer(x), want)
        with pytest.raises(ValueError, match="one row of scores per sample"):
            acc.infer(x, output="argmax")


@pytest.mark.parametrize("output", ["scores", "argmax", ("top_k", 3)])
def test_a_pool_of_bf16_devices_equals_one_device(output):
    net = to_bf16(_mlp([9, 8, 5], seed=6, last_bias=-1.0), rows=3)
    config = _config(3, 3)
    program = hwgen.compile(net, config, batch=2)
    x = net.quantize_input(_wide(np.random.default_rng(6), 23, 9))
    want = net.forward(x)
    with _open(config, program) as one:
        alone = one.infer(x, output=output)
    devices = [InProcessDevice(config, features=f) for f in FEATURES]
    with AcceleratorPool(devices, config=config) as pool:
        pool.load(program)
        pooled = pool.infer(x, output=output)
    if output == "scores":
        _same_bits(alone, want)
        _same_bits(pooled, want)
    else:
        k = 1 if output == "argmax" else output[1]
        ranked = _ranked(want, k)
        np.testing.assert_array_equal(alone, ranked[:, 0] if k == 1 else ranked)
        np.testing.assert_array_equal(pooled, alone)


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float32])
def test_inf_and_nan_inputs_are_refused_naming_where(bad, dtype):
    net = to_bf16(_mlp([4, 3], seed=0), rows=2)
    config = _config(2, 2)
    with _open(config, hwgen.compile(net, config)) as acc:
        x = np.array([[0.5, 1.0, -2.0, 0.25], [0.5, 1.0, bad, 0.25]], dtype=dtype)
        sent = acc.bytes_sent
        with pytest.raises(ValueError, match=r"infer: field 'x' is -?(inf|nan) at index "
                                             r"\(1, 2\); allowed: finite bf16 values"):
            acc.infer(x)
        assert acc.bytes_sent == sent   # refused before anything is sent


def test_inputs_that_are_not_bf16_values_are_refused():
    net = to_bf16(_mlp([4, 3], seed=0), rows=2)
    config = _config(2, 2)
    with _open(config, hwgen.compile(net, config)) as acc:
        with pytest.raises(ValueError, match=r"infer: field 'x' holds 0.1.* at index \(0, 3\), "
                                             "not a bf16 value"):
            acc.infer(np.array([[0.5, 1.0, -2.0, 0.1]], dtype=np.float32))
        for other in (np.float64, np.int16):
            with pytest.raises(ValueError, match=r"infer: field 'x' has dtype .*; allowed: "
                                                 r"ml_dtypes.bfloat16, or float32"):
                acc.infer(np.zeros((1, 4), dtype=other))
        with pytest.raises(ValueError, match=r"infer: x has shape \(1, 5\); allowed: "
                                             r"\(rows, 4\)"):
            acc.infer(np.zeros((1, 5), dtype=ml_dtypes.bfloat16))


def _int8_twin(config):
    """The int8 design of ``config``'s array and memories."""
    return dataclasses.replace(config, dtype="int8", in_bits=8, w_bits=8, acc_bits=24)


def test_a_bf16_program_on_an_int8_device_is_refused_naming_dtype():
    net = to_bf16(_mlp([4, 3], seed=0), rows=2)
    config = _config(2, 2)
    program = hwgen.compile(net, config)
    for device in (_int8_twin(config), hwgen.AcceleratorConfig(rows=2, cols=5)):
        acc = Accelerator(InProcessDevice(device))
        with pytest.raises(IncompatibleDevice, match=r"^the program is for dtype='bf16' and "
                                                     r"the device at inprocess://\d+ is "
                                                     r"dtype='int8': "):
            acc.load(program)
        acc.close()
        with pytest.raises(IncompatibleDevice, match=r"^the config is for dtype='bf16' and "
                                                     r"the device .* is dtype='int8'"):
            Accelerator(InProcessDevice(device), config=config)


def test_an_int8_program_on_a_bf16_device_is_refused_naming_dtype():
    config = _config(2, 2)
    int8 = _int8_twin(config)
    rng = np.random.default_rng(1)
    program = hwgen.compile(quantize(_mlp([4, 3], seed=1), rng.normal(size=(16, 4)),
                                     acc_bits=int8.acc_bits), int8)
    acc = Accelerator(InProcessDevice(config))
    with pytest.raises(IncompatibleDevice, match=r"^the program is for dtype='int8' and the "
                                                 r"device at inprocess://\d+ is dtype='bf16'"):
        acc.load(program)
    acc.close()
    with pytest.raises(IncompatibleDevice, match=r"^the config is for dtype='int8' and the "
                                                 r"device .* is dtype='bf16'"):
        Accelerator(InProcessDevice(config), config=int8)
