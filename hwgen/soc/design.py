"""What ``hwgen soc`` builds around: the accelerator's Wishbone top and its register map, and
the model compiled for it with a few test inputs and their reference classes."""

import dataclasses
import json
from pathlib import Path

import numpy as np

__all__ = ["OPTIONAL_UNITS", "Accelerator", "TestSet", "reference_classes", "units_used",
           "write_accelerator"]

#: The device's optional units, the most logic first. The firmware runs one model, so the
#: SoC's core carries only those the model uses: with all of them the 85F preset's core and
#: the CPU congested nextpnr's router; the MLP's core without them routes at 69.8 MHz
#: (docs/performance.md, "The LiteX SoC on the ULX3S-85F").
OPTIONAL_UNITS = ("residual", "spatial", "bounds")


@dataclasses.dataclass(frozen=True)
class Accelerator:
    """The Wishbone top's files: its Verilog, module name, register header and the bytes of
    address space it answers (the size of its region on the SoC's bus)."""

    verilog: Path
    module: str
    regs_header: Path
    size: int

    def instance(self):
        """Return ``(verilog, module, size)`` for :func:`hwgen.soc.litex_soc.add_accelerator`."""
        return (self.verilog, self.module, self.size)


@dataclasses.dataclass(frozen=True)
class TestSet:
    """Quantized test inputs, their classes by :mod:`hwgen.nn` and their true labels."""

    x: np.ndarray
    reference: np.ndarray
    labels: np.ndarray


def write_accelerator(config, out, implementation=None):
    """Write ``hwgen generate --top wishbone``'s files for ``config`` into ``out``, built with
    ``implementation`` (``None``: the plain netlist); return the :class:`Accelerator`."""
    from ..generate import write_design

    v_path, j_path = write_design(config, out, top="wishbone", implementation=implementation)
    name = json.loads(Path(j_path).read_text())["name"]
    regs = Path(out) / "hwgen_regs.h"
    size = json.loads((Path(out) / "hwgen_regs.json").read_text())["size"]
    return Accelerator(Path(v_path), name, regs, size)


def reference_classes(network, x):
    """Return each sample's class by :mod:`hwgen.nn` (the largest score, the first on a tie,
    as ``numpy.argmax``)."""
    scores = np.asarray(network.forward(x))
    return scores.reshape(len(x), -1).argmax(axis=1)


def units_used(compile_model, config, given=()):
    """Return ``(config, dropped)``: ``config`` without each of :data:`OPTIONAL_UNITS` that
    ``compile_model`` does without, and the names of those turned off.

    Parameters
    ----------
    compile_model : callable
        ``compile_model(config)`` compiles the model for ``config``, raising
        :class:`hwgen.compiler.CompileError` where the design lacks what it needs.
    config : hwgen.AcceleratorConfig
        The design with its units.
    given : collection of str
        Units the user set: they stay as they are.
    """
    from ..compiler import CompileError

    dropped = []
    for unit in OPTIONAL_UNITS:
        if unit in given or not getattr(config, unit):
            continue
        trial = dataclasses.replace(config, **{unit: False})
        try:
            compile_model(trial)
        except CompileError:
            continue
        config = trial
        dropped.append(unit)
    return config, dropped
