"""Whether a design fits a board: the resource model checked before synthesis, and nextpnr's
word after it.

:func:`estimate` is a model calibrated on builds of this flow: exact for DSP blocks, exact for
large block RAMs (small ones may become LUT RAM on the ECP5), within 7 % for LUTs of the builds
it is fitted on (``tests/boards/test_fit.py``: the iCE40's in the test, the ECP5's the
record's preset builds; Gowin's high by at most 10 %, on purpose; docs/performance.md has
them). :func:`check_fit` refuses a design only
when the estimate exceeds the device, so a design near the limit still reaches place and route,
which has the last word: a placement that runs out of sites is reported as a :class:`FitError`
with nextpnr's numbers (:func:`raise_if_overfull`).
"""

import dataclasses
import math

from ..memattrs import SPRAM_SUFFIX, block_rams
from .catalog import Family
from .nextpnr import parse_nextpnr_log, util_of
from .pll import clock_plan

__all__ = ["BRAM_CONGESTION_ABOVE", "DSP_CONGESTION_ABOVE", "RESOURCE_NAMES", "FitError",
           "check_array_fit", "check_fit", "dsp_blocks_with_adder", "estimate",
           "implementation_for", "nextpnr_options", "raise_if_overfull", "sb_mac16_pairs"]


class FitError(ValueError):
    """A design does not fit a device; the message names the resource, the need and the
    capacity."""


#: What each family calls each resource, for messages.
RESOURCE_NAMES = {
    Family.ICE40: {"lut": "logic cells", "ff": "flip-flops", "dsp": "SB_MAC16 DSPs",
                   "bram": "SB_RAM40_4K block RAMs", "spram": "SB_SPRAM256KA RAMs"},
    Family.ECP5: {"lut": "LUT4s", "ff": "flip-flops", "dsp": "MULT18X18D multipliers",
                  "bram": "DP16KD block RAMs"},
    Family.GOWIN: {"lut": "LUT4s", "ff": "flip-flops", "dsp": "MULT18X18 multipliers",
                   "bram": "BSRAM blocks"},
}

# Memories at most this deep become LUT RAM (ECP5, Gowin) or flip-flops rather than block RAM.
_SMALL_DEPTH = {Family.ICE40: 0, Family.ECP5: 32, Family.GOWIN: 32}

