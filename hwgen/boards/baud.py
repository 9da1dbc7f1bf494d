"""The link's baud rate on a board: which clock the UART runs from, whether its integer divisor
holds the rate within what the receivers on both ends tolerate, and what would.

The UART samples each bit once, in its middle, ``divisor`` clock cycles apart
(:class:`hwgen.link.uart.UARTRx`): the stop bit is sampled 9.5 bit periods after the start
edge, which it sees up to a cycle late, so it follows a peer whose bit time differs from its own
by up to ``(0.5 - 1 / divisor) / 9.5`` (:func:`receiver_tolerance`). The bridge's receiver
(FTDI's, 16 samples a bit) tolerates ``(0.5 - 1 / 16) / 9.5``, 4.6 %. The bridge's own rate is
off by up to :data:`BRIDGE_ERROR` (2 %), so a rate is accepted when the divisor's own error plus
2 % stays within both tolerances, and the divisor's own error within the 2 % that
:func:`hwgen.link.uart.divisor_for` allows.

The link runs from the board's oscillator (in a clock domain of its own) when the board does
so and the oscillator makes the rate; otherwise from the design's clock. The ULX3S's 25 MHz
makes 3 Mbaud only 4.2 % fast (8 cycles a bit), so at 3 Mbaud its link shares the design's
62.5 MHz clock (21 cycles a bit, 0.8 % slow).
"""

from ..link.uart import MAX_BAUD_ERROR, MIN_DIVISOR
from .pll import PLLError, clock_plan, link_clock_hz

__all__ = ["BRIDGE_ERROR", "BRIDGE_RX_TOLERANCE", "BaudError", "bridge_rates", "default_baud",
           "link_plan", "own_link_clock_hz", "receiver_tolerance", "uart_divisor"]

#: How far a USB bridge's bit time may be off its nominal rate.
BRIDGE_ERROR = 0.02
#: The mismatch an FTDI bridge's receiver, 16 samples a bit, follows to the stop bit.
BRIDGE_RX_TOLERANCE = (0.5 - 1 / 16) / 9.5


class BaudError(ValueError):
    """The board's clocks cannot make a baud rate within the receivers' tolerance."""


def receiver_tolerance(divisor):
    """Return the bit-time mismatch the UART's receiver follows at ``divisor`` cycles a bit."""
    return (0.5 - 1 / divisor) / 9.5


def _error(clk_hz, baud):
    """Return ``(divisor, relative error of clk_hz / divisor against baud, ok)``."""
    divisor = round(clk_hz / baud)
    if divisor < MIN_DIVISOR:
        return divisor, None, False
    error = clk_hz / divisor / baud - 1
    ok = (abs(error) <= MAX_BAUD_ERROR and abs(error) + BRIDGE_ERROR
          <= min(receiver_tolerance(divisor), BRIDGE_RX_TOLERANCE))
    return divisor, error, ok


def _clocks(board, config):
    """The clocks the link may run from on ``board``: its own (the oscillator) first."""
    own = link_clock_hz(board, config)
    return [own, config.clock_hz] if own is not None else [config.clock_hz]


def link_plan(board, config, baud):
    """Return how ``board`` makes ``baud`` for ``config``.

    Returns
    -------
    dict
        ``clock_hz`` (the UART's clock), ``own_domain`` (True when that is the oscillator in a
        domain of its own, False when the link shares the design's clock), ``divisor``
        (cycles a bit) and ``error`` (relative error of the bit rate, signed).

    Raises
    ------
    BaudError
        When no clock the link may run from makes ``baud`` within the tolerance; the one-line
        message gives each clock's error and the rates and clocks that would work.
    """
    clocks = _clocks(board, config)
    tried = []
    for index, hz in enumerate(clocks):
        divisor, error, ok = _error(hz, baud)
        if ok:
            return {"clock_hz": hz, "own_domain": index == 0 and len(clocks) == 2,
                    "divisor": divisor, "error": error}
        tried.append(f"{hz / 1e6:g} MHz gives a divisor of {divisor} " + (
            f"(at least {MIN_DIVISOR} needed)" if error is None
            else f"({hz / divisor:,.0f} baud, {error:+.2%})"))
    works = [r for r in bridge_rates(board, top=board.bridge_hz)
             if any(_error(hz, r)[2] for hz in clocks)][:4]
    raise BaudError(
        f"{board.name} cannot run the UART at {baud:,} baud: " + "; ".join(tried)
        + f" (allowed: the divisor's error + {BRIDGE_ERROR:.0%} for the bridge within the "
        f"receivers' (0.5 - 1/divisor) / 9.5 and {BRIDGE_RX_TOLERANCE:.1%}); rates that work "
        f"here: " + (", ".join(f"{r:,}" for r in works) or "none")
        + (_clocks_for(board, baud) if baud <= board.bridge_hz
           else f"; the {board.bridge} runs at most {board.bridge_hz:,} baud"))


def _clocks_for(board, baud):
    """The text naming design clocks the board makes that would carry ``baud``."""
    found = []
    for divisor in range(MIN_DIVISOR, 64):
        hz = baud * divisor
        if hz > 200e6 or len(found) == 3:
            break
        try:
            clock_plan(board, hz)
        except PLLError:
            continue
        if _error(hz, baud)[2]:
            found.append(hz)
    if not found:
        return ""
    return f"; {baud:,} baud works with --clock-hz " + " or ".join(str(hz) for hz in found)


def bridge_rates(board, top=None):
    """Return the integer baud rates the board's bridge makes up to ``top`` (default: its
    reliable :attr:`~hwgen.boards.catalog.Board.baud`), fastest first, down to 100 kbaud."""
    top = board.baud if top is None else top
    rates = []
    for m in [8, 12, *range(16, 8 * board.bridge_hz // 100_000 + 1)]:
        if board.bridge_hz * 8 % m == 0 and board.bridge_hz * 8 // m <= top:
            rates.append(board.bridge_hz * 8 // m)
    return rates


def default_baud(board, config):
    """Return ``(baud, note)``: the bridge's rate when the board makes it for ``config``, else
    the fastest rate of the bridge that the link's usual clock makes, with a one-line ``note``
    saying why (None when the bridge's own rate is used)."""
    try:
        link_plan(board, config, board.baud)
        return board.baud, None
    except BaudError as exc:
        why = str(exc).split(": ", 1)[1].split(" (allowed")[0]
    usual = _clocks(board, config)[0]
    for rate in bridge_rates(board):
        if _error(usual, rate)[2]:
            return rate, (f"{board.bridge} at {board.baud:,} baud: {why}; building at {rate:,} "
                          f"baud" + _clocks_for(board, board.baud))
    raise BaudError(f"{board.name}: no rate of its {board.bridge} fits the "
                    f"{usual / 1e6:g} MHz link clock; give --baud")


def own_link_clock_hz(board, config, baud):
    """Return the clock of the link's own domain at ``baud`` (the oscillator), or None when
    the link shares the design's clock.

    Raises
    ------
    BaudError
        When no clock of the link makes ``baud`` (:func:`link_plan`).
    """
    plan = link_plan(board, config, baud)
    return plan["clock_hz"] if plan["own_domain"] else None


def uart_divisor(board, config, baud):
    """Return the clock cycles per bit of the board top's UART at ``baud``.

    Raises
    ------
    BaudError
        When no clock of the link makes ``baud`` (:func:`link_plan`).
    """
    return link_plan(board, config, baud)["divisor"]
