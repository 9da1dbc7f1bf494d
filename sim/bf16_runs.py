"""Runs of bf16 programs on a device through its host port, for the Amaranth and cocotb test
benches: random bf16 MLPs and CNNs, a run that reads the output words back and decodes them with the
program (:meth:`~hwgen.compiler.program.Program.unpack_output`: bf16 values or fp32
scores), and the bit-for-bit comparison with :meth:`hwgen.nn.Bf16Network.forward`."""

import ml_dtypes
import numpy as np

from host.plan import execute_load_async, run_plans
from hwgen.memmap import Region
from hwgen.nn import CNN, MLP, Flatten, FloatConv2D, FloatDense, MaxPool2D, to_bf16
from hwgen.nn.bf16 import BF16_NAN

__all__ = ["bf16_cnn", "bf16_mlp", "bf16_rows", "differing_bits", "nan_act", "run_bf16"]


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


def _spread(rng, weight, bias, scale):
    """Spread ``weight`` over powers of two (some zero) and draw ``bias``, in place."""
    weight[:] *= scale * (rng.random(weight.shape) > 0.2) * 2.0 ** rng.integers(
        -12, 12, size=weight.shape)
    bias[:] = rng.normal(size=bias.shape) * scale


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
