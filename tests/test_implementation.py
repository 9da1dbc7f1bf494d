"""The implementation options: validation (each error names the option, its value and what is
allowed), the register levels, the requantization's extra cycles, the check against a
configuration, the DSP packing per dataflow and where the requantization's products go."""

import dataclasses

import pytest

from hwgen.config import AcceleratorConfig
from hwgen.device.requantizer import Requantizer
from hwgen.implementation import DspPacking, Implementation, Registers

BOOL_OPTIONS = ("post_pipeline", "spram", "link_on_oscillator", "out_param_shared",
                "weight_pairs")


def test_defaults_are_the_plain_design():
    impl = Implementation()
    assert impl.dsp_packing is None
    assert not (impl.post_pipeline or impl.spram or impl.link_on_oscillator)
    assert impl.registers is Registers.NONE
    assert impl.split_multiplier == 1 and impl.split_operand is None
    assert Requantizer.stages_for(impl) == 0


@pytest.mark.parametrize("value", [0, 1, 2, 3, *Registers])
def test_registers_take_a_level_or_its_number(value):
    impl = Implementation(registers=value)
    assert impl.registers is Registers(value)
    assert Implementation(registers=Registers(value)) == impl


@pytest.mark.parametrize("value", [4, -1, True, 1.5, "HOST", None])
def test_registers_outside_the_levels_are_refused(value):
    with pytest.raises(ValueError, match=(
            rf"Implementation: registers={value!r}; allowed: Registers.NONE \(0\), "
            r"Registers.READS \(1\), Registers.HOST \(2\), Registers.ARRAY \(3\)")) as info:
        Implementation(registers=value)
    assert info.value.__cause__ is None


def test_levels_add_their_registers_in_order():
    """Each level has every one before it: the boards' three and the plain design."""
    assert [level.value for level in Registers] == [0, 1, 2, 3]
    assert Registers.NONE < Registers.READS < Registers.HOST < Registers.ARRAY


@pytest.mark.parametrize("level", [Registers.READS, Registers.HOST, Registers.ARRAY])
def test_registers_refuse_what_has_no_registered_reads(level):
    """One memory for OUTPUT and PARAM, and ACT split into single-port memories, are built
    for plain reads only."""
    with pytest.raises(ValueError, match=(
            rf"Implementation: out_param_shared=True goes without registers, not with "
            rf"registers=Registers.{level.name}; allowed: Registers.NONE, or "
            r"out_param_shared=False")):
        Implementation(registers=level, out_param_shared=True)
    cfg = AcceleratorConfig(rows=2, cols=2, act_depth=128, act_spram_depth=64, spatial=False,
                            residual=False)
    with pytest.raises(ValueError, match=(
            rf"Implementation: registers=Registers.{level.name} cannot read ACT split at "
            r"act_spram_depth=64 .*; allowed: registers=Registers.NONE, or act_spram_depth=0")):
        Implementation(registers=level).check(cfg)
    Implementation(out_param_shared=True).check(cfg)


@pytest.mark.parametrize("value", ["sb_mac16", "mult18x18d", DspPacking.SB_MAC16])
def test_dsp_packing_takes_its_names(value):
    impl = Implementation(dsp_packing=value)
    assert isinstance(impl.dsp_packing, DspPacking)
    assert impl.dsp_packing == DspPacking(value)


def test_dsp_packings_operand_widths():
    """The iCE40 SB_MAC16 multiplies 8x8 (twice), the ECP5 MULT18X18D 18x18, both signed."""
    assert DspPacking.SB_MAC16.operand_bits == 8
    assert DspPacking.MULT18X18D.operand_bits == 18


