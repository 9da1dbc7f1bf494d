"""The ports every accelerator core wires alike, whatever its arithmetic: PROGRAM to the
controller and WEIGHT to the weight feeder (each shared with the host while idle), the starts
of the pooler and the adder, and the counters to the host port
(:class:`~hwgen.device.accelerator.AcceleratorCore`,
:class:`~hwgen.device.bf16_core.BF16AcceleratorCore`)."""

from amaranth.hdl import Cat, Mux, Signal

from ..memmap import Region
from .host_access import host_write, share_read
from .memories import weight_banks, weight_groups, weight_memories, weight_names
from .weight_banks import banked_weight_group

__all__ = ["count_work", "program_port", "start_pool_and_add", "weight_port"]


def program_port(m, mems, access, host, controller, *, registered):
    """Give ``controller`` its program words, the host's start and batch."""
    prog_rd, prog_wr = mems["prog"].read_port(), mems["prog"].write_port()
    # Registered: idle, the memory reads word 0 but for the host's reads, so the first
    # descriptor is in the register as a run starts, without `start` in the address.
    word = share_read(m, prog_rd, access, Region.PROGRAM, addr=controller.prog_addr, en=1,
                      always_take=True, name="prog",
                      host_addr=Mux(host.re, host.addr, 0) if registered else None)
    host_write(m, prog_wr, access, Region.PROGRAM)
    m.d.comb += [controller.prog_data.eq(word), controller.start.eq(host.start),
                 controller.batch_in.eq(host.batch)]


def weight_port(m, mems, access, host, feeder, *, implementation):
    """Give the weight ``feeder`` its reads from the WEIGHT memories ``implementation`` builds
    (one, or one per group of lanes: :func:`~hwgen.device.memories.weight_names`, each
    perhaps in banks of depth: :func:`~hwgen.device.memories.weight_banks`), each addressed
    by one of the feeder's copies; a memory may be a single-port SPRAM, whose write takes the
    read's address."""
    config = feeder.config
    names = weight_names(config, implementation)
    per_group = len(weight_banks(config, implementation))
    built = [mems[bank] for bank, _, _ in weight_memories(config, implementation)]
    words, seconds, low = [], [], 0
    for g, (name, lanes) in enumerate(zip(names, weight_groups(config, implementation),
                                          strict=True)):
        copy = g * feeder.copies // len(names)
        bits = len(lanes) * config.w_bits
        data = host.wdata[low:low + bits]
        low += bits
        if per_group > 1:
            banks = built[g * per_group:(g + 1) * per_group]
            word, second = banked_weight_group(m, banks, access, feeder, copy, data=data,
                                               name=name)
            words.append(word)
            seconds.append(second)
            continue
        w_rd, w_wr = mems[name].read_port(), mems[name].write_port()
        words.append(share_read(m, w_rd, access, Region.WEIGHT, addr=feeder.rd_addr[copy],
                                en=feeder.rd_en, port_en=feeder.rd_port[copy], exclusive=True,
                                name=name))
        m.d.comb += [w_wr.addr.eq(w_rd.addr), w_wr.data.eq(data),
                     w_wr.en.eq(access.we[Region.WEIGHT])]
        if feeder.pairs:
            seconds.append(_second_read(m, mems[name], feeder, copy, access.busy, name=name))
    word = Cat(*words)
    access.words[Region.WEIGHT] = word
    m.d.comb += feeder.rd_data.eq(word)
    if feeder.pairs:
        m.d.comb += feeder.rd_data_b.eq(Cat(*seconds))


def _second_read(m, memory, feeder, copy, busy, *, name):
    """Return the word of ``memory``'s second read port, the feeder's ``rd_addr_b`` (copy
    ``copy``), read only during a run and taken into a register as the first port's (the
    feeder's pairs: the host's write shares the first port's address, so that synthesis puts
    that read and the write on one port of each block RAM and this read on the other)."""
    port = memory.read_port()
    word = Signal.like(port.data, name=f"{name}_b_q", reset_less=True)
    m.d.comb += [port.addr.eq(feeder.rd_addr_b[copy]), port.en.eq(busy & feeder.rd_port[copy])]
    with m.If(busy & feeder.rd_en):
        m.d.sync += word.eq(port.data)
    return word


def count_work(m, counters, host, busy, issue):
    """Count the cycles, busy cycles and issued MACs (``issue``) for the host port."""
    m.d.comb += [counters.busy.eq(busy), counters.issue.eq(issue),
                 counters.clear.eq(host.clear), host.cycles.eq(counters.cycles),
                 host.busy_cycles.eq(counters.busy_cycles), host.macs.eq(counters.macs)]


def start_pool_and_add(m, starts, controller, pooler, adder):
    """Start the ``pooler`` and the ``adder`` (either may be None) from their
    :class:`~hwgen.device.pass_starts.PassStarts` groups ``pool`` and ``add``, with the running
    descriptor, geometry and last row (and the adder its second input's first word)."""
    desc = controller.desc
    for name, unit in (("pool", pooler), ("add", adder)):
        if unit is not None:
            m.d.comb += [unit.start.eq(getattr(starts, f"start_{name}")),
                         unit.go.eq(getattr(starts, f"prime_{name}")), unit.desc.eq(desc),
                         unit.geom.eq(controller.geom), unit.last_row.eq(controller.last_row)]
    if adder is not None:
        m.d.comb += adder.src2_base.eq(desc.src2_base)
