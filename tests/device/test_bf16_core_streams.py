"""bf16 convolutions past the first whose channels are not a multiple of ``rows`` (issue 52) on
the bf16 core in the Amaranth simulator: the pass before each writes its input as the taps
layout's element stream (a matrix pass itself, or a relayout pass after a max pool or for
left and right padding), which the convolution walks in the contract's tiles; bit for bit
with Bf16Network.forward over ACT poisoned with NaN, the cycles the model's."""

import numpy as np
import pytest
from device.test_bf16_core import _check, _chunks, _spatial
from support import each_once

from hwgen.memmap import PassKind
from sim.bf16_runs import bf16_cnn, bf16_rows

# (rows, cols), layers (bf16_cnn's), dense outputs, input shape; what writes the stream.
_STREAMS = {
    # A max pool writes words: a relayout pass writes the stream (LeNet-5's shape).
    "pool_then_conv": ((4, 4), [((3, 1, 3), {}), (2,), ((3, 3, 3), {})], 3, (8, 8, 1)),
    # A matrix pass writes it itself, n=3 in two tiles of cols=2, over chunks.
    "conv_then_conv": ((4, 2), [((2, 2, 3), {"padding": 1, "relu": False}),
                                ((2, 3, 3), {"stride": (1, 2), "relu": False})], 0, (5, 6, 2)),
    # Five channels on four banks (a pixel's step a word and a bank) in three tiles of two.
    "five_on_four": ((4, 2), [((2, 1, 5), {"relu": False}), ((3, 5, 3), {})], 0, (5, 5, 1)),
    # Left and right padding: a relayout pass writes them as +0.0 elements.
    "padded": ((4, 4), [((1, 3, 3), {}), ((3, 3, 4), {"padding": 1, "stride": 2})], 2,
               (6, 5, 3)),
}


def _stream_writers(program):
    """The kinds of the passes that write a stream (``dst_run``) and whether their reader
    walks it as taps."""
    d = program.descriptors
    return [(program.layers[i].kind, bool(d[i + 1]["geometry"]["taps"]))
            for i in range(len(d)) if d[i].get("dst_run")]


# Each stream once by default, the output formats alternating (the other: ``-m slow``).
@pytest.mark.parametrize(("name", "output"), each_once(_STREAMS, ["raw", "bf16"]))
def test_convolutions_reading_streams_run_bit_for_bit(name, output):
    (rows, cols), layers, dense, in_shape = _STREAMS[name]
    net = bf16_cnn(layers, dense, in_shape, seed=rows + cols, rows=rows, output=output)
    config = _spatial(rows, cols, acc_depth=16)
    x = bf16_rows(net, 2, seed=4)
    program = _check(net, config, [x, bf16_rows(net, 1, seed=5)], batch=2)
    assert _stream_writers(program) == [(PassKind.MATRIX, True)]
    assert _chunks(program, len(x), config) > 1


def test_inf_and_nan_through_a_stream_run_bit_for_bit():
    # Products beyond fp32 in the first convolution: Inf and NaN in the stream's elements.
    (rows, cols), layers, dense, in_shape = _STREAMS["conv_then_conv"]
    net = bf16_cnn(layers, dense, in_shape, seed=3, rows=rows, scale=1e30)
    x = bf16_rows(net, 2, seed=6, scale=1e10)
    hidden = np.asarray(net.forward_tensors(x)[net.nodes[0].name], np.float32)
    assert np.isinf(hidden).any()
    _check(net, _spatial(rows, cols), [x])
