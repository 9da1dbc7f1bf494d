"""The ports every accelerator core wires alike, whatever its arithmetic: PROGRAM to the
controller and WEIGHT to the weight feeder (each shared with the host while idle), the starts
of the pooler and the adder, and the counters to the host port
(:class:`~hwgen.device.accelerator.AcceleratorCore`,
:class:`~hwgen.device.bf16_core.BF16AcceleratorCore`)."""

from itertools import groupby

from amaranth.hdl import Cat, Mux

from ..memmap import Region
from .host_access import host_write, share_read
from .memories import weight_memories, weight_names
from .weight_banks import banked_first_read, second_read

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
    perhaps in banks of depth: :func:`~hwgen.device.memories.weight_memories`), each
    addressed by one of the feeder's copies; a memory may be a single-port SPRAM, whose write
    takes the read's address."""
    config = feeder.config
    names = weight_names(config, implementation)
    groups = [(lanes, [mems[bank] for bank, _, _ in members]) for lanes, members in
              groupby(weight_memories(config, implementation), key=lambda memory: memory[1])]
    words, seconds = [], []
    for g, (name, (lanes, banks)) in enumerate(zip(names, groups, strict=True)):
        copy = g * feeder.copies // len(names)
        data = host.wdata[lanes[0] * config.w_bits:(lanes[-1] + 1) * config.w_bits]
        if len(banks) > 1:
            words.append(banked_first_read(m, banks, access, feeder, copy, data=data,
                                           name=name))
        else:
            w_rd, w_wr = banks[0].read_port(), banks[0].write_port()
            words.append(share_read(m, w_rd, access, Region.WEIGHT, addr=feeder.rd_addr[copy],
                                    en=feeder.rd_en, port_en=feeder.rd_port[copy],
                                    exclusive=True, name=name))
            m.d.comb += [w_wr.addr.eq(w_rd.addr), w_wr.data.eq(data),
                         w_wr.en.eq(access.we[Region.WEIGHT])]
        if feeder.pairs:
            seconds.append(second_read(m, banks, feeder, copy, access.busy, name=name))
    word = Cat(*words)
    access.words[Region.WEIGHT] = word
    m.d.comb += feeder.rd_data.eq(word)
    if feeder.pairs:
        m.d.comb += feeder.rd_data_b.eq(Cat(*seconds))


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
