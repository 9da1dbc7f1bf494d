"""The Wishbone top's register bank: control, status, counters and INFO, as its map says."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..memmap import batch_bits
from .regmap import REGISTER_PAGE_WORDS

__all__ = ["RegisterBank", "byte_mask"]

_INDEX_BITS = (REGISTER_PAGE_WORDS - 1).bit_length()
_COUNTER_NAMES = ("cycles", "busy_cycles", "macs")


def byte_mask(sel):
    """Return the 32-bit mask of the byte lanes ``sel`` (4 bits) selects."""
    return Cat(*(sel[i].replicate(8) for i in range(4)))


class RegisterBank(wiring.Component):
    """The registers of a :class:`~hwgen.bus.regmap.RegisterMap`.

    An access is one cycle of ``access``: a write takes effect at the next clock edge, a
    read's word is in ``rdata`` from the next cycle until the next access. ``mapped`` tells
    in the access cycle whether ``index`` is a register (the bus answers ``err`` otherwise).

    Parameters
    ----------
    regmap : RegisterMap

    Members
    -------
    access, we : In(1)
        An access in this cycle; it writes.
    index : In(6)
        The register's word index in the page (its byte offset / 4).
    wdata : In(32)
    sel : In(4)
        Byte lanes written.
    rdata : Out(32)
    mapped : Out(1)
    bus_error : In(1)
        The bus answered an access with ``err``: sets ``ERROR_CAUSE.BUS``.
    busy : In(1)
        The accelerator runs.
    cycles, busy_cycles, macs : In(64)
        The accelerator's counters.
    start, clear : Out(1)
        One-cycle pulses to the accelerator's host port: run, zero the counters.
    batch : Out(batch_bits(config))
        Rows of the run ``start`` begins.
    irq : Out(1)
        ``STATUS.DONE`` and ``IRQ_ENABLE.DONE``.
    """

    def __init__(self, regmap):
        self.regmap = regmap
        self._batch_bits = batch_bits(regmap.config)
        super().__init__({
            "access": In(1), "we": In(1), "index": In(_INDEX_BITS), "wdata": In(32),
            "sel": In(4), "rdata": Out(32), "mapped": Out(1), "bus_error": In(1),
            "busy": In(1), "cycles": In(64), "busy_cycles": In(64), "macs": In(64),
            "start": Out(1), "clear": Out(1), "batch": Out(self._batch_bits), "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        rmap = self.regmap
        busy_q, done, irq_en = Signal(), Signal(), Signal(init=1)
        batch = Signal(self._batch_bits, init=rmap["BATCH"].reset)
        runs, cause = Signal(32), Signal(3)
        hi = {n: Signal(32, name=f"{n}_hi") for n in _COUNTER_NAMES}
        m.d.sync += busy_q.eq(self.busy)
        m.d.comb += [self.batch.eq(batch), self.irq.eq(done & irq_en)]
        with m.If(busy_q & ~self.busy):
            m.d.sync += done.eq(1)
        with m.If(self.bus_error):
            m.d.sync += cause[2].eq(1)

        status = Cat(self.busy, done, cause.any(), self.irq)
        values = {"STATUS": status, "BATCH": batch, "IRQ_ENABLE": irq_en, "RUNS": runs,
                  "ERROR_CAUSE": cause, "CONTROL": Const(0, 32)}
        for n in _COUNTER_NAMES:
            values[f"{n.upper()}_LO"] = getattr(self, n)[:32]
            values[f"{n.upper()}_HI"] = hi[n]
        index = {reg.offset // 4: reg for reg in rmap.registers}

        with m.If(self.access):
            with m.Switch(self.index):
                for i, reg in index.items():
                    with m.Case(i):
                        m.d.comb += self.mapped.eq(1)
                        value = values.get(reg.name, Const(reg.reset, 32))
                        # A write reads back 0.
                        m.d.sync += self.rdata.eq(Mux(self.we, 0, value))
                        if reg.name.endswith("_LO"):
                            n = reg.name[:-3].lower()
                            with m.If(~self.we):
                                m.d.sync += hi[n].eq(getattr(self, n)[32:])
            with m.If(self.we):
                self._writes(m, batch=batch, irq_en=irq_en, done=done, runs=runs, cause=cause)
        return m

    def _writes(self, m, *, batch, irq_en, done, runs, cause):
        """The effects of a write in the access cycle."""
        rmap = self.regmap
        mask = byte_mask(self.sel)
        bits = self.wdata & mask
        index = self.index

        def merged(old):
            return ((old & ~mask) | bits)[:len(old)]

        with m.If(index == rmap["BATCH"].offset // 4):
            m.d.sync += batch.eq(merged(Cat(batch, Const(0, 32 - len(batch)))))
        with m.If(index == rmap["IRQ_ENABLE"].offset // 4):
            m.d.sync += irq_en.eq(merged(Cat(irq_en, Const(0, 31))))
        control = rmap["CONTROL"]
        with m.If(index == control.offset // 4):
            start = bits[control.field("START").lsb]
            with m.If(bits[control.field("CLEAR_DONE").lsb]):
                m.d.sync += done.eq(0)
            with m.If(bits[control.field("CLEAR_COUNTERS").lsb]):
                m.d.comb += self.clear.eq(1)
                m.d.sync += runs.eq(0)
            with m.If(bits[control.field("CLEAR_ERROR").lsb]):
                m.d.sync += cause.eq(0)
            bad_batch = (batch == 0) | (batch > rmap.config.acc_depth)
            with m.If(start):
                with m.If(self.busy):
                    m.d.sync += cause[0].eq(1)
                with m.Elif(bad_batch):
                    m.d.sync += cause[1].eq(1)
                with m.Else():
                    m.d.comb += self.start.eq(1)
                    m.d.sync += [done.eq(0), runs.eq(runs + 1)]

