"""Runs of bf16 programs on a device through its host port, for the Amaranth and cocotb test
benches: random bf16 MLPs, CNNs and graphs (residual adds, depthwise convolutions, pools), bf16
MLPs and their inputs as JSON bit patterns (the cases a test draws and a bench runs), a run
that reads the output words back and decodes them with the program
(:meth:`~hwgen.compiler.program.Program.unpack_output`: bf16 values or fp32 scores), and the
bit-for-bit comparison with :meth:`hwgen.nn.Bf16Network.forward`."""

import ml_dtypes
import numpy as np

from host.plan import execute_load_async, run_plans
from hwgen.memmap import Region
from hwgen.nn import (
    CNN,
    INPUT,
    MLP,
    Flatten,
    FloatAdd,
    FloatAvgPool2D,
    FloatConv2D,
    FloatDense,
    FloatGlobalAvgPool2D,
    MaxPool2D,
    Node,
    to_bf16,
)
from hwgen.nn.bf16 import BF16_NAN
from hwgen.nn.bf16_layers import Bf16Dense
from hwgen.nn.bf16_network import Bf16Network

__all__ = ["bf16_cnn", "bf16_graph", "bf16_mlp", "bf16_rows", "dense_case", "differing_bits",
           "from_dense_case", "nan_act", "run_bf16"]


def bf16_mlp(sizes, seed, *, rows, output="raw", scale=1.0):
    """A bf16 MLP of ``sizes`` for an array of ``rows``: random weights over a wide range of
    powers of two (so that the fp32 sums round), some of them zero, random biases; a large
    ``scale`` makes products and sums overflow to Inf (and Inf - Inf NaN)."""
    mlp = MLP(sizes, seed=seed)
    rng = np.random.default_rng(seed)
    for weight, bias in mlp.layers:
        _spread(rng, weight, bias, scale)
    return to_bf16(mlp, rows=rows, output=output)


def bf16_cnn(layers, dense, in_shape, seed, *, rows, output="raw", scale=1.0):
    """A bf16 CNN on images of ``in_shape``: ``layers`` (each FloatConv2D.random's
    ``(arguments, keywords)``, or a MaxPool2D's ``(size,)`` or ``(size, stride)``), then a
    Flatten and a dense layer of ``dense`` outputs (none if 0); weights and biases as
    :func:`bf16_mlp`'s."""
    rng = np.random.default_rng(seed)
    made = [MaxPool2D(*spec) if isinstance(spec[0], int) else
            FloatConv2D.random(*spec[0], rng=rng, **spec[1]) for spec in layers]
    if dense:
        shape = CNN(made, input_shape=in_shape).forward(np.zeros((1, *in_shape))).shape
        made += [Flatten(), FloatDense.random(int(np.prod(shape[1:])), dense, relu=False,
                                              rng=rng)]
    for layer in made:
        if hasattr(layer, "weight"):
            _spread(rng, layer.weight, layer.bias, scale)
    return to_bf16(CNN(made, input_shape=in_shape), rows=rows, output=output)


def bf16_graph(seed, *, rows, in_shape=(6, 6, 4), channels=4, output="raw", scale=1.0):
    """A random bf16 graph of every layer kind on images of ``in_shape``: a convolution (random
    kernel, stride, padding), perhaps a max pool, a residual block (conv -> identity conv,
    + the skip, bounded or ReLU), a depthwise convolution, an average or a global average
    pool, then a Flatten and a dense layer; weights as :func:`bf16_mlp`'s (``scale``)."""
    rng = np.random.default_rng(seed)
    c, pick = channels, lambda *options: options[int(rng.integers(len(options)))]
    k = int(rng.integers(1, 4))
    layers = [("a", FloatConv2D.random((k, k), in_shape[2], c, stride=pick(1, 1, 2),
                                       padding=int(rng.integers(0, k)), rng=rng), INPUT)]
    if rng.random() < 0.5:
        layers.append(("pool", MaxPool2D(2, pick(1, 2)), "a"))
    skip = layers[-1][0]
    # The branch's last convolution without an activation: the add sees negative values.
    layers += [("b", FloatConv2D.random((3, 3), c, c, padding=1, rng=rng), skip),
               ("c", FloatConv2D.random((1, 1), c, c, relu=False, rng=rng), "b"),
               ("sum", pick(FloatAdd(activation="relu"), FloatAdd(act_min=-0.5, act_max=2.0),
                            FloatAdd()), ("c", skip))]
    k = pick((3, 3), (2, 3), (1, 2))
    layers.append(("dw", FloatConv2D.random(k, c, c, groups=c, stride=pick(1, 2),
                                            padding=int(rng.integers(0, 2)),
                                            relu=bool(rng.random() < 0.5), rng=rng), "sum"))
    small = min(_shape(layers, in_shape)[1:3]) < 2
    layers.append(("avg", FloatGlobalAvgPool2D() if small or rng.random() < 0.5 else
                   FloatAvgPool2D((2, 2), 1), "dw"))
    shape = _shape(layers, in_shape)
    dense = FloatDense.random(int(np.prod(shape[1:])), 3, relu=False, rng=rng)
    layers += [("flat", Flatten(), "avg"), ("out", dense, "flat")]
    for _, layer, _ in layers:
        if hasattr(layer, "weight"):
            _spread(rng, layer.weight, layer.bias, scale)
    return to_bf16(CNN([Node(*layer) for layer in layers], input_shape=in_shape), rows=rows,
                   output=output)


