"""What a board's bitstream holds: the device with its pins, LEDs and clock, or the array alone.

:class:`BoardTop` wraps :class:`hwgen.device.Device` for a board: the UART on the board's
USB-serial pins, a heartbeat LED and a busy LED, and a PLL when the target clock is not the
board's oscillator. :class:`ArrayTop` puts the systolic array alone on a board, for
measurements, and :class:`BF16ArrayTop` the bf16 array (:mod:`hwgen.device.bf16_array`).
"""

from amaranth.hdl import (
    Cat,
    ClockDomain,
    ClockSignal,
    Const,
    Elaboratable,
    Instance,
    Module,
    Signal,
    Value,
)
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from .baud import own_link_clock_hz
from .catalog import Family
from .fit import implementation_for
from .pll import clock_plan

__all__ = ["OSCILLATOR_NET", "ArrayTop", "BF16ArrayTop", "BoardTop"]

#: The oscillator's input buffer where a top makes its clocks itself (a PLL, or the ECP5's
#: reset), and the net behind it that Yosys names after the buffer's output.
_OSCILLATOR_BUFFER = "clk_buf"
OSCILLATOR_NET = f"{_OSCILLATOR_BUFFER}.i"


class BoardTop(Elaboratable):
    """The device on a board: UART on the USB-serial pins, LEDs, clock.

    LED 0 blinks at 0.5..1 Hz while the clock runs (a heartbeat); LED 1 shows ``busy``. When
    the target clock is not the board's oscillator, a PLL makes it and the design is held in
    reset until the PLL locks.

    Parameters
    ----------
    board : Board
    config : AcceleratorConfig
        ``config.clock_hz`` is the clock the design runs at. The UART divisor comes from it, or
        from the oscillator on a board with ``link_on_oscillator`` when the PLL makes the clock
        (the link and the frame engine then run from the oscillator).
    baud : int
    pe_instances : bool
        Instantiate the processing elements by module name; their Verilog is added to the
        platform by :func:`hwgen.boards.flow.build`.
    """

    def __init__(self, board, config, *, baud, pe_instances=False):
        from ..device import Device, Link

        self.board = board
        self.config = config
        self.clock = clock_plan(board, config.clock_hz)
        #: The link's own clock (the oscillator), or None when it shares the design's (also
        #: when the oscillator cannot make ``baud``: :func:`hwgen.boards.baud.link_plan`).
        self.link_clock_hz = own_link_clock_hz(board, config, baud)
        self.device = Device(config, link=Link.UART, baud=baud,
                             implementation=implementation_for(board, config),
                             pe_instances=pe_instances,
                             link_clock_hz=self.link_clock_hz)

    def elaborate(self, platform):
        m = Module()
        _add_clock(m, platform, self.board, self.clock, link=self.link_clock_hz is not None)
        m.submodules.device = dev = self.device
        uart = platform.request("uart", 0, dir="-")
        m.submodules.rx_buf = rx = io.Buffer("i", uart.rx)
        m.submodules.tx_buf = tx = io.Buffer("o", uart.tx)
        m.d.comb += [dev.rx.eq(rx.i), tx.o.eq(dev.tx)]
        # A free-running counter, not a reloaded down-counter: on the iCE40 the reload
        # multiplexer broke the carry chain every few bits and made the heartbeat the critical
        # path. Its top bit toggles every 0.5..1 s.
        beat = Signal(self.clock["hz"].bit_length())
        m.d.sync += beat.eq(beat + 1)
        m.d.comb += [_led(m, platform, 0).eq(beat[-1]), _led(m, platform, 1).eq(dev.busy)]
        return m


