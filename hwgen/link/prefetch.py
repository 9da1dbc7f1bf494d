"""A READ's memory words fetched ahead of the bytes that carry them.

:class:`WordPrefetch` reads a READ's words from the host port one after another and holds the
next one ready, so that the response can go on from the last byte of one word to the first of
the next without waiting for the port; :func:`send_prefetched` is the executor's side.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["WordPrefetch", "send_prefetched"]


class WordPrefetch(wiring.Component):
    """Fetch ``count`` words on a host port's read protocol and offer them one at a time.

    ``start`` (one cycle) begins a new run of ``count`` words and drops any word held. Then
    one read at a time is asked for (``re``, one cycle) while words remain and the word register
    is empty or being taken (then in the same cycle); ``fetched`` pulses when the port answers
    (``rvalid``, in the cycle of ``re`` or later): the requester's address must hold from ``re``
    until then and move on to the next word after it. ``valid`` says that ``word`` holds the
    next word; ``take`` (only with ``valid``) takes it. So a word is replaced as soon as the
    port's latency allows: the next word is ready ``latency + 1`` cycles after the last one was
    taken.

    ``rvalid`` is looked at only while a read of this component is outstanding, so a port that
    pulses it for other requests too (:class:`hwgen.link.bridge.HostPortBridge`) is fine.

    Parameters
    ----------
    width : int
        Word width in bits (the register's).

    Members
    -------
    start : In(1)
    count : In(16)
        Words to fetch, read with ``start``.
    re : Out(1)
    rvalid : In(1)
    rdata : In(width)
        The host port's read request and answer.
    fetched : Out(1)
        A word arrived: the requester's address may go on to the next word.
    word : Out(width)
    valid : Out(1)
    take : In(1)
    """

    def __init__(self, width):
        super().__init__({
            "start": In(1), "count": In(16),
            "re": Out(1), "rvalid": In(1), "rdata": In(width), "fetched": Out(1),
            "word": Out(width), "valid": Out(1), "take": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        left = Signal(16)    # words not asked for yet
        pending = Signal()   # a read is out, its word not arrived
        m.d.comb += [
            self.re.eq((left != 0) & ~pending & (~self.valid | self.take)),
            self.fetched.eq(self.rvalid & (pending | self.re)),
        ]
        with m.If(self.re):
            m.d.sync += left.eq(left - 1)
        m.d.sync += pending.eq((pending | self.re) & ~self.rvalid)
        with m.If(self.take):
            m.d.sync += self.valid.eq(0)
        with m.If(self.fetched):
            m.d.sync += [self.word.eq(self.rdata), self.valid.eq(1)]
        with m.If(self.start):
            m.d.sync += [left.eq(self.count), pending.eq(0), self.valid.eq(0)]
        return m


def send_prefetched(m, response, host, dp, is_read):
    """Add to the IDLE state of :class:`hwgen.link.executor.CommandExecutor` (built with
    ``prefetch``): send a READ's payload from the shift register ``dp.sr`` (holding back while it
    is empty), the next word moving in from ``dp.prefetch`` (a :class:`WordPrefetch`) as the
    last byte of one goes; ``host.re`` is the prefetcher's. Other responses go out as before."""
    rs, pf = response, dp.prefetch
    m.d.comb += [host.re.eq(pf.re), rs.payload.valid.eq(~is_read | (dp.byte_pos != 0))]
    sent = rs.payload.valid & rs.payload.ready
    take = pf.valid & ((dp.byte_pos == 0) | (sent & (dp.byte_pos == 1)))
    m.d.comb += pf.take.eq(take)
    with m.If(take):
        m.d.sync += [dp.sr.eq(pf.word), dp.byte_pos.eq(dp.checks.word_bytes)]
    with m.Elif(sent):
        m.d.sync += [dp.sr.eq(dp.sr_next), dp.byte_pos.eq(dp.byte_pos - 1)]
