"""The serial rate at which the host opens a board's port.

A serial port must be opened at the device's rate before a single frame (INFO included) gets
through, so the rate cannot come from INFO itself. The host takes it, in this order, from the
caller (``--baud``), from the build that made the bitstream (``report.json`` in a ``--build``
folder, the rate ``hwgen build`` checked and built) or from the board's name (what ``hwgen build
--board B`` builds by default: the USB bridge's rate where the board's clocks make it), else
:data:`BOARD_BAUD`, the rate of every board's default build. INFO then reports the rate the
bitstream was built for (``DeviceInfo.baud``, ``Accelerator.info.baud``). pyserial sets any
rate on Linux (termios2 ``BOTHER``): 3 and 6 Mbaud need nothing special. ``socket://`` and
``loop://`` URLs ignore the rate.
"""

import json
from pathlib import Path

__all__ = ["BOARD_BAUD", "board_baud", "build_baud", "serial_rate"]

#: The rate of ``hwgen build --board B``'s default build on every board (the ULX3S's FT231X at
#: its top rate; the iCEBreaker's preset clock, 12 MHz, makes no more than 3 Mbaud).
BOARD_BAUD = 3_000_000


def build_baud(build):
    """Return the UART rate recorded in the build folder ``build`` (its ``report.json``).

    Raises
    ------
    ValueError
        If the folder has no readable ``report.json`` with a ``baud``, naming the path.
    """
    path = Path(build) / "report.json"
    try:
        baud = json.loads(path.read_text())["baud"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: no build report with a baud rate ({exc})") from None
    if isinstance(baud, bool) or not isinstance(baud, int) or baud <= 0:
        raise ValueError(f"{path}: baud {baud!r} is not a positive int")
    return baud


def board_baud(board):
    """Return the UART rate of ``hwgen build --board board``'s default build.

    Raises
    ------
    ValueError
        If ``board`` is not a board :data:`hwgen.boards.BOARDS` knows; the message lists them.
    """
    from hwgen.boards import BOARDS, board_config, default_baud

    if board not in BOARDS:
        raise ValueError(f"board {board!r} is unknown; allowed: " + ", ".join(sorted(BOARDS)))
    return default_baud(BOARDS[board], board_config(BOARDS[board]))[0]


def serial_rate(baudrate=None, *, build=None, board=None):
    """Return the rate to open a board's serial port at: ``baudrate`` when given, else the
    build's (:func:`build_baud`), else the board's default build's (:func:`board_baud`), else
    :data:`BOARD_BAUD`.

    Raises
    ------
    ValueError
        From :func:`build_baud` or :func:`board_baud`.
    """
    if baudrate is not None:
        return baudrate
    if build is not None:
        return build_baud(build)
    if board is not None:
        return board_baud(board)
    return BOARD_BAUD
