"""A WRITE's words written to memory: the COMMIT state of
:class:`hwgen.link.executor.CommandExecutor`.

The words wait in the executor's payload buffer, one byte at an address; COMMIT assembles each
in the executor's shift register and writes it on the host port.
"""

from amaranth.hdl import Const, Mux

from ..memmap import Region

__all__ = ["add_commit", "store_byte", "write_pending"]


def add_commit(m, host, dp, *, handshake, wide=False):
    """Add COMMIT to the executor's state machine (inside its ``m.FSM()``): write a WRITE's
    words from the buffer to memory, then go to IDLE to answer. Each word is written from
    ``sr`` (``host.wdata``) the cycle after its last byte (``dp.pending``,
    :func:`write_pending`), as the next word's bytes come: the memories see a register, not the
    multiplexer that fills it.

    Parameters
    ----------
    m : Module
    host : the executor's host port (:class:`hwgen.memmap.HostPortSignature`)
    dp : SimpleNamespace
        The executor's shared datapath (``sr``, ``byte_pos``, ``buf_r``, ``ptr``, ...), set up
        for the first word by DISPATCH.
    handshake : bool
        Hold each write until ``host.rvalid`` pulses.
    wide : bool
        Put each byte in its place in ``sr`` (:func:`store_byte`): a byte a cycle, not
        ``sr``'s width in bytes a word.
    """
    if wide:
        _add_wide_commit(m, host, dp, handshake=handshake)
        return
    sr, byte_pos, sr_bytes = dp.sr, dp.byte_pos, dp.sr_bytes
    with m.State("COMMIT"):
        # Each word takes sr_bytes cycles: its word_bytes bytes enter at the top of `sr`,
        # then zero bytes push them down to bit 0. That costs cycles (plentiful: the link
        # is far slower) instead of a word-wide alignment multiplexer (scarce LUTs).
        hold, written = write_pending(m, host, dp, handshake=handshake)
        last_word = dp.words_left == 0    # all shifted in: the last write is pending
        ptr_next = Mux(dp.data_phase, dp.ptr_p1, dp.ptr)
        m.d.comb += [dp.sr_fill.eq(Mux(dp.data_phase, dp.buf_r.data, 0)),
                     dp.buf_r.addr.eq(ptr_next)]
        with m.If(hold):
            # Everything holds, the buffer's output too: `wdata` stays what it was.
            m.d.comb += dp.buf_r.en.eq(0)
        with m.Elif(~last_word):
            m.d.sync += [sr.eq(dp.sr_next), dp.ptr.eq(ptr_next), dp.ptr_p1.eq(ptr_next + 1),
                         byte_pos.eq(byte_pos + 1),
                         dp.data_phase.eq(byte_pos + 1 < dp.checks.word_bytes)]
            with m.If(byte_pos == sr_bytes - 1):
                m.d.sync += [byte_pos.eq(0), dp.data_phase.eq(1), dp.pending.eq(1),
                             dp.words_left.eq(dp.words_left - 1)]
        _end_commit(m, dp, written & last_word)


def store_byte(m, dp, byte):
    """Put ``byte`` in its place in the word being assembled in ``dp.sr`` (byte ``byte_pos``;
    the first one clears the rest, so that the bits above the word are 0) and count it; after
    the word's last byte it is ``pending``: :func:`write_pending` writes it."""
    with m.If(dp.byte_pos == 0):
        m.d.sync += dp.sr.eq(byte)
    with m.Else():
        m.d.sync += dp.sr.word_select(dp.byte_pos, 8).eq(byte)
    m.d.sync += dp.byte_pos.eq(dp.byte_pos + 1)
    with m.If(dp.byte_pos == dp.checks.word_bytes - 1):
        m.d.sync += [dp.byte_pos.eq(0), dp.pending.eq(1)]


def write_pending(m, host, dp, *, handshake):
    """Write the word ``dp.sr`` to ``dp.mem_addr`` while it is ``pending`` (with
    ``handshake``, until ``host.rvalid`` answers), in the state being added; return the
    condition that holds everything else meanwhile (a write not yet answered) and the one that
    the write is done in this cycle."""
    answered = host.rvalid if handshake else Const(1, 1)
    with m.If(dp.pending):
        m.d.comb += host.we.eq(1)
        with m.If(answered):
            m.d.sync += [dp.pending.eq(0), dp.mem_addr.eq(dp.mem_addr + 1)]
    return dp.pending & ~answered, dp.pending & answered


def _add_wide_commit(m, host, dp, *, handshake):
    """COMMIT a byte a cycle: the buffer shows byte ``ptr`` in each cycle (DISPATCH primed its
    read port); it goes into its place in ``sr`` while the last word is written."""
    with m.State("COMMIT"):
        hold, written = write_pending(m, host, dp, handshake=handshake)
        last_word = dp.words_left == 0
        m.d.comb += dp.buf_r.addr.eq(Mux(hold | last_word, dp.ptr, dp.ptr_p1))
        with m.If(hold):
            m.d.comb += dp.buf_r.en.eq(0)   # the buffer's output holds too
        with m.Elif(~last_word):
            store_byte(m, dp, dp.buf_r.data)
            m.d.sync += [dp.ptr.eq(dp.ptr_p1), dp.ptr_p1.eq(dp.ptr_p1 + 1)]
            with m.If(dp.byte_pos == dp.checks.word_bytes - 1):
                m.d.sync += dp.words_left.eq(dp.words_left - 1)
        _end_commit(m, dp, written & last_word)


def _end_commit(m, dp, done):
    """Go to IDLE when the last word is written (``done``): a PROGRAM is then loaded."""
    with m.If(done):
        with m.If(dp.args.region == Region.PROGRAM.value):
            m.d.sync += dp.program_loaded.eq(1)
        m.next = "IDLE"
