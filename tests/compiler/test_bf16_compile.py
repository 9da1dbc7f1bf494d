"""bf16 programs (issue 52): a Bf16Network compiled for a dtype="bf16" design and run on the
program interpreter gives Bf16Network.forward's bits; what the bf16 compiler refuses."""

import ml_dtypes
import numpy as np
import pytest
from support import COMPILER_CONFIGS, run_on_interpreter, small_dense_network
from support.bf16_programs import bf16_config as _config
from support.bf16_programs import check_program as _check
from support.bf16_programs import same_bits as _same_bits
from support.bf16_programs import wide as _wide

import hwgen
from hwgen.compiler import CompileError
from hwgen.nn import (
    CNN,
    INPUT,
    MLP,
    Flatten,
    FloatAdd,
    FloatAvgPool2D,
    FloatConv2D,
    FloatDense,
    MaxPool2D,
    Node,
    to_bf16,
)
from hwgen.nn.bf16 import round_to_bf16, round_to_fp32
from hwgen.nn.bf16_layers import Bf16Dense
from hwgen.nn.bf16_network import Bf16Network


def _mlp(sizes, seed, *, scale=1.0):
    """A float MLP with random biases and some zero weights (to_bf16 flushes them to +0.0)."""
    mlp = MLP(sizes, seed=seed)
    rng = np.random.default_rng(seed)
    for weight, bias in mlp.layers:
        # Powers of two over a wide range, so that fp32 sums round.
        weight[:] *= scale * (rng.random(weight.shape) > 0.2) * 2.0 ** rng.integers(
            -12, 12, size=weight.shape)
        bias[:] = rng.normal(size=bias.shape) * scale
    return mlp


def _inputs(net, m, seed, *, scale=1.0):
    """``m`` bf16 rows of :func:`_wide` values, one row of zeros."""
    rng = np.random.default_rng(seed + 100)
    x = _wide(rng, m, net.input_shape[0]) * scale
    x[0] = 0.0
    return net.quantize_input(x)


@pytest.mark.parametrize(("rows", "cols", "sizes"), [
    (1, 1, [3, 2, 2]), (1, 8, [5, 9, 3]), (8, 1, [11, 4, 2]), (3, 5, [7, 6, 4]),
    (5, 3, [13, 8, 7, 5]), (8, 8, [20, 17, 10]), (2, 7, [9, 15, 8]), (4, 4, [4, 4, 4]),
])
@pytest.mark.parametrize("output", ["raw", "bf16"])
def test_mlps_run_bit_for_bit(rows, cols, sizes, output):
    net = to_bf16(_mlp(sizes, seed=rows * 10 + cols), rows=rows, output=output)
    config = _config(rows, cols)
    program, want = _check(net, config, _inputs(net, 6, seed=rows + cols), batch=8)
    assert want.dtype == (np.float32 if output == "raw" else ml_dtypes.bfloat16)
    assert program.output.kind == ("raw" if output == "raw" else "requant")
    # A smaller run of the same program, and the largest batch by default.
    _check(net, config, _inputs(net, 1, seed=7))


def test_overflow_inf_and_nan_inside_the_datapath_run_bit_for_bit():
    # Products beyond fp32 give Inf, Inf - Inf gives NaN: the scores and the hidden values
    # carry them as the contract says (a hidden NaN meets the next layer's zero weights too).
    net = to_bf16(_mlp([6, 5, 4], seed=3, scale=1e30), rows=2, output="raw")
    x = _inputs(net, 4, seed=3, scale=1e10)
    _, want = _check(net, _config(2, 3), x)
    assert np.isinf(want).any() and np.isnan(want).any()


def _dense_net(layers, k, rows):
    nodes = [Node(f"fc{i}", layer, INPUT if i == 0 else f"fc{i - 1}")
             for i, layer in enumerate(layers)]
    shapes = {INPUT: (k,), **{f"fc{i}": (layer.weight.shape[1],)
                              for i, layer in enumerate(layers)}}
    return Bf16Network(nodes, rows=rows, tensor_shapes=shapes)


