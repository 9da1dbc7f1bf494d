"""bf16 convolutions past the first whose channels do not fill tiles of ``rows`` (issue 52):
the pass before each writes its input as the taps layout's element stream (a matrix pass
itself; a relayout pass after a pool, an add or a depthwise pass, or for left and right
padding), and the convolution walks it in the contract's tiles, so the programs run bit for
bit (vs :meth:`hwgen.nn.Bf16Network.forward`) on the interpreter; what still cannot is
refused, naming what is allowed."""

import numpy as np
import pytest
from support.bf16_programs import bf16_config, check_program, same_bits, wide

import hwgen
from hwgen.compiler import CompileError, codec
from hwgen.memmap import PassKind
from hwgen.nn import (
    CNN,
    INPUT,
    Flatten,
    FloatAdd,
    FloatAvgPool2D,
    FloatConv2D,
    FloatDense,
    MaxPool2D,
    Node,
    to_bf16,
)
from hwgen.nn.bf16 import bf16_array
from hwgen.passes.bf16_matrix import lanes_of_bits
from sim.interpreter import ProgramInterpreter


def _images(net, m, seed, *, scale=1.0):
    rng = np.random.default_rng(seed)
    x = wide(rng, m, *net.input_shape) * scale
    x[0] = 0.0
    return net.quantize_input(x)


def _conv(rng, kernel, c_in, c_out, **kwargs):
    return FloatConv2D(wide(rng, *kernel, c_in, c_out), wide(rng, c_out), **kwargs)


def _two_convs(seed, c, *, second=None, pool=None, size=(7, 6), dense=2):
    """A first convolution (3x3 of one channel to ``c``, padded), perhaps a pool, a second
    convolution of ``c`` channels (``second``: FloatConv2D's keywords and kernel), then a
    Flatten and a dense layer."""
    rng = np.random.default_rng(seed)
    second = {"kernel": (3, 3), **(second or {})}
    kernel = second.pop("kernel")
    layers = [_conv(rng, (3, 3), 1, c, padding=1, activation="identity")]
    layers += [pool] if pool is not None else []
    layers.append(_conv(rng, kernel, c, 4, **second))
    shape = CNN(layers, input_shape=(*size, 1)).forward(np.zeros((1, *size, 1))).shape
    layers += [Flatten(), FloatDense(wide(rng, int(np.prod(shape[1:])), dense), wide(rng, dense))]
    return CNN(layers, input_shape=(*size, 1))


def _streams(program):
    """``(kind of the pass writing a stream, whether its reader walks taps)`` of each."""
    d = program.descriptors
    return [(program.layers[i].kind, bool(d[i + 1]["geometry"]["taps"]))
            for i in range(len(d)) if d[i].get("dst_run")]


# (rows, cols), channels, the second convolution, a pool between: what writes the stream.
_CASES = {
    "matrix_writes": ((4, 4), 3, {}, None),
    "strided_two_tiles": ((4, 2), 3, {"stride": (2, 1), "kernel": (2, 3)}, None),
    "padded": ((4, 4), 3, {"padding": (1, 0, 2, 1)}, None),
    "after_max_pool": ((8, 8), 6, {"kernel": (2, 2)}, MaxPool2D(2, 1)),
    "five_on_eight": ((8, 4), 5, {"padding": 1, "stride": 2}, None),
    "two_on_four": ((4, 3), 2, {"kernel": (3, 2)}, MaxPool2D(2)),
    # More channels than rows, not a multiple: twelve on 8 lanes (a pixel past a word).
    "twelve_on_eight": ((8, 8), 12, {"padding": 1}, None),
    "five_on_four": ((4, 4), 5, {"kernel": (2, 3), "stride": 2}, None),
    "six_on_four_cols_two": ((4, 2), 6, {}, MaxPool2D(2, 1)),
}


@pytest.mark.parametrize("name", list(_CASES))
@pytest.mark.parametrize("output", ["raw", "bf16"])
def test_later_convolutions_of_fewer_channels_than_rows_run_bit_for_bit(name, output):
    (rows, cols), c, second, pool = _CASES[name]
    net = to_bf16(_two_convs(rows + cols + c, c, second=dict(second), pool=pool), rows=rows,
                  output=output)
    program, _ = check_program(net, bf16_config(rows, cols), _images(net, 3, seed=c),
                               batch=3)
    relayout = pool is not None or "padding" in second
    # The dense layer after the Flatten reads a stream too where its 4 channels are no tile.
    assert _streams(program) == [(PassKind.MATRIX, True)] * (1 + bool(4 % rows))
    assert len(program.layers) == 3 + (pool is not None) + relayout


def test_inf_and_nan_through_a_stream_run_bit_for_bit():
    net = to_bf16(_two_convs(1, 3), rows=4)
    x = _images(net, 3, seed=2, scale=1e33)
    hidden = np.asarray(net.forward_tensors(x)[net.nodes[0].name], np.float32)
    assert np.isinf(hidden).any()
    program, want = check_program(net, bf16_config(4, 4), x)
    assert _streams(program) and (np.isnan(want).any() or np.isinf(want).any())


