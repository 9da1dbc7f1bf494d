"""Bitstreams for real boards with the open toolchain from PyPI.

``hwgen build --board NAME`` wraps :class:`hwgen.device.Device` in a board top, checks that the
design fits before synthesis, runs Yosys, nextpnr and the bitstream packer from the YoWASP
packages through the board's ``amaranth-boards`` platform, and writes the bitstream with
``report.json`` and ``report.md`` (resources, Fmax, tools, times). One module per concept:

- :mod:`~hwgen.boards.catalog`: the boards (:data:`BOARDS`, :class:`Board`, :class:`Family`),
  their presets and the implementation each family builds;
- :mod:`~hwgen.boards.pll`: exact PLL settings, the clock plan, the link's clock, the UART
  divisor;
- :mod:`~hwgen.boards.baud`: the link's baud rate: the check against the receivers' tolerance
  (:class:`BaudError`), the clock the UART runs from, the bridge's rates and the default;
- :mod:`~hwgen.boards.tops`: the board tops (:class:`BoardTop`, :class:`ArrayTop`,
  :class:`BF16ArrayTop`): pins, LEDs,
  the PLL instances;
- :mod:`~hwgen.boards.fit`: the resource model and the fit checks (:class:`FitError`);
- :mod:`~hwgen.boards.config`: the configuration a board builds (preset, ``--config``, options);
- :mod:`~hwgen.boards.flow`: the build itself (the tools, their progress, the steps);
- :mod:`~hwgen.boards.yosys`: Yosys's script lines, options and log;
- :mod:`~hwgen.boards.nextpnr`: nextpnr's log (device use, timing, phases, the router's arcs);
- :mod:`~hwgen.boards.fold`: the pass that moves read registers into the ECP5's DP16KDs;
- :mod:`~hwgen.boards.report`: ``report.json`` and ``report.md``.
"""

from .baud import BaudError, default_baud, link_plan, uart_divisor
from .catalog import BOARDS, Board, Family
from .config import board_config, named_design
from .fit import FitError, check_fit, estimate
from .flow import build
from .fold import fold_output_registers
from .nextpnr import nextpnr_arcs_left, nextpnr_phases, parse_nextpnr_log
from .pll import PLLError, clock_plan, ecp5_pll, ice40_pll, link_clock_hz
from .report import make_report, render_markdown, resources, tool_versions, write_report
from .tops import ArrayTop, BF16ArrayTop, BoardTop
from .yosys import parse_yosys_log

__all__ = [
    "BOARDS",
    "ArrayTop",
    "BF16ArrayTop",
    "BaudError",
    "Board",
    "BoardTop",
    "Family",
    "FitError",
    "PLLError",
    "board_config",
    "build",
    "check_fit",
    "clock_plan",
    "default_baud",
    "ecp5_pll",
    "estimate",
    "fold_output_registers",
    "ice40_pll",
    "link_clock_hz",
    "link_plan",
    "make_report",
    "named_design",
    "nextpnr_arcs_left",
    "nextpnr_phases",
    "parse_nextpnr_log",
    "parse_yosys_log",
    "render_markdown",
    "resources",
    "tool_versions",
    "uart_divisor",
    "write_report",
]
