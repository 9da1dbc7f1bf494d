"""What the bf16 program tests share: a bf16 design, wide values, and a program run on the
interpreter compared bit for bit with :meth:`hwgen.nn.Bf16Network.forward`."""

import ml_dtypes
import numpy as np

import hwgen
from hwgen.nn import CNN, FloatConv2D
from sim.interpreter import run_on_interpreter

__all__ = ["bf16_config", "check_program", "grouped_cnn", "same_bits", "wide"]


def bf16_config(rows, cols, **kwargs):
    """Return a ``dtype="bf16"`` design of ``rows x cols``."""
    return hwgen.AcceleratorConfig(dtype="bf16", rows=rows, cols=cols, **kwargs)


def wide(rng, *shape):
    """Normal values times powers of two over a wide range (so that fp32 sums round), a
    fifth of them zero."""
    return (rng.normal(size=shape) * 2.0 ** rng.integers(-12, 12, size=shape)
            * (rng.random(shape) > 0.2))


def same_bits(got, want):
    """Assert that ``got`` has ``want``'s dtype, shape and bit patterns (NaN included)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    view = np.uint16 if want.dtype == ml_dtypes.bfloat16 else np.uint32
    np.testing.assert_array_equal(got.view(view), want.view(view))


def check_program(net, config, x, **kwargs):
    """Compile ``net`` for ``config`` (``kwargs`` to :func:`hwgen.compile`), run it on the
    interpreter on ``x`` and assert the reference's bits, as the interpreter's output words
    and as :meth:`~hwgen.compiler.Program.unpack_output` gives them; return ``(program,
    reference output)``."""
    program = hwgen.compile(net, config, **kwargs)
    want = net.forward(x)
    interpreted, unpacked = run_on_interpreter(program, x, seed=3, out_shape=net.output_shape,
                                               channels=net.output_shape[-1])
    same_bits(interpreted, want)
    same_bits(unpacked, want)
    return program, want


def grouped_cnn(seed, groups, c_group, outputs, kernel, *, stride=1, padding=0,
                in_shape=(6, 7), hot=None):
    """A float CNN: a 1x1 convolution of 3 channels to ``groups * c_group`` (so that the
    grouped layer reads a hidden image), then a convolution of ``groups`` groups of
    ``c_group`` input and ``outputs / groups`` output channels, no ReLU. With ``hot``, the 1x1
    convolution's channel ``hot`` is ``2**127`` times input channel 0: Inf of either sign (or
    +0.0) in that channel of the hidden image, where an input is not 0."""
    rng = np.random.default_rng(seed)
    channels = groups * c_group
    first = wide(rng, 1, 1, 3, channels)
    bias = wide(rng, channels)
    if hot is not None:
        first[..., hot] = 0.0
        first[0, 0, 0, hot], bias[hot] = 2.0 ** 127, 0.0
    return CNN([FloatConv2D(first, bias, activation="identity"),
                FloatConv2D(wide(rng, *kernel, c_group, outputs), wide(rng, outputs),
                            stride=stride, padding=padding, groups=groups,
                            activation="identity")],
               input_shape=(*in_shape, 3))
