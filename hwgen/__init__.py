"""hwgen: systolic-array neural-network accelerators for FPGAs, in Amaranth HDL."""

from .config import AcceleratorConfig
from .toolchain import package_version

__all__ = ["AcceleratorConfig", "__version__", "compile", "compile_for"]

#: The installed distribution's version.
__version__ = package_version("hwgen")


def compile(network, config, **kwargs):
    """Compile a :class:`hwgen.nn.QuantizedNetwork` (or, for a ``dtype="bf16"`` design, a
    :class:`hwgen.nn.Bf16Network`) for ``config``; see :mod:`hwgen.compiler`."""
    from .compiler import compile_network

    return compile_network(network, config, **kwargs)


def compile_for(model, config, calibration=None, **kwargs):
    """Quantize a float model with ``config``'s widths and compile it: ``(network, program)``.

    ``net, program = hwgen.compile_for(from_onnx("model.onnx"), config, x_calib)``; see
    :func:`hwgen.compiler.compile_for`.
    """
    from .compiler import compile_for as _compile_for

    return _compile_for(model, config, calibration, **kwargs)
