"""``hwgen serve`` with a shared key (host.auth, host.serve.BoardServer(key=...)).

The board behind the server is an in-process device on a TCP port (support.tcp_device: fast,
no Verilator), which counts the bytes that reach it, so "the board never sees a rejected
client's bytes" is checked directly. Outputs are checked against
:meth:`hwgen.nn.QuantizedNetwork.forward`; the handshake's bytes against HMAC-SHA256 computed
here from the documented layout, not by host.auth.
"""

import contextlib
import hashlib
import hmac
import os
import re
import socket
import threading
import time

import numpy as np
import pytest
from support import BOARD_WS as WS
from support import host_port
from support.tcp_device import TcpDevice

import hwgen
from host import Accelerator, AcceleratorPool, AuthenticationError, DeviceError, LinkError
from host.auth import KeyRequired, read_key
from host.frames import ResponseDecoder
from host.serve import BoardServer
from hwgen.protocol import Opcode, Status, encode_request
from sim.inprocess import InProcessDevice
from sim.netgen import random_input, random_network

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))


def check_inference(acc, seed, rows=21):
    net = random_network(np.random.default_rng(seed), WS, widths=[10, 7, 5])
    acc.load(hwgen.compile(net, WS, batch=8))
    x = random_input(np.random.default_rng(seed), WS, rows, 10)
    np.testing.assert_array_equal(acc.infer(x), net.forward(x))


def key_file(tmp_path, data=KEY, mode=0o600, name="board.key"):
    path = tmp_path / name
    path.write_bytes(data)
    path.chmod(mode)
    return path


@pytest.fixture
def board():
    with TcpDevice(WS) as b:
        yield b


@pytest.fixture
def lines():
    return []


@pytest.fixture
def server(board, lines):
    with BoardServer(board.url, key=KEY, log=lines.append, auth_timeout=2) as s:
        yield s


def mac(label, first, second, key=KEY):
    return hmac.new(key, label + first + second, hashlib.sha256).digest()


