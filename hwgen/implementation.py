"""How a design is built: the implementation options, in one validated object.

An :class:`~hwgen.config.AcceleratorConfig` says *what* the device computes (array, widths,
buffers, clock) and is what the host checks; an :class:`Implementation` says *how* it is built
for a chip (DSP blocks, pipeline registers, memory primitives, clock domains). The results are
the same for every implementation; the cycles are too, but for
:attr:`Implementation.requant_latency` cycles more per requantized layer, which
:mod:`hwgen.cycles` counts. Boards choose their implementation (:mod:`hwgen.boards`); the
simulations use the plain one unless told.
"""

import dataclasses
import enum

from .protocol import RX_FIFO, Features

__all__ = ["DSP_OPERAND_BITS", "SB_MAC16_OPERAND_BITS", "DspPacking", "Implementation"]

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


def _bool(name, value):
    if not isinstance(value, bool):
        raise ValueError(f"Implementation: {name}={value!r}; allowed: True or False")
    return value


@dataclasses.dataclass(frozen=True)
class Implementation:
    """Options that change the netlist of a design but not its results.

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
    registered_reads : bool
        A register right after every memory's read port (an ECP5 build folds it into the
        DP16KD); the readers address their memories a cycle ahead, so that the cycles stay.
    staged_host : bool
        The host port's requests (strobes, region, address, data, start) pass a register
        before the memories and the controller, and a read's answer another: every access,
        and ``start``, take effect a cycle later, reads answer two cycles later
        (:attr:`host_read_latency`), ``busy`` still rises the cycle after ``start``. The
        memories' write enables and addresses then leave flip-flops, not the link's decoding
        (routed across a large ECP5, its longest path).
    registered_writeback : bool
        The write-back's bank writes (address, data, enable) leave registers, after the lane
        rotation and a fused pool's maximum: a cycle more per chunk of a requantized layer
        (counted in :attr:`requant_latency`).
    registered_array : bool
        A weight-stationary array's inputs (the activation row, the weight row and what
        travels with them) pass a register before its skew: a cycle more from a row's
        admission to its result (:func:`hwgen.cycles.ws_latency`). The first row's lane has no
        skew register, so without it the activation feeder's row ran from the banks' registers
        across the die into that row's DSP inputs in one cycle. An output-stationary array
        ignores it. With ``registered_reads`` (and one requantization step) the patch walker's
        rows also pass a register of their own (its ``staged_rows``): a chunk's first row
        comes a cycle later, which a weight-stationary array's first weight tile hides.
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
        iCE40 block RAMs where the two took fifteen. Not with ``registered_reads``.
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
    registered_reads: bool = False
    staged_host: bool = False
    registered_writeback: bool = False
    registered_array: bool = False
    spram: bool = False
    link_on_oscillator: bool = False
    adder_dsp: bool = True
    packed_wire: bool = True
    class_output: bool = True
    out_param_shared: bool = False
    rx_fifo: int = RX_FIFO

    def __post_init__(self):
        if self.dsp_packing is not None:
            try:
                object.__setattr__(self, "dsp_packing", DspPacking(self.dsp_packing))
            except ValueError:
                raise ValueError(
                    f"Implementation: dsp_packing={self.dsp_packing!r}; allowed: None, "
                    + ", ".join(repr(p.value) for p in DspPacking)) from None
        for name in ("post_pipeline", "registered_reads", "staged_host", "registered_writeback",
                     "registered_array", "spram", "link_on_oscillator", "adder_dsp",
                     "packed_wire", "class_output", "out_param_shared"):
            _bool(name, getattr(self, name))
        if self.out_param_shared and self.registered_reads:
            raise ValueError("Implementation: out_param_shared=True goes without "
                             "registered_reads; allowed: one of the two")
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
            If ``split_multiplier`` has more pieces than the multiplier has bits, or the DSP
            packing cannot multiply the configuration's operands.
        """
        if config.act_spram_depth and self.registered_reads:
            raise ValueError(f"Implementation: registered_reads=True cannot read ACT split at "
                             f"act_spram_depth={config.act_spram_depth}; allowed: "
                             "registered_reads=False, or act_spram_depth=0")
        if self.split_multiplier > config.mult_bits:
            raise ValueError(
                f"Implementation: split_multiplier={self.split_multiplier} cuts the "
                f"{config.mult_bits}-bit multiplier into more pieces than bits; allowed: "
                f"1..{config.mult_bits}")
        packing = self.packing_for(config)
        if packing is not None and max(config.in_bits, config.w_bits) > packing.operand_bits:
            raise ValueError(
                f"dsp_packing={packing.value!r} needs in_bits and w_bits <= "
                f"{packing.operand_bits}, not {config.in_bits} and {config.w_bits}; allowed: "
                "narrower operands, or no DSP packing")
        return self

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

    @property
    def host_read_latency(self):
        """Cycles from the host port's ``re`` to its ``rvalid``: one, one more with
        ``registered_reads`` and two more with ``staged_host``."""
        return 1 + self.registered_reads + 2 * self.staged_host

    @property
    def requantizer_stages(self):
        """Pipeline stages these options add to the requantizer itself."""
        stages = 3 if self.post_pipeline else 0
        if self.split_multiplier > 1:
            stages += 1
        if self.split_operand is not None:
            stages += 2
        return stages

    @property
    def requant_latency(self):
        """Cycles a requantized layer takes beyond the plain design (each chunk of it): one
        per pipeline stage these options add to the requantizer and its write-back."""
        return self.requantizer_stages + self.registered_writeback

    def stages_rows(self, config):
        """Return whether the patch walker's rows pass a register of their own
        (``registered_array`` where the feeder has its skid: registered reads, one
        requantization step): a chunk's first activation row a cycle later."""
        return self.registered_array and self.registered_reads and config.requant_steps == 1

    def requant_in_dsp(self, config):
        """Return whether the requantization's slice products are MULT18X18Ds with their
        registers: with ``post_pipeline``, slices and multipliers narrower than the block's
        operands."""
        return (self.dsp_packing is DspPacking.MULT18X18D and self.post_pipeline
                and self.split_operand is not None and self.split_operand < DSP_OPERAND_BITS
                and config.mult_bits < DSP_OPERAND_BITS)
