"""hwgen: systolic-array neural-network accelerators for FPGAs, in Amaranth HDL."""

from .config import AcceleratorConfig

__all__ = ["AcceleratorConfig", "compile"]


def compile(network, config, **kwargs):
    """Compile a :class:`hwgen.nn.QuantizedNetwork` for ``config``; see :mod:`hwgen.compiler`."""
    from .compiler import compile_network

    return compile_network(network, config, **kwargs)
