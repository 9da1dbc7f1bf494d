"""Byte transports: what a host driver talks to a device through.

A device is reached through a **pyserial URL** (a port name such as ``/dev/ttyUSB1`` or
``COM3``, ``socket://host:port`` of the simulated board or of ``hwgen serve``, ``loop://`` for
tests), which :func:`open_port` opens, or through **any object with** ``read(n)`` **and**
``write(data)`` (:class:`Transport`): the in-process device of :mod:`sim.inprocess`, a test
bench's port, a wrapper that injects faults. :func:`open_transport` takes either.
"""

import typing

import serial

from hwgen.protocol import DEFAULT_BAUD, SYNC_REQUEST, Opcode

__all__ = ["CountingTransport", "Transport", "open_port", "open_transport"]

# Bytes of the start of a link that CountingTransport keeps (to recognise a key challenge).
_HEAD_BYTES = 16


@typing.runtime_checkable
class Transport(typing.Protocol):
    """A byte pipe to a device, as a host driver uses it (pyserial's port interface).

    ``write(data)`` sends the bytes (all of them; the return value is ignored). ``read(size)``
    returns at most ``size`` bytes: what has arrived, waiting a short while (the ``timeout``)
    when nothing has, and returning fewer bytes, or none, rather than blocking longer.

    Optional members, used when present:

    ``timeout``
        Seconds ``read`` waits for a byte; the client sets it to its poll interval.
    ``close()``
        Called when the driver is closed.
    ``url``
        A name for messages and for telling devices of a pool apart.
    ``synchronous``
        True when RUN finishes before its answer (:class:`sim.inprocess.InProcessDevice`): the
        driver then polls at once instead of waiting for the program's modelled duration.
    """

    def read(self, size: int) -> bytes: ...

    def write(self, data: bytes) -> typing.Any: ...


def open_port(url, baudrate=DEFAULT_BAUD, timeout=0.05):
    """Open ``url`` with :func:`serial.serial_for_url` and return the port.

    Raises
    ------
    serial.SerialException
        If the port cannot be opened (pyserial names the reason).
    """
    return serial.serial_for_url(url, baudrate=baudrate, timeout=timeout)


def open_transport(device, baudrate=DEFAULT_BAUD):
    """Return ``(transport, url)`` for ``device``: a pyserial URL, opened, or a
    :class:`Transport`, as it is (its ``url``, or its type and id, naming it).

    Raises
    ------
    TypeError
        If ``device`` is neither a string nor an object with ``read`` and ``write``.
    serial.SerialException, OSError, ValueError
        If the URL cannot be opened.
    """
    if isinstance(device, str):
        return open_port(device, baudrate=baudrate), device
    if not (callable(getattr(device, "read", None)) and callable(getattr(device, "write", None))):
        raise TypeError(f"device is a {type(device).__name__} ({device!r}); allowed: a pyserial "
                        "URL string or an object with read(size) and write(data) "
                        "(host.transport.Transport, e.g. sim.inprocess.InProcessDevice)")
    url = getattr(device, "url", None)
    return device, url if isinstance(url, str) else f"{type(device).__name__}@{id(device):#x}"


class CountingTransport:
    """A :class:`Transport` that counts the bytes through it and remembers the last request
    sent (by its opcode's name) and the first bytes received (``head``, up to 16), for the
    driver's counters and error messages."""

    def __init__(self, port):
        self.port = port
        self.sent = 0
        self.received = 0
        self.last_request = None
        self.head = b""

    @property
    def timeout(self):
        return getattr(self.port, "timeout", None)

    @timeout.setter
    def timeout(self, value):
        if hasattr(self.port, "timeout"):
            self.port.timeout = value

    @property
    def synchronous(self):
        return bool(getattr(self.port, "synchronous", False))

    def write(self, data):
        if len(data) > 1 and data[0] == SYNC_REQUEST:
            try:
                self.last_request = Opcode(data[1]).name
            except ValueError:
                self.last_request = f"opcode {data[1]:#04x}"
        self.sent += len(data)
        return self.port.write(data)

    def read(self, size=1):
        data = self.port.read(size)
        self.received += len(data)
        if len(self.head) < _HEAD_BYTES:
            self.head += data[:_HEAD_BYTES - len(self.head)]
        return data

    def close(self):
        close = getattr(self.port, "close", None)
        if callable(close):
            close()
