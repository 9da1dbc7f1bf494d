"""The depthwise unit's delay lines: a word stream and copies of it, each a fixed number of
cycles later than the one before."""

from amaranth.hdl import Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from ..memattrs import LOGIC_RAM_ATTRS

__all__ = ["DelayLines"]


class DelayLines(wiring.Component):
    """``lines`` copies of a word stream, each ``delay`` cycles behind the one before.

    ``o_lines[0]`` is ``i_word``; ``o_lines[l]`` shows in cycle ``c`` what ``o_lines[l - 1]``
    showed in cycle ``c - delay``, for any ``delay`` from 0 to ``depth`` (a layer's, held while
    the lines run; ``restart`` with it). Line ``l`` is a block of memory of ``depth - 1`` words
    written and read at one address that cycles through ``delay - 1`` of them (a read before
    the write: the word written ``delay - 1`` cycles ago, then the memory's output register);
    a delay of 1 is a register, 0 the line before; the memories are logic cells' RAM
    (:data:`~hwgen.memattrs.LOGIC_RAM_ATTRS`). The lines move every cycle, so that a word
    is where its delay puts it whatever happens around it; what they hold before a stream
    reaches them is undefined.

    Parameters
    ----------
    word_shape : shape-like
        Of a word.
    lines : int
        Delayed copies (at least 1).
    depth : int
        The longest delay (at least 1).

    Members
    -------
    restart : In(1)
        The lines' delay is ``delay`` from the next cycle on (their addresses start over).
    delay : In(range(depth + 1))
    i_word : In(word_shape)
    o_lines : Out(ArrayLayout(word_shape, lines + 1))
    """

    def __init__(self, word_shape, *, lines, depth):
        if lines < 1 or depth < 1:
            raise ValueError(f"DelayLines: lines={lines}, depth={depth}; allowed: both >= 1")
        self.word_shape = word_shape
        self.lines = lines
        self.depth = depth
        super().__init__({
            "restart": In(1),
            "delay": In(range(depth + 1)),
            "i_word": In(word_shape),
            "o_lines": Out(data.ArrayLayout(word_shape, lines + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        word = Value.cast(self.i_word)
        width = len(word)
        period = max(1, self.depth - 1)
        # The address cycles through 0 .. delay - 2 (a register: its last value's flag too).
        addr = Signal(range(period), name="line_addr")
        wrap = Signal(name="line_wrap")
        last = Signal(range(period + 1), name="line_last")      # delay - 2
        with m.If(self.restart):
            m.d.sync += [addr.eq(0), last.eq(self.delay - 2),
                         wrap.eq(self.delay <= 2)]
        with m.Elif(wrap):
            m.d.sync += [addr.eq(0), wrap.eq(last == 0)]
        with m.Else():
            m.d.sync += [addr.eq(addr + 1), wrap.eq(addr + 1 == last)]
        short = Signal(2, name="line_short")      # the delay: 0, 1, or longer
        with m.If(self.restart):
            m.d.sync += short.eq(Mux(self.delay < 2, self.delay, 2))
        m.d.comb += self.o_lines[0].eq(word)
        before = word
        for line in range(1, self.lines + 1):
            held = Signal(width, name=f"line{line}_reg")
            m.d.sync += held.eq(before)
            out = Signal(width, name=f"line{line}_out")
            with m.Switch(short):
                with m.Case(0):
                    m.d.comb += out.eq(before)
                with m.Case(1):
                    m.d.comb += out.eq(held)
                if self.depth >= 2:
                    with m.Default():
                        m.d.comb += out.eq(self._memory(m, line, width=width, period=period,
                                                        addr=addr, word=before))
            m.d.comb += self.o_lines[line].eq(out)
            before = out
        return m

    @staticmethod
    def _memory(m, line, *, width, period, addr, word):
        """Return the word written ``period`` cycles before at ``addr`` (read before the write,
        through the memory's output register)."""
        mem = memory.Memory(shape=unsigned(width), depth=period, init=[],
                            attrs=LOGIC_RAM_ATTRS)
        m.submodules[f"line{line}"] = mem
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=())
        m.d.comb += [wr.addr.eq(addr), wr.data.eq(word), wr.en.eq(1),
                     rd.addr.eq(addr), rd.en.eq(1)]
        return rd.data
