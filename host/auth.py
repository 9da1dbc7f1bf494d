"""A shared key for ``hwgen serve``: who may use a board served on the network.

A :class:`~host.serve.BoardServer` given a key (``hwgen serve --key-file PATH``) authenticates
every connection by challenge and response with HMAC-SHA256 before any byte of it reaches the
board; a client proves that it holds the same key, and the server proves it back (mutual), so a
client also knows it reached the server it meant. A server that listens on anything but a
loopback address must have a key (:func:`check_listen`); on loopback, one is optional and
without one nothing changes: no handshake, the bytes flow as they always did.

The handshake runs over any byte stream, before the first protocol frame: the server's TCP
socket on one side, the ``socket://`` port pyserial opens (any :class:`~host.transport.Transport`)
on the other. The client speaks first, since a port may discard what arrived before it was
open (pyserial's ``socket://`` does). ``Ns`` and ``Nc`` are 32 bytes from
:func:`secrets.token_bytes`, fresh for every connection, and ``HMAC`` is HMAC-SHA256 under the
key:

1. client to server, 8 bytes: :data:`HELLO_MAGIC` (``b"hwgnKEY1"``), asking for a challenge;
2. server to client, 40 bytes: :data:`CHALLENGE_MAGIC` (``b"hwgnKEY?"``), ``Ns``;
3. client to server, 72 bytes: :data:`ANSWER_MAGIC` (``b"hwgnKEY!"``), ``Nc``,
   ``HMAC(b"hwgen client" + Ns + Nc)``;
4. server to client: 33 bytes, :data:`ACCEPTED` (``0x01``) and ``HMAC(b"hwgen server" + Nc +
   Ns)``, when the client's HMAC is right (compared in constant time); otherwise one byte,
   :data:`REJECTED` (``0x00``), and the server hangs up.

The client checks the server's HMAC (in constant time) before it sends its first frame. The two
labels keep one side's answer from ever being the other's, and the server answers only a client
that has proved itself, so it is no oracle for the key. No magic starts with a frame's sync byte:
a client without a key sends a request frame (``0xA5``) where the hello should be, and is
refused at its first byte (the server sends it :data:`CHALLENGE_MAGIC` alone, so that the client
can say that a key is asked for, and hangs up); a client with a key to a server without one waits
for a challenge that never comes, and gives up after its timeout (its hello reaches the board
there, which skips it as noise before a frame's sync byte). The handshake authenticates the
connection; it neither encrypts the frames nor protects them from someone who can rewrite TCP on
the way (use an SSH tunnel or a VPN for that).

A key is bytes (at least :data:`MIN_KEY_BYTES`), or the path of a key file, whose bytes are the
key exactly as they are (a trailing newline included: give both sides the same file). A key file
that other users may read or write is refused, as ``ssh`` refuses such a private key: anyone with
a login on the machine could copy it and use the board from anywhere (``chmod 600 PATH``).
Make one with ``head -c 32 /dev/urandom > board.key && chmod 600 board.key``.
"""

import hmac
import ipaddress
import os
import secrets
import socket
import stat
import time

import serial

from hwgen.protocol import SYNC_REQUEST

from .client import LinkError

__all__ = ["ACCEPTED", "ANSWER_MAGIC", "CHALLENGE_MAGIC", "HELLO_MAGIC", "MIN_KEY_BYTES",
           "REJECTED",
           "AuthenticationError", "KeyRequired", "authenticate", "check_listen",
           "check_unanswered_challenge", "read_key", "serve_handshake"]

#: What a client with a key sends first: it asks for a challenge.
HELLO_MAGIC = b"hwgnKEY1"
#: First bytes the server sends: a challenge follows.
CHALLENGE_MAGIC = b"hwgnKEY?"
#: First bytes of the client's answer.
ANSWER_MAGIC = b"hwgnKEY!"
#: The server's verdict: accepted (its own proof follows), or rejected (it hangs up).
ACCEPTED, REJECTED = b"\x01", b"\x00"
#: Shortest key allowed, in bytes.
MIN_KEY_BYTES = 16
# Longest key file read: a key is short, and a device file (/dev/urandom) never ends.
_MAX_KEY_BYTES = 65536
_NONCE_BYTES = 32
_MAC_BYTES = 32
_CLIENT_LABEL, _SERVER_LABEL = b"hwgen client", b"hwgen server"


class AuthenticationError(LinkError):
    """The shared-key handshake failed: a wrong key, a key the other side does not expect or
    lacks, or no answer in time. The message says which, and what to do."""


class KeyRequired(ValueError):
    """A server would listen beyond loopback without a key."""


