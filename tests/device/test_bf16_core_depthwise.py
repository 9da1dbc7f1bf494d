"""The bf16 core's depthwise pass (issue 52) in the Amaranth simulator: depthwise convolutions
and average pools on the depthwise unit, bit for bit with Bf16Network.forward, the cycles the
model's."""

import numpy as np
import pytest
from device.test_bf16_core import _check, _spatial
from support.accelerator_sim import ECP5, ICE40, without_dsp
from support.bf16_programs import wide

from hwgen.implementation import Implementation, Registers
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
from sim.bf16_runs import bf16_rows


def _config(rows, cols, **kwargs):
    return _spatial(rows, cols, **{"depthwise": True, "dw_lines": 4, "prog_depth": 32,
                                   **kwargs})


def _depthwise_cnn(seed, channels, kernel, *, stride=1, padding=0, in_shape=(6, 7),
                   pool=True, scale=1.0):
    """A 1x1 convolution (the depthwise layers read a hidden image), a depthwise convolution,
    then optionally an average pool, a global average pool and a dense layer."""
    rng = np.random.default_rng(seed)
    kh, kw = kernel
    layers = [FloatConv2D(wide(rng, 1, 1, 2, channels), wide(rng, channels), activation="relu"),
              FloatConv2D(wide(rng, kh, kw, 1, channels) * scale, wide(rng, channels),
                          stride=stride, padding=padding, groups=channels)]
    if pool:
        layers += [FloatAvgPool2D((2, 1), stride=(1, 2)), FloatGlobalAvgPool2D(),
                   Flatten(), FloatDense(wide(rng, channels, 3), wide(rng, 3))]
    return CNN(layers, input_shape=(*in_shape, 2))


def _kinds(program):
    return [PassKind(d["kind"]) for d in program.descriptors]


@pytest.mark.parametrize(("design", "layer", "output"), [
    ((4, 4, 4), ((3, 3), 1, 1), "bf16"),        # three reduction tiles, padded
    ((4, 4, 6), ((3, 3), 2, 1), "raw"),         # stride 2, two output tiles (n past the tile)
    ((2, 2, 3), ((2, 3), (1, 2), (1, 0, 0, 1)), "bf16"),
    ((4, 4, 4), ((1, 3), 1, (0, 0, 1, 1)), "raw"),     # rows past the kernel
    ((2, 4, 4), ((1, 1), 2, 0), "bf16"),
    ((4, 8, 10), ((5, 4), (2, 1), 2), "raw"),     # seven tiles of taps, n past two tiles
])
def test_depthwise_convolutions_run_bit_for_bit(design, layer, output):
    # Output pixels over several chunks (acc_depth 16), each pass its taps' tile. One run: the
    # unit starting clean in a second is the boards' implementations' test below.
    (rows, cols, channels), (kernel, stride, padding) = design, layer
    net = to_bf16(_depthwise_cnn(rows + channels, channels, kernel, stride=stride,
                                 padding=padding, pool=False), rows=rows, output=output)
    program = _check(net, _config(rows, cols), [bf16_rows(net, 2, seed=3)])
    assert _kinds(program)[-1] is PassKind.DEPTHWISE


@pytest.mark.parametrize(("rows", "cols", "channels"), [(4, 4, 4), (2, 4, 6), (3, 3, 5)])
def test_average_pools_run_bit_for_bit(rows, cols, channels):
    # A depthwise convolution, a (2, 1) average pool of stride (1, 2) and a global average
    # pool (its kernel's taps over several tiles), then a dense layer.
    net = to_bf16(_depthwise_cnn(channels, channels, (2, 2), padding=1), rows=rows,
                  output="bf16")
    program = _check(net, _config(rows, cols, dw_lines=8), [bf16_rows(net, 2, seed=5)])
    assert _kinds(program).count(PassKind.DEPTHWISE) == 3


def test_inf_and_nan_through_the_depthwise_unit():
    # Products past fp32 give Inf, a channel's Infs of both signs NaN; the pools average them.
    net = to_bf16(_depthwise_cnn(2, 4, (3, 3), padding=1, scale=1e30), rows=4, output="raw")
    x = bf16_rows(net, 2, seed=7, scale=1e10)
    tensors = [np.asarray(v, np.float32) for v in net.forward_tensors(x).values()]
    assert any(np.isinf(v).any() for v in tensors) and any(np.isnan(v).any() for v in tensors)
    _check(net, _config(4, 4, dw_lines=8), [x])


@pytest.mark.parametrize(("size", "stride"), [((3, 3), 2), ((2, 3), 1)])
def test_average_pools_alone(size, stride):
    # A 1x1 convolution, an average pool, a global average pool (the network's last layer).
    rng = np.random.default_rng(sum(size))
    net = to_bf16(CNN([FloatConv2D(wide(rng, 1, 1, 2, 4), wide(rng, 4), activation="relu"),
                       FloatAvgPool2D(size, stride), FloatGlobalAvgPool2D()],
                      input_shape=(7, 6, 2)), rows=4, output="bf16")
    program = _check(net, _config(4, 4, dw_lines=8), [bf16_rows(net, 2, seed=8)])
    assert _kinds(program)[1:] == [PassKind.DEPTHWISE] * 2


@pytest.mark.parametrize(("implementation", "gate_idle"), [
    (without_dsp(ICE40), False), (without_dsp(ECP5), False),
    (Implementation(registers=Registers.READS), False), (Implementation(), True),
])
def test_depthwise_on_the_boards_implementations(implementation, gate_idle):
    # Registered reads stage the unit's words and the biases; the gated clock stops the unit
    # between runs too.
    net = to_bf16(_depthwise_cnn(5, 4, (3, 3), stride=2, padding=1), rows=4, output="raw")
    _check(net, _config(4, 4, dw_lines=8), [bf16_rows(net, 2, seed=9),
                                            bf16_rows(net, 1, seed=10)],
           implementation=implementation, gate_idle=gate_idle)
