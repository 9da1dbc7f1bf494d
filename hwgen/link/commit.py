"""A WRITE's words written to memory: the COMMIT state of
:class:`hwgen.link.executor.CommandExecutor`.

The words wait in the executor's payload buffer, one byte at an address; COMMIT assembles each
in the executor's shift register and writes it on the host port.
"""

from amaranth.hdl import Mux, Signal

from ..memmap import Region

__all__ = ["add_commit"]


def add_commit(m, host, dp, *, handshake):
    """Add COMMIT to the executor's state machine (inside its ``m.FSM()``): write a WRITE's
    words from the buffer to memory, then go to IDLE to answer.

    Parameters
    ----------
    m : Module
    host : the executor's host port (:class:`hwgen.memmap.HostPortSignature`)
    dp : SimpleNamespace
        The executor's shared datapath (``sr``, ``byte_pos``, ``buf_r``, ``ptr``, ...), set up
        for the first word by DISPATCH.
    handshake : bool
        Hold each write until ``host.rvalid`` pulses.
    """
    sr, byte_pos, sr_bytes = dp.sr, dp.byte_pos, dp.sr_bytes
    wait_write = Signal()
    if handshake:
        m.d.comb += wait_write.eq((byte_pos == sr_bytes - 1) & ~host.rvalid)
    with m.State("COMMIT"):
        # Each word takes sr_bytes cycles: its word_bytes bytes enter at the top of `sr`,
        # then zero bytes push them down to bit 0. That costs cycles (plentiful: the link
        # is far slower) instead of a word-wide alignment multiplexer (scarce LUTs).
        ptr_next = Mux(dp.data_phase, dp.ptr_p1, dp.ptr)
        m.d.comb += [dp.sr_fill.eq(Mux(dp.data_phase, dp.buf_r.data, 0)),
                     dp.buf_r.addr.eq(ptr_next)]
        with m.If(wait_write):
            # Everything holds, the buffer's output too: `wdata` stays what it was.
            m.d.comb += [host.we.eq(1), dp.buf_r.en.eq(0)]
        with m.Else():
            m.d.sync += [sr.eq(dp.sr_next), dp.ptr.eq(ptr_next), dp.ptr_p1.eq(ptr_next + 1),
                         byte_pos.eq(byte_pos + 1),
                         dp.data_phase.eq(byte_pos + 1 < dp.checks.word_bytes)]
            with m.If(byte_pos == sr_bytes - 1):
                m.d.comb += host.we.eq(1)
                m.d.sync += [byte_pos.eq(0), dp.data_phase.eq(1),
                             dp.mem_addr.eq(dp.mem_addr + 1),
                             dp.words_left.eq(dp.words_left - 1)]
                with m.If(dp.words_left == 1):
                    with m.If(dp.args.region == Region.PROGRAM.value):
                        m.d.sync += dp.program_loaded.eq(1)
                    m.next = "IDLE"
