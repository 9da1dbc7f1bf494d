"""How a design is built: the implementation options, in one validated object.

An :class:`~hwgen.config.AcceleratorConfig` says *what* the device computes (array, widths,
buffers, clock) and is what the host checks; an :class:`Implementation` says *how* it is built
for a chip (DSP blocks, pipeline registers, memory primitives, clock domains). The results are
the same for every implementation; the cycles differ by the registers it adds, each counted
where its unit states it (the requantizer's stages, the write-back's, the array's input
register, the walker's staged rows), which :mod:`hwgen.cycles` reads from those units. Boards
choose their implementation (:mod:`hwgen.boards`); the simulations use the plain one unless
told.
"""

import dataclasses
import enum

from .protocol import RX_FIFO, Features

__all__ = ["DSP_OPERAND_BITS", "SB_MAC16_OPERAND_BITS", "DspPacking", "Implementation",
           "Registers"]

#: Signed operand width of an ECP5 MULT18X18D.
DSP_OPERAND_BITS = 18
#: Signed operand width of one of the two 8x8 products of an iCE40 SB_MAC16.
SB_MAC16_OPERAND_BITS = 8


class DspPacking(enum.StrEnum):
    """How the weight-stationary array maps its multipliers onto DSP blocks."""

    #: Two processing elements of one column share an iCE40 SB_MAC16 (its two-8x8 mode).
    SB_MAC16 = "sb_mac16"
    #: One ECP5 MULT18X18D per processing element, with its input and output registers.
    MULT18X18D = "mult18x18d"

    @property
    def operand_bits(self):
        """The widest signed operand the block multiplies."""
        return {DspPacking.SB_MAC16: SB_MAC16_OPERAND_BITS,
                DspPacking.MULT18X18D: DSP_OPERAND_BITS}[self]


class Registers(enum.IntEnum):
    """The register levels that a board's timing closure adds, each with every one before it.

    Each level is what a board builds (:mod:`hwgen.boards.catalog`); the cycles each adds are
    stated by the unit that builds its registers, and read from there by :mod:`hwgen.cycles`.
    """

    #: No register beyond the plain design's (the iCE40, the simulations).
    NONE = 0
    #: A register right after every memory's read port (an ECP5 build folds it into the
    #: DP16KD: the block RAM's output then takes a fraction of a cycle, not most of one); the
    #: readers address their memories a cycle ahead, so that the cycles stay, but for the
    #: host's reads (a cycle more) and a pooling pass (one per pass). The ULX3S-12F's.
    READS = 1
    #: And the host port's requests staged in a register before the memories and the
    #: controller, its answers in another (every access and ``start`` a cycle later, reads two
    #: cycles more; on the 85F the link's decoding into all 64 WEIGHT blocks was the longest
    #: path, 67.7 MHz after it), and the write-back's bank writes from registers (a cycle more
    #: per chunk of a requantized layer: the lane rotation and a fused pool's maximum no longer
    #: reach the banks in the cycle; 73.9 MHz after it). The ULX3S-25F's and -45F's.
    HOST = 2
    #: And a weight-stationary array's inputs registered before its skew (a cycle more from a
    #: row's admission to its result), and the patch walker's rows staged in a register of
    #: their own where its step is a register (one requantization step): a chunk's first row a
    #: cycle later, which a weight-stationary array's first weight tile hides. The first row's
    #: lane has no skew register: without it the feeder's row crossed the 85F's die into that
    #: row's DSP inputs in one cycle. And WEIGHT as one memory per 16 bits of lanes, each
    #: addressed from registers of its own, where that takes no more block RAMs (no cycle;
    #: :func:`hwgen.device.memories.weight_groups`: one address into the zoo design's 136
    #: DP16KDs was its longest path). And the frame engine's host port relayed to the
    #: accelerator's through a register each way (:func:`hwgen.device.host_access.relay_host`:
    #: every access a cycle later; the engine's decisions crossed the die to its word
    #: register, 59.9 MHz with the depthwise row). The ULX3S-85F's.
    ARRAY = 3


def _bool(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"Implementation: {name}={value!r}; allowed: True or False")
    return value


