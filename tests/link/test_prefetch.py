"""hwgen.link.prefetch.WordPrefetch alone, in Amaranth simulation: a port model that answers
each read after a fixed latency (or, like the clock-domain bridge, after a random wait) from a
list of words, and a consumer that takes the words with random stalls. Every run's words come
out whole, in order, each read once; with a consumer that never stalls, the next word is
ready as the last byte of one goes if the port answers within ``word_bytes - 1`` cycles."""

import random

import pytest
from amaranth.sim import Simulator

from hwgen.link.prefetch import WordPrefetch

_WIDTH = 24


def _run(runs, *, latency, stall, seed, word_bytes=3):
    """Simulate ``runs`` (lists of words) back to back; ``latency`` None: random waits.

    The consumer is the executor's shift register: it sends a word's ``word_bytes`` bytes one a
    cycle (pausing with probability ``stall``), takes the next word when it has none left or as
    its last byte goes. Return the words taken per
    run and, per take, the cycles since the take before."""
    rng = random.Random(seed)
    dut = WordPrefetch(_WIDTH)
    got, gaps = [], []

    async def bench(ctx):
        for words in runs:
            ctx.set(dut.count, len(words))
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            addr, outstanding, taken, last_take, cycle, left = 0, None, [], None, 0, 0
            while len(taken) < len(words) or left:
                assert cycle < 50 * (len(words) + 1), "the words stopped coming"
                sending = left > 0 and rng.random() >= stall
                ready = left == 0 or (sending and left == 1)   # room for the next word
                # `take` as the word offered before the port answers (`re` depends on it), then
                # as offered once it has answered (the same: the word register is a register)
                ctx.set(dut.take, ctx.get(dut.valid) and ready)
                re = ctx.get(dut.re)
                if re:
                    assert outstanding is None, "a read before the last one answered"
                    assert addr < len(words), "a read beyond the run"
                    wait = latency if latency is not None else rng.choice([0, 1, 3, 7])
                    outstanding = [wait, words[addr]]
                rvalid = outstanding is not None and outstanding[0] == 0
                ctx.set(dut.rvalid, rvalid)
                ctx.set(dut.rdata, outstanding[1] if rvalid else rng.getrandbits(_WIDTH))
                assert ctx.get(dut.fetched) == rvalid
                take = ctx.get(dut.valid) and ready
                ctx.set(dut.take, take)
                assert ctx.get(dut.re) == re
                left -= sending
                if take:
                    taken.append(ctx.get(dut.word))
                    left = word_bytes
                    if last_take is not None:
                        gaps.append(cycle - last_take)
                    last_take = cycle
                if rvalid:
                    outstanding, addr = None, addr + 1
                elif outstanding is not None:
                    outstanding[0] -= 1
                await ctx.tick()
                cycle += 1
            ctx.set(dut.take, 0)
            ctx.set(dut.rvalid, 0)
            assert not ctx.get(dut.valid) and not ctx.get(dut.re), "a word beyond the run"
            got.append(taken)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got, gaps


@pytest.mark.parametrize("latency", [0, 1, 2, None], ids=["0", "1", "2", "random"])
def test_words_in_order(latency):
    rng = random.Random(latency)
    runs = [[rng.getrandbits(_WIDTH) for _ in range(n)] for n in (1, 5, 0, 17, 2)]
    got, _ = _run(runs, latency=latency, stall=0.4, seed=latency or 9)
    assert got == runs


@pytest.mark.parametrize(("latency", "word_bytes"), [(0, 1), (1, 2), (1, 3), (2, 3), (2, 5),
                                                     (3, 2)])
def test_byte_a_cycle(latency, word_bytes):
    # Without stalls the next word is ready as the last byte of one goes when the port answers
    # within word_bytes - 1 cycles (one byte a cycle), else latency + 1 cycles after the take
    # (the read for it goes out in the cycle of the take).
    words = list(range(1, 21))
    got, gaps = _run([words], latency=latency, stall=0.0, seed=1, word_bytes=word_bytes)
    assert got == [words]
    gap = max(word_bytes, latency + 1)
    assert gaps == [gap] * (len(words) - 1)