# LUT model: base + per (MAC x (acc_bits + w_bits)) + per (column x (acc_bits + mult_bits))
# + per bit of the widest host word + per bit of the layer descriptor (its register and the
# feeders' counters) + per (requantization lane x (acc_bits + 1) x mult_bits).
# Both families are fitted on the cell counts nextpnr reports after packing (`--pack-only`) of
# whole devices with the presets' buffers; the builds, their counts and the fit's error are in
# docs/performance.md ("Figures that were in code comments").
# iCE40 counts logic cells; its requantization multipliers and shifters are logic cells (the
# lane term). ECP5 counts LUT4s (carry halves included), refitted after the registered reads
# with the link bridge's term as fitted on the iCE40; the word and descriptor terms add nothing
# there. A device with spatial layers adds the patch walker and the pooler: about the same on
# both families and over array shapes (1,285 to 1,839 measured on six builds, 2026-11-25).
# Activation bounds and leaky ReLU (``bounds``) add per requantization lane its multiplier's
# select, its clamp and the wider parameter and host words: Yosys's cells with and without
# them on the presets (synthesis only, carry cells as two LUT4s on the ECP5; 2026-11-26:
# 85F +599 LUT4 over 8 lanes, iCEBreaker +116 LC over one).
# The adder (``residual``) adds per activation lane its shifter, rounding, clamp, sum and
# operand select (the 85F preset built with and without it, 8 lanes of 8 x 16 bits: 15,496
# and 13,197 LUT4 placed and routed, about 290 a lane; 2026-11-26); on the iCE40 also its
# multiplier, from logic cells (the iCEBreaker preset has no adder).
# The taps walk (``taps``, spatial designs) adds per activation lane its three counters, the
# row check, the third operand of its bank's address adder and its share of the lanes'
# rotation, less a constant: a line through Yosys's activation feeder alone with and without
# it (LUT4 + two per CCU2C, nextpnr's count; 2026-11-26), 12F 4x4 +1,162, 85F 8x8 +3,010 and
# 16x2 +6,177 (the line: +1,239, +2,899, +6,219); the 85F preset placed and routed, 18,480
# and 15,496 (+2,984). The iCE40 takes the same terms (the iCEBreaker 2x2's feeder: +297
# SB_LUT4, +195 SB_CARRY; 409 by them), as it does the fused pool's (the same feeder +155
# SB_LUT4 of the 285).
# The fused max pool (``fuse_pool``, spatial designs): the window counters, the running
# maximum and the longer geometry, Yosys's blocks of the 85F preset with and without it
# (+205 LUT4, +40 CCU2C: 285 in nextpnr's count; 2026-11-26; not placed and routed).
# The packed wire (``Implementation.packed_wire``: LOAD and FETCH's repacker and request
# checks) and the class output (``class_output``: the scanner): constants. The iCEBreaker
# preset built with them, 4,915 LC without, +1,244 with LOAD and FETCH, +2,004 with all three
# (2026-11-26); the 85F preset placed and routed with all three 17,024 LUT4, without 15,354
# (+1,670), split between the two as on the iCE40.
# The depthwise unit (``depthwise``): per cell and operand bit its choice of the row's operand,
# the lines and zero; its stream's counters and the output cells' walk a constant. First
# estimated from the unit's structure (a 4:1 choice a LUT4 and a half, 700 for the rest), then
# both scaled by 4.25 on the 85F preset's build, the one with the unit (29,733 LUT4 against
# 24,960 with the first terms; 2026-12-04). The iCE40's keep the first estimate (no build).
# Today's ECP5 gateware (the terms above were fitted before the registered host port, the
# array's registered inputs, WEIGHT's address copies and the reset's global) takes more per
# activation lane (``act_lane``), fitted on the record's builds of the five presets without
# the unit (2026-12-04): 12F 4x4 +1,190 over the older terms, 45F 8x6 +3,233, the 85F's
# three 8x8s +2,483 to +3,067, 297 to 404 a lane; the estimate at 350 is within 2 % of each.
# The iCE40's and Gowin's builds match their terms without it.
_LUT_MODEL = {
    Family.ICE40: {"base": 1532.4, "mac": 1.8, "col": 10.9, "word": 3.0, "desc": 5.6,
                   "lane": 2.734, "spatial": 1490, "bounds": 116, "adder": 260,
                   "taps": 415, "taps0": -421, "fuse_pool": 285,
                   "packed_wire": 1244, "class_output": 760, "dw_cell": 1.5, "dw": 700,
                   "act_lane": 0},
    Family.ECP5: {"base": 2712.6, "mac": 1.362, "col": 8.434, "word": 0.0, "desc": 0.0,
                  "lane": 0.304, "spatial": 1490, "bounds": 75, "adder": 290,
                  "taps": 415, "taps0": -421, "fuse_pool": 285,
                  "packed_wire": 1037, "class_output": 633, "dw_cell": 6.4, "dw": 2980,
                  "act_lane": 350},
}
# Gowin counts LUT4s and ALUs (a carry cell takes a LUT4's site), nextpnr-himbaechel's table
# (the same after packing as after routing). Fitted on three builds of 2026-12-02: the ECP5's
# terms on a base 1,365 higher, from the Tang Nano 9K's 2x2 device with its preset's widths
# (4,803 placed and routed against the ECP5 model's 3,438); its 4x4 preset then comes out
# 6.9 % high (5,799 against the 5,423 of its recorded build, `hwgen build --board
# tang-nano-9k`): Yosys's Gowin mapping grows less per MAC and column than its ECP5 mapping,
# so keeping the ECP5's slopes errs high on larger arrays, as a fit check should. The
# features (spatial layers, bounds, the adder, the taps walk, the fused pool, the packed wire,
# the class output, the depthwise unit) at 1.55 times the ECP5's: the Primer 20K's preset,
# which has them all, took 16,548 (12,274 LUT4, 4,274 ALU; `hwgen build --board
# tang-primer-20k`) against 13,354 with the ECP5's (1.52 times would meet it; one build, so
# rounded up).
_LUT_MODEL[Family.GOWIN] = {**_LUT_MODEL[Family.ECP5], "base": 4077.6, "act_lane": 0}
_LUT_MODEL[Family.GOWIN].update({
    key: 1.55 * _LUT_MODEL[Family.ECP5][key]
    for key in ("spatial", "bounds", "adder", "taps", "taps0", "fuse_pool", "packed_wire",
                "class_output", "dw_cell", "dw")})