class ArrayTop(Elaboratable):
    """The systolic array alone on a board, for measuring its size and Fmax.

    A 64-bit LFSR drives every input of :class:`hwgen.device.systolic.WeightStationaryArray`
    (random traffic: nothing is computed, but no logic can be optimised away) and the XOR of
    all its outputs drives LED 0. This is what ``benchmarks/boards.py`` uses for "array"
    figures; the board's DSP packing applies.
    """

    def __init__(self, board, config):
        from ..device.systolic import WeightStationaryArray

        self.board = board
        self.config = config
        self.clock = clock_plan(board, config.clock_hz)
        self.array = WeightStationaryArray(config, dsp_packing=board.packing_for(config))

    def elaborate(self, platform):
        m = Module()
        _add_clock(m, platform, self.board, self.clock)
        m.submodules.array = arr = self.array
        _drive_from_lfsr(m, [arr.a_data, arr.a_valid, arr.a_last, arr.a_sel, arr.w_data,
                             arr.w_row, arr.w_valid, arr.w_bank])
        parts = [Value.cast(arr.o_data[j]).xor() for j in range(self.config.cols)]
        m.d.comb += _led(m, platform, 0).eq(_registered_parity(m, [*parts, arr.o_valid,
                                                                    arr.o_last]))
        return m


class BF16ArrayTop(Elaboratable):
    """The bf16 array alone on a board, for measuring its size and Fmax beside
    :class:`ArrayTop`'s int8 array.

    As :class:`ArrayTop`: an LFSR drives every input of
    :class:`hwgen.device.bf16_array.BF16Array` (``config.rows x config.cols``; nothing else
    of ``config`` but its clock is used) and the registered XOR of all its outputs drives
    LED 0.

    Parameters
    ----------
    board : Board
    config : AcceleratorConfig
    mul_latency, add_latency : int
        The latencies of the array's multipliers and adders.
    """

    def __init__(self, board, config, *, mul_latency=3, add_latency=4):
        from ..device.bf16_array import BF16Array

        self.board = board
        self.config = config
        self.clock = clock_plan(board, config.clock_hz)
        self.array = BF16Array(config.rows, config.cols, mul_latency=mul_latency,
                               add_latency=add_latency)

    def elaborate(self, platform):
        m = Module()
        _add_clock(m, platform, self.board, self.clock)
        m.submodules.array = arr = self.array
        _drive_from_lfsr(m, [arr.a_data, arr.a_valid, arr.a_first, arr.a_sel, arr.bias,
                             arr.w_data, arr.w_row, arr.w_valid, arr.w_bank])
        parts = [Value.cast(out[j]).xor() for out in (arr.s, arr.acc)
                 for j in range(self.config.cols)]
        m.d.comb += _led(m, platform, 0).eq(_registered_parity(m, [*parts, arr.s_valid,
                                                                    arr.acc_valid]))
        return m


def _drive_from_lfsr(m, inputs):
    """Drive ``inputs`` from the bits of an LFSR of at least 64 bits (random traffic:
    nothing is computed, but no logic can be optimised away)."""
    width = sum(len(Value.cast(v)) for v in inputs)
    lfsr = Signal(max(64, width), init=1)
    # x^64 + x^63 + x^61 + x^60 + 1, shifted by one bit per cycle.
    fb = lfsr[63] ^ lfsr[62] ^ lfsr[60] ^ lfsr[59]
    m.d.sync += lfsr.eq(Cat(fb, lfsr[:-1]))
    pos = 0
    for v in inputs:
        n = len(Value.cast(v))
        m.d.comb += Value.cast(v).eq(lfsr[pos:pos + n])
        pos += n


def _registered_parity(m, parts):
    """Return the parity of the bits ``parts`` in two registered steps, so that the harness
    is not the critical path: the parts registered, then their parity."""
    partial = Signal(len(parts))
    sink = Signal()
    m.d.sync += [partial.eq(Cat(*parts)), sink.eq(partial.xor())]
    return sink


def _led(m, platform, index):
    """Return the output of an output buffer on LED ``index`` (inversion handled by the port)."""
    buf = io.Buffer("o", platform.request("led", index, dir="-"))
    m.submodules[f"led{index}_buf"] = buf
    return buf.o


