"""Memories that serve two users through one pair of ports: OUTPUT and PARAM in one memory
(``Implementation.out_param_shared``), and the activation banks' words below
``act_spram_depth`` in single-port memories, two banks to each (an iCE40UP's SPRAM).

The run and the host never use a port at once (the host only while idle), and the compiler
keeps every pass off reading and writing the single-port words in one pass
(:func:`hwgen.compiler.activations.area_bases`), so each memory's one read and one write (or
its one port) serves both, and the results and cycles are those of separate memories.
"""

from amaranth.hdl import Cat, Const, Mux, Signal

from ..memattrs import SPRAM_SUFFIX
from ..memmap import Region, regions
from .memories import act_groups, out_param_layout

__all__ = ["out_param_ports", "split_act_banks"]


def out_param_ports(m, mem, access, config, *, param_addr, param_en, raw_addr, raw_data,
                    raw_we):
    """Drive the shared OUTPUT and PARAM memory ``mem`` (:func:`out_param_layout`): while
    busy its read port reads PARAM at ``param_addr`` when ``param_en`` and its write port
    writes the raw rows; while idle both serve the host, in either region. Return the PARAM
    word read."""
    base, _, _ = out_param_layout(config)
    geo = regions(config)
    span = max(1, (config.param_depth - 1).bit_length())
    rd, wr = mem.read_port(), mem.write_port()
    width = rd.addr.shape().width
    host, busy = access.host, access.busy

    def at_param(addr):
        return Cat(addr[:span], Const(base >> span, width - span))

    host_addr = Mux(host.region == Region.PARAM, at_param(host.addr), host.addr)
    m.d.comb += [
        rd.addr.eq(Mux(busy, at_param(param_addr), host_addr)),
        rd.en.eq(Mux(busy, param_en, access.rd)),
        wr.addr.eq(Mux(busy, raw_addr, host_addr)),
        wr.data.eq(Mux(busy, raw_data, host.wdata)),
        wr.en.eq(Mux(busy, raw_we, access.we[Region.PARAM] | access.we[Region.OUTPUT])),
    ]
    word = rd.data[:geo[Region.PARAM].word_bits]
    access.words[Region.PARAM] = word
    access.words[Region.OUTPUT] = rd.data[:geo[Region.OUTPUT].word_bits]
    return word


def _first(enables, values):
    """The value of the first enabled of ``values`` (the last one when none is)."""
    out = values[-1]
    for en, value in zip(enables[-2::-1], values[-2::-1], strict=True):
        out = Mux(en, value, out)
    return out


def split_act_banks(m, mems, access, banks, config):
    """Drive the activation banks split at ``act_spram_depth`` (a power of two at least half
    of ``act_depth``, so that its bit of an address says which memory holds the word): the
    words above it in ``act{b}``, those below in ``act_lo{g}``, one word for the banks of
    :func:`act_groups` ``g``. Return each bank's word read."""
    low = config.act_spram_depth.bit_length() - 1
    ib = config.in_bits
    host, busy = access.host, access.busy
    words = []
    for g, group in enumerate(act_groups(config)):
        lo = mems.get(f"act_lo{g}") or mems[f"act_lo{g}{SPRAM_SUFFIX}"]
        lo_rd, lo_wr = lo.read_port(), lo.write_port(granularity=ib)
        ra = [Mux(busy, banks.rd_addr[b], host.addr) for b in group]
        re = [Mux(busy, banks.rd_en[b], access.rd) for b in group]
        wa = [Mux(busy, banks.wr_addr[b], host.addr) for b in group]
        we = [Mux(busy, banks.wr_en[b], access.we[Region.ACT]) for b in group]
        lo_re = [en & ~addr[low] for en, addr in zip(re, ra, strict=True)]
        lo_we = Signal(len(group), name=f"act_lo{g}_we")
        m.d.comb += lo_we.eq(Cat(en & ~addr[low] for en, addr in zip(we, wa, strict=True)))
        # One address for the group's banks (those that use it name the same word); a write
        # takes the port, and the compiler never reads these words in a pass that writes them.
        m.d.comb += [
            lo_rd.addr.eq(Mux(lo_we.any(), _first(list(lo_we), wa), _first(lo_re, ra))[:low]),
            lo_wr.addr.eq(lo_rd.addr),
            lo_rd.en.eq(Cat(*lo_re).any() & ~lo_we.any()),
            lo_wr.en.eq(lo_we),
            lo_wr.data.eq(Cat(Mux(busy, banks.wr_data[b].as_unsigned(),
                                  host.wdata[b * ib:(b + 1) * ib]) for b in group)),
        ]
        for j, b in enumerate(group):
            rd, wr = mems[f"act{b}"].read_port(), mems[f"act{b}"].write_port()
            high = Signal(name=f"act{b}_high")   # the word read is above the split
            with m.If(re[j]):
                m.d.sync += high.eq(ra[j][low])
            m.d.comb += [rd.addr.eq(ra[j][:low]), rd.en.eq(re[j] & ra[j][low]),
                         wr.addr.eq(wa[j][:low]), wr.en.eq(we[j] & wa[j][low]),
                         wr.data.eq(Mux(busy, banks.wr_data[b],
                                        host.wdata[b * ib:(b + 1) * ib]))]
            words.append(Mux(high, rd.data.as_unsigned(), lo_rd.data[j * ib:(j + 1) * ib]))
    return words