# Logic cells per product bit of a multiplier that Yosys builds from iCE40 logic cells (an
# unpacked, output-stationary array).
_ICE40_CELLS_PER_PRODUCT_BIT = 3.2

#: The DSP blocks of an ECP5 design above which the adder's multipliers are built from logic
#: cells and nextpnr routes with router2 (:func:`implementation_for`, :func:`nextpnr_options`):
#: the 8x16 ResNet-8 design with them took 152 MULT18X18Ds and its router1 stalled, congested;
#: the 85F preset's 88 route, as do the smaller chips' full ones (28 of the 12F's 28, 68 of the
#: 45F's 72), a fraction of the 85F design's nets.
DSP_CONGESTION_ABOVE = 128

#: The share of an ECP5's block RAMs (by the estimate) above which nextpnr routes with router2:
#: the 8x8 VWW design with 198 of the 85F's 208 DP16KDs stalled in router1 (54,000 of 114,208
#: arcs left from 900 s to 2,261 s, when it was stopped); router2 routed it in 5 minutes.
BRAM_CONGESTION_ABOVE = 0.9

# LUT4s per product bit of an adder multiplier built from logic cells on the ECP5
# (hwgen.device.adder.logic_product: in_bits shifted copies of the multiplier, added as a
# tree; an estimate, with the adder's carry chains as two LUT4s a bit).
_ECP5_LUTS_PER_ADDER_BIT = 2.0

# Memories a board with ``spram`` puts into SB_SPRAM256KA (names as in _memories).
_SPRAM_MEMORIES = ("weight", "frame_buffer", *(f"act_lo{g}" for g in range(32)))


# A bf16 MAC's multiplier normalization, fp32 adder and their pipeline registers, beside what
# the integer terms count for its 16-bit operands and 32-bit sums: the bf16 4x4 dense device
# on the 85F placed 23,706 TRELLIS_COMB against 8,223 by the integer terms (2026-12-03, about
# 970 a MAC; the bf16 arrays alone took 1,032 and 948 a MAC at 4x4 and 8x8).
BF16_MAC_LUTS = 950

# A bf16 adder's lane (``residual`` on a bf16 design: hwgen.device.bf16_add.BF16AddLane, an
# fp32 adder and a finish) in place of the int8 adder's, and no multiplier: Yosys's cells of
# one lane, synthesis only (2026-12-03): ECP5 770 LUT4 + 124 CCU2C (two LUT4s each), iCE40
# 767 SB_LUT4; to be refitted on a build.
BF16_ADD_LANE_LUTS = {Family.ICE40: 767}
_BF16_ADD_LANE_LUTS_ELSE = 1018


def _bram_blocks(family, width, depth):
    if depth <= _SMALL_DEPTH[family]:
        return 0
    return block_rams(family, width, depth)


def _memories(config, impl):
    """Return ``[(name, width, depth)]`` of the memories of a device built from ``config`` by
    ``impl``."""
    from ..device.memories import act_groups, out_param_layout, weight_memories
    from ..memmap import Region, regions
    from ..protocol import MAX_PAYLOAD

    geo = regions(config)
    shared = (Region.PARAM, Region.OUTPUT)
    mems = [("program", geo[Region.PROGRAM].word_bits, geo[Region.PROGRAM].depth)]
    mems += [(name.removesuffix(SPRAM_SUFFIX), len(lanes) * config.w_bits, depth)
             for name, lanes, depth in weight_memories(config, impl)]
    mems += [(r.name.lower(), geo[r].word_bits, geo[r].depth)
             for r in (() if impl.out_param_shared else shared)]
    if impl.out_param_shared:
        mems.append(("out_param", *out_param_layout(config)[1:]))
    split = config.act_spram_depth
    mems += [(f"act{b}", config.in_bits, config.act_depth - split)
             for b in range(config.act_lanes)]
    mems += [(f"act_lo{g}", config.in_bits * len(group), split)
             for g, group in enumerate(act_groups(config)) if split]
    mems.append(("acc", config.cols * config.acc_bits, config.acc_depth))
    mems.append(("frame_buffer", 8, MAX_PAYLOAD))
    # The engine's result FIFO is registers in the accelerator (its sink is always ready).
    mems.append(("rx_fifo", 8, impl.rx_fifo - 1))
    return mems