def _dense(k, n, seed, **finish):
    rng = np.random.default_rng(seed)
    return Bf16Dense(weight=round_to_bf16(rng.normal(size=(k, n))),
                     bias=round_to_fp32(rng.normal(size=n)), **finish)


@pytest.mark.parametrize("finish", [
    {"activation": "identity", "act_min": -0.3, "act_max": 0.7},
    {"activation": "relu", "act_max": 0.45},
    {"activation": "relu", "act_min": 0.1},
    {"activation": "relu", "act_min": -2.0, "act_max": 1.3},
    {"activation": "identity", "act_max": -0.2},
])
def test_bounds_not_bf16_values_clamp_as_the_reference(finish):
    # Bounds that are not bf16 values: the descriptor holds them rounded to bf16, which gives
    # the same bits (rounding is monotone).
    bounds = {name: float(round_to_fp32(v)) for name, v in finish.items() if name != "activation"}
    layers = [_dense(9, 6, 1, activation=finish["activation"], **bounds),
              _dense(6, 5, 2, activation="relu"), _dense(5, 3, 3, raw=True)]
    net = _dense_net(layers, 9, rows=4)
    _check(net, _config(4, 3), _inputs(net, 5, seed=1))
    # Each hidden layer's output too, as the last layer of a shorter network.
    short = _dense_net(layers[:1], 9, rows=4)
    _check(short, _config(4, 3), _inputs(short, 5, seed=1))


def test_quantize_input_and_pack_input_refuse_inf_and_nan():
    net = to_bf16(_mlp([3, 2], seed=0), rows=2)
    program = hwgen.compile(net, _config(2, 2))
    for bad in (np.inf, -np.inf, np.nan, 1e39):
        with pytest.raises(ValueError, match=r"quantize_input: field 'x'.*at index \(0, 1\)"):
            net.quantize_input(np.array([[0.5, bad, 1.0]]))
    x = np.array([[0.5, np.inf, 1.0]], dtype=ml_dtypes.bfloat16)
    with pytest.raises(ValueError, match=r"pack_input: field 'x' is inf at index \(0, 1\)"):
        program.pack_input(x)


def test_a_bf16_network_on_an_int8_design_is_refused():
    net = to_bf16(_mlp([3, 2], seed=0), rows=8)
    with pytest.raises(CompileError, match=r"Bf16Network \(bf16\) and the design has "
                                           r"dtype='int8'; allowed: a network for dtype='int8'"):
        hwgen.compile(net, hwgen.AcceleratorConfig())


def test_an_int8_network_on_a_bf16_design_is_refused():
    config = COMPILER_CONFIGS["2x3"]
    net = small_dense_network(config, (5, 4), last_raw=True, acc_bits=24, seed=4)
    with pytest.raises(CompileError, match=r"QuantizedNetwork \(int8\) and the design has "
                                           r"dtype='bf16'.*to_bf16"):
        hwgen.compile(net, _config(2, 3))


def test_other_rows_are_refused_naming_the_order_of_the_sums():
    net = to_bf16(_mlp([3, 2], seed=0), rows=4)
    with pytest.raises(CompileError, match=r"tiles of rows=4 and the design has rows=8.*"
                                           r"to_bf16\(model, rows=8\)"):
        hwgen.compile(net, _config(8, 8))


def _cnn(seed, rows):
    """A float CNN whose reductions the matrix pass sums in the contract's order: a padded,
    strided 3x3 convolution of ``rows`` channels, a max pool, 1x1 convolutions of any
    channels, flatten (of ``rows`` channels) and dense."""
    rng = np.random.default_rng(seed)
    return CNN([FloatConv2D(_wide(rng, 3, 3, rows, rows), _wide(rng, rows), stride=(1, 2),
                            padding=(1, 1, 1, 0), activation="relu", act_max=1.5),
                MaxPool2D(2),
                FloatConv2D(_wide(rng, 1, 1, rows, 5), _wide(rng, 5), activation="relu"),
                FloatConv2D(_wide(rng, 1, 1, 5, rows), _wide(rng, rows), act_min=-0.7),
                Flatten(),
                FloatDense(_wide(rng, 4 * 2 * rows, 3), _wide(rng, 3))],
               input_shape=(9, 10, rows))


