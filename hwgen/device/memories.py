"""The accelerator's memories: which exist, their shapes, and which never see a collision."""

from amaranth.hdl import signed, unsigned
from amaranth.lib import memory

from ..memattrs import NO_COLLISION_ATTRS, SPRAM_ATTRS, SPRAM_SUFFIX
from ..memmap import Region, regions

__all__ = ["collision_free_memories", "make_memories"]


def collision_free_memories(config, implementation):
    """Return the names of the accelerator's memories whose reads never meet a write to the same
    address in the same cycle.

    The host port reads and writes only while idle and never both at once; a layer writes its
    activations to an area the compiler keeps apart from the one it reads. So a board build may
    tell Yosys that a collision cannot happen (``COLLISION_X_MASK``): otherwise it adds a
    register and a multiplexer per bit of the word to return the old word on a collision.
    The accumulators' read-modify-write needs that bypass, unless ``registered_reads``: that
    read skips a colliding cycle and forwards the word itself.
    """
    names = ["prog", "param", "out", *(f"act{b}" for b in range(config.act_lanes))]
    if not implementation.spram:
        names.append("weight")
    if implementation.registered_reads:
        names.append("acc")
    return names


def make_memories(m, config, implementation):
    """Add the memories the host reaches to ``m``; return them by name (``prog``, ``weight``,
    ``param``, ``out``, ``act0``.., as :func:`collision_free_memories` names them; the weight
    memory's name ends in ``SPRAM_SUFFIX`` when it goes to SPRAM)."""
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

    add("prog", *region(Region.PROGRAM))
    if implementation.spram:
        add("weight" + SPRAM_SUFFIX, *region(Region.WEIGHT), attrs=SPRAM_ATTRS)
    else:
        add("weight", *region(Region.WEIGHT))
    add("param", *region(Region.PARAM))
    add("out", *region(Region.OUTPUT))
    for b in range(config.act_lanes):
        add(f"act{b}", signed(config.in_bits), config.act_depth)
    return mems