def sb_mac16_pairs(config):
    """Return the SB_MAC16s of a packed array: vertically adjacent processing elements share
    one (:class:`hwgen.device.systolic.WeightStationaryArray`)."""
    return config.cols * math.ceil(config.array_rows / 2)


def _dsp_blocks(board, config):
    """Return ``(DSP blocks, products built from logic cells)`` of a device on ``board``."""
    macs = config.array_rows * config.cols
    if board.family is Family.ICE40:
        # A packed array shares SB_MAC16s (two products each); the post-processing multipliers
        # are built from logic cells, the DSPs being taken. Unpacked (output-stationary), Yosys
        # builds every product from logic cells.
        adder = (_ICE40_CELLS_PER_PRODUCT_BIT * _adder_multipliers(config)
                 * config.in_bits * config.mult_bits)
        if board.packing_for(config) is not None:
            return sb_mac16_pairs(config), adder
        return 0, _ICE40_CELLS_PER_PRODUCT_BIT * macs * config.in_bits * config.w_bits + adder
    # One MULT18X18D per product of the array; a post-processing product of
    # (acc_bits + 1) x (mult_bits + 1) signed bits takes 18x18 tiles (with split_operand,
    # one per slice of the accumulator); the adder's, one per lane. Nothing else multiplies
    # (the MAC counter's product by rows * cols is shifts and adds).
    # An adder built from logic cells (implementation_for) takes its products' cells instead.
    total = dsp_blocks_with_adder(board, config)
    if implementation_for(board, config).adder_dsp:
        return total, 0
    adder = _adder_products(config)
    return total - adder, _ECP5_LUTS_PER_ADDER_BIT * adder * config.in_bits * config.mult_bits


def implementation_for(board, config):
    """Return the implementation that builds ``config`` on ``board``: the board's, with the
    options of the preset ``config`` is (:data:`~hwgen.boards.catalog.PRESET_IMPLEMENTATIONS`),
    the adder's multipliers in logic cells (``adder_dsp=False``) on an ECP5 design that would
    otherwise take more than :data:`DSP_CONGESTION_ABOVE` DSP blocks (an array that takes
    most of the 85F's), and tiles loaded a row a cycle (``weight_pairs=False``) by an array
    that pairs do not serve (bf16, output-stationary)."""
    from . import catalog
    from .config import preset_of

    impl = board.implementation
    own = catalog.PRESET_IMPLEMENTATIONS.get(preset_of(board, config))
    if own:
        impl = dataclasses.replace(impl, **own)
    if config.residual and impl.adder_dsp and _dsp_congested(board, config):
        impl = dataclasses.replace(impl, adder_dsp=False)
    if impl.weight_pairs and not impl.pairs_for(config):
        impl = dataclasses.replace(impl, weight_pairs=False)
    return impl


def nextpnr_options(board, config):
    """Return the options ``hwgen build`` gives nextpnr for ``config`` on ``board`` beyond its
    defaults (flag and value pairs): on an ECP5 design of more than
    :data:`DSP_CONGESTION_ABOVE` DSP blocks (with the adder's) or more than
    :data:`BRAM_CONGESTION_ABOVE` of the block RAMs, the analytic placer ``static`` and
    router2.

    router2 makes headway where router1 (the default) stalled on such designs. The default
    placer (HeAP) left router2 congested on every design past 128 DSP blocks (the 8x16 array:
    overuse still 30,300 at iteration 5, falling 5 % an iteration) and on the zoo design with
    the depthwise unit; ``static`` placed the 8x16's netlist with 42 % less wire, and both
    routed and met their clocks (docs/performance.md). On designs that HeAP routes easily,
    ``static`` cost clock (the 85F's 8x8 of 64 block RAMs: 42.7 MHz against 65.6), so it is
    kept to these. A preset whose recorded build routed otherwise names its own
    (:func:`~hwgen.boards.config.preset_nextpnr`)."""
    from .config import preset_nextpnr

    own = preset_nextpnr(board, config)
    if own is not None:
        return own
    congested = _dsp_congested(board, config) or (
        board.family is Family.ECP5
        and estimate(board, config)["bram"] > BRAM_CONGESTION_ABOVE * board.capacity["bram"])
    return ["--placer", "static", "--router", "router2"] if congested else []


