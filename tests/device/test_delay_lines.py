"""The depthwise unit's delay lines: every line is the one before it ``delay`` cycles late, for
every delay the lines take (a register, a bypass, the memories), and after a restart with
another delay."""

import random

import pytest
from amaranth.hdl import unsigned
from amaranth.sim import Simulator

from hwgen.device.delay_lines import DelayLines


def _check(delays, *, lines, depth, cycles=40):
    dut = DelayLines(unsigned(8), lines=lines, depth=depth)
    rng = random.Random(sum(delays) + depth)

    async def bench(ctx):
        for delay in delays:
            ctx.set(dut.delay, delay)
            ctx.set(dut.restart, 1)
            await ctx.tick()
            ctx.set(dut.restart, 0)
            words = []
            for cycle in range(cycles):
                words.append(rng.randrange(256))
                ctx.set(dut.i_word, words[-1])
                for line in range(lines + 1):
                    then = cycle - line * delay
                    if then >= 0:
                        assert ctx.get(dut.o_lines[line]) == words[then], (delay, line, cycle)
                await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("depth", [1, 2, 9])
def test_every_delay_the_lines_take(depth):
    _check(range(depth + 1), lines=3, depth=depth)


def test_a_restart_takes_the_new_delay():
    _check([7, 2, 0, 5], lines=2, depth=8, cycles=25)


def test_sizes_are_checked(refused):
    refused("lines=0, depth=4; allowed: both >= 1",
            lambda: DelayLines(unsigned(8), lines=0, depth=4))
