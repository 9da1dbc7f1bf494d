"""Byte pipes for :class:`host.client.DeviceClient`.

A device is reached through a pyserial URL: a port name (``/dev/ttyUSB1``, ``COM3``), a
``socket://host:port`` of the simulated board, or ``loop://`` for tests. Anything else with
pyserial's ``write``/``read``/``timeout`` works too.
"""

import serial

from hwgen.protocol import DEFAULT_BAUD

__all__ = ["open_port"]


def open_port(url, baudrate=DEFAULT_BAUD, timeout=0.05):
    """Open ``url`` with :func:`serial.serial_for_url` and return the port.

    Raises
    ------
    serial.SerialException
        If the port cannot be opened (pyserial names the reason).
    """
    return serial.serial_for_url(url, baudrate=baudrate, timeout=timeout)
