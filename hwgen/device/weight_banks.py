"""A WEIGHT memory split by depth into banks of one block RAM each
(:func:`hwgen.device.memories.weight_banks`), read through a register per bank and port.

Each bank's read ends at a register of its own, which the build folds into the block's output
register (:mod:`hwgen.boards.fold`); the banks' words are chosen after those registers, by the
bank the address named, kept in a register for each cycle of the read. The word comes at the
same cycle as from one memory with a register after its read (``read_latency`` two). A weight
pair's second read goes through :func:`banked_read` whether WEIGHT is banked or not (one bank).
"""

from amaranth.hdl import Array, Mux, Signal

from ..memmap import Region

__all__ = ["banked_first_read", "banked_read", "second_read"]


def banked_read(m, ports, *, low, addr, read, take, name):
    """Read word ``addr`` of the banks behind ``ports`` (their read ports, in order of
    address, each bank ``2 ** low`` words): every port reads ``addr``'s low bits when
    ``read``, each bank's register takes its port's word when ``take`` (a cycle or more
    later), and the word returned is the register of the bank ``addr`` chose when its ports
    read. Return that word."""
    chosen = Signal(range(len(ports)), name=f"{name}_bank")      # at the ports' read
    taken = Signal(range(len(ports)), name=f"{name}_bank_q")     # at the registers' take
    registers = []
    for k, port in enumerate(ports):
        m.d.comb += [port.addr.eq(addr[:low]), port.en.eq(read)]
        word = Signal.like(port.data, name=f"{name}_{k}_q", reset_less=True)
        with m.If(take):
            m.d.sync += word.eq(port.data)
        registers.append(word)
    with m.If(read):
        m.d.sync += chosen.eq(addr[low:])
    with m.If(take):
        m.d.sync += taken.eq(chosen)
    return Array(registers)[taken]


def banked_first_read(m, banks, access, feeder, copy, *, data, name):
    """Drive the first ports of the banks (``banks``: memories, in order of address) of one
    WEIGHT group from the weight ``feeder`` (its address copy ``copy``) while busy and from
    the host while idle (``access``; its write ``data``, the group's bits of the host port's
    ``wdata``); return the word read.

    As :func:`~hwgen.device.host_access.share_read` with registered reads: the ports read a
    cycle ahead (``rd_port``), not while the host writes (the write shares the first port's
    address, so that synthesis puts both on one port of each block), and the registers take
    at ``rd_en`` (the host's reads: a cycle after its ``re``).
    """
    busy, host = access.busy, access.host
    host_we = access.we[Region.WEIGHT]
    low = _low_bits(banks)
    first = [bank.read_port() for bank in banks]
    word = banked_read(m, first, low=low, addr=Mux(busy, feeder.rd_addr[copy], host.addr),
                       read=~host_we & (~busy | feeder.rd_port[copy]),
                       take=Mux(busy, feeder.rd_en, access.rd_q), name=name)
    for k, (bank, port) in enumerate(zip(banks, first, strict=True)):
        wr = bank.write_port()
        m.d.comb += [wr.addr.eq(port.addr), wr.data.eq(data),
                     wr.en.eq(host_we & (host.addr[low:] == k))]
    return word


def second_read(m, banks, feeder, copy, busy, *, name):
    """Return the word of the banks' second read ports (``banks``: one WEIGHT memory, or its
    banks in order of address), the feeder's ``rd_addr_b`` (copy ``copy``), read only during
    a run and taken into registers as the first port's (the feeder's pairs: the host's write
    shares the first port's address, so that synthesis puts that read and the write on one
    port of each block RAM and this read on the other)."""
    return banked_read(m, [bank.read_port() for bank in banks], low=_low_bits(banks),
                       addr=feeder.rd_addr_b[copy], read=busy & feeder.rd_port[copy],
                       take=busy & feeder.rd_en, name=f"{name}_b")


def _low_bits(banks):
    """The address bits within a bank (the first is as deep as any)."""
    return (banks[0].depth - 1).bit_length()
