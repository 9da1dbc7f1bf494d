"""The accelerator's memories: which exist, their shapes, their read latency, and which never
see a collision."""

import math

from amaranth.hdl import signed, unsigned
from amaranth.lib import memory

from ..implementation import Registers
from ..memattrs import NO_COLLISION_ATTRS, SPRAM_ATTRS, SPRAM_SUFFIX, block_rams
from ..memmap import Region, regions

__all__ = ["WEIGHT_BANK_DEPTH", "act_groups", "collision_free_memories", "make_memories",
           "out_param_layout", "read_latency", "weight_banks", "weight_groups", "weight_memories",
           "weight_names"]

#: Words of one bank of a WEIGHT memory split by depth (:func:`weight_banks`): a 16-bit
#: group's bank is two ECP5 DP16KDs side by side (2048 x 9, a lane each), one deep.
WEIGHT_BANK_DEPTH = 2048


def read_latency(implementation):
    """Return the cycles from a memory read's address to the word its reader takes: one, two
    where every read port ends at a register (``Registers.READS`` on; the readers address
    their ports a cycle ahead, see :mod:`hwgen.device.host_access`)."""
    return 1 + (implementation.registers >= Registers.READS)


def out_param_layout(config):
    """Return ``(param_base, word_bits, depth)`` of the memory that holds OUTPUT and PARAM
    (``Implementation.out_param_shared``): OUTPUT at word 0, PARAM from ``param_base``, a
    multiple of the power of two above PARAM's last address, so that a PARAM address is its
    low bits under a constant."""
    geo = regions(config)
    span = 1 << max(1, (config.param_depth - 1).bit_length())
    base = math.ceil(config.out_depth / span) * span
    bits = max(geo[Region.PARAM].word_bits, geo[Region.OUTPUT].word_bits)
    return base, bits, base + config.param_depth


