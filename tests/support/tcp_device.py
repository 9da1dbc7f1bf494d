"""An in-process device on a TCP port: a fast board for ``hwgen serve`` to serve.

:class:`TcpDevice` puts a :class:`sim.inprocess.InProcessDevice` (the program interpreter
behind the frame engine's rules, no Verilator) behind ``socket://127.0.0.1:PORT``, one
connection at a time, as a simulated board does, and counts the bytes that reach it: a
client that the server turns away must leave :attr:`TcpDevice.received` unchanged.
"""

import contextlib
import socket
import threading

from sim.inprocess import InProcessDevice

__all__ = ["TcpDevice"]

_POLL_S = 0.002


class TcpDevice:
    """An :class:`InProcessDevice` of ``config`` served on a free TCP port of 127.0.0.1.

    A context manager; ``device`` keywords go to the :class:`InProcessDevice` (its
    ``features``, ``rx_fifo``). Attributes: ``url`` (``socket://127.0.0.1:PORT``), ``device`` (the
    in-process device), ``received`` (bytes that reached the device so far), ``connections``
    (connections accepted so far).
    """

    def __init__(self, config, **device):
        self.device = InProcessDevice(config, **device)
        self.received = 0
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.url = f"socket://127.0.0.1:{self._listener.getsockname()[1]}"
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="tcp-device")
        self._thread.start()

    def _serve(self):
        while not self._stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            with conn:
                self._pump(conn)

    def _pump(self, conn):
        conn.settimeout(_POLL_S)
        while not self._stopped.is_set():
            try:
                data = conn.recv(65536)
            except TimeoutError:
                data = None
            except OSError:
                return
            if data == b"":
                return
            if data:
                self.received += len(data)
                self.device.write(data)
            out = self.device.read(65536)
            if out:
                try:
                    conn.sendall(out)
                except OSError:
                    return

    def close(self):
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self._thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
