"""What the bf16 program tests share: a bf16 design, wide values, and a program run on the
interpreter compared bit for bit with :meth:`hwgen.nn.Bf16Network.forward`."""

import ml_dtypes
import numpy as np

import hwgen
from sim.interpreter import run_on_interpreter

__all__ = ["bf16_config", "check_program", "same_bits", "wide"]


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
