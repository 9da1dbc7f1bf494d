"""The boards ``hwgen build`` knows: their chips, clocks, capacities, presets and how each
family builds the device.

A :class:`Board` names its FPGA :class:`Family`, the ``amaranth-boards`` platform, the
oscillator and the default clock, the chip's capacities (what :mod:`hwgen.boards.fit` checks
against), the design preset used when the command line gives none, and the
:class:`~hwgen.implementation.Implementation` the family builds: on the iCE40UP5K two
processing elements share one SB_MAC16 in its two-8x8 mode; on the ECP5 each gets a MULT18X18D
with its input and output registers (Yosys would leave those registers in the fabric). Both
families pipeline the requantization; the iCE40, whose requantization multipliers are logic
cells, splits each product into pieces of the multiplier, the ECP5 into one MULT18X18D per
17-bit slice of the accumulator. On the ECP5 every memory read ends at a register that the
build moves into the DP16KD (:func:`hwgen.boards.fold.fold_output_registers`), and the link
runs from the oscillator in a domain of its own on both families when a PLL makes the
design's clock.
"""

import dataclasses
import enum
import importlib

from ..implementation import DspPacking, Implementation, Registers

__all__ = [
    "BOARDS",
    "ECP5_IMPLEMENTATION",
    "ICE40_IMPLEMENTATION",
    "ICEBREAKER_PRESET",
    "NAMED_PRESETS",
    "PRESET_ALIASES",
    "PRESET_IMPLEMENTATIONS",
    "PRESET_NAMES",
    "PRESET_NEXTPNR",
    "PRESET_SEEDS",
    "ULX3S_45F_PRESET",
    "ULX3S_85F_RESNET8_PRESET",
    "ULX3S_85F_ZOO_PRESET",
    "ULX3S_PRESET",
    "ULX3S_SMALL_PRESET",
    "UNSPLIT_ACT",
    "Board",
    "Family",
]


class Family(enum.StrEnum):
    """The FPGA family of a board: what its tools, primitives and resources are called."""

    #: Lattice iCE40 (nextpnr-ice40, icepack; SB_MAC16, SB_RAM40_4K, SB_SPRAM256KA).
    ICE40 = "ice40"
    #: Lattice ECP5 (nextpnr-ecp5, ecppack; MULT18X18D, DP16KD).
    ECP5 = "ecp5"
    #: Gowin GW1N/GW2A (nextpnr-himbaechel's gowin uarch, Apicula's gowin_pack; MULT9X9 and
    #: MULT18X18 in DSP blocks, 18 Kbit BSRAM).
    GOWIN = "gowin"


#: The iCEBreaker preset: a 4x4 int8 array whose 16 MACs share the UP5K's 8 SB_MAC16s, one
#: requantization lane (its multiplier is built from logic cells; rows of a layer's last
#: reduction tile enter the array 4 cycles apart) and small buffers; the weights and the
#: network's input area of ACT sit in the 4 SB_SPRAM256KA. Its 1,024 weight words hold the
#: demo's MLP (608 words): the two SPRAMs of 32-bit words hold 16K, so the depth costs only the
#: descriptor's weight address. Its batch (64 for the demo MLP, issue 33's wire target) is
#: ACT's: 1,536 words a bank, the first 1,024 (the input area, which no pass both reads and
#: writes: ``act_spram_depth``) in two SPRAMs of two 8-bit banks each, the other 512 in four
#: block RAMs; OUTPUT (192 words: 64 samples of 10 raw scores) shares the nine block RAMs of
#: PARAM (``Implementation.out_param_shared``), and the frame buffer is two block RAMs. It
#: fills nearly all of the chip's logic cells and block RAMs (its builds' figures: the
#: record, docs/figures.json). A design derived from it that cannot split ACT (spatial layers, an
#: output-stationary array, fewer rows than columns) gets :data:`UNSPLIT_ACT`'s buffers. With
#: four requantization lanes (``--post-lanes 4``) the device needs more logic cells than the
#: chip has, and ``hwgen build`` refuses it, naming the numbers. Activation bounds and leaky
#: ReLU (``bounds``) would take block RAMs more: the preset runs ReLU and identity. It has no
#: adder (``residual``): its descriptors stay as they were, and residual networks are refused.
ICEBREAKER_PRESET = {
    "rows": 4, "cols": 4, "dataflow": "ws", "in_bits": 8, "w_bits": 8, "acc_bits": 22,
    "mult_bits": 8, "max_k": 64, "act_depth": 1536, "act_spram_depth": 1024,
    "weight_depth": 1024, "param_depth": 16, "acc_depth": 64, "out_depth": 192,
    "prog_depth": 8, "post_lanes": 1, "spatial": False, "bounds": False, "residual": False}

