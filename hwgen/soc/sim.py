"""The SoC in LiteX's Verilator simulation: build the software, the firmware and the
simulator, run it and return its console.

Two passes of the builder over the same SoC: the first writes the SoC's headers and compiles
LiteX's libraries and BIOS (the firmware links against them), the second preloads the
firmware into main RAM (the BIOS boots it) and generates the simulator. The firmware ends
the simulation through LiteX's ``sim_finish`` CSR.
"""

import os
import subprocess
import time
from pathlib import Path

from ..toolchain import setup_verilator
from .firmware import compile_firmware
from .logs import to_log

__all__ = ["SIM_CLOCK_HZ", "console_figures", "run_sim"]

#: The SoC's nominal clock in simulation: the firmware's rates are computed at it.
SIM_CLOCK_HZ = 50_000_000


def _builder(soc, out, **kwargs):
    from litex.soc.integration.builder import Builder

    return Builder(soc, output_dir=str(out), **kwargs)


def _sim_config(clock_hz):
    from litex.build.sim.config import SimConfig

    config = SimConfig()
    config.add_clocker("sys_clk", freq_hz=clock_hz)
    config.add_module("serial2console", "serial")
    return config


def run_sim(out, accelerator, firmware_src, *, clock_hz=SIM_CLOCK_HZ, timeout=1800, say=print):
    """Build and run the simulated SoC; return its console output (str).

    Parameters
    ----------
    out : path-like
        The LiteX build folder (software, gateware, the simulator).
    accelerator : tuple
        ``(verilog, module, size)`` of :func:`hwgen.soc.litex_soc.add_accelerator`.
    firmware_src : path-like
        The folder :func:`hwgen.soc.firmware.write_firmware` wrote.
    clock_hz : int
    timeout : float
        Seconds the simulation may run.
    say : callable
        Progress messages.

    Raises
    ------
    RuntimeError
        If the simulator does not build, or it fails or times out (its output so far).
    """
    from litex.soc.integration.common import get_mem_data

    from .litex_soc import SimSoC

    out = Path(out).resolve()
    setup_verilator()
    env = dict(os.environ)
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "build.log"
    say(f"soc: LiteX software (BIOS, libraries; log {log}) ...")
    with to_log(log):
        _builder(SimSoC(clock_hz, accelerator=accelerator), out,
                 compile_gateware=False).build(run=False)
    say("soc: firmware ...")
    binary = compile_firmware(firmware_src, out)
    words = get_mem_data(str(binary), data_width=32, endianness="little")
    say(f"soc: simulator ({len(words) * 4} bytes of firmware) ...")
    with to_log(log):
        soc = SimSoC(clock_hz, main_ram_init=words, accelerator=accelerator)
        _builder(soc, out).build(sim_config=_sim_config(clock_hz), run=False, interactive=False)
    gateware = out / "gateware"
    built = subprocess.run(["bash", "build_sim.sh"], cwd=gateware, env=env, capture_output=True,
                           text=True, check=False)
    if built.returncode:
        raise RuntimeError(f"the simulator did not build:\n{built.stdout[-3000:]}"
                           f"{built.stderr[-3000:]}")
    say(f"soc: running ({time.perf_counter() - start:.0f} s so far) ...")
    try:
        ran = subprocess.run(["obj_dir/Vsim"], cwd=gateware, env=env, capture_output=True,
                             stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"the simulation ran past {timeout} s:\n"
                           f"{(exc.stdout or b'').decode(errors='replace')[-3000:]}") from None
    console = ran.stdout.decode(errors="replace")
    if ran.returncode or "hwgen: done" not in console:
        raise RuntimeError(f"the simulation failed (exit {ran.returncode}):\n{console[-3000:]}"
                           f"{ran.stderr.decode(errors='replace')[-2000:]}")
    return console


def console_figures(console):
    """Return the figures of the firmware's timing lines in ``console`` (its ``cycles per
    inference`` and ``inferences per second at <clock> Hz``), for the record
    (:mod:`hwgen.figures`); empty when they are not there."""
    import re

    # LiteX's console starts each line with the carriage return of the line before.
    console = console.replace("\r", "")
    figures = {}
    cycles = re.search(r"^cycles per inference: (\d+) total = (\d+) copy in \+ (\d+) array",
                       console, re.M)
    if cycles:
        figures.update(cycles_per_inference=int(cycles[1]), copy_in_cycles=int(cycles[2]),
                       array_cycles=int(cycles[3]))
    rate = re.search(r"^inferences per second at (\d+) Hz: (\d+)", console, re.M)
    if rate:
        figures.update(clock_mhz=int(rate[1]) / 1e6, inferences_per_s=int(rate[2]))
    return figures