def _dsp_congested(board, config):
    return board.family is Family.ECP5 and dsp_blocks_with_adder(board, config) \
        > DSP_CONGESTION_ABOVE


def dsp_blocks_with_adder(board, config):
    """Return the 18x18 multipliers (MULT18X18D, MULT18X18) of a device on the ECP5 or Gowin
    ``board`` with the adder's multipliers in DSP blocks: the array's (two Gowin MULT9X9s to
    one), the requantization's and the adder's."""
    macs = config.array_rows * config.cols
    if board.family is Family.GOWIN and max(config.in_bits, config.w_bits) <= 9:
        # Yosys puts a product of 9-bit operands into a MULT9X9, half a MULT18X18's site.
        macs = math.ceil(macs / 2)
    operand = board.implementation.split_operand
    slices = (math.ceil(config.acc_bits / operand) if operand
              else math.ceil((config.acc_bits + 1) / 18))
    requant = config.requant_lanes * slices * math.ceil((config.mult_bits + 1) / 18)
    return macs + requant + _adder_products(config)


def _adder_products(config):
    """Return the adder's products (``residual``): one per activation lane, in_bits x
    (mult_bits + 1) signed bits, which Yosys maps onto 18x18 tiles on the ECP5
    (:class:`hwgen.device.adder.Adder`)."""
    tiles = math.ceil(config.in_bits / 18) * math.ceil((config.mult_bits + 1) / 18)
    return _adder_multipliers(config) * tiles


def _adder_multipliers(config):
    """Return the adder's multipliers: one per activation lane with ``residual``, none on a
    bf16 design (its adder sums without scaling)."""
    return config.residual * config.act_lanes * (config.dtype != "bf16")


def _adder_luts(board, config, k):
    """Return the adder's LUTs besides its multipliers: the int8 adder's per lane, or a bf16
    one's (:data:`BF16_ADD_LANE_LUTS`)."""
    lane = (BF16_ADD_LANE_LUTS.get(board.family, _BF16_ADD_LANE_LUTS_ELSE)
            if config.dtype == "bf16" else k["adder"])
    return lane * config.act_lanes * config.residual


def _feature_luts(k, config, impl):
    """Return the LUTs of the taps walk and the fused max pool (spatial designs only) and of
    the packed wire and the class output (when ``impl`` builds them)."""
    spatial = config.spatial
    taps = max(0, k["taps"] * config.act_lanes + k["taps0"])
    macs = config.array_rows * config.cols
    return (taps * (spatial and config.taps)
            + k["fuse_pool"] * (spatial and config.fuse_pool)
            + config.depthwise * (k["dw"] + k["dw_cell"] * macs * config.in_bits
                                  + _dw_line_luts(config))
            + k["packed_wire"] * impl.packed_wire + k["class_output"] * impl.class_output)