def receive(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def until(condition, seconds=5):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


# -- the good key ----------------------------------------------------------------------------------

def test_the_right_key_runs_bit_exact(server):
    assert server.key_required
    with Accelerator(server.url, config=WS, key=KEY) as acc:
        check_inference(acc, 1)
        assert acc.client.stats["retries"] == 0
    with Accelerator(server.url, config=WS, key=KEY) as acc:  # and again
        check_inference(acc, 2)
    assert server.clients == 2 and server.rejected == 0


def test_one_client_at_a_time_with_the_key_too(server, board):
    with Accelerator(server.url, config=WS, key=KEY) as first:
        with pytest.raises(DeviceError) as info:
            Accelerator(server.url, config=WS, key=KEY)
        assert info.value.status == Status.REFUSED
        check_inference(first, 3)
    assert (server.clients, server.refused, server.rejected) == (1, 1, 0)


def test_the_key_from_a_file_on_both_sides(board, tmp_path):
    path = key_file(tmp_path)  # its bytes are the key
    with BoardServer(board.url, key=path) as server, \
            Accelerator(server.url, config=WS, key=str(path)) as acc:
        check_inference(acc, 2)
    assert server.clients == 1 and server.rejected == 0


def test_the_handshake_bytes_are_as_documented(server, board):
    """A client written from the documented layout, with HMAC-SHA256 computed here."""
    with socket.create_connection(host_port(server.url), timeout=5) as raw:
        raw.sendall(b"hwgnKEY1")
        challenge = receive(raw, 40)
        assert challenge[:8] == b"hwgnKEY?"
        server_nonce, client_nonce = challenge[8:], os.urandom(32)
        raw.sendall(b"hwgnKEY!" + client_nonce
                    + mac(b"hwgen client", server_nonce, client_nonce))
        verdict = receive(raw, 33)
        assert verdict == b"\x01" + mac(b"hwgen server", client_nonce, server_nonce)
        # Then the link is the board's: an INFO request is answered.
        raw.sendall(encode_request(Opcode.INFO, 3))
        decoder, frames = ResponseDecoder(), []
        while not frames:
            frames = decoder.feed(raw.recv(4096))
        assert (frames[0].opcode, frames[0].seq, frames[0].status) == (Opcode.INFO, 3, Status.OK)
        assert board.received == len(encode_request(Opcode.INFO, 3))
    # A fresh challenge every time.
    with socket.create_connection(host_port(server.url), timeout=5) as raw:
        raw.sendall(b"hwgnKEY1")
        assert receive(raw, 40)[8:] != server_nonce


# -- wrong and missing keys ------------------------------------------------------------------------

def test_a_wrong_key_is_rejected_logged_and_never_reaches_the_board(server, board, lines):
    with pytest.raises(AuthenticationError, match=re.escape(
            f"authenticating to {server.url}: the server rejected the key")):
        Accelerator(server.url, config=WS, key=OTHER)
    assert until(lambda: server.rejected == 1)
    assert re.fullmatch(r"client 127\.0\.0\.1:\d+ rejected: wrong key \(its answer to the key "
                        r"challenge does not match\)", lines[-1]), lines
    assert board.received == 0 and server.clients == 0
    with Accelerator(server.url, config=WS, key=KEY) as acc:  # the right key still works
        check_inference(acc, 3)


def test_a_forged_answer_gets_one_rejected_byte(server, board):
    with socket.create_connection(host_port(server.url), timeout=5) as raw:
        raw.sendall(b"hwgnKEY1")
        nonce = receive(raw, 40)[8:]
        raw.sendall(b"hwgnKEY!" + bytes(32) + mac(b"hwgen client", nonce, bytes(32), OTHER))
        assert receive(raw, 100) == b"\x00"  # then the server hangs up
    assert board.received == 0


def test_a_client_without_a_key_is_rejected_at_once(server, board, lines):
    start = time.monotonic()
    with pytest.raises(AuthenticationError, match=re.escape(
            f"{server.url} asks for a key (hwgen serve --key-file) and none was given")):
        Accelerator(server.url, config=WS, timeout=3)
    assert time.monotonic() - start < 2.5  # not a timeout: the server hung up
    assert until(lambda: server.rejected == 1)
    assert re.fullmatch(r"client 127\.0\.0\.1:\d+ rejected: no key: it sent a protocol frame "
                        "instead of the key handshake", lines[-1]), lines
    assert board.received == 0


def test_a_silent_client_is_dropped_after_the_auth_timeout(board, lines):
    with BoardServer(board.url, key=KEY, log=lines.append, auth_timeout=0.3) as server, \
            socket.create_connection(host_port(server.url), timeout=5) as raw:
        start = time.monotonic()
        raw.sendall(b"hwgnKEY1")
        assert receive(raw, 40)[:8] == b"hwgnKEY?"
        assert raw.recv(100) == b""  # the server hangs up
        assert 0.2 < time.monotonic() - start < 3
        assert until(lambda: server.rejected == 1)
    assert "rejected: the key handshake did not end within 0.3 s" in lines[-1]
    assert board.received == 0


def test_a_key_to_a_server_without_one_times_out_clearly(board):
    with BoardServer(board.url) as server:
        assert not server.key_required
        start = time.monotonic()
        with pytest.raises(AuthenticationError, match=re.escape(
                f"authenticating to {server.url}: no key challenge within 0.5 s; the server "
                "does not ask for a key")):
            Accelerator(server.url, config=WS, key=KEY, timeout=0.5)
        assert time.monotonic() - start < 3
        with Accelerator(server.url, config=WS) as acc:  # without a key, as always
            check_inference(acc, 4)
    assert board.connections == 1


def test_the_client_checks_the_server(board):
    """A server that accepts any answer but cannot prove it holds the key is refused."""
    listener = socket.create_server(("127.0.0.1", 0))

    def impostor():
        conn, _ = listener.accept()
        with conn:
            receive(conn, 8)
            conn.sendall(b"hwgnKEY?" + os.urandom(32))
            receive(conn, 72)
            conn.sendall(b"\x01" + os.urandom(32))
            conn.recv(100)

    thread = threading.Thread(target=impostor, daemon=True)
    thread.start()
    url = f"socket://127.0.0.1:{listener.getsockname()[1]}"
    with listener, pytest.raises(AuthenticationError, match="did not prove that it holds the"):
        Accelerator(url, config=WS, key=KEY, timeout=2)
    thread.join(5)


# -- where a key is needed -------------------------------------------------------------------------

def non_loopback_address():
    """An IPv4 address of this machine that is not loopback, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent; picks the outgoing interface
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_beyond_loopback_a_key_is_required(host):
    # Checked before the device is opened: this one does not exist.
    with pytest.raises(KeyRequired) as info:
        BoardServer("/dev/nonexistent-hwgen-port", host=host).start()
    assert str(info.value).startswith(f"--host {host} is not a loopback address")
    assert "allowed: --key-file PATH" in str(info.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_needs_no_key(board, host):
    server = BoardServer(board.url, host=host)
    try:
        server.start()
    except OSError as exc:  # no IPv6 on this machine
        pytest.skip(f"cannot listen on {host}: {exc}")
    with contextlib.closing(server), Accelerator(server.url, config=WS) as acc:
        check_inference(acc, 5)


def test_a_network_address_with_the_key(board, lines):
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no address but loopback (the key is tested there)")
    with pytest.raises(KeyRequired):
        BoardServer(board.url, host=address).start()
    with BoardServer(board.url, host=address, key=KEY, log=lines.append) as server:
        assert server.url.startswith(f"socket://{address}:")
        with pytest.raises(AuthenticationError, match="asks for a key"):
            Accelerator(server.url, config=WS)
        with Accelerator(server.url, config=WS, key=KEY) as acc:
            check_inference(acc, 6)
    assert any(re.fullmatch(rf"client {re.escape(address)}:\d+ rejected: no key: .*", line)
               for line in lines), lines


# -- key files -------------------------------------------------------------------------------------

def test_key_files(tmp_path):
    assert read_key(key_file(tmp_path, b"x" * 16 + b"\n")) == b"x" * 16 + b"\n"  # as they are
    assert read_key(bytearray(KEY)) == KEY
    with pytest.raises(ValueError, match=r"key: a key of 15 bytes is too short; allowed: at "
                                         "least 16 bytes"):
        read_key(b"x" * 15)
    short = key_file(tmp_path, b"short", name="short")
    with pytest.raises(ValueError, match=f"--key-file {short}: a key of 5 bytes is too short"):
        read_key(short, "--key-file")
    shared = key_file(tmp_path, mode=0o644, name="shared")
    with pytest.raises(ValueError, match=re.escape(
            f"key {shared}: other users may read or write it (mode 644); allowed: a file only "
            f"its owner may write and others may not read (chmod 600 {shared})")):
        read_key(shared)
    assert read_key(key_file(tmp_path, mode=0o640, name="group")) == KEY  # a lab group's key
    with pytest.raises(ValueError, match="cannot read it"):
        read_key(tmp_path / "missing")
    with pytest.raises(ValueError, match=re.escape(f"key {tmp_path}: not a regular file")):
        read_key(tmp_path)
    os.mkfifo(tmp_path / "fifo")  # would block if it were opened
    with pytest.raises(ValueError, match="not a regular file"):
        read_key(tmp_path / "fifo")
    with pytest.raises(ValueError, match="not a regular file"):
        read_key("/dev/zero")
    with pytest.raises(ValueError, match="longer than 65536 bytes"):
        read_key(key_file(tmp_path, b"x" * 65537, name="long"))
    with pytest.raises(TypeError, match="key must be the key as bytes or the path of a key "
                                        "file, not int"):
        read_key(5)


def test_bad_keys_are_refused_before_connecting(board):
    with pytest.raises(ValueError, match="too short"):
        BoardServer(board.url, key=b"short")
    with pytest.raises(ValueError, match="too short"):
        Accelerator("/dev/nonexistent-hwgen-port", key=b"short")
    with pytest.raises(ValueError, match="auth_timeout must be a number of seconds > 0"):
        BoardServer(board.url, key=KEY, auth_timeout=0)
    assert board.connections == 0


# -- the pool --------------------------------------------------------------------------------------

def test_a_pool_of_keyed_servers(board, tmp_path):
    net = random_network(np.random.default_rng(7), WS, widths=[10, 7, 5])
    program = hwgen.compile(net, WS, batch=8)
    x = random_input(np.random.default_rng(7), WS, 100, 10)
    with TcpDevice(WS) as second, \
            BoardServer(board.url, key=KEY) as one, BoardServer(second.url, key=KEY) as two:
        with AcceleratorPool([one.url, two.url], config=WS, key=key_file(tmp_path)) as pool:
            pool.load(program)
            np.testing.assert_array_equal(pool.infer(x), net.forward(x))
        # A key per URL: the others (a local transport, a keyless server) get none.
        with BoardServer(TcpDevice(WS).url) as keyless, \
                AcceleratorPool([one.url, keyless.url, InProcessDevice(WS)], config=WS,
                                key={one.url: KEY}) as pool:
            pool.load(program)
            np.testing.assert_array_equal(pool.infer(x), net.forward(x))
        with pytest.raises(AuthenticationError, match=re.escape(
                f"{two.url} asks for a key")):
            AcceleratorPool([one.url, two.url], config=WS, key={one.url: KEY})
        with pytest.raises(ValueError, match=re.escape(
                "key['socket://elsewhere:1']: no such device for the pool to open")):
            AcceleratorPool([one.url], key={"socket://elsewhere:1": KEY})
        with pytest.raises(LinkError, match="rejected the key"):  # an AuthenticationError
            AcceleratorPool([one.url], key=OTHER)
