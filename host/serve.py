"""``hwgen serve``: share a board's serial link over TCP, so that other machines can use it.

:class:`BoardServer` bridges a listening TCP socket to a device's pyserial port byte for byte
(the same :mod:`hwgen.protocol` frames both ways), so a host elsewhere opens the board as
``socket://HOST:PORT`` with :class:`host.Accelerator` or puts it in a
:class:`host.AcceleratorPool`:

.. code-block:: sh

    hwgen serve --device /dev/ttyUSB1 --host 0.0.0.0 --port 4600    # on the board's machine

.. code-block:: python

    AcceleratorPool(["socket://lab1:4600", "socket://lab2:4600"])  # anywhere on the network

One client at a time: the protocol keeps state on the device (the program, a running batch),
so two hosts interleaving requests would spoil each other's work. While a client is connected,
another one gets one response frame with status :attr:`~hwgen.protocol.Status.REFUSED` to its
first request (``host.Accelerator`` raises a :class:`~host.client.DeviceError` that says
another client is connected) and is disconnected; the first client is not disturbed. (Before it
refuses, the server waits half a second for the connected client to leave: one that has just
closed its connection may not have been noticed yet.) When a
client leaves, whatever the device still sends is discarded and the next client waits until the
device has been left alone for ``settle`` seconds, so that a request cut short by the departure
has timed out on the device and the next client starts clean.

Beyond this machine, a shared key: a server that listens on anything but a loopback address
must be given one (``key=``, ``hwgen serve --key-file PATH``), and then every connection is
authenticated by challenge and response with HMAC-SHA256 (:mod:`host.auth` describes the
handshake) before any of its bytes reaches the device; clients pass the same key
(``Accelerator(url, key=...)``, ``AcceleratorPool(urls, key=...)``, ``hwgen infer --key-file``).
A client with a wrong key, or none, is disconnected, and the server logs it with its address;
the device never sees its bytes. On loopback (127.0.0.1, the default) a key is optional, and
without one the server is the plain byte bridge it always was.
"""

import contextlib
import select
import socket
import threading
import time

import serial

from hwgen.protocol import Status, encode_response

from .auth import AuthenticationError, check_listen, read_key, serve_handshake
from .frames import RequestDecoder
from .rate import serial_rate

__all__ = ["POLL_S", "BoardServer"]

# Longest wait of the threads for data, so that they notice a stop this often.
#: How often the server's threads look for a stop (seconds).
POLL_S = 0.05
# Bytes moved per read.
_CHUNK = 65536
# A refused client has this long to send its first request (to be answered REFUSED).
_REFUSE_WAIT_S = 2.0
# How long a new client waits for the connected one to leave before it is refused: covers a
# client that closed its connection just before another one opened.
_GRACE_S = 0.5
# Default quiet time between two clients: longer than a board's partial-frame timeout
# (clock_hz // 10 cycles, 0.1 s).
_SETTLE_S = 0.25
# Default time a client has to answer the key challenge.
_AUTH_TIMEOUT_S = 5.0
# How long a rejected client's bytes are drained before its socket is closed: closing with
# unread bytes would reset the connection and could lose the verdict on its way.
_DRAIN_S = 1.0