def act_groups(config):
    """Return the banks that share each single-port memory below ``act_spram_depth``: as many
    ``in_bits`` lanes as a 16-bit SB_SPRAM256KA word holds (at least one)."""
    size = max(1, 16 // config.in_bits)
    lanes = range(config.act_lanes)
    return [tuple(lanes[g:g + size]) for g in range(0, config.act_lanes, size)]


def weight_groups(config, implementation):
    """Return the lanes of each WEIGHT memory: one memory, or with ``Registers.ARRAY`` one per
    16 bits of lanes where that takes no more DP16KDs than one memory.

    On the ULX3S-85F WEIGHT spans the die: one address into its 136 DP16KDs took 21 ns of
    routing, the preset's longest path. A memory per group of lanes has an address of its own
    (:class:`~hwgen.device.weight_feeder.WeightFeeder`'s copies of its address registers), a
    net to a quarter of the blocks, which the placer can put beside them.
    """
    lanes = tuple(range(config.cols))
    size = max(1, 16 // config.w_bits)     # a DP16KD's 18-bit port holds 16 bits of lanes
    if (implementation.registers < Registers.ARRAY or implementation.spram
            or config.cols % size):
        return [lanes]
    whole = block_rams("ecp5", config.cols * config.w_bits, config.weight_depth)
    split = block_rams("ecp5", size * config.w_bits, config.weight_depth) * (config.cols // size)
    if split > whole:
        return [lanes]
    return [lanes[g:g + size] for g in range(0, config.cols, size)]


def weight_names(config, implementation):
    """Return the names of the WEIGHT memories, lane group by lane group (``weight``, or
    ``weight0``.. for :func:`weight_groups`; an SPRAM's ends in ``SPRAM_SUFFIX``)."""
    groups = weight_groups(config, implementation)
    if len(groups) == 1:
        return ["weight" + (SPRAM_SUFFIX if implementation.spram else "")]
    return [f"weight{g}" for g in range(len(groups))]


def weight_banks(config, implementation):
    """Return the depths of the memories each WEIGHT memory (:func:`weight_names`) is split
    into, bank by bank: ``[weight_depth]`` (one memory), or with weight pairs on lanes split
    into 16-bit groups (the ULX3S-85F's preset) banks of :data:`WEIGHT_BANK_DEPTH` words.

    Each bank is one block RAM deep, so each of its two read ports can end at a register of
    its own, which the build folds into the blocks (``OUTREG``, :mod:`hwgen.boards.fold`);
    the banks' words are chosen after those registers, by a select a cycle behind
    (:mod:`hwgen.device.weight_banks`). A memory many blocks deep has one register after
    Yosys's multiplexer over its blocks instead, which no block can hold: the blocks' slow
    outputs (5.8 ns) and that multiplexer, for both ports, were the preset's longest paths.
    Banks as deep as a block of 9-bit words keep that multiplexer's inputs (17 banks for the
    zoo's 33,792 words; banks of 1,024 words, 1024 x 18 blocks, took twice as many, and
    nextpnr's router1 made a seventeenth of its headway on them).
    """
    depth = config.weight_depth
    groups = weight_groups(config, implementation)
    if (not implementation.pairs_for(config) or len(groups) == 1
            or depth <= WEIGHT_BANK_DEPTH):
        return [depth]
    full, rest = divmod(depth, WEIGHT_BANK_DEPTH)
    return [WEIGHT_BANK_DEPTH] * full + ([rest] if rest else [])


def weight_memories(config, implementation):
    """Return ``[(name, lanes, depth)]`` of the WEIGHT memories as built: one per group of
    lanes, or one per bank of each (``weight<g>_<k>``, :func:`weight_banks`)."""
    banks = weight_banks(config, implementation)
    groups = zip(weight_names(config, implementation), weight_groups(config, implementation),
                 strict=True)
    if len(banks) == 1:
        return [(name, lanes, banks[0]) for name, lanes in groups]
    return [(f"{name}_{k}", lanes, depth) for name, lanes in groups
            for k, depth in enumerate(banks)]


def collision_free_memories(config, implementation):
    """Return the names of the accelerator's memories whose reads never meet a write to the same
    address in the same cycle.

    The host port reads and writes only while idle and never both at once; a layer writes its
    activations to an area the compiler keeps apart from the one it reads. So a board build may
    tell Yosys that a collision cannot happen (``COLLISION_X_MASK``): otherwise it adds a
    register and a multiplexer per bit of the word to return the old word on a collision.
    The accumulators' read-modify-write needs that bypass, unless reads are registered
    (:func:`read_latency`): that
    read skips a colliding cycle and forwards the word itself. (The single-port memories below
    ``act_spram_depth`` read only when they do not write.)
    """
    shared = ["out_param"] if implementation.out_param_shared else ["param", "out"]
    names = ["prog", *shared, *(f"act{b}" for b in range(config.act_lanes))]
    if not implementation.spram:
        names += [name for name, _, _ in weight_memories(config, implementation)]
    if read_latency(implementation) > 1:
        names.append("acc")
    return names


def make_memories(m, config, implementation):
    """Add the memories the host reaches to ``m``; return them by name (``prog``, ``weight``,
    ``param`` and ``out`` or ``out_param``, ``act0``.. and ``act_lo0``.. below
    ``act_spram_depth``, as :func:`collision_free_memories` names them; the names of the
    memories that go to SPRAM end in ``SPRAM_SUFFIX``)."""
    apart = collision_free_memories(config, implementation)
    geo = regions(config)
    mems = {}

    def add(name, shape, depth, attrs=None):
        if name in apart:
            attrs = NO_COLLISION_ATTRS
        mem = memory.Memory(shape=shape, depth=depth, init=[], attrs=attrs)
        m.submodules[name] = mem
        mems[name] = mem
        return mem

    def region(r):
        return unsigned(geo[r].word_bits), geo[r].depth

    spram = SPRAM_SUFFIX if implementation.spram else ""
    huge = SPRAM_ATTRS if implementation.spram else None
    add("prog", *region(Region.PROGRAM))
    for name, lanes, depth in weight_memories(config, implementation):
        add(name, unsigned(len(lanes) * config.w_bits), depth, attrs=huge)
    if implementation.out_param_shared:
        _, bits, depth = out_param_layout(config)
        add("out_param", unsigned(bits), depth)
    else:
        add("param", *region(Region.PARAM))
        add("out", *region(Region.OUTPUT))
    split = config.act_spram_depth
    for b in range(config.act_lanes):
        add(f"act{b}", signed(config.in_bits), config.act_depth - split)
    if split:
        for g, group in enumerate(act_groups(config)):
            add(f"act_lo{g}{spram}", unsigned(config.in_bits * len(group)), split, attrs=huge)
    return mems