#: The iCEBreaker preset's buffers where its split ACT cannot be (a design derived from it with
#: spatial layers, an output-stationary array or fewer rows than columns, whose banks read
#: different words, :attr:`hwgen.AcceleratorConfig.act_spram_depth`): ACT all in block RAM,
#: as before the split (batch 10 of the demo MLP). :func:`hwgen.boards.board_config` takes
#: them for every such field the design does not give.
UNSPLIT_ACT = {"act_spram_depth": 0, "act_depth": 256, "out_depth": 64}

#: The ULX3S presets: an 8x8 int8 array with the default widths and buffers the device holds.
ULX3S_PRESET = {"rows": 8, "cols": 8, "dataflow": "ws", "in_bits": 8, "w_bits": 8}
#: The 45F has 72 multipliers: 48 for the array, 13 for the post-processing.
ULX3S_45F_PRESET = {"rows": 8, "cols": 6, "dataflow": "ws", "in_bits": 8, "w_bits": 8}
ULX3S_SMALL_PRESET = {"rows": 4, "cols": 4, "dataflow": "ws", "in_bits": 8, "w_bits": 8,
                      "act_depth": 1024, "weight_depth": 512, "out_depth": 256}


#: The 85F design for ResNet-8 (MLPerf Tiny's image classification, :mod:`hwgen.models`): an
#: 8x8 array with eight requantization lanes (the 85F preset's logic: 88 of its 156
#: MULT18X18D) with buffers that hold ResNet-8 at batch 1: ACT 8,192 words on 8 banks (its
#: input and three live 32x32x16 tensors take 6,144, two words a pixel), WEIGHT 16,384 words
#: (it takes 9,736), PROGRAM 64 words (its 14 passes take 42). Both depths are powers of two so
#: that every block RAM holds the memory's full depth in a slice of its width: no multiplexer
#: after the blocks, and each read's register goes into the block (OUTREG; 6,144 and 10,240
#: words folded 36 of 102). Its clock, 84.375 MHz, is an exact PLL clock that its builds meet
#: with the taps lanes' first counters registered from a geometry whole before the layer's load
#: (the figures of its newest build and of ResNet-8 on it: the record, docs/figures.json). An
#: 8x16 array did not route at the clock it needed: its 16 activation banks and the adder's
#: sixteen lanes congested nextpnr (docs/performance.md, "ResNet-8 on a design that routes").
ULX3S_85F_RESNET8_PRESET = {"rows": 8, "cols": 8, "dataflow": "ws", "in_bits": 8,
                            "w_bits": 8, "weight_depth": 16384, "act_depth": 8192,
                            "param_depth": 128, "prog_depth": 64, "acc_depth": 256,
                            "out_depth": 512, "clock_hz": 84_375_000}

#: The 85F design for VWW (MLPerf Tiny's visual wake words, MobileNetV1) and the zoo's other
#: convolutional models: the ResNet-8 design's 8x8 array with WEIGHT 32,768 words (VWW takes
#: 26,219, its depthwise tiles one word each, ``wdiag``), PARAM 512 (375) and PROGRAM 128
#: (87): 198 of the 208 DP16KDs, routed with router2 (``fit.nextpnr_options``). Its WEIGHT
#: blocks span the die, and their read enable and address from the feeder's registers take
#: most of a cycle of routing: 45 MHz, a PLL clock that makes the UART's 3 Mbaud exactly, is
#: the clock its builds meet (faster ones did not route: docs/performance.md, "VWW on an 8x8
#: design" and "The 85F presets rebuilt"; its newest build's figures: the record,
#: docs/figures.json). AD's 33,024 words do not fit it (the zoo design).
ULX3S_85F_VWW_PRESET = {**ULX3S_85F_RESNET8_PRESET, "weight_depth": 32768, "param_depth": 512,
                        "prog_depth": 128, "clock_hz": 45_000_000}