def test_lenet5_runs_bit_for_bit_on_eight_rows():
    pytest.importorskip("torch")
    from hwgen.models import get
    from hwgen.nn import from_torch

    zoo = get("lenet5")
    net = to_bf16(from_torch(zoo.model(), input_shape=zoo.input_shape), rows=8)
    config = bf16_config(8, 8, depthwise=True, act_depth=4096, weight_depth=8192,
                         param_depth=256, prog_depth=64)
    program, _ = check_program(net, config, net.quantize_input(zoo.calibration(2)))
    # conv2 (six channels) reads a stream that a relayout pass writes after the average pool.
    assert _streams(program) == [(PassKind.MATRIX, True)]


def test_a_dense_layer_after_a_flatten_of_a_hidden_image_reads_a_stream():
    rng = np.random.default_rng(4)
    model = CNN([_conv(rng, (2, 2), 2, 3, activation="identity"), Flatten(),
                 FloatDense(wide(rng, 4 * 3 * 3, 2), wide(rng, 2))], input_shape=(5, 4, 2))
    net = to_bf16(model, rows=4)
    program, _ = check_program(net, bf16_config(4, 4), _images(net, 2, seed=1))
    assert _streams(program) == [(PassKind.MATRIX, True)]


def test_a_tensor_other_layers_read_gets_a_relayout_pass():
    # A residual block's skip, read by the convolution and the add, and the network's input,
    # read by two convolutions: each convolution reads a stream of its own.
    rng = np.random.default_rng(0)
    nodes = [Node("a", _conv(rng, (1, 1), 3, 3, activation="identity"), (INPUT,)),
             Node("b", _conv(rng, (3, 3), 3, 3, padding=1, activation="identity"), ("a",)),
             Node("sum", FloatAdd(), ("a", "b")),
             Node("c", _conv(rng, (2, 2), 3, 3, activation="identity"), (INPUT,)),
             Node("pool", FloatAvgPool2D(2, 1), ("sum",)),
             Node("pool_c", MaxPool2D(2, 1), ("c",)),
             Node("d", _conv(rng, (2, 2), 3, 3), ("pool",)),
             Node("both", FloatAdd(), ("d", "pool_c"))]
    net = to_bf16(CNN(nodes, input_shape=(5, 5, 3)), rows=4, output="bf16")
    program, _ = check_program(net, bf16_config(4, 4, depthwise=True, prog_depth=64),
                               _images(net, 2, seed=5))
    assert len(_streams(program)) == 3


def test_read_out_decodes_a_stream_as_the_layer_it_holds():
    net = to_bf16(_two_convs(2, 3), rows=4)
    program = hwgen.compile(net, bf16_config(4, 4), readout=True)
    x = _images(net, 2, seed=3)
    device = ProgramInterpreter(program.config, 0)
    device.load(program, x)
    device.run(len(x))
    spec = program.layer_outputs[0]
    assert (spec.runs, spec.pitch) == (7, program.descriptors[0]["dst_pitch_word"] * 4
                                       + program.descriptors[0]["dst_pitch_rem"])
    region, base, count = codec.output_words(spec, program.batch, len(x))
    lanes = codec.unpack_output(spec, program.batch,
                                [device.read(region, base + i) for i in range(count)], len(x))
    same_bits(bf16_array(lanes_of_bits(lanes, 16)),
              net.forward_tensors(x)[net.nodes[0].name])


def test_a_first_convolution_of_more_channels_than_rows_reads_a_stream():
    # Five channels on four rows: the input's taps layout is for fewer, so a relayout pass
    # writes the input as a stream.
    rng = np.random.default_rng(1)
    model = CNN([_conv(rng, (3, 3), 5, 2)], input_shape=(4, 4, 5))
    net = to_bf16(model, rows=4)
    program, _ = check_program(net, bf16_config(4, 4), _images(net, 2, seed=3))
    assert _streams(program) == [(PassKind.MATRIX, True)]


def test_what_cannot_read_a_stream_is_refused_naming_what_is_allowed():
    rng = np.random.default_rng(0)
    # Left padding past what the walk takes (15).
    wide_pad = to_bf16(CNN([_conv(rng, (1, 1), 1, 3, activation="identity"),
                            _conv(rng, (3, 3), 3, 2, padding=(0, 0, 16, 0))],
                           input_shape=(4, 4, 1)), rows=4)
    with pytest.raises(CompileError, match=r"layer 1 \(Bf16Conv2D: the matrix pass pads each "
                                           r"kernel position's 3 channels.*left and right "
                                           r"padding at most 15"):
        hwgen.compile(wide_pad, bf16_config(4, 4))
    # A kernel of more taps than max_k.
    three = to_bf16(_two_convs(0, 3), rows=4)
    with pytest.raises(CompileError, match=r"a kernel of at most max_k=16 taps"):
        hwgen.compile(three, bf16_config(4, 4, max_k=16))
    # A design that does not walk taps.
    with pytest.raises(CompileError, match=r"a design that walks taps \(spatial=True, "
                                           r"taps=True\)"):
        hwgen.compile(three, bf16_config(4, 4, taps=False))