@dataclasses.dataclass(frozen=True)
class Implementation:
    """Options that change the netlist of a design but not its results.

    Some add cycles, each stated by the unit that builds it: the requantizer's three options
    a cycle per stage per chunk of a requantized layer
    (:meth:`hwgen.device.requantizer.Requantizer.stages_for`), ``registers`` what
    :class:`Registers` says of each level.

    Parameters
    ----------
    dsp_packing : DspPacking, str or None
        Map the weight-stationary array's multipliers onto DSP blocks explicitly (``None``: let
        synthesis infer them). Output-stationary arrays ignore it.
    post_pipeline : bool
        Three pipeline stages in the requantization (before the multipliers, inside the
        rounding shifter, before saturation) and the controller's loop bounds in registers.
    split_multiplier : int
        Build each requantization product from this many narrower products of the multiplier's
        slices, registered, then added (one stage): for multipliers built from logic cells
        (iCE40), whose carry chains are the longest path otherwise. 1: one product.
    split_operand : int or None
        Build each requantization product from slices of this many bits of the biased
        accumulator, from operands registered once more, each product registered (two
        stages): 17 makes every product one ECP5 MULT18X18D. Not with ``split_multiplier``.
    registers : Registers or int
        The register levels for the clock (:class:`Registers`: what each adds, and costs).
    spram : bool
        Put the single-port buffers (weights, the frame payload) into iCE40UP SB_SPRAM256KA.
    link_on_oscillator : bool
        When a PLL makes the design's clock, run the link (UART, frame engine) from the
        board's oscillator in a clock domain of its own.
    adder_dsp : bool
        Leave the adder's per-lane multipliers (``residual``) to synthesis, which maps them
        onto DSP blocks; ``False`` builds them from logic cells
        (:func:`hwgen.device.adder.logic_product`), for designs whose array takes most of the
        chip's DSP blocks (:func:`hwgen.boards.fit.implementation_for`).
    packed_wire : bool
        The frame engine serves LOAD and FETCH (inputs and outputs packed at their widths on
        the wire); without, a host falls back to WRITE and READ of whole words.
    class_output : bool
        The frame engine serves CLASSES (the top-k indices found on the device); without, a
        host reads the scores and finds them itself (the same results).
    out_param_shared : bool
        One memory for OUTPUT and PARAM (:func:`hwgen.device.memories.out_param_layout`): the
        host reads OUTPUT and writes PARAM only while idle, a run only reads PARAM and writes
        OUTPUT, so one port of each kind serves both: a 140-bit memory of 208 words is nine
        iCE40 block RAMs where the two took fifteen. Only with ``Registers.NONE``.
    weight_pairs : bool
        Load an int8 weight-stationary array's tiles two rows a cycle, WEIGHT's block RAMs
        read on both their ports during a run (:meth:`hwgen.device.weight_feeder.WeightFeeder.
        rows_per_cycle_for`; a tile in half the cycles, which a batch of one sample waits for:
        the AD autoencoder twice as fast). No block RAM more; it costs a second row bus from
        WEIGHT to the array (a multiplexer input per block and bit: the ULX3S-85F's preset
        routed with it only with HeAP and router1, docs/performance.md). On lanes split into
        16-bit groups (``Registers.ARRAY``) WEIGHT is also split by depth into banks of a block
        RAM each, whose reads end at registers inside the blocks
        (:func:`hwgen.device.memories.weight_banks`: no cycle more). Needs registered reads
        (``Registers.READS`` on) and WEIGHT in block RAM (not ``spram``).
    rx_fifo : int
        Bytes of the UART's receive FIFO (INFO's ``rx_fifo``: what a host may send ahead of
        an answer it has not read, so the deeper, the more the next request overlaps the last
        answer on the full-duplex UART), at least 2.

    Raises
    ------
    ValueError
        Naming the option, its value and what is allowed.
    """

    dsp_packing: DspPacking | None = None
    post_pipeline: bool = False
    split_multiplier: int = 1
    split_operand: int | None = None
    registers: Registers = Registers.NONE
    spram: bool = False
    link_on_oscillator: bool = False
    adder_dsp: bool = True
    packed_wire: bool = True
    class_output: bool = True
    out_param_shared: bool = False
    weight_pairs: bool = False
    rx_fifo: int = RX_FIFO

    def __post_init__(self):
        if self.dsp_packing is not None:
            try:
                object.__setattr__(self, "dsp_packing", DspPacking(self.dsp_packing))
            except ValueError:
                raise ValueError(
                    f"Implementation: dsp_packing={self.dsp_packing!r}; allowed: None, "
                    + ", ".join(repr(p.value) for p in DspPacking)) from None
        for name in ("post_pipeline", "spram", "link_on_oscillator", "adder_dsp",
                     "packed_wire", "class_output", "out_param_shared", "weight_pairs"):
            _bool(name, getattr(self, name))
        try:
            if isinstance(self.registers, bool):
                raise ValueError
            object.__setattr__(self, "registers", Registers(self.registers))
        except ValueError:
            raise ValueError(
                f"Implementation: registers={self.registers!r}; allowed: "
                + ", ".join(f"Registers.{r.name} ({r.value})" for r in Registers)) from None
        if self.out_param_shared and self.registers:
            raise ValueError(f"Implementation: out_param_shared=True goes without registers, not "
                             f"with registers=Registers.{self.registers.name}; allowed: "
                             "Registers.NONE, or out_param_shared=False")
        if self.weight_pairs and (self.registers < Registers.READS or self.spram):
            raise ValueError("Implementation: weight_pairs=True reads WEIGHT's block RAMs a cycle "
                             f"ahead on both ports, not with registers=Registers."
                             f"{self.registers.name}, spram={self.spram}; allowed: registers "
                             ">= Registers.READS and spram=False, or weight_pairs=False")
        if isinstance(self.rx_fifo, bool) or not isinstance(self.rx_fifo, int) \
                or self.rx_fifo < 2:
            raise ValueError(f"Implementation: rx_fifo={self.rx_fifo!r}; allowed: an int >= 2 "
                             "(bytes)")
        pieces = self.split_multiplier
        if isinstance(pieces, bool) or not isinstance(pieces, int) or pieces < 1:
            raise ValueError(f"Implementation: split_multiplier={pieces!r}; allowed: an int "
                             ">= 1 (pieces of the requantization multiplier)")
        operand = self.split_operand
        if operand is not None and (isinstance(operand, bool) or not isinstance(operand, int)
                                    or operand < 2):
            raise ValueError(f"Implementation: split_operand={operand!r}; allowed: None or an "
                             "int >= 2 (bits per slice of the accumulator)")
        if operand is not None and pieces > 1:
            raise ValueError(f"Implementation: split_operand={operand} goes without "
                             f"split_multiplier, not with split_multiplier={pieces}; allowed: "
                             "one of the two")

    def check(self, config):
        """Check the options against ``config``; return ``self``.

        Raises
        ------
        ValueError
            If ``split_multiplier`` has more pieces than the multiplier has bits, the DSP
            packing cannot multiply the configuration's operands, or ``weight_pairs`` meets a
            bf16 or output-stationary array.
        """
        if config.act_spram_depth and self.registers:
            raise ValueError(f"Implementation: registers=Registers.{self.registers.name} cannot "
                             f"read ACT split at act_spram_depth={config.act_spram_depth} (its "
                             "reads are not registered); allowed: registers=Registers.NONE, or "
                             "act_spram_depth=0")
        if self.split_multiplier > config.mult_bits:
            raise ValueError(
                f"Implementation: split_multiplier={self.split_multiplier} cuts the "
                f"{config.mult_bits}-bit multiplier into more pieces than bits; allowed: "
                f"1..{config.mult_bits}")
        if self.weight_pairs and not self.pairs_for(config):
            raise ValueError(f"Implementation: weight_pairs=True loads an int8 weight-stationary "
                             f"array, not dtype={config.dtype!r}, dataflow="
                             f"{str(config.dataflow)!r}; allowed: weight_pairs=False")
        packing = self.packing_for(config)
        if packing is not None and max(config.in_bits, config.w_bits) > packing.operand_bits:
            raise ValueError(
                f"dsp_packing={packing.value!r} needs in_bits and w_bits <= "
                f"{packing.operand_bits}, not {config.in_bits} and {config.w_bits}; allowed: "
                "narrower operands, or no DSP packing")
        return self

    def pairs_for(self, config):
        """Return whether ``config``'s weight tiles load two rows a cycle: with
        ``weight_pairs``, an int8 weight-stationary array's (the one that pairs serve)."""
        from .config import Dataflow

        return self.weight_pairs and config.dtype == "int8" and config.dataflow is Dataflow.WS

    def packing_for(self, config):
        """Return the array's DSP packing for ``config``: only weight-stationary arrays pack."""
        from .config import Dataflow

        return self.dsp_packing if config.dataflow is Dataflow.WS else None

    @property
    def features(self):
        """The optional commands of :mod:`hwgen.protocol` the frame engine serves (INFO's
        ``features``)."""
        return ((Features.PACKED if self.packed_wire else Features.NONE)
                | (Features.CLASSES if self.class_output else Features.NONE))

    def requant_in_dsp(self, config):
        """Return whether the requantization's slice products are MULT18X18Ds with their
        registers: with ``post_pipeline``, slices and multipliers narrower than the block's
        operands."""
        return (self.dsp_packing is DspPacking.MULT18X18D and self.post_pipeline
                and self.split_operand is not None and self.split_operand < DSP_OPERAND_BITS
                and config.mult_bits < DSP_OPERAND_BITS)