#: The 85F's preset, the design for the model zoo (:mod:`hwgen.models`), which
#: ``hwgen build --board ulx3s-85f`` builds: the VWW design's 8x8 array, bounds
#: (ReLU6, leaky ReLU) and buffers, with WEIGHT 33,792 words, which hold AD's 33,024 (its 265K
#: weights, eight to a word): the one design whose buffers hold each of the zoo's six models at
#: batch 1 (AD, KWS, VWW, ResNet-8, LeNet-5, the tutorial CNN), and the depthwise unit with a
#: ninth row of eight multipliers that only depthwise passes feed (a 3x3 kernel in one tile:
#: VWW's stride-1 depthwise layers at two thirds of the 72 multipliers). 201 of the 208
#: DP16KD, WEIGHT in four memories of 16 bits with an address each (``Registers.ARRAY``: one
#: address into all of WEIGHT's blocks held it at 45 MHz), its tiles loaded two rows a cycle
#: from banks one block deep whose reads are registered in the blocks
#: (:data:`PRESET_IMPLEMENTATIONS`, :func:`hwgen.device.memories.weight_banks`); placed by
#: HeAP at seed 8 and routed with router1 at 62.5 MHz (:data:`PRESET_SEEDS`,
#: :data:`PRESET_NEXTPNR`), 21 cycles a bit at 3 Mbaud (-0.79 %). Before the banks WEIGHT's
#: slow block outputs held it to 60 MHz: docs/performance.md; its build's figures: the record,
#: docs/figures.json.
ULX3S_85F_ZOO_PRESET = {**ULX3S_85F_VWW_PRESET, "weight_depth": 33792, "depthwise": True,
                        "dw_extra_rows": 1, "clock_hz": 62_500_000}


# The bitstream file each family's packer writes.
_BITSTREAM_SUFFIX = {Family.ICE40: ".bin", Family.ECP5: ".bit", Family.GOWIN: ".fs"}


@dataclasses.dataclass(frozen=True)
class Board:
    """A board the build knows.

    Attributes
    ----------
    name : str
        As given to ``--board``.
    family : Family or str
        :attr:`Family.ICE40` or :attr:`Family.ECP5`; a string is converted.
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
        :func:`hwgen.boards.fold.fold_output_registers`), SPRAM and the link's clock domain.
    program : str
        Command that loads the bitstream into the board (``{bitstream}`` is replaced).
    serial : str
        Where the board's USB serial port usually appears on Linux.
    bridge : str
        The USB-serial bridge on the board (``FT231X``, ``FT2232H``).
    bridge_hz : int
        The bridge's baud-rate base: it makes ``bridge_hz * 8 / m`` baud for ``m`` = 8, 12 or
        any integer from 16 on (FTDI's divisor, in eighths; 3 MHz on the FT231X, 12 MHz on the
        H-series).
    baud : int
        The fastest rate the bridge runs reliably: the default of ``hwgen build`` (when the
        board's clocks make it; :func:`hwgen.boards.baud.default_baud`), ``hwgen infer`` and
        ``hwgen serve``.
    chip : str
        The chip database nextpnr and the bitstream packer name the FPGA by, where it is not
        ``device`` (Gowin: ``GW1N-9C`` for the GW1NR-9C, ``GW2A-18C``); empty elsewhere.

    Raises
    ------
    ValueError
        If ``family`` is not a :class:`Family`.
    """

    name: str
    family: Family
    platform: str
    device: str
    osc_hz: int
    clock_hz: int
    capacity: dict
    preset: dict
    implementation: Implementation
    program: str = ""
    serial: str = ""
    bridge: str = ""
    bridge_hz: int = 3_000_000
    baud: int = 1_000_000
    chip: str = ""

    def __post_init__(self):
        try:
            object.__setattr__(self, "family", Family(self.family))
        except ValueError:
            raise ValueError(f"Board {self.name!r}: family={self.family!r}; allowed: "
                             + ", ".join(repr(f.value) for f in Family)) from None

    def packing_for(self, config):
        """Return the array's DSP packing for ``config``: only weight-stationary arrays pack."""
        return self.implementation.packing_for(config)

    @property
    def bitstream_suffix(self):
        """The file suffix of the family's bitstream."""
        return _BITSTREAM_SUFFIX[self.family]

    def make_platform(self):
        """Return a fresh instance of the board's ``amaranth-boards`` platform."""
        module, cls = self.platform.split(":")
        return getattr(importlib.import_module(module), cls)()


