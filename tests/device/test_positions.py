"""Element positions kept as ``(word, lane)`` pairs: :func:`advance` against ``divmod``, for
every bank count, step (past a word too) and starting lane, registered and as the next values
of registers."""

import itertools

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hwgen.device.positions import advance

WORD_BITS = 5


@pytest.mark.parametrize("lanes", [1, 2, 3, 4, 6, 7])
def test_advance_is_divmod_of_the_element_index(lanes):
    """Each step (1..3 * lanes: an output tile of ``cols`` channels may span words of fewer
    banks) in three forms: registers that advance themselves, registers that
    take another pair advanced, and (``domain="comb"``) that pair's next values."""
    m = Module()
    src_word, src_rem = Signal(WORD_BITS), Signal(range(lanes))
    cases = []
    for step in range(1, 3 * lanes + 1):
        self_word, self_rem = (Signal(WORD_BITS, name=f"self_word{step}"),
                               Signal(range(lanes), name=f"self_rem{step}"))
        advance(m, self_word, self_rem, step, lanes)
        frm_word, frm_rem = (Signal(WORD_BITS, name=f"frm_word{step}"),
                             Signal(range(lanes), name=f"frm_rem{step}"))
        advance(m, frm_word, frm_rem, step, lanes, frm=(src_word, src_rem))
        comb_word, comb_rem = (Signal(WORD_BITS, name=f"comb_word{step}"),
                               Signal(range(lanes), name=f"comb_rem{step}"))
        advance(m, comb_word, comb_rem, step, lanes, frm=(src_word, src_rem), domain="comb")
        cases.append((step, (self_word, self_rem), (frm_word, frm_rem), (comb_word, comb_rem)))
    top = 1 << WORD_BITS
    checked = []

    def after(word, rem, step):
        word, rem = divmod(word * lanes + rem + step, lanes)
        return word % top, rem

    async def bench(ctx):
        for word, rem in itertools.product((0, 1, 9, top - 1), range(lanes)):
            ctx.set(src_word, word)
            ctx.set(src_rem, rem)
            for step, (sw, sr), _, (cw, cr) in cases:
                ctx.set(sw, word)
                ctx.set(sr, rem)
                assert (ctx.get(cw), ctx.get(cr)) == after(word, rem, step), ("comb", step)
            await ctx.tick()
            for step, (sw, sr), (fw, fr), _ in cases:
                want = after(word, rem, step)
                assert (ctx.get(sw), ctx.get(sr)) == want, ("self", step, word, rem)
                assert (ctx.get(fw), ctx.get(fr)) == want, ("frm", step, word, rem)
                checked.append(step)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(checked) == 4 * lanes * 3 * lanes