class BoardServer:
    """Serve the device at a pyserial URL on a TCP port, one client at a time.

    A context manager; :meth:`start` (or ``with``) opens the device and listens, :meth:`close`
    stops, closes every connection and releases the device's port. The server also stops by
    itself when the device vanishes (an unplugged adaptor, a simulated board that exits):
    :attr:`error` then says why.

    Parameters
    ----------
    device : str
        A pyserial URL: ``/dev/ttyUSB1``, ``COM3``, ``socket://127.0.0.1:PORT`` (a simulated
        board), ``loop://``.
    host : str
        Address to listen on; ``127.0.0.1`` serves this machine only, ``0.0.0.0`` (or ``::``)
        every network interface.
    port : int
        TCP port, ``0 .. 65535``; 0 picks a free one (see :attr:`port`).
    baudrate : int or None
        Serial rate of a real port; None: the rate of every board's default build
        (:func:`host.rate.serial_rate`).
    settle : float
        Seconds the device is left alone between two clients (>= 0).
    log : callable, optional
        Receives a line of text for each client that connects, leaves, is refused or rejected
        (``client ADDRESS:PORT rejected: wrong key ...``).
    key : bytes, str or os.PathLike, optional
        The shared key, or the path of a key file (:func:`host.auth.read_key`: at least 16
        bytes, read as bytes; a file other users may read is refused). Required when ``host``
        is not a loopback address; with it, every connection must prove it holds the key.
    auth_timeout : float
        Seconds a client has to answer the key challenge (> 0).

    Attributes
    ----------
    clients, refused, rejected : int
        Clients served, turned away (another was connected) and rejected (no key or a wrong
        key) so far.
    error : str or None
        Why the server stopped by itself (the device vanished); None otherwise.
    """

    def __init__(self, device, *, host="127.0.0.1", port=0, baudrate=None,
                 settle=_SETTLE_S, log=None, key=None, auth_timeout=_AUTH_TIMEOUT_S):
        baudrate = serial_rate(baudrate)
        _check_arguments(device, host, port, baudrate, settle=settle, auth_timeout=auth_timeout)
        self._key = None if key is None else read_key(key)
        self.auth_timeout = auth_timeout
        self.device = device
        self.host = host
        self.baudrate = baudrate
        self.settle = settle
        self.log = log or (lambda text: None)
        self._want_port = port
        self.port = None
        self.clients = 0
        self.refused = 0
        self.rejected = 0
        self.error = None
        self._serial = None
        self._listener = None
        self._lock = threading.Lock()
        self._vacant = threading.Condition(self._lock)  # notified when a client leaves
        self._client = None  # the connected client's socket
        self._forward = None  # where the device's bytes go: the client once it has settled
        self._quiet_from = 0.0  # monotonic time after which the next client may talk
        self._stopped = threading.Event()
        self._threads = []

    # -- life cycle ------------------------------------------------------------------------------

    def start(self):
        """Open the device, listen and serve in background threads; return ``self``.

        Raises
        ------
        host.auth.KeyRequired
            If ``host`` is not a loopback address and the server has no key (a ValueError).
        OSError
            If the device cannot be opened (a :class:`serial.SerialException`) or the address
            cannot be listened on (in use, not an address of this machine); nothing stays open.
        """
        if self._serial is not None:
            raise RuntimeError("the server is already started")
        family = check_listen(self.host, self._want_port, self._key)
        # Reads never block: the reader waits in select() on the port's file descriptor.
        self._serial = serial.serial_for_url(self.device, baudrate=self.baudrate, timeout=0)
        try:
            self._listener = socket.create_server((self.host, self._want_port), family=family)
            self._listener.settimeout(POLL_S)
            self.port = self._listener.getsockname()[1]
            self._serial.reset_input_buffer()  # what the device said before we came
        except BaseException:
            self.close()
            raise
        for target, name in ((self._read_device, "device"), (self._accept, "accept")):
            thread = threading.Thread(target=target, daemon=True, name=f"serve-{name}")
            self._threads.append(thread)
            thread.start()
        return self

    @property
    def key_required(self):
        """Whether every client must prove it holds the key."""
        return self._key is not None

    @property
    def url(self):
        """The pyserial URL clients open, ``socket://HOST:PORT``."""
        if self.port is None:
            raise RuntimeError("the server is not started")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"socket://{host}:{self.port}"

    def wait(self, timeout=None):
        """Block until the server stops (:meth:`close`, or the device vanished); return whether
        it has stopped."""
        return self._stopped.wait(timeout)

    def close(self):
        """Stop serving, disconnect the client, release the device's port (idempotent)."""
        self._stopped.set()
        with self._vacant:
            client, self._client, self._forward = self._client, None, None
            self._vacant.notify_all()
        for sock in (client, self._listener):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
        for thread in list(self._threads):
            if thread is not threading.current_thread():
                thread.join(timeout=5)
        if self._serial is not None:
            with contextlib.suppress(serial.SerialException, OSError):
                self._serial.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- the threads -----------------------------------------------------------------------------

    def _vanished(self, exc):
        if not self._stopped.is_set():
            self.error = f"the device at {self.device} is gone: {exc}"
            self.log(self.error)
            threading.Thread(target=self.close, daemon=True, name="serve-close").start()

    def _read_device(self):
        """Forward the device's bytes to the client; discard them while none is settled."""
        port = self._serial
        try:
            fileno = port.fileno()
        except (AttributeError, NotImplementedError, OSError, serial.SerialException):
            fileno = None  # loop:// and friends: poll
        while not self._stopped.is_set():
            try:
                if fileno is not None:
                    ready, _, _ = select.select([fileno], [], [], POLL_S)
                    data = port.read(_CHUNK) if ready else b""
                else:
                    data = port.read(_CHUNK)
                    if not data:
                        time.sleep(0.001)
            except (serial.SerialException, OSError, ValueError) as exc:
                if not self._stopped.is_set():
                    self._vanished(exc)
                return
            if not data:
                continue
            with self._lock:
                target = self._forward
            if target is not None:
                with contextlib.suppress(OSError):  # the client left: its thread sees it
                    target.sendall(data)

    def _accept(self):
        while not self._stopped.is_set():
            try:
                sock, address = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed
            who = f"{address[0]}:{address[1]}"
            thread = threading.Thread(target=self._handle, args=(sock, who), daemon=True,
                                      name=f"serve-client-{who}")
            self._threads.append(thread)
            thread.start()

    def _claim(self, sock):
        """Make ``sock`` the client if there is none; return whether it is (under the lock)."""
        if self._client is None and not self._stopped.is_set():
            self._client = sock
            return True
        return False

    def _handle(self, sock, who):
        """Serve a new connection, or refuse it if another client is connected (or without the
        key)."""
        if self._key is not None and not self._authenticate(sock, who):
            return
        with self._vacant:
            claimed = self._claim(sock)
        if claimed:
            self._session(sock, who, b"")
            return
        # Read its first request. A client that has just closed its connection may not be
        # noticed yet (its FIN is on its way): give it a moment to leave before refusing.
        received, frame = _first_request(sock, self._stopped)
        with self._vacant:
            self._vacant.wait_for(lambda: self._claim(sock) or self._stopped.is_set(),
                                  _GRACE_S)
            claimed = self._client is sock
        if claimed:
            self._session(sock, who, received)
            return
        self.refused += 1
        self.log(f"client {who} refused: another client is connected")
        with contextlib.suppress(OSError):
            if frame is not None:
                sock.sendall(encode_response(frame.opcode, frame.seq, Status.REFUSED))
        with contextlib.suppress(OSError):
            sock.close()

    def _authenticate(self, sock, who):
        """Run the key handshake with a new connection; return whether it holds the key (if
        not, log it and hang up)."""
        try:
            sock.settimeout(POLL_S)
            serve_handshake(_reader(sock, self._stopped), sock.sendall, self._key,
                            self.auth_timeout)
            return True
        except (AuthenticationError, OSError) as exc:
            if not self._stopped.is_set():
                self.rejected += 1
                self.log(f"client {who} rejected: {exc}")
        _hang_up(sock, 0 if self._stopped.is_set() else _DRAIN_S)
        return False

    def _session(self, sock, who, received):
        """Carry one client's bytes (``received`` first) to the device until it disconnects."""
        self.clients += 1
        self.log(f"client {who} connected")
        with contextlib.suppress(OSError):
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            # The device must be left alone for a while after the last client (see the module).
            delay = self._quiet_from - time.monotonic()
            if delay > 0 and self._stopped.wait(delay):
                return
            with self._lock:
                if self._client is sock:
                    self._forward = sock
            data = received
            while not self._stopped.is_set():
                if data:
                    try:
                        self._serial.write(data)
                    except (serial.SerialException, OSError, ValueError) as exc:
                        self._vanished(exc)
                        break
                try:
                    data = sock.recv(_CHUNK)
                except OSError:
                    break
                if not data:
                    break
        finally:
            with self._vacant:
                if self._client is sock:
                    self._client = self._forward = None
                    self._quiet_from = time.monotonic() + self.settle
                self._vacant.notify_all()
            with contextlib.suppress(OSError):
                sock.close()
            self.log(f"client {who} disconnected")


