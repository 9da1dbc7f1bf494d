"""UART 8N1 transmitter and receiver with stream interfaces.

The board link under hwgen/protocol.py's frames: one start bit, eight data bits sent least
significant bit first, no parity, one stop bit. The bit period is a fixed number of clock
cycles, the *divisor*; :func:`divisor_for` computes it from a clock and a baud rate and refuses
rates the receiver would not hold to.

All three components take the same divisor, checked by the same rule (an :class:`int`,
at least :data:`MIN_DIVISOR`), so a divisor accepted for one end of a link is accepted for the
other.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["MAX_BAUD_ERROR", "MIN_DIVISOR", "UART", "UARTRx", "UARTTx", "divisor_for"]

#: Smallest divisor (clock cycles per bit) the components accept. The receiver needs a few
#: samples per bit to find the middle of a bit; the transmitter alone would work down to 1, but
#: one rule for both keeps a transmitter from being built at a rate no receiver here can take.
MIN_DIVISOR = 4

#: Largest relative difference between the requested baud rate and ``clk_hz / divisor`` that
#: :func:`divisor_for` accepts. The receiver samples the stop bit 9.5 bit periods after the start
#: edge, so the two ends together may drift by less than half a bit over that span (about 5 %);
#: 2 % on our side leaves the rest to the peer's clock and to sampling jitter.
MAX_BAUD_ERROR = 0.02

_DATA_BITS = 8


def divisor_for(clk_hz, baud):
    """Return the divisor for ``baud`` at a clock of ``clk_hz``.

    Parameters
    ----------
    clk_hz : int or float
        Frequency of the clock the UART runs on, in Hz.
    baud : int or float
        Wanted bit rate, in bits per second.

    Returns
    -------
    int
        ``round(clk_hz / baud)``, the number of clock cycles per bit.

    Raises
    ------
    ValueError
        If ``clk_hz`` or ``baud`` is not a positive number, if the divisor is below
        :data:`MIN_DIVISOR`, or if ``clk_hz / divisor`` differs from ``baud`` by more than
        :data:`MAX_BAUD_ERROR`.
    """
    for name, value in (("clk_hz", clk_hz), ("baud", baud)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(f"{name} must be a positive number, not {value!r}")
    divisor = round(clk_hz / baud)
    if divisor < MIN_DIVISOR:
        raise ValueError(
            f"clk_hz={clk_hz} and baud={baud} give divisor {divisor}; the UART needs at least "
            f"{MIN_DIVISOR} clock cycles per bit (baud <= {clk_hz / MIN_DIVISOR:g})")
    error = abs(clk_hz / divisor - baud) / baud
    if error > MAX_BAUD_ERROR:
        raise ValueError(
            f"clk_hz={clk_hz} and baud={baud} give divisor {divisor}, i.e. "
            f"{clk_hz / divisor:g} baud, {error:.2%} off; at most {MAX_BAUD_ERROR:.0%} is allowed")
    return divisor


def _check_divisor(divisor):
    # bool is an int subclass, but True as a divisor is surely a mistake.
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < MIN_DIVISOR:
        raise ValueError(
            f"divisor must be an int >= {MIN_DIVISOR} (clock cycles per bit), not {divisor!r}")


class _SerialComponent(wiring.Component):
    """Shared constructor: check and keep ``divisor`` (clock cycles per bit)."""

    def __init__(self, divisor):
        _check_divisor(divisor)
        self._divisor = divisor
        super().__init__()

    @property
    def divisor(self):
        """Clock cycles per bit."""
        return self._divisor


class UARTTx(_SerialComponent):
    """UART 8N1 transmitter.

    Each byte taken from ``i_data`` goes out on ``tx`` as a start bit (low), the eight data bits
    least significant first, and a stop bit (high), each held for ``divisor`` clock cycles.
    ``i_data.ready`` is asserted while idle and in the last cycle of a stop bit, so a byte
    waiting in the stream starts right after the previous stop bit: back-to-back bytes take
    exactly ``10 * divisor`` cycles each.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least :data:`MIN_DIVISOR`; see :func:`divisor_for`.

    Members
    -------
    i_data : ``In(stream.Signature(8))``
        Bytes to send.
    tx : ``Out(1, init=1)``
        Serial output, registered; high when idle.

    Raises
    ------
    ValueError
        If ``divisor`` is not an int of at least :data:`MIN_DIVISOR`.
    """

    i_data: In(stream.Signature(_DATA_BITS))
    tx: Out(1, init=1)

    def elaborate(self, platform):
        m = Module()

        busy = Signal()
        # Data bits, then the stop bit; shifted out from bit 0.
        shreg = Signal(_DATA_BITS + 1)
        # Bits still to start after the current one (start bit: 9, stop bit: 0).
        bits_left = Signal(range(_DATA_BITS + 2))
        # Cycles left in the current bit after this one.
        timer = Signal(range(self._divisor))

        bit_done = timer == 0
        last_cycle = bit_done & (bits_left == 0)
        m.d.comb += self.i_data.ready.eq(~busy | last_cycle)

        with m.If(busy):
            with m.If(~bit_done):
                m.d.sync += timer.eq(timer - 1)
            with m.Elif(bits_left != 0):
                m.d.sync += [
                    self.tx.eq(shreg[0]),
                    shreg.eq(shreg >> 1),
                    bits_left.eq(bits_left - 1),
                    timer.eq(self._divisor - 1),
                ]
            with m.Else():
                m.d.sync += busy.eq(0)

        # Placed last so that taking a byte in the last stop-bit cycle wins over going idle.
        with m.If(self.i_data.valid & self.i_data.ready):
            m.d.sync += [
                busy.eq(1),
                self.tx.eq(0),
                shreg.eq(Cat(self.i_data.payload, Const(1, 1))),
                bits_left.eq(_DATA_BITS + 1),
                timer.eq(self._divisor - 1),
            ]

        return m


class UARTRx(_SerialComponent):
    """UART 8N1 receiver.

    ``rx`` goes through a two-stage synchronizer. The receiver waits for the line to be high,
    then for it to fall (a start bit), and samples each bit once, in its middle, counting
    ``divisor`` cycles between samples. A start bit that is high again at its middle was a
    glitch and is ignored.

    A frame whose stop bit is low is dropped, pulses ``err_frame`` and increments
    ``frame_errors``; the receiver then waits for the line to go high before it looks for the
    next start bit, so a BREAK (line held low) gives one framing error and no bytes. A byte
    completed while ``o_data`` still holds one that was not taken is dropped and pulses
    ``err_overrun``; the byte already offered stays unchanged. The receiver starts in the
    waiting-for-high state, so a line held low from reset yields nothing at all.

    The receiver follows a peer whose bit period differs from ``divisor`` by up to about
    ``(0.5 - 1 / divisor) / 9.5`` (2.6 % at a divisor of 4, 4.6 % at 16): the start edge is
    seen up to one cycle late, and the stop bit is sampled 9.5 bit periods after it.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least :data:`MIN_DIVISOR`; see :func:`divisor_for`.

    Members
    -------
    rx : ``In(1, init=1)``
        Serial input; asynchronous to the clock.
    o_data : ``Out(stream.Signature(8))``
        Received bytes. ``payload`` holds still while ``valid`` waits for ``ready``.
    err_frame : ``Out(1)``
        One-cycle pulse: a frame with a low stop bit was dropped.
    err_overrun : ``Out(1)``
        One-cycle pulse: a byte was dropped because ``o_data`` was still full.
    frame_errors : ``Out(16)``
        Number of ``err_frame`` pulses since reset, saturating at 65535.

    Raises
    ------
    ValueError
        If ``divisor`` is not an int of at least :data:`MIN_DIVISOR`.
    """

    rx: In(1, init=1)
    o_data: Out(stream.Signature(_DATA_BITS))
    err_frame: Out(1)
    err_overrun: Out(1)
    frame_errors: Out(16)

    def elaborate(self, platform):
        m = Module()

        # Starts low so that, until the line has really been seen high after configuration,
        # the receiver stays in WAIT_IDLE instead of taking a low line for a start bit.
        line = Signal(init=0)
        m.submodules.sync_rx = FFSynchronizer(self.rx, line, init=0)

        shreg = Signal(_DATA_BITS)
        bit_index = Signal(range(_DATA_BITS))
        timer = Signal(range(self._divisor))
        sample = timer == 0

        # Pulses last one cycle: cleared every cycle unless set again below.
        m.d.sync += [self.err_frame.eq(0), self.err_overrun.eq(0)]
        with m.If(self.o_data.valid & self.o_data.ready):
            m.d.sync += self.o_data.valid.eq(0)

        with m.FSM(init="WAIT_IDLE"):
            with m.State("WAIT_IDLE"), m.If(line):
                m.next = "HUNT"

            # HUNT is only entered with the line seen high, so low here is a falling edge. The
            # edge was seen this cycle; the start bit's middle is divisor/2 cycles away.
            with m.State("HUNT"), m.If(~line):
                m.d.sync += timer.eq(self._divisor // 2 - 1)
                m.next = "START"

            with m.State("START"):
                with m.If(~sample):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(line):
                    # High again at mid-bit: a glitch, not a start bit; the line is idle.
                    m.next = "HUNT"
                with m.Else():
                    m.d.sync += [bit_index.eq(0), timer.eq(self._divisor - 1)]
                    m.next = "DATA"

            with m.State("DATA"):
                with m.If(~sample):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    # Least significant bit first: shift in at the top.
                    m.d.sync += [
                        shreg.eq(Cat(shreg[1:], line)),
                        bit_index.eq(bit_index + 1),
                        timer.eq(self._divisor - 1),
                    ]
                    with m.If(bit_index == _DATA_BITS - 1):
                        m.next = "STOP"

            with m.State("STOP"):
                with m.If(~sample):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(~line):
                    m.d.sync += self.err_frame.eq(1)
                    with m.If(self.frame_errors != 0xFFFF):
                        m.d.sync += self.frame_errors.eq(self.frame_errors + 1)
                    m.next = "WAIT_IDLE"
                with m.Else():
                    # A byte taken in this very cycle frees the output: not an overrun.
                    with m.If(self.o_data.valid & ~self.o_data.ready):
                        m.d.sync += self.err_overrun.eq(1)
                    with m.Else():
                        m.d.sync += [self.o_data.payload.eq(shreg), self.o_data.valid.eq(1)]
                    # Returning at mid-stop-bit leaves half a bit to catch the next start edge.
                    m.next = "HUNT"

        return m


class UART(_SerialComponent):
    """UART 8N1 transmitter and receiver sharing one divisor.

    A :class:`UARTTx` and a :class:`UARTRx`; see them for the behaviour of each direction.

    Parameters
    ----------
    divisor : int
        Clock cycles per bit, at least :data:`MIN_DIVISOR`; see :func:`divisor_for`.

    Members
    -------
    i_data : ``In(stream.Signature(8))``
        Bytes to send on ``tx``.
    o_data : ``Out(stream.Signature(8))``
        Bytes received on ``rx``.
    tx : ``Out(1, init=1)``
        Serial output; high when idle.
    rx : ``In(1, init=1)``
        Serial input; asynchronous to the clock.
    err_frame : ``Out(1)``
        One-cycle pulse: a received frame with a low stop bit was dropped.
    err_overrun : ``Out(1)``
        One-cycle pulse: a received byte was dropped because ``o_data`` was still full.
    frame_errors : ``Out(16)``
        Number of ``err_frame`` pulses since reset, saturating at 65535.

    Raises
    ------
    ValueError
        If ``divisor`` is not an int of at least :data:`MIN_DIVISOR`.
    """

    i_data: In(stream.Signature(_DATA_BITS))
    o_data: Out(stream.Signature(_DATA_BITS))
    tx: Out(1, init=1)
    rx: In(1, init=1)
    err_frame: Out(1)
    err_overrun: Out(1)
    frame_errors: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx = tx = UARTTx(self._divisor)
        m.submodules.rx = rx = UARTRx(self._divisor)

        wiring.connect(m, wiring.flipped(self.i_data), tx.i_data)
        wiring.connect(m, rx.o_data, wiring.flipped(self.o_data))
        m.d.comb += [
            self.tx.eq(tx.tx),
            rx.rx.eq(self.rx),
            self.err_frame.eq(rx.err_frame),
            self.err_overrun.eq(rx.err_overrun),
            self.frame_errors.eq(rx.frame_errors),
        ]
        return m
