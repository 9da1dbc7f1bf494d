"""The LiteX SoC: a VexRiscv CPU with the accelerator's Wishbone top on its bus.

Imports LiteX (the optional extra ``soc``); only :mod:`hwgen.soc.flow` and the ``hwgen soc``
command import this module. The accelerator is the Verilog of ``hwgen generate --top
wishbone`` (ports ``bus__*``, ``irq``, ``clk``, ``rst``), instantiated on a Wishbone slave
region of the SoC's bus at :data:`ACCEL_ORIGIN`.
"""

from litex.build.generic_platform import Pins, Subsignal
from litex.build.io import CRG
from litex.build.sim import SimPlatform
from litex.soc.integration.soc import SoCRegion
from litex.soc.integration.soc_core import SoCCore
from litex.soc.interconnect import wishbone
from migen import Cat, ClockSignal, Constant, Instance, ResetSignal, Signal

__all__ = ["ACCEL_ORIGIN", "SimSoC", "add_accelerator"]

#: Where the accelerator's address space starts on the CPU's bus (in VexRiscv's uncached IO region).
ACCEL_ORIGIN = 0x8000_0000

_SIM_IO = [
    ("sys_clk", 0, Pins(1)),
    ("sys_rst", 0, Pins(1)),
    ("serial", 0,
     Subsignal("source_valid", Pins(1)), Subsignal("source_ready", Pins(1)),
     Subsignal("source_data", Pins(8)),
     Subsignal("sink_valid", Pins(1)), Subsignal("sink_ready", Pins(1)),
     Subsignal("sink_data", Pins(8))),
]


def add_accelerator(soc, verilog, module, size):
    """Instantiate the accelerator ``module`` (Verilog file ``verilog``) on ``soc``'s bus.

    Parameters
    ----------
    soc : litex.soc.integration.soc.SoC
    verilog : path-like
        The Verilog of ``hwgen generate --top wishbone``.
    module : str
        Its top module's name.
    size : int
        Bytes of its address space (a power of two): the region at :data:`ACCEL_ORIGIN`.

    Returns
    -------
    migen.Signal
        The accelerator's ``irq`` (a run ended), for the caller to route.
    """
    bus = wishbone.Interface(data_width=32, adr_width=30)
    word_bits = (size // 4 - 1).bit_length()
    irq = Signal()
    # The core decodes a word address from 0: the region's base bits are the SoC's decoder's.
    adr = Cat(bus.adr[:word_bits], Constant(0, 32 - word_bits))
    soc.specials += Instance(
        module,
        i_clk=ClockSignal("sys"), i_rst=ResetSignal("sys"),
        i_bus__adr=adr, i_bus__dat_w=bus.dat_w, o_bus__dat_r=bus.dat_r, i_bus__sel=bus.sel,
        i_bus__cyc=bus.cyc, i_bus__stb=bus.stb, i_bus__we=bus.we, o_bus__ack=bus.ack,
        o_bus__err=bus.err, o_irq=irq)
    soc.platform.add_source(str(verilog))
    soc.bus.add_slave("accel", bus, SoCRegion(origin=ACCEL_ORIGIN, size=size, cached=False))
    return irq


class SimSoC(SoCCore):
    """A VexRiscv SoC on LiteX's Verilator platform: console on the simulator's terminal.

    Parameters
    ----------
    clk_freq : int
        The nominal clock (Hz) the firmware's rates are computed at; the simulation is cycle
        based.
    main_ram_init : list of int
        The firmware's 32-bit words, preloaded in main RAM (the BIOS boots them).
    accelerator : tuple or None
        ``(verilog, module, size)`` for :func:`add_accelerator`.
    main_ram_size : int
        Bytes of integrated main RAM (firmware and the model image).
    """

    def __init__(self, clk_freq, main_ram_init=(), accelerator=None, main_ram_size=0x40000):
        from litex.build.sim.platform import SimFinish, SimMarker

        platform = SimPlatform("SIM", _SIM_IO)
        self.crg = CRG(platform.request("sys_clk"))
        SoCCore.__init__(self, platform, clk_freq=clk_freq, ident="hwgen LiteX simulation",
                         cpu_type="vexriscv", uart_name="sim", timer_uptime=True,
                         integrated_rom_size=0x10000, integrated_sram_size=0x4000,
                         integrated_main_ram_size=main_ram_size,
                         integrated_main_ram_init=list(main_ram_init))
        self.add_config("BIOS_NO_DELAYS")
        self.add_config("BIOS_NO_PROMPT")
        # The BIOS's sim_debug.c wants both; the firmware ends the simulation by sim_finish.
        self.sim_marker = SimMarker()
        self.sim_finish = SimFinish()
        if main_ram_init:
            self.add_constant("ROM_BOOT_ADDRESS", self.mem_map["main_ram"])
        if accelerator is not None:
            add_accelerator(self, *accelerator)