def estimate(board, config):
    """Estimate the resources a device built from ``config`` uses on ``board``.

    Returns
    -------
    dict
        ``{"lut", "ff", "dsp", "bram", "spram"}`` → int, plus ``"memories"``: the block RAMs
        of every memory, ``[(name, width, depth, blocks)]`` (0 blocks for one in SPRAM).
    """
    from ..memmap import descriptor_layout, max_word_bits

    fam = board.family
    macs = config.array_rows * config.cols
    dsp, lut_mults = _dsp_blocks(board, config)
    k = _LUT_MODEL[fam]
    impl = implementation_for(board, config)
    lut = (k["base"] + k["mac"] * macs * (config.acc_bits + config.w_bits)
           + k["col"] * config.cols * (config.acc_bits + config.mult_bits)
           + k["word"] * max_word_bits(config) + k["desc"] * descriptor_layout(config).size
           + k["lane"] * config.requant_lanes * (config.acc_bits + 1) * config.mult_bits
           + k["spatial"] * config.spatial + k["bounds"] * config.requant_lanes * config.bounds
           + k["act_lane"] * config.act_lanes
           + _adder_luts(board, config, k) + lut_mults
           + _feature_luts(k, config, impl) + BF16_MAC_LUTS * macs * (config.dtype == "bf16"))
    if board.implementation.link_on_oscillator \
            and clock_plan(board, config.clock_hz)["pll"] is not None:
        # The host port bridge (link in its own domain): the counters' copy (128 registers), a
        # read register and the handshake; fitted on iCEBreaker builds (docs/performance.md).
        lut += 170 + max_word_bits(config) // 2
    # High on the iCE40 on purpose (iCEBreaker preset: 3,812 against 2,624 built): it only
    # has to refuse what cannot fit. Below the ECP5's builds (the ResNet-8 design 10,093
    # against 13,400), where flip-flops never bind (as many as LUT4s). The features as
    # measured with their LUTs (above): the taps walk's counters (85F +304, 12F +161, 16x2
    # +583 in the feeder), the fused pool's +247, the wire's +561 (85F, split as its LUTs).
    ff = (macs * (config.in_bits + 2 * config.w_bits + config.acc_bits + 1)
          + 10 * config.cols * config.acc_bits + 1900 + 2 * max_word_bits(config)
          + config.spatial * (38 * config.act_lanes * config.taps + 247 * config.fuse_pool)
          + 380 * impl.packed_wire + 181 * impl.class_output
          + config.depthwise * _depthwise_ffs(config))
    mems, spram = [], 0
    for name, w, d in _memories(config, impl):
        # The frame buffer leaves SPRAM to the input area when ACT is split.
        if board.implementation.spram and name in _SPRAM_MEMORIES \
                and not (name == "frame_buffer" and config.act_spram_depth):
            spram += math.ceil(w / 16) * math.ceil(d / 16384)   # SB_SPRAM256KA: 16 x 16K
            mems.append((name, w, d, 0))
        else:
            mems.append((name, w, d, _bram_blocks(fam, w, d)))
    return {"lut": int(lut), "ff": int(ff), "dsp": dsp, "bram": sum(m[3] for m in mems),
            "spram": spram, "memories": mems}


def _dw_line_luts(config):
    """Return the LUT4s of the depthwise unit's delay lines, logic cells' RAM
    (``LOGIC_RAM_ATTRS``): a 16 x 4 RAM a slice, two LUT4s, per 4 bits of 16 words."""
    words = max(1, config.dw_depth - 1)
    return config.dw_lines * 2 * math.ceil(config.cols * config.in_bits / 4) \
        * math.ceil(words / 16)


def _depthwise_ffs(config):
    """Return the depthwise unit's flip-flops: each cell's line select, the lane skew and the
    lines' registers, its counters."""
    from ..device.layouts import sel_bits

    skew = config.in_bits * config.cols * (config.cols + 1) // 2
    return (config.array_rows * config.cols * sel_bits(config) + skew
            + config.dw_lines * config.cols * config.in_bits + 300)


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
    names = RESOURCE_NAMES[board.family]
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


def check_array_fit(board, config, *, packed=True):
    """Return ``{"dsp": blocks}`` of the array alone (:class:`hwgen.boards.tops.ArrayTop`) on
    ``board``: one DSP block per product, or one per pair on a packed iCE40 array (not with
    ``packed=False``: the bf16 array, :class:`hwgen.boards.tops.BF16ArrayTop`, multiplies
    each pair of significands in a block of its own).

    Raises
    ------
    FitError
        If the board has fewer DSP blocks.
    """
    from ..implementation import DspPacking

    dsp = config.array_rows * config.cols
    if packed and board.packing_for(config) is DspPacking.SB_MAC16:
        dsp = sb_mac16_pairs(config)
    if dsp > board.capacity["dsp"]:
        raise FitError(f"the {config.rows}x{config.cols} array needs {dsp} "
                       f"{RESOURCE_NAMES[board.family]['dsp']}, the {board.name} has "
                       f"{board.capacity['dsp']}")
    return {"dsp": dsp}


def raise_if_overfull(board, config, nextpnr_log):
    """Raise :class:`FitError` if nextpnr's utilisation table in ``nextpnr_log`` shows more
    cells than sites (nextpnr prints it before it gives up)."""
    util = parse_nextpnr_log(nextpnr_log)["utilisation"]
    for res in ("lut", "dsp", "bram", "ff"):
        used, avail = util_of(board.family, res, util)
        if used > avail:
            raise FitError(
                f"{config.name} does not fit the {board.name} ({board.device}) after synthesis: "
                f"it needs {used} {RESOURCE_NAMES[board.family][res]}, the device has {avail} "
                f"(the estimate before synthesis was {estimate(board, config)[res]})")