def _hang_up(sock, drain):
    """Close ``sock`` after what was sent to it has left: stop sending, read until the peer
    closes (for ``drain`` seconds at most), then close."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + drain
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(_CHUNK):
                break
    with contextlib.suppress(OSError):
        sock.close()


def _check_arguments(device, host, port, baudrate, *, settle, auth_timeout):
    if not isinstance(device, str) or not device:
        raise TypeError(f"device must be a pyserial URL string, not {device!r}")
    if not isinstance(host, str):
        raise TypeError(f"host must be an address string, not {host!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port must be an int in 0..65535 (0: any free port), not {port!r}")
    if isinstance(baudrate, bool) or not isinstance(baudrate, int) or baudrate <= 0:
        raise ValueError(f"baudrate must be an int > 0, not {baudrate!r}")
    if isinstance(settle, bool) or not isinstance(settle, int | float) or not settle >= 0:
        raise ValueError(f"settle must be a number of seconds >= 0, not {settle!r}")
    if isinstance(auth_timeout, bool) or not isinstance(auth_timeout, int | float) \
            or not auth_timeout > 0:
        raise ValueError(f"auth_timeout must be a number of seconds > 0, not "
                         f"{auth_timeout!r}")


def _first_request(sock, stopped):
    """Return ``(bytes received, first request frame or None)`` of ``sock``, waiting a little
    (until ``stopped`` is set at most)."""
    decoder = RequestDecoder()
    received = b""
    deadline = time.monotonic() + _REFUSE_WAIT_S
    with contextlib.suppress(OSError):
        while (left := deadline - time.monotonic()) > 0 and not stopped.is_set():
            sock.settimeout(min(left, POLL_S))
            try:
                data = sock.recv(_CHUNK)
            except TimeoutError:
                continue
            if not data:
                break
            received += data
            frames = decoder.feed(data)
            if frames:
                return received, frames[0]
    return received, None


def _reader(sock, stopped):
    """``read(size)`` of :func:`host.auth.serve_handshake` on ``sock`` (set to a short
    timeout): EOFError once the client has gone or ``stopped`` is set."""
    def read(size):
        if stopped.is_set():
            raise EOFError
        try:
            data = sock.recv(size)
        except TimeoutError:
            return b""
        if not data:
            raise EOFError
        return data

    return read