@pytest.mark.parametrize("value", ["dsp48", "SB_MAC16", 3, ""])
def test_unknown_dsp_packing_is_refused(value):
    with pytest.raises(ValueError, match=(
            rf"Implementation: dsp_packing={value!r}; allowed: None, 'sb_mac16', "
            r"'mult18x18d'")) as info:
        Implementation(dsp_packing=value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


@pytest.mark.parametrize("name", BOOL_OPTIONS)
@pytest.mark.parametrize("value", [1, 0, "yes", None])
def test_flags_must_be_bools(name, value):
    with pytest.raises(ValueError, match=rf"Implementation: {name}={value!r}; allowed: True or "
                                         "False"):
        Implementation(**{name: value})


@pytest.mark.parametrize("value", [0, -2, True, 2.0, "2", None])
def test_split_multiplier_is_a_positive_int(value):
    with pytest.raises(ValueError, match=rf"Implementation: split_multiplier={value!r}; allowed: "
                                         r"an int >= 1"):
        Implementation(split_multiplier=value)


@pytest.mark.parametrize("value", [1, 0, -7, True, False, 7.0, "17"])
def test_split_operand_is_none_or_an_int_of_two_bits_or_more(value):
    with pytest.raises(ValueError, match=rf"Implementation: split_operand={value!r}; allowed: "
                                         r"None or an int >= 2"):
        Implementation(split_operand=value)


def test_split_operand_and_split_multiplier_exclude_each_other():
    with pytest.raises(ValueError, match=r"split_operand=7 goes without split_multiplier, not "
                                         r"with split_multiplier=2; allowed: one of the two"):
        Implementation(split_operand=7, split_multiplier=2)
    # Each alone (and the smallest values allowed) is fine.
    Implementation(split_operand=2)
    Implementation(split_multiplier=2)
    Implementation(split_operand=7, split_multiplier=1)


def test_options_are_frozen():
    impl = Implementation()
    with pytest.raises(dataclasses.FrozenInstanceError):
        impl.post_pipeline = True


@pytest.mark.parametrize(("options", "stages"), [
    ({}, 0),
    ({"post_pipeline": True}, 3),
    ({"split_multiplier": 2}, 1),
    ({"split_multiplier": 16}, 1),
    ({"split_operand": 7}, 2),
    ({"post_pipeline": True, "split_multiplier": 4}, 4),
    ({"post_pipeline": True, "split_operand": 17}, 5),
    # Options outside the requantization add no stage.
    ({"registers": Registers.ARRAY, "spram": True, "link_on_oscillator": True,
      "dsp_packing": "mult18x18d"}, 0),
], ids=["plain", "pipelined", "split2", "split16", "operand7", "ice40-like", "ecp5-like",
        "others"])
def test_requantizer_counts_the_stages_the_options_add(options, stages):
    """Three pipeline stages for post_pipeline, one for a split multiplier, two for a split
    operand (as the options' documentation says); the Requantizer's tests measure them."""
    assert Requantizer.stages_for(Implementation(**options)) == stages


def test_check_refuses_more_multiplier_pieces_than_bits():
    cfg = AcceleratorConfig(rows=2, cols=2, mult_bits=9)
    impl = Implementation(split_multiplier=9)
    assert impl.check(cfg) is impl
    with pytest.raises(ValueError, match=r"Implementation: split_multiplier=10 cuts the 9-bit "
                                         r"multiplier into more pieces than bits; allowed: 1\.\.9"):
        Implementation(split_multiplier=10).check(cfg)


@pytest.mark.parametrize(("in_bits", "w_bits"), [(9, 8), (8, 9), (16, 16)])
def test_check_refuses_operands_wider_than_the_dsp_packing(in_bits, w_bits):
    cfg = AcceleratorConfig(rows=2, cols=2, in_bits=in_bits, w_bits=w_bits, acc_bits=48)
    with pytest.raises(ValueError, match=(
            rf"dsp_packing='sb_mac16' needs in_bits and w_bits <= 8, not {in_bits} and "
            rf"{w_bits}; allowed: narrower operands, or no DSP packing")):
        Implementation(dsp_packing="sb_mac16").check(cfg)
    # 18-bit blocks take every operand a configuration allows (16 bits at most).
    Implementation(dsp_packing="mult18x18d").check(cfg)
    # An output-stationary array does not pack: nothing to refuse.
    os_cfg = dataclasses.replace(cfg, dataflow="os")
    Implementation(dsp_packing="sb_mac16").check(os_cfg)


def test_check_accepts_the_widest_operands_each_packing_takes():
    Implementation(dsp_packing="sb_mac16").check(AcceleratorConfig(in_bits=8, w_bits=8))
    cfg16 = AcceleratorConfig(in_bits=16, w_bits=16, acc_bits=48, mult_bits=16)
    Implementation(dsp_packing="mult18x18d").check(cfg16)


@pytest.mark.parametrize("packing", [None, "sb_mac16", "mult18x18d"])
def test_only_weight_stationary_arrays_pack(packing):
    impl = Implementation(dsp_packing=packing)
    ws = AcceleratorConfig(dataflow="ws")
    os_ = AcceleratorConfig(dataflow="os")
    assert impl.packing_for(ws) == (None if packing is None else DspPacking(packing))
    assert impl.packing_for(os_) is None


ECP5_REQUANT = {"dsp_packing": "mult18x18d", "post_pipeline": True, "split_operand": 17}


@pytest.mark.parametrize(("change", "mult_bits", "in_dsp"), [
    ({}, 16, True),
    ({}, 17, True),
    ({}, 18, False),                           # the multiplier no longer fits the block
    ({"split_operand": 18}, 16, False),        # the slice no longer fits the block
    ({"split_operand": 5}, 16, True),
    ({"post_pipeline": False}, 16, False),     # no registers for the block to take over
    ({"split_operand": None}, 16, False),      # no slices
    ({"dsp_packing": "sb_mac16"}, 16, False),
    ({"dsp_packing": None}, 16, False),
])
def test_requantization_products_go_into_mult18x18ds_when_they_fit(change, mult_bits, in_dsp):
    cfg = AcceleratorConfig(rows=2, cols=2, mult_bits=mult_bits)
    impl = Implementation(**{**ECP5_REQUANT, **change})
    assert impl.requant_in_dsp(cfg) is in_dsp


def test_the_frame_engines_options():
    from hwgen.protocol import RX_FIFO, Features

    assert Implementation().features == Features.ALL
    assert Implementation().rx_fifo == RX_FIFO
    assert Implementation(packed_wire=False).features == Features.CLASSES
    assert Implementation(class_output=False).features == Features.PACKED
    assert Implementation(packed_wire=False, class_output=False).features == Features.NONE
    for bad in (1, 0, True, 64.0):
        with pytest.raises(ValueError, match=r"rx_fifo=.*allowed: an int >= 2"):
            Implementation(rx_fifo=bad)


@pytest.mark.parametrize(("options", "message"), [
    ({}, "registers=Registers.NONE, spram=False"),
    ({"registers": Registers.READS, "spram": True}, "registers=Registers.READS, spram=True"),
])
def test_weight_pairs_need_registered_reads_of_block_rams(options, message):
    """Weight pairs read WEIGHT a cycle ahead on both ports of its block RAMs: not without
    registered reads, not from single-port SPRAM."""
    with pytest.raises(ValueError, match=(
            rf"Implementation: weight_pairs=True reads WEIGHT's block RAMs a cycle ahead on both "
            rf"ports, not with {message}; allowed: registers >= Registers.READS and "
            rf"spram=False, or weight_pairs=False")):
        Implementation(weight_pairs=True, **options)
    assert Implementation(registers=Registers.READS, weight_pairs=True).weight_pairs


@pytest.mark.parametrize(("options", "named"), [
    ({"dtype": "bf16"}, "dtype='bf16', dataflow='ws'"),
    ({"dataflow": "os"}, "dtype='int8', dataflow='os'"),
])
def test_check_refuses_weight_pairs_beside_other_arrays(options, named):
    impl = Implementation(registers=Registers.READS, weight_pairs=True)
    impl.check(AcceleratorConfig(rows=2, cols=2))
    with pytest.raises(ValueError, match=(
            rf"Implementation: weight_pairs=True loads an int8 weight-stationary array, not "
            rf"{named}; allowed: weight_pairs=False")):
        impl.check(AcceleratorConfig(rows=2, cols=2, **options))