def _add_clock(m, platform, board, clock, *, link=False):
    """The sync domain from the PLL when ``clock`` needs one, else from the oscillator."""
    if clock["pll"] is not None:
        _add_pll(m, platform, board, clock, link=link)
    else:
        _add_oscillator(m, platform, board)


def _add_oscillator(m, platform, board):
    """Make the ``sync`` domain from the oscillator on an ECP5, its registers reset through the
    global set/reset (:func:`_global_reset`): Amaranth's own ECP5 domain resets so too, but is
    reset-less, and the DSP blocks take the domain's reset. The iCE40's domain has one (held
    until its block RAMs are ready)."""
    if board.family is not Family.ECP5:
        return
    m.domains.sync = ClockDomain("sync")
    clk = _oscillator(m, platform)
    m.d.comb += ClockSignal("sync").eq(clk)
    _global_reset(m, clk, Const(1, 1))


def _add_pll(m, platform, board, clock, *, link=False):
    """Make the ``sync`` domain from the board's PLL, in reset until it locks; with ``link``
    also the ``link`` domain from the oscillator (iCE40: the PLL's second output passes the
    oscillator's clock through; ECP5: the oscillator's input buffer)."""
    m.domains.sync = ClockDomain("sync")
    clk, lock = Signal(name="pll_clk"), Signal(name="pll_lock")
    if board.family is Family.ICE40:
        _ice40_pll(m, platform, clock["pll"], clk=clk, lock=lock, link=link)
    else:
        # Behind the oscillator's input buffer, whose clock is the link domain's with `link`.
        ref = _oscillator(m, platform)
        make = _gowin_pll if board.family is Family.GOWIN else _ecp5_pll
        m.submodules.pll = make(board, clock, ref=ref, clk=clk, lock=lock)
        if link:
            _link_domain(m, ref, lock)
    # No constraints on the PLL's outputs: nextpnr derives them from the oscillator pin's and
    # the PLL's dividers. (Constraints on `clk` and `link_clk` named nets that synthesis had
    # merged into the domains' clocks, and nextpnr ignored them with a warning.)
    m.d.comb += ClockSignal("sync").eq(clk)
    if board.family is Family.ECP5:
        _global_reset(m, clk, lock)
    else:
        m.submodules.reset_sync = ResetSynchronizer(~lock, domain="sync")


def _global_reset(m, clk, ready):
    """Hold every register of the ECP5 in reset until ``ready`` (the PLL's lock), through the
    chip's global set/reset network, as Amaranth's own ECP5 domain does: ``ready`` passes two
    flip-flops that the network does not reset into an SGSR clocked by ``clk``. Each register
    then returns to its initial value with no reset net in the fabric: that one net reached
    every register and crossed the 85F's die (20 ns at 62.5 MHz), and on a global buffer
    (DCCA) its route into the buffer failed in half the 85F's placements. The ``sync``
    domain's own reset stays 0 (the DSP blocks take it)."""
    sync = [Signal(name=f"gsr_sync{i}") for i in range(2)]
    for i, d in enumerate([ready, sync[0]]):
        m.submodules[f"gsr_stage{i}"] = Instance("FD1S3AX", p_GSR="DISABLED", i_CK=clk, i_D=d,
                                                o_Q=sync[i])
    m.submodules.global_reset = Instance("SGSR", i_CLK=clk, i_GSR=sync[1])


def _ice40_pll(m, platform, p, *, clk, lock, link):
    """Instantiate the SB_PLL40 on the oscillator's pin (two outputs with ``link``)."""
    pin = platform.request(platform.default_clk, dir="-")
    ports = {"p_FEEDBACK_PATH": "SIMPLE", "io_PACKAGEPIN": pin.io, "i_RESETB": Const(1, 1),
             "i_BYPASS": Const(0, 1), "o_LOCK": lock,
             **{f"p_{name}": p[name] for name in ("DIVR", "DIVF", "DIVQ", "FILTER_RANGE")}}
    if link:
        # The two-output PLL: port A passes the oscillator through, port B is the PLL's.
        m.domains.link = ClockDomain("link")
        link_clk = Signal()
        m.submodules.pll = Instance("SB_PLL40_2_PAD", p_PLLOUT_SELECT_PORTB="GENCLK",
                                    o_PLLOUTGLOBALA=link_clk, o_PLLOUTGLOBALB=clk, **ports)
        m.d.comb += ClockSignal("link").eq(link_clk)
        m.submodules.reset_sync_link = ResetSynchronizer(~lock, domain="link")
    else:
        m.submodules.pll = Instance("SB_PLL40_PAD", o_PLLOUTGLOBAL=clk, **ports)