def read_key(key, what="key"):
    """Return the key bytes of ``key``: bytes as they are, or the contents of a key file.

    Parameters
    ----------
    key : bytes, bytearray, memoryview, str or os.PathLike
        The key itself (at least :data:`MIN_KEY_BYTES` bytes), or the path of a regular file
        whose bytes are the key, read as they are (no decoding, no stripping), that only its
        owner may read or write (no permission for group-write or for others).
    what : str
        Names the key in messages (``"--key-file"``, ``"key"``).

    Raises
    ------
    TypeError
        For anything else (a text string is taken as a path, never as the key).
    ValueError
        For a key too short, or a file that is missing, unreadable, not a regular file, too
        large or open to other users; the message names the path and what is allowed.
    """
    if isinstance(key, bytes | bytearray | memoryview):
        data = bytes(key)
        where = what
    elif isinstance(key, str | os.PathLike):
        where = f"{what} {os.fspath(key)}"
        data = _read_file(key, where)
    else:
        raise TypeError(f"{what} must be the key as bytes or the path of a key file, not "
                        f"{type(key).__name__}")
    if len(data) < MIN_KEY_BYTES:
        raise ValueError(f"{where}: a key of {len(data)} bytes is too short; allowed: at least "
                         f"{MIN_KEY_BYTES} bytes (e.g. head -c 32 /dev/urandom > board.key)")
    return data