@pytest.mark.parametrize(("rows", "cols"), [(3, 5), (4, 4), (8, 2), (2, 8), (1, 3)])
@pytest.mark.parametrize("output", ["raw", "bf16"])
def test_cnns_run_bit_for_bit(rows, cols, output):
    net = to_bf16(_cnn(rows + cols, rows), rows=rows, output=output)
    rng = np.random.default_rng(rows)
    x = _wide(rng, 3, *net.input_shape)
    x[0] = 0.0
    _check(net, _config(rows, cols, prog_depth=32), net.quantize_input(x), batch=4)


def test_reductions_in_another_order_than_the_contract_are_all_listed():
    rng = np.random.default_rng(0)
    model = CNN([FloatConv2D(_wide(rng, 3, 3, 3, 4), _wide(rng, 4), padding=1),
                 FloatConv2D(_wide(rng, 3, 3, 1, 4), _wide(rng, 4), padding=1, groups=4),
                 FloatAvgPool2D(2, 1),
                 FloatConv2D(_wide(rng, 1, 1, 4, 3), _wide(rng, 3)),
                 Flatten(),
                 FloatDense(_wide(rng, 75, 2), _wide(rng, 2))], input_shape=(6, 6, 3))
    # (A design that walks taps runs layers 0 and 5: test_bf16_streams.)
    with pytest.raises(CompileError) as info:
        hwgen.compile(to_bf16(model, rows=2), _config(2, 2, taps=False))
    message = str(info.value)
    for fragment in ("layer 0 (Bf16Conv2D: the matrix pass pads each kernel position's 3 "
                     "channels to tiles of rows=2",
                     "layer 1 (Bf16Conv2D: a depthwise reduction, which needs the depthwise unit",
                     "layer 2 (Bf16AvgPool2D: a depthwise", "layer 5 (Bf16Dense: the matrix "
                     "pass pads each kernel position's 3 channels"):
        assert fragment in message, message
    assert "layer 3" not in message and "layer 4" not in message


def test_a_spatial_output_and_a_max_pool_last_run_bit_for_bit():
    rng = np.random.default_rng(5)
    layers = [FloatConv2D(_wide(rng, 2, 2, 3, 5), _wide(rng, 5), activation="relu"),
              MaxPool2D(2), FloatConv2D(_wide(rng, 1, 1, 5, 4), _wide(rng, 4))]
    for output in ("raw", "bf16"):
        net = to_bf16(CNN(layers, input_shape=(7, 6, 3)), rows=3, output=output)
        _check(net, _config(3, 4), net.quantize_input(_wide(rng, 2, 7, 6, 3)))
    pool_last = to_bf16(CNN(layers[:2], input_shape=(7, 6, 3)), rows=3, output="bf16")
    _check(pool_last, _config(3, 4), pool_last.quantize_input(_wide(rng, 2, 7, 6, 3)))


def _residual(seed, *, image, c=3):
    """A float graph with two residual adds of ``c`` channels, over images (convolutions) or
    rows (dense)."""
    rng = np.random.default_rng(seed)
    if image:
        def layer(**kw):
            return FloatConv2D(_wide(rng, 3, 3, c, c), _wide(rng, c), padding=1, **kw)
        tail = [Node("flat", Flatten(), "sum2"),
                Node("out", FloatDense(_wide(rng, 5 * 4 * c, 4), _wide(rng, 4)), "flat")]
    else:
        def layer(**kw):
            return FloatDense(_wide(rng, c, c), _wide(rng, c), **kw)
        tail = [Node("out", FloatDense(_wide(rng, c, 4), _wide(rng, 4)), "sum2")]
    nodes = [Node("a", layer(activation="relu"), INPUT), Node("b", layer(), "a"),
             Node("sum", FloatAdd(activation="relu", act_max=1.2), ("a", "b")),
             Node("c", layer(activation="relu"), "sum"),
             Node("sum2", FloatAdd(act_min=-0.4), ("c", "sum")), *tail]
    return CNN(nodes, input_shape=(5, 4, c) if image else (c,))


