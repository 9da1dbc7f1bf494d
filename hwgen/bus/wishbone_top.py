"""The accelerator on a Wishbone bus: registers and memory windows a CPU reads and writes."""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..device.cores import accelerator_core
from ..memmap import Region, addr_bits, max_word_bits
from .registers import RegisterBank, byte_mask
from .regmap import ADDR_WIDTH, RegisterMap
from .wishbone import WishboneSignature

__all__ = ["WishboneTop"]


class WishboneTop(wiring.Component):
    """The accelerator core of ``config.dtype`` (:func:`~hwgen.device.cores.accelerator_core`:
    int8 or bf16) behind a Wishbone B4 classic target port (32-bit data, byte lanes, word
    addresses) and an interrupt.

    The address map is :class:`~hwgen.bus.regmap.RegisterMap`'s: the register page
    (:class:`~hwgen.bus.registers.RegisterBank`) and a window per memory region, through which
    a CPU does what the host protocol's WRITE, READ, RUN, COUNTERS and RESET do. A window's
    read fetches the memory word and answers its 32-bit piece; a write reads the word, replaces
    the ``sel`` bytes of its piece and writes it back, so pieces may be written in any order.
    Every access is answered by exactly one ``ack`` or ``err``: ``err`` for an address outside
    the map (an unused slot or register offset, a word past a region's depth, a piece past its
    word) and for a window access while a run is in progress (the accelerator owns its
    memories then); such an access changes nothing and sets ``ERROR_CAUSE.BUS``.
    Latency: ``ack`` or ``err`` comes in the 2nd cycle of ``stb`` for a register, in the 4th
    for a window access (the 5th with the implementation's registered reads).

    Parameters
    ----------
    config : AcceleratorConfig
    implementation : Implementation or None
        Its staging of the host port is left out (the core's ``host_in_registers``): the bus
        side holds the window's region and address in registers already (the latency above
        stays).
    pe_instances : bool
        Instantiate the processing elements by Verilog module name (for emission).

    Members
    -------
    bus : In(WishboneSignature(addr_width=30, data_width=32, granularity=8))
    irq : Out(1)
        High from the end of a run until ``CONTROL.CLEAR_DONE`` or the next ``START`` (while
        ``IRQ_ENABLE.DONE``), a level.

    Raises
    ------
    ValueError
        If the configuration's memories do not fit the bus's address space.
    """

    def __init__(self, config, implementation=None, *, pe_instances=False):
        self.regmap = RegisterMap(config)
        self.config = config
        self.accelerator = accelerator_core(config, implementation, pe_instances=pe_instances,
                                            host_in_registers=True)
        super().__init__({"bus": In(WishboneSignature(addr_width=ADDR_WIDTH)), "irq": Out(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.accelerator = acc = self.accelerator
        m.submodules.registers = regs = RegisterBank(self.regmap)
        host, bus = acc.host, self.bus
        m.d.comb += [regs.busy.eq(host.busy), host.start.eq(regs.start),
                     host.clear.eq(regs.clear), host.batch.eq(regs.batch), self.irq.eq(regs.irq),
                     regs.cycles.eq(host.cycles), regs.busy_cycles.eq(host.busy_cycles),
                     regs.macs.eq(host.macs)]
        shift = self.regmap.window_shift
        slot, offset = bus.adr[shift:shift + 3], bus.adr[:shift]
        pieces = max(w.pieces for w in self.regmap.windows)
        word = Signal(pieces * 32)      # a window write's word, read then merged
        piece = Signal(range(max(w.stride for w in self.regmap.windows)))
        dat_w, sel, we = Signal(32), Signal(4), Signal()
        piece_q = Signal(32)            # a window read's piece
        mapped = Signal()               # the register access hit a register
        # Which window, word and piece the bus addresses, and whether the map has it.
        region, addr = Signal(Region), Signal(addr_bits(self.config))
        w_piece, w_valid = Signal.like(piece), Signal()
        self._decode(m, slot, offset, region=region, addr=addr, piece=w_piece, valid=w_valid)
        wide = Cat(host.rdata, Const(0, pieces * 32 - len(host.rdata)))
        m.d.comb += [regs.index.eq(offset), regs.we.eq(bus.we), regs.wdata.eq(bus.dat_w),
                     regs.sel.eq(bus.sel), host.wdata.eq(word[:max_word_bits(self.config)])]

        def answer(ok, data=None):
            if ok:
                m.d.comb += bus.ack.eq(1)
                if data is not None:
                    m.d.comb += bus.dat_r.eq(data)
            else:
                m.d.comb += [bus.err.eq(1), regs.bus_error.eq(1)]
            m.next = "IDLE"

        with m.FSM():
            with m.State("IDLE"), m.If(bus.cyc & bus.stb):
                m.d.sync += [dat_w.eq(bus.dat_w), sel.eq(bus.sel), we.eq(bus.we),
                             piece.eq(w_piece), host.region.eq(region), host.addr.eq(addr)]
                with m.If(slot == 0):
                    m.d.comb += regs.access.eq(1)
                    m.d.sync += mapped.eq(regs.mapped)
                    m.next = "REGISTER"
                with m.Elif(w_valid & ~host.busy):
                    m.next = "FETCH"
                with m.Else():
                    m.next = "ERROR"
            with m.State("REGISTER"):
                with m.If(mapped):
                    answer(True, regs.rdata)
                with m.Else():
                    answer(False)
            with m.State("FETCH"):
                m.d.comb += host.re.eq(1)
                m.next = "WAIT"
            with m.State("WAIT"), m.If(host.rvalid):
                # A read answers the word's piece; a write merges its bytes into the word.
                old = wide.word_select(piece, 32)
                m.d.sync += [piece_q.eq(old), word.eq(wide)]
                m.d.sync += word.word_select(piece, 32).eq(
                    (old & ~byte_mask(sel)) | (dat_w & byte_mask(sel)))
                m.next = "READ"
                with m.If(we):
                    m.next = "WRITE"
            with m.State("WRITE"):
                m.d.comb += host.we.eq(1)
                answer(True)
            with m.State("READ"):
                answer(True, piece_q)
            with m.State("ERROR"):
                answer(False)
        return m

    def _decode(self, m, slot, offset, *, region, addr, piece, valid):
        """Drive the window, word address and piece that ``slot`` and ``offset`` name, and
        whether the window has them."""
        for w in self.regmap.windows:
            with m.If(slot == w.region.value + 1):
                s = (w.stride - 1).bit_length()
                word, part = offset[s:], offset[:s]
                m.d.comb += [region.eq(w.region), addr.eq(word), piece.eq(part),
                             valid.eq((word < w.depth) & (part < w.pieces))]
