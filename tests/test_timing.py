"""The cycles each register level adds, as the units state them (hwgen.timing): the table the
cycle models read. tests/device/test_accelerator.py checks each level's cycles against the
simulated device."""

import pytest

from hwgen.boards.catalog import (
    ECP5_12F_IMPLEMENTATION,
    ECP5_85F_IMPLEMENTATION,
    ECP5_IMPLEMENTATION,
    ICE40_IMPLEMENTATION,
)
from hwgen.config import AcceleratorConfig
from hwgen.implementation import Implementation, Registers
from hwgen.timing import UnitLatencies, unit_latencies

ONE_STEP = AcceleratorConfig(rows=2, cols=3)
TWO_STEPS = AcceleratorConfig(rows=2, cols=4, post_lanes=2)


@pytest.mark.parametrize(("level", "one_step", "two_steps"), [
    # read, array, first_row, requant (write-back), weight rows a cycle
    (Registers.NONE, (1, 0, 0, 0, 1), (1, 0, 0, 0, 1)),
    (Registers.READS, (2, 0, 0, 0, 1), (2, 0, 0, 0, 1)),
    (Registers.HOST, (2, 0, 0, 1, 1), (2, 0, 0, 1, 1)),
    # Staged rows only where the walker's step is a register (one requantization step).
    (Registers.ARRAY, (2, 1, 1, 1, 1), (2, 1, 0, 1, 1)),
])
def test_each_level_adds_its_units_cycles(level, one_step, two_steps):
    impl = Implementation(registers=level)
    assert TWO_STEPS.requant_steps == 2
    assert unit_latencies(ONE_STEP, impl) == UnitLatencies(*one_step)
    assert unit_latencies(TWO_STEPS, impl) == UnitLatencies(*two_steps)


def test_the_plain_design_adds_nothing():
    assert unit_latencies(ONE_STEP) == unit_latencies(ONE_STEP, Implementation()) \
        == UnitLatencies(read=1, array=0, first_row=0, requant=0)


@pytest.mark.parametrize(("impl", "level", "requant"), [
    (ICE40_IMPLEMENTATION, Registers.NONE, 4),       # pipelined, multiplier split
    (ECP5_12F_IMPLEMENTATION, Registers.READS, 5),   # pipelined, operand split
    (ECP5_IMPLEMENTATION, Registers.HOST, 6),        # and the write-back's register
    (ECP5_85F_IMPLEMENTATION, Registers.ARRAY, 6),
], ids=["ice40", "ecp5-12f", "ecp5", "ecp5-85f"])
def test_the_boards_levels(impl, level, requant):
    """The boards build three levels and the plain one; a requantized chunk takes the
    requantizer's stages and the write-back's more."""
    assert impl.registers is level
    assert unit_latencies(ONE_STEP, impl).requant == requant


def test_weight_pairs_load_two_rows_a_cycle():
    """``weight_pairs`` loads an int8 weight-stationary array's tiles two rows a cycle; a
    bf16 or output-stationary array, which it does not serve, keeps one."""
    pairs = Implementation(registers=Registers.READS, weight_pairs=True)
    assert unit_latencies(ONE_STEP, pairs).weight_rows == 2
    for config in (AcceleratorConfig(rows=2, cols=3, dataflow="os"),
                   AcceleratorConfig(rows=2, cols=3, dtype="bf16")):
        assert unit_latencies(config, pairs).weight_rows == 1