def _shape(layers, in_shape):
    """The output shape of a graph of ``layers`` (``Node`` arguments) on one image."""
    return CNN([Node(*layer) for layer in layers], input_shape=in_shape).forward(
        np.zeros((1, *in_shape))).shape


def _spread(rng, weight, bias, scale):
    """Spread ``weight`` over powers of two (some zero) and draw ``bias``, in place."""
    weight[:] *= scale * (rng.random(weight.shape) > 0.2) * 2.0 ** rng.integers(
        -12, 12, size=weight.shape)
    bias[:] = rng.normal(size=bias.shape) * scale


def dense_case(layers, x):
    """Return a bf16 MLP and its input as JSON data of bit patterns: ``layers`` of
    ``{"weight", "bias", "activation", "act_min", "act_max", "raw"}`` (uint16 weight patterns
    ``(K, N)``, uint32 bias patterns, fp32 bound patterns or None), ``x`` uint16 patterns
    ``(M, K)``; :func:`from_dense_case` reads it."""
    return {"layers": [{key: np.asarray(v).tolist() if key in ("weight", "bias") else v
                        for key, v in layer.items()} for layer in layers],
            "x": np.asarray(x).tolist()}


def from_dense_case(case, rows):
    """Return ``(net, x)``: the :class:`~hwgen.nn.Bf16Network` of :func:`dense_case`'s data
    for an array of ``rows``, and its input as ``ml_dtypes.bfloat16``."""
    nodes, shapes = [], {INPUT: (len(case["x"][0]),)}
    for i, layer in enumerate(case["layers"]):
        weight = np.array(layer["weight"], dtype=np.uint16).view(ml_dtypes.bfloat16)
        bounds = {key: None if layer[key] is None else
                  float(np.array(layer[key], dtype=np.uint32).view(np.float32))
                  for key in ("act_min", "act_max")}
        dense = Bf16Dense(weight=weight, raw=layer["raw"], activation=layer["activation"],
                          bias=np.array(layer["bias"], dtype=np.uint32).view(np.float32),
                          **bounds)
        nodes.append(Node(f"fc{i}", dense, INPUT if i == 0 else f"fc{i - 1}"))
        shapes[f"fc{i}"] = (weight.shape[1],)
    x = np.array(case["x"], dtype=np.uint16).view(ml_dtypes.bfloat16)
    return Bf16Network(nodes, rows=rows, tensor_shapes=shapes), x


def bf16_rows(net, m, seed, *, scale=1.0):
    """``m`` bf16 inputs of ``net`` (rows, or images) over a wide range of magnitudes, the
    first all zero."""
    rng = np.random.default_rng(seed + 100)
    shape = (m, *net.input_shape)
    x = rng.normal(size=shape) * 2.0 ** rng.integers(-8, 8, size=shape) * scale
    x[0] = 0.0
    return net.quantize_input(x)


def nan_act(config):
    """The write of the canonical bf16 NaN to every lane of every ACT word: stale lanes that a
    pass failed to set to +0.0 then make NaN of the next pass's padding products."""
    word = sum(BF16_NAN << (16 * b) for b in range(config.act_lanes))
    return Region.ACT, 0, [word] * config.act_depth


async def run_bf16(port, program, x, *, load=True, poison=True):
    """Load ``program`` (with ``load``) through ``port`` (``write``/``run``/``read`` awaited,
    as :mod:`host.plan`'s async executors drive), after NaN in every ACT lane (``poison``),
    write ``x``'s words, run, read the output words; return the decoded output."""
    if poison:
        await port.write(*nan_act(program.config))
    if load:
        await execute_load_async(port, program)
    (plan,) = run_plans(program, np.asarray(x))
    await port.write(*plan.write)
    await port.run(plan.batch)
    region, base, count = program.output_words(len(x))
    return program.unpack_output(await port.read(region, base, count), len(x))


def differing_bits(got, want):
    """Return a message naming the first element whose bit pattern differs (bf16 values or
    fp32 scores), or None if ``got`` and ``want`` are the same bits."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"got {got.dtype} {got.shape}, want {want.dtype} {want.shape}"
    view = np.uint16 if want.dtype == ml_dtypes.bfloat16 else np.uint32
    bad = np.argwhere(got.view(view) != want.view(view))
    if not len(bad):
        return None
    i = tuple(bad[0].tolist())
    return (f"{len(bad)} values differ, the first at {list(i)}: got {got[i]} "
            f"(0x{int(got.view(view)[i]):x}), want {want[i]} (0x{int(want.view(view)[i]):x})")