#: How the iCEBreaker builds the device: two products per SB_MAC16, the requantization
#: pipelined with its multipliers (logic cells) split in four, weights (and ACT's input area,
#: or else the frame buffer) in SPRAM, OUTPUT and PARAM in one memory, the link on the 12 MHz
#: oscillator when the PLL makes the design's clock; without LOAD, FETCH and CLASSES (the
#: preset has no logic cells left for them, see docs/performance.md: the host falls back to
#: WRITE, READ and its own argsort), but with a 1 KiB receive FIFO (two block RAMs) that holds
#: a WRITE, so that its host sends the next input's WRITEs while the last output's READs are
#: answered (:func:`host.wire.words_ahead`).
ICE40_IMPLEMENTATION = Implementation(dsp_packing=DspPacking.SB_MAC16, post_pipeline=True,
                                      split_multiplier=4, spram=True, link_on_oscillator=True,
                                      packed_wire=False, class_output=False,
                                      out_param_shared=True, rx_fifo=1024)
#: How the ULX3S builds it: a MULT18X18D per processing element, the requantization pipelined
#: with one MULT18X18D per 17-bit slice, the registers of ``Registers.HOST`` (every read
#: registered, the host's requests staged in a register before the memories, their write
#: enables and addresses from flip-flops: on the 85F the link's decoding into all 64 WEIGHT
#: blocks was the longest path; the write-back's bank writes from registers), the link on the
#: 25 MHz oscillator. The receive FIFO keeps its
#: default depth: a 2048-byte FIFO in a DP16KD made the netlist's block RAM model report a
#: read of a byte written in the same cycle (not yet explained), so the ULX3S does not build
#: it until that is understood.
ECP5_IMPLEMENTATION = Implementation(dsp_packing=DspPacking.MULT18X18D, post_pipeline=True,
                                     split_operand=17, registers=Registers.HOST,
                                     link_on_oscillator=True)
#: The 12F's: without CLASSES (the host picks the classes itself, the same answers), left out
#: to keep the 4x4 preset under the LFE5U-12F's nominal 12,096 LUT4s, which its build has
#: since passed (docs/boards.md's presets): the board's capacity is now the die's (below).
#: Its registers only ``Registers.READS`` (its host port not staged nor its write-back
#: registered): its memories are few and near, and its fit was measured so.
ECP5_12F_IMPLEMENTATION = dataclasses.replace(ECP5_IMPLEMENTATION, class_output=False,
                                              registers=Registers.READS)
#: The 85F's: ``Registers.ARRAY``, the array's inputs registered too (a cycle more per pass):
#: the first row's lane has no skew register, and across the 85F's die the activation
#: feeder's row did not reach that row's DSP inputs in one cycle at the ResNet-8 preset's
#: clock (docs/performance.md, "Toward 84.375 MHz").
ECP5_85F_IMPLEMENTATION = dataclasses.replace(ECP5_IMPLEMENTATION, registers=Registers.ARRAY)


#: How the Gowin boards build it: the array's products and the requantization's (one per 17-bit
#: slice of the accumulator, as on the ECP5: an 18x18 multiplier each) left to Yosys's
#: ``synth_gowin``, which puts them into the DSP blocks' MULT9X9 and MULT18X18, the
#: requantization pipelined, the memories in BSRAM (their reads unregistered: no pass moves a
#: read register into the BSRAM yet), the link on the oscillator when a PLL makes the design's
#: clock.
GOWIN_IMPLEMENTATION = Implementation(post_pipeline=True, split_operand=17,
                                      link_on_oscillator=True)