def _ecp5_pll(board, clock, *, ref, clk, lock):
    """Return the EHXPLLL that makes ``clk`` from the oscillator's ``ref``."""
    p = clock["pll"]
    zero = Const(0, 1)
    return Instance(
        "EHXPLLL",
        # Loop filter settings as `ecppll` writes them.
        a_FREQUENCY_PIN_CLKI=f"{board.osc_hz / 1e6:g}",
        a_FREQUENCY_PIN_CLKOP=f"{clock['hz'] / 1e6:g}",
        a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
        a_MFG_GMCREF_SEL="2",
        p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
        p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
        p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
        p_CLKI_DIV=p["CLKI_DIV"], p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p["CLKOP_DIV"],
        p_CLKOP_CPHASE=p["CLKOP_CPHASE"], p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
        p_CLKFB_DIV=p["CLKFB_DIV"],
        i_CLKI=ref, i_CLKFB=clk, i_RST=zero, i_STDBY=zero, i_PHASESEL0=zero,
        i_PHASESEL1=zero, i_PHASEDIR=zero, i_PHASESTEP=zero, i_PHASELOADREG=zero,
        i_PLLWAKESYNC=zero, i_ENCLKOP=zero,
        o_CLKOP=clk, o_LOCK=lock)


def _oscillator(m, platform):
    """Return the oscillator's clock behind its input buffer."""
    m.submodules[_OSCILLATOR_BUFFER] = ref_buf = io.Buffer("i", platform.request(
        platform.default_clk, dir="-"))
    return ref_buf.i


def _link_domain(m, ref, lock):
    """Make the ``link`` domain from the oscillator's own clock ``ref`` (its pin's constraint
    covers it), in reset until the PLL locks."""
    m.domains.link = ClockDomain("link")
    m.d.comb += ClockSignal("link").eq(ref)
    m.submodules.reset_sync_link = ResetSynchronizer(~lock, domain="link")


def _gowin_pll(board, clock, *, ref, clk, lock):
    """Return the Gowin rPLL that makes ``clk`` from the oscillator's ``ref``."""
    p = clock["pll"]
    zero = Const(0, 1)
    return Instance(
        "rPLL",
        p_FCLKIN=f"{board.osc_hz / 1e6:g}", p_DEVICE=board.chip.replace("GW1N-", "GW1NR-"),
        p_IDIV_SEL=p["IDIV_SEL"], p_FBDIV_SEL=p["FBDIV_SEL"], p_ODIV_SEL=p["ODIV_SEL"],
        p_DYN_IDIV_SEL="false", p_DYN_FBDIV_SEL="false", p_DYN_ODIV_SEL="false",
        p_DYN_DA_EN="false", p_DYN_SDIV_SEL=2, p_CLKFB_SEL="internal",
        p_CLKOUT_BYPASS="false", p_CLKOUTP_BYPASS="false", p_CLKOUTD_BYPASS="false",
        i_CLKIN=ref, i_CLKFB=zero, i_RESET=zero, i_RESET_P=zero, i_FBDSEL=Const(0, 6),
        i_IDSEL=Const(0, 6), i_ODSEL=Const(0, 6), i_PSDA=Const(0, 4), i_DUTYDA=Const(0, 4),
        i_FDLY=Const(0, 4), o_CLKOUT=clk, o_LOCK=lock)
