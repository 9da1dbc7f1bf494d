"""The device: the accelerator's components, the systolic engine and its DSP primitives.

:class:`Device` (:mod:`hwgen.device.top`) is what a board runs: the accelerator behind the
link (:mod:`hwgen.link`).
"""

from ..protocol import DEFAULT_BAUD
from .top import LINKS, Device, Link

__all__ = ["DEFAULT_BAUD", "LINKS", "Device", "Link"]