def _read_file(path, where):
    try:
        # Before opening: opening a FIFO would wait for a writer.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError(f"{where}: not a regular file; allowed: a file of "
                             f"{MIN_KEY_BYTES}..{_MAX_KEY_BYTES} bytes")
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if os.name == "posix" and info.st_mode & 0o027:
                raise ValueError(f"{where}: other users may read or write it (mode "
                                 f"{stat.S_IMODE(info.st_mode):o}); allowed: a file only its "
                                 f"owner may write and others may not read (chmod 600 {path})")
            data = f.read(_MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > _MAX_KEY_BYTES:
        raise ValueError(f"{where}: longer than {_MAX_KEY_BYTES} bytes; allowed: a key file "
                         f"of {MIN_KEY_BYTES}..{_MAX_KEY_BYTES} bytes")
    return data


def check_listen(host, port, key):
    """Resolve ``host`` for listening; return its address family.

    Raises
    ------
    KeyRequired
        If ``key`` is None and ``host`` resolves to any address that is not loopback
        (``0.0.0.0``, ``::``, an interface's address); the message says what is allowed.
    OSError
        If ``host`` cannot be resolved (a :class:`socket.gaierror`).
    """
    infos = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    if key is None and not all(_loopback(info[4][0]) for info in infos):
        raise KeyRequired(
            f"--host {host} is not a loopback address, and a board served beyond this machine "
            "needs a shared key; allowed: --key-file PATH (the same key file on the clients, "
            f"at least {MIN_KEY_BYTES} bytes, chmod 600), or --host 127.0.0.1, ::1 or "
            "localhost (this machine only; other machines through an SSH tunnel)")
    return infos[0][0]


def _loopback(address):
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def _mac(key, label, first, second):
    return hmac.new(key, label + first + second, "sha256").digest()


class _Unexpected(Exception):
    """Bytes that are not the message awaited (``args[0]``: what arrived)."""


def _receive(read, size, deadline, magic=b""):
    """Return exactly ``size`` bytes from ``read``, never more, the first of them ``magic``.

    Raises :class:`_Unexpected` at the first byte that departs from ``magic``, and
    :class:`TimeoutError` (what arrived in its ``args[0]``) at ``deadline``.
    """
    data = b""
    while len(data) < size:
        if time.monotonic() >= deadline:
            raise TimeoutError(data)
        chunk = read(size - len(data))
        if not chunk:
            time.sleep(0.001)  # a read that returns at once (timeout 0) must not spin
            continue
        data += chunk
        n = min(len(data), len(magic))
        if data[:n] != magic[:n]:
            raise _Unexpected(data)
    return data


def serve_handshake(read, write, key, timeout):
    """The server's side: await the client's hello at ``read``, challenge it at ``write``;
    return if it holds ``key``, all within ``timeout`` seconds.

    ``read(n)`` returns at most ``n`` bytes, or none after a short wait, and raises
    :class:`EOFError` (or an :class:`OSError`) when the client has gone.

    Raises
    ------
    AuthenticationError
        Saying why the client is refused (after :data:`REJECTED` was sent to a wrong key).
    """
    deadline = time.monotonic() + timeout
    size = len(ANSWER_MAGIC) + _NONCE_BYTES + _MAC_BYTES
    try:
        _receive(read, len(HELLO_MAGIC), deadline, HELLO_MAGIC)
        server_nonce = secrets.token_bytes(_NONCE_BYTES)
        write(CHALLENGE_MAGIC + server_nonce)
        answer = _receive(read, size, deadline, ANSWER_MAGIC)
    except _Unexpected as exc:
        if exc.args[0][0] != SYNC_REQUEST:
            raise AuthenticationError(f"no key: it sent {exc.args[0][:8]!r} instead of the key "
                                      "handshake") from None
        write(CHALLENGE_MAGIC)  # tells a client without a key that one is asked for
        raise AuthenticationError("no key: it sent a protocol frame instead of the key "
                                  "handshake") from None
    except TimeoutError:
        raise AuthenticationError(f"the key handshake did not end within {timeout:g} s") \
            from None
    except (EOFError, OSError):
        raise AuthenticationError("it hung up during the key handshake") from None
    client_nonce = answer[len(ANSWER_MAGIC):-_MAC_BYTES]
    expected = _mac(key, _CLIENT_LABEL, server_nonce, client_nonce)
    if not hmac.compare_digest(answer[-_MAC_BYTES:], expected):
        write(REJECTED)
        raise AuthenticationError("wrong key (its answer to the key challenge does not match)")
    write(ACCEPTED + _mac(key, _SERVER_LABEL, client_nonce, server_nonce))


def authenticate(port, key, timeout, url):
    """The client's side: ask the server at ``port`` for a challenge, answer it with ``key``
    and check the server's proof, before any frame is sent.

    Parameters
    ----------
    port : Transport
        The open link (``read(n)`` waits at most a short while).
    key : bytes
        From :func:`read_key`.
    timeout : float
        Seconds to wait for the challenge, and then for the verdict.
    url : str
        Names the server in messages.

    Raises
    ------
    AuthenticationError
        If no challenge comes (the server asks for no key), the server rejects the key, hangs
        up or cannot prove that it holds the key.
    """
    try:
        port.write(HELLO_MAGIC)
        challenge = _receive(port.read, len(CHALLENGE_MAGIC) + _NONCE_BYTES,
                             time.monotonic() + timeout, CHALLENGE_MAGIC)
    except TimeoutError:
        raise AuthenticationError(
            f"authenticating to {url}: no key challenge within {timeout:g} s; the server does "
            "not ask for a key (hwgen serve without --key-file, or the board itself): connect "
            "without a key") from None
    except _Unexpected as exc:
        raise AuthenticationError(
            f"authenticating to {url}: it sent {exc.args[0][:8]!r} instead of a key "
            "challenge; it is not hwgen serve with a key: connect without a key") from None
    except (serial.SerialException, OSError) as exc:
        raise AuthenticationError(f"authenticating to {url}: the link failed before the key "
                                  f"challenge: {exc}; the server rejected the key handshake, "
                                  "or is gone") from None
    server_nonce = challenge[len(CHALLENGE_MAGIC):]
    client_nonce = secrets.token_bytes(_NONCE_BYTES)
    port.write(ANSWER_MAGIC + client_nonce + _mac(key, _CLIENT_LABEL, server_nonce, client_nonce))
    try:
        verdict = _receive(port.read, 1, time.monotonic() + timeout)
        if verdict == REJECTED:
            raise _Unexpected(verdict)
        proof = _receive(port.read, _MAC_BYTES, time.monotonic() + timeout)
    except _Unexpected:
        raise AuthenticationError(
            f"authenticating to {url}: the server rejected the key; allowed: the key (file) "
            "that hwgen serve was given with --key-file") from None
    except (TimeoutError, serial.SerialException, OSError) as exc:
        why = f"no verdict within {timeout:g} s" if isinstance(exc, TimeoutError) else exc
        raise AuthenticationError(f"authenticating to {url}: the server did not accept the key "
                                  f"({why})") from None
    if verdict != ACCEPTED or not hmac.compare_digest(
            proof, _mac(key, _SERVER_LABEL, client_nonce, server_nonce)):
        raise AuthenticationError(
            f"authenticating to {url}: the server did not prove that it holds the key; it is "
            "not the server you meant, or its key differs from yours")


def check_unanswered_challenge(head, url):
    """Raise :class:`AuthenticationError` if ``head``, the first bytes a client without a key
    received from ``url``, is a key challenge: the server asks for a key.

    Called when the link failed, to name the reason.
    """
    if head.startswith(CHALLENGE_MAGIC):
        raise AuthenticationError(
            f"{url} asks for a key (hwgen serve --key-file) and none was given; allowed: "
            "key= the server's key or key file (hwgen infer --key-file PATH)")
