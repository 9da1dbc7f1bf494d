"""hwgen: systolic-array neural-network accelerators for FPGAs, in Amaranth HDL."""

from .config import AcceleratorConfig
from .toolchain import package_version

__all__ = ["AcceleratorConfig", "__version__", "compile"]

#: The installed distribution's version.
__version__ = package_version("hwgen")


def compile(network, config, **kwargs):
    """Compile a :class:`hwgen.nn.QuantizedNetwork` for ``config``; see :mod:`hwgen.compiler`."""
    from .compiler import compile_network

    return compile_network(network, config, **kwargs)