#: The Tang Nano 9K's: without LOAD, FETCH and CLASSES (the host falls back to WRITE, READ and
#: its own argsort, the same answers), whose logic the GW1NR-9's 8,640 LUT4s cannot spare: a
#: 2x2 device with them and the default widths took 8,336 LUT4s and ALUs.
GOWIN_9K_IMPLEMENTATION = dataclasses.replace(GOWIN_IMPLEMENTATION, packed_wire=False,
                                              class_output=False)


def _ulx3s(size, luts, ebr, mults, preset, *, implementation=ECP5_IMPLEMENTATION):
    return Board(
        name=f"ulx3s-{size}f", family=Family.ECP5,
        platform=f"amaranth_boards.ulx3s:ULX3S_{size}F_Platform", device=f"LFE5U-{size}F",
        # 62.5 MHz from the PLL: below what every preset reaches on its chip, with a margin for
        # placement (docs/performance.md has the measured figures).
        osc_hz=25_000_000, clock_hz=62_500_000,
        capacity={"lut": luts, "ff": luts, "dsp": mults, "bram": ebr}, preset=preset,
        implementation=implementation,
        program="openFPGALoader --board ulx3s {bitstream}",
        # The FT231X's top rate, 3 Mbaud.
        serial="/dev/ttyUSB0", bridge="FT231X", bridge_hz=3_000_000, baud=3_000_000)


#: The Tang Nano 9K preset: dense networks (the demo MLP) on a 4x4 int8 array with the
#: iCEBreaker preset's widths (22-bit accumulators, reductions up to 64 tiles, one
#: requantization lane, no bounds, no adder), its buffers in BSRAM.
TANG_NANO_9K_PRESET = {**ICEBREAKER_PRESET, "act_spram_depth": 0}
#: The Tang Primer 20K preset: the spatial device (CNNs) on a 4x4 int8 array.
TANG_PRIMER_20K_PRESET = {"rows": 4, "cols": 4, "dataflow": "ws", "in_bits": 8, "w_bits": 8,
                          "act_depth": 1024, "weight_depth": 2048, "out_depth": 256}


def _gowin(name, platform, device, chip, loader_board, *, capacity, preset,
           implementation=GOWIN_IMPLEMENTATION):
    return Board(
        name=name, family=Family.GOWIN, platform=f"amaranth_boards.{platform}", device=device,
        chip=chip, osc_hz=27_000_000, clock_hz=27_000_000, capacity=capacity, preset=preset,
        implementation=implementation,
        program=f"openFPGALoader -b {loader_board} {{bitstream}}",
        # The BL702 on both boards is a USB-UART that answers as an FTDI H-series bridge
        # (12 MHz base); 3 Mbaud is the rate users report clean, 9 cycles of 27 MHz exactly.
        serial="/dev/ttyUSB1", bridge="BL702", bridge_hz=12_000_000, baud=3_000_000)


