"""The accelerator's memories: which exist with which shapes and attributes, and which the
build may declare free of read/write collisions."""

import dataclasses

import pytest
from amaranth.hdl import Fragment, Module, signed, unsigned
from support import ECP5, ICE40, SMALL, without_dsp

from hwgen.config import AcceleratorConfig
from hwgen.device.accelerator import AcceleratorCore
from hwgen.device.memories import collision_free_memories, make_memories
from hwgen.implementation import Implementation, Registers
from hwgen.memattrs import NO_COLLISION_ATTRS, SPRAM_ATTRS, SPRAM_SUFFIX
from hwgen.memmap import descriptor_layout

IMPLEMENTATIONS = {
    "plain": Implementation(),
    "pipelined": Implementation(post_pipeline=True),
    "registered-reads": Implementation(registers=Registers.READS),
    "spram": Implementation(spram=True),
    "ice40": without_dsp(ICE40),
    "ecp5": without_dsp(ECP5),
}
CONFIGS = {
    "2x3": AcceleratorConfig(rows=2, cols=3, **SMALL),
    "4x2": AcceleratorConfig(rows=4, cols=2, in_bits=6, w_bits=5, acc_bits=24, mult_bits=9,
                             max_k=64, **SMALL),
}


def word_bits(config):
    """The words of each memory the host reaches, from the configuration alone: a descriptor;
    ``cols`` weights; ``cols`` parameters (bias, multiplier, a shift of 0..acc_bits + mult_bits
    - 1, the negative values' multiplier); ``cols`` raw accumulators; one activation per
    bank."""
    shift = (config.acc_bits + config.mult_bits - 1).bit_length()
    return {
        "prog": unsigned(descriptor_layout(config).size),
        "weight": unsigned(config.cols * config.w_bits),
        "param": unsigned(config.cols * (config.acc_bits + 2 * config.mult_bits + shift)),
        "out": unsigned(config.cols * config.acc_bits),
        **{f"act{b}": signed(config.in_bits) for b in range(config.act_lanes)},
    }


def depths(config):
    return {"prog": config.prog_depth, "weight": config.weight_depth,
            "param": config.param_depth, "out": config.out_depth,
            **{f"act{b}": config.act_depth for b in range(config.act_lanes)}}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
def test_collision_free_memories(impl, config):
    """The program, parameters, raw outputs and activation banks never see a collision (the
    host reads or writes while idle, a layer writes an area apart from the one it reads); the
    weights only where they are not a single-port SPRAM; the accumulators only with registered
    reads (their read-modify-write reads the word being written otherwise, see
    tests/device/test_accumulators.py)."""
    cfg, implementation = CONFIGS[config], IMPLEMENTATIONS[impl]
    names = collision_free_memories(cfg, implementation)
    assert len(names) == len(set(names))
    shared = ("out_param",) if implementation.out_param_shared else ("param", "out")
    want = {"prog", *shared, *(f"act{b}" for b in range(cfg.act_lanes))}
    if not implementation.spram:
        want.add("weight")
    if implementation.registers >= Registers.READS:
        want.add("acc")
    assert set(names) == want
    # Every name is one of the accelerator's memories (so that the collision watch of the
    # accelerator's tests watches them all), and the others are the ones left out above.
    dut = AcceleratorCore(cfg, implementation)
    Fragment.get(dut, None)
    others = set(dut.memories) - set(names)
    assert set(names) <= set(dut.memories)
    assert others == ({"weight" + SPRAM_SUFFIX} if implementation.spram else set()) | \
        (set() if implementation.registers >= Registers.READS else {"acc"})


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("impl", list(IMPLEMENTATIONS))
def test_make_memories(impl, config):
    cfg, implementation = CONFIGS[config], IMPLEMENTATIONS[impl]
    m = Module()
    mems = make_memories(m, cfg, implementation)
    weight = "weight" + (SPRAM_SUFFIX if implementation.spram else "")
    shapes = word_bits(cfg)
    shapes[weight] = shapes.pop("weight")
    sizes = depths(cfg)
    sizes[weight] = sizes.pop("weight")
    if implementation.out_param_shared:
        # OUTPUT from word 0, PARAM from the next multiple of the power of two that holds it.
        span = 1 << (cfg.param_depth - 1).bit_length()
        shapes["out_param"] = unsigned(max(shapes.pop("param").width, shapes.pop("out").width))
        sizes["out_param"] = -(-sizes.pop("out") // span) * span + sizes.pop("param")
    assert set(mems) == set(shapes)
    apart = set(collision_free_memories(cfg, implementation))
    for name, mem in mems.items():
        assert m.submodules[name] is mem
        assert (mem.shape, mem.depth) == (shapes[name], sizes[name]), name
        if name == "weight" + SPRAM_SUFFIX:
            assert mem.attrs == SPRAM_ATTRS
        elif name in apart:
            assert mem.attrs == NO_COLLISION_ATTRS, name
        else:
            assert not mem.attrs, name
        assert all(v == 0 for v in mem.init)         # no contents until the host writes
    Fragment.get(m, None)


def test_spram_needs_its_suffix_and_nothing_else_changes():
    """The SPRAM option renames the weight memory only (the board flow finds it by suffix)."""
    cfg = CONFIGS["2x3"]
    modules = [Module(), Module()]
    plain, spram = (make_memories(m, cfg, Implementation(spram=s))
                    for m, s in zip(modules, (False, True), strict=True))
    for m in modules:
        Fragment.get(m, None)
    assert set(spram) - set(plain) == {"weight" + SPRAM_SUFFIX}
    assert set(plain) - set(spram) == {"weight"}
    impl = dataclasses.replace(Implementation(), spram=True, registers=Registers.READS)
    assert "weight" not in collision_free_memories(cfg, impl)


def test_split_act_puts_the_input_area_in_pairs_of_banks():
    """Below ``act_spram_depth`` two 8-bit banks share a 16-bit single-port memory (an SPRAM
    with ``spram``); the banks keep the words above it."""
    cfg = AcceleratorConfig(rows=4, cols=3, **{**SMALL, "act_depth": 128,
                                               "act_spram_depth": 64, "spatial": False})
    for impl, suffix in ((Implementation(), ""), (Implementation(spram=True), SPRAM_SUFFIX)):
        mems = make_memories(Module(), cfg, impl)
        for g in range(2):
            lo = mems[f"act_lo{g}{suffix}"]
            assert (lo.shape, lo.depth) == (unsigned(16), 64)
            assert lo.attrs == (SPRAM_ATTRS if suffix else {})
        assert all((mems[f"act{b}"].shape, mems[f"act{b}"].depth) == (signed(8), 64)
                   for b in range(4))