@pytest.mark.parametrize("image", [False, True])
@pytest.mark.parametrize(("rows", "cols"), [(2, 3), (4, 4), (3, 1)])
def test_residual_adds_run_bit_for_bit(rows, cols, image):
    net = to_bf16(_residual(rows * cols, image=image, c=rows if image else 3), rows=rows)
    rng = np.random.default_rng(cols)
    x = net.quantize_input(_wide(rng, 3, *net.input_shape))
    _check(net, _config(rows, cols, prog_depth=32), x)


def test_adds_need_the_adder():
    net = to_bf16(_residual(0, image=False), rows=2)
    with pytest.raises(CompileError, match=r"not: layer 2 \('sum'\) \(Bf16Add: the design has "
                                           r"no adder, residual=False\), layer 4 \('sum2'\)"):
        hwgen.compile(net, _config(2, 2, residual=False))


def test_spatial_layers_need_a_spatial_design():
    net = to_bf16(_cnn(0, 2), rows=4)
    with pytest.raises(CompileError, match=r"layer 0 \(Bf16Conv2D: walks images, and the "
                                           r"design has spatial=False\)"):
        hwgen.compile(net, _config(4, 4, spatial=False))


def test_readout_places_every_layer_in_its_own_area():
    """A read-out program keeps each layer's bf16 values in an area of its own, as 16-bit
    lanes (the host decodes them as bf16), the raw last layer's as 32-bit scores."""
    net = to_bf16(_mlp([3, 5, 4, 2], seed=0), rows=2)
    program = hwgen.compile(net, _config(2, 2), readout=True)
    hidden = program.layer_outputs[:-1]
    assert [spec.features for spec in hidden] == [5, 4]
    assert {spec.lane_bits for spec in hidden} == {16}
    assert program.layer_outputs[-1].lane_bits == 32
    assert hidden[0].base != hidden[1].base


def test_a_saved_program_loads_and_runs_the_same(tmp_path):
    net = to_bf16(_mlp([5, 6, 3], seed=1), rows=4)
    program = hwgen.compile(net, _config(4, 4))
    program.save(tmp_path / "p.npz")
    loaded = type(program).load(tmp_path / "p.npz")
    assert loaded == program and loaded.config.dtype == "bf16"
    x = _inputs(net, 3, seed=2)
    _same_bits(run_on_interpreter(loaded, x)[1], net.forward(x))


def test_inf_and_nan_through_convolutions_pools_and_adds_run_bit_for_bit():
    # Overflowing products make Inf and NaN in hidden images: the max pool keeps a window's
    # NaN, the add makes Inf - Inf, the padding lanes stay +0.0.
    net = to_bf16(_residual(2, image=True, c=2), rows=2, output="bf16")
    big = to_bf16(CNN([FloatConv2D(_wide(np.random.default_rng(1), 3, 3, 2, 2) * 1e30,
                                   np.ones(2), padding=1), MaxPool2D(2)],
                      input_shape=(5, 4, 2)), rows=2, output="bf16")
    rng = np.random.default_rng(9)
    tensors = []
    for network in (net, big):
        x = network.quantize_input(_wide(rng, 3, *network.input_shape) * 1e30)
        _check(network, _config(2, 2, prog_depth=32), x)
        tensors += [np.asarray(v, np.float32) for v in network.forward_tensors(x).values()]
    assert any(np.isinf(v).any() for v in tensors) and any(np.isnan(v).any() for v in tensors)


def test_compile_for_rounds_a_float_model_on_a_bf16_design():
    model = _mlp([6, 5, 3], seed=4)
    config = _config(2, 4)
    for output, dtype in (("raw", np.float32), ("requant", ml_dtypes.bfloat16)):
        net, program = hwgen.compile_for(model, config, output=output)
        assert net.rows == 2 and net.forward(_inputs(net, 2, seed=0)).dtype == dtype
        _check(net, config, _inputs(net, 4, seed=1))
        assert program == hwgen.compile(net, config)