#: Every board ``hwgen build`` knows, by name. Capacities from the Lattice data sheets.
BOARDS = {
    "icebreaker": Board(
        name="icebreaker", family=Family.ICE40,
        platform="amaranth_boards.icebreaker:ICEBreakerPlatform",
        device="iCE40UP5K-SG48", osc_hz=12_000_000, clock_hz=12_000_000,
        capacity={"lut": 5280, "ff": 5280, "dsp": 8, "bram": 30, "spram": 4},
        preset=ICEBREAKER_PRESET,
        implementation=ICE40_IMPLEMENTATION, program="iceprog {bitstream}",
        # The FT2232H makes 12 Mbaud, but FTDI's driver maintainers call <= 6 Mbaud reliable.
        serial="/dev/ttyUSB1", bridge="FT2232H", bridge_hz=12_000_000, baud=6_000_000),
    # The LFE5U-12F is the 25F's die with another IDCODE: nextpnr places it whole (24,288
    # LUT4, 56 DP16KD; YosysHQ/nextpnr#410), and so the fit check counts it; Lattice's
    # datasheet names 12,096 LUT4 and 32 block RAMs.
    "ulx3s-12f": _ulx3s(12, 24_288, 56, 28, ULX3S_SMALL_PRESET,
                        implementation=ECP5_12F_IMPLEMENTATION),
    "ulx3s-25f": _ulx3s(25, 24_288, 56, 28, ULX3S_SMALL_PRESET),
    "ulx3s-45f": _ulx3s(45, 43_848, 108, 72, ULX3S_45F_PRESET),
    "ulx3s-85f": _ulx3s(85, 83_640, 208, 156, ULX3S_85F_ZOO_PRESET,
                        implementation=ECP5_85F_IMPLEMENTATION),
    "tang-nano-9k": _gowin("tang-nano-9k", "tang_nano_9k:TangNano9kPlatform",
                           "GW1NR-LV9QN88PC6/I5", "GW1N-9C", "tangnano9k",
                           capacity={"lut": 8640, "ff": 6480, "dsp": 20, "bram": 26},
                           preset=TANG_NANO_9K_PRESET,
                           implementation=GOWIN_9K_IMPLEMENTATION),
    "tang-primer-20k": _gowin("tang-primer-20k", "tang_primer_20k:TangPrimer20kDockPlatform",
                              "GW2A-LV18PG256C8/I7", "GW2A-18C", "tangprimer20k",
                              capacity={"lut": 20736, "ff": 15552, "dsp": 48, "bram": 46},
                              preset=TANG_PRIMER_20K_PRESET),
}

#: Designs besides the boards' presets, by name: ``(board, fields)``, each a whole design that
#: replaces the board's preset
#: (``hwgen.boards.board_config(BOARDS[board], preset=name)``). ``ulx3s-85f-small``, the 8x8
#: with the default buffers at the board's 62.5 MHz, was the 85F's preset before the zoo
#: design: its block RAM leaves room for a LiteX SoC (``hwgen soc`` takes it).
NAMED_PRESETS = {"ulx3s-85f-small": ("ulx3s-85f", ULX3S_PRESET),
                 "ulx3s-85f-resnet8": ("ulx3s-85f", ULX3S_85F_RESNET8_PRESET),
                 "ulx3s-85f-vww": ("ulx3s-85f", ULX3S_85F_VWW_PRESET)}
#: The nextpnr seed ``hwgen build`` places a preset with when no ``--seed`` is given: the
#: placement its recorded build routed with, where that was not nextpnr's default seed. The
#: 85F's preset meets 62.5 MHz at seed 8, the one placement of it built so far
#: (docs/performance.md).
PRESET_SEEDS = {"ulx3s-85f": 8}
#: The placer and router a preset (at any clock) routed with, where they are not what
#: :func:`hwgen.boards.fit.nextpnr_options` chooses for a design of its size (``--placer`` or
#: ``--router`` given to ``hwgen build`` through ``HWGEN_NEXTPNR_OPTS`` still replaces them).
#: With two weight rows a cycle the 85F's preset did not route with ``static`` and router2
#: (overuse rising from iteration 46 at seed 8) nor HeAP and router2, and at a faster clock
#: ``static`` and router2 missed it by a quarter; HeAP and router1 routed it, in 30 to 60
#: minutes at its clock and about four times that at a 10 % faster one (docs/performance.md).
PRESET_NEXTPNR = {"ulx3s-85f": ("--placer", "heap", "--router", "router1")}
#: Implementation options a preset (at any clock) builds with beyond its board's
#: (:func:`hwgen.boards.fit.implementation_for`): the 85F's preset loads its weight tiles two
#: rows a cycle (``weight_pairs``: AD's dense layers at batch 1 twice as fast, no block RAM
#: more); the ResNet-8 design built so missed its 84.375 MHz, so the others keep
#: the board's (docs/performance.md).
PRESET_IMPLEMENTATIONS = {"ulx3s-85f": {"weight_pairs": True}}
#: Names that stay accepted for a board's own preset: ``--preset ulx3s-85f-zoo`` named the zoo
#: design before it became the 85F's preset.
PRESET_ALIASES = {"ulx3s-85f-zoo": "ulx3s-85f"}
#: Every name ``--preset`` takes.
PRESET_NAMES = tuple(sorted({*NAMED_PRESETS, *PRESET_ALIASES}))
