"""The accelerator core of a design, chosen by its arithmetic (``config.dtype``)."""

from .accelerator import AcceleratorCore
from .bf16_core import BF16AcceleratorCore, check_bf16_core

__all__ = ["accelerator_core", "check_core"]


def check_core(config):
    """Raise ValueError, naming what, if ``config``'s core does not build it."""
    if config.dtype == "bf16":
        check_bf16_core(config)


def accelerator_core(config, implementation=None, **options):
    """Return the accelerator core for ``config``: :class:`AcceleratorCore` for ``"int8"``,
    :class:`BF16AcceleratorCore` for ``"bf16"`` (the same host port, memories and programs;
    ``options`` are the cores' keywords: ``pe_instances``, ``gate_idle``,
    ``host_in_registers``)."""
    core = BF16AcceleratorCore if config.dtype == "bf16" else AcceleratorCore
    return core(config, implementation, **options)
