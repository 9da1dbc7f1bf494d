"""A WEIGHT memory split by depth into banks of one block RAM each
(:func:`hwgen.device.memories.weight_banks`), read through a register per bank and port.

Each bank's read ends at a register of its own, which the build folds into the block's output
register (:mod:`hwgen.boards.fold`); the banks' words are chosen after those registers, by the
bank the address named, kept in a register for each cycle of the read. The word comes at the
same cycle as from one memory with a register after its read (``read_latency`` two).
"""

from amaranth.hdl import Array, Mux, Signal

from ..memmap import Region

__all__ = ["banked_read", "banked_weight_group"]


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


def banked_weight_group(m, banks, access, feeder, copy, *, data, name):
    """Drive the banks (``banks``: memories, in order of address) of one WEIGHT group from
    the weight ``feeder`` (its address copy ``copy``; both ports with its pairs) while busy and
    from the host while idle (``access``; its write ``data``, the group's bits of the host
    port's ``wdata``); return ``(word, second word or None)`` as
    :func:`hwgen.device.core_ports.weight_port` wires them.

    As :func:`~hwgen.device.host_access.share_read` with registered reads: the ports read a
    cycle ahead (``rd_port``), not while the host writes (the write shares the first port's
    address, so that synthesis puts both on one port of each block), and the registers take
    at ``rd_en`` (the host's reads: a cycle after its ``re``). The second port reads only
    during a run.
    """
    busy, host = access.busy, access.host
    host_we = access.we[Region.WEIGHT]
    low = (banks[0].depth - 1).bit_length()
    first = [bank.read_port() for bank in banks]
    addr = Mux(busy, feeder.rd_addr[copy], host.addr)
    word = banked_read(m, first, low=low, addr=addr, read=~host_we & (~busy | feeder.rd_port[copy]),
                       take=Mux(busy, feeder.rd_en, access.rd_q), name=name)
    for k, (bank, port) in enumerate(zip(banks, first, strict=True)):
        wr = bank.write_port()
        m.d.comb += [wr.addr.eq(port.addr), wr.data.eq(data),
                     wr.en.eq(host_we & (host.addr[low:] == k))]
    second = None
    if feeder.pairs:
        second = banked_read(m, [bank.read_port() for bank in banks], low=low,
                             addr=feeder.rd_addr_b[copy], read=busy & feeder.rd_port[copy],
                             take=busy & feeder.rd_en, name=f"{name}_b")
    return word, second
