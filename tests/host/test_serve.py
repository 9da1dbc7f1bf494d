"""``hwgen serve`` (host.serve.BoardServer): a simulated board's link shared over TCP.

The simulated board's ``socket://`` URL stands in for a serial port. The host driver talks to
the board through the server; every output is checked against
:meth:`hwgen.nn.QuantizedNetwork.forward`. A simulated board serves one client at a time, so
"the server released the device" is checked by connecting to the board directly.
"""

import re
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest
from support import BOARD_WS as WS

import hwgen
from host import Accelerator, AcceleratorPool, DeviceError, LinkError
from host.frames import ResponseDecoder
from host.serve import BoardServer
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    MAX_PAYLOAD,
    STATUS_TEXT,
    Opcode,
    Status,
    encode_request,
    pack_read,
    read_chunk_words,
)
from sim.netgen import random_input, random_network


def network(seed, *, widths, batch=8):
    net = random_network(np.random.default_rng(seed), WS, widths=widths)
    return net, hwgen.compile(net, WS, batch=batch)


def check_inference(acc, seed, rows=50):
    net, program = network(seed, widths=[10, 7, 5])
    acc.load(program)
    x = random_input(np.random.default_rng(seed), WS, rows, 10)
    np.testing.assert_array_equal(acc.infer(x), net.forward(x))


def reconnects(url):
    try:
        with Accelerator(url, timeout=0.5, retries=0):
            return True
    except LinkError:
        return False


@pytest.fixture
def board(board_factory):
    return board_factory(WS)


@pytest.fixture
def server(board):
    with BoardServer(board.url) as s:
        yield s


def test_inference_through_the_server_is_bit_exact(server):
    assert re.fullmatch(r"socket://127\.0\.0\.1:\d+", server.url)
    with Accelerator(server.url, config=WS) as acc:
        check_inference(acc, 1, rows=3 * 8 + 5)
        assert acc.client.stats["retries"] == 0
    assert server.clients == 1 and server.refused == 0


def test_a_second_client_is_refused_and_the_first_undisturbed(server):
    with Accelerator(server.url, config=WS) as first:
        net, program = network(2, widths=[10, 7, 5])
        first.load(program)
        with pytest.raises(DeviceError) as info:
            Accelerator(server.url, config=WS)
        assert info.value.status == Status.REFUSED
        assert "REFUSED (refused by hwgen serve: another client is connected to this board" \
            in str(info.value)
        assert server.refused == 1
        x = random_input(np.random.default_rng(3), WS, 40, 10)
        np.testing.assert_array_equal(first.infer(x), net.forward(x))
        assert first.client.stats["retries"] == 0
        # The pool names the URL it could not open.
        with pytest.raises(DeviceError, match=re.escape(f"{server.url}: INFO handshake")):
            AcceleratorPool([server.url])
    # Once the first has left, the next client is served.
    with Accelerator(server.url, config=WS) as again:
        check_inference(again, 4)
    assert server.clients == 2 and server.refused == 2


def test_a_refused_client_gets_one_answer_to_its_first_request(server):
    with Accelerator(server.url, config=WS), \
            socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(b"\x00\x13garbage" + encode_request(Opcode.COUNTERS, 77))
        data = b""
        while chunk := raw.recv(4096):  # the server hangs up after its answer
            data += chunk
    (frame,) = ResponseDecoder().feed(data)
    assert (frame.opcode, frame.seq, frame.status) == (Opcode.COUNTERS, 77, Status.REFUSED)
    assert frame.crc_ok and frame.payload == b""
    assert set(STATUS_TEXT) == set(Status)


def test_the_next_client_starts_clean(server):
    """A client that leaves with a request half sent and an answer unread leaves nothing behind:
    the next one's first request is answered at once, with nothing stale before it."""
    act = regions(WS)[Region.ACT]
    words = read_chunk_words(act, MAX_PAYLOAD)  # the longest answer
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        raw.sendall(encode_request(Opcode.READ, 1, pack_read(act, 0, words))  # never read
                    + encode_request(Opcode.COUNTERS, 2)[:5])  # cut short
    with Accelerator(server.url, config=WS) as acc:
        check_inference(acc, 5)
        assert acc.client.stats == {"retries": 0, "discarded": 0, "corrupt": 0}
        assert acc.client._decoder.skipped == 0


def test_closing_releases_the_device_and_the_port(board):
    server = BoardServer(board.url).start()
    port = server.port
    with Accelerator(server.url, config=WS) as acc:
        check_inference(acc, 6)
        server.close()
        assert server.wait(0) and server.error is None
        with pytest.raises(LinkError):
            acc.infer(np.zeros((1, 10), dtype=np.int8))
    server.close()  # again: nothing happens
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    with Accelerator(board.url, config=WS) as direct:
        check_inference(direct, 7)


def test_the_server_stops_when_the_device_vanishes(board):
    lines = []
    with BoardServer(board.url, log=lines.append) as server, \
            Accelerator(server.url, config=WS) as acc:
        check_inference(acc, 8)
        board.process.kill()
        assert server.wait(10)
        with pytest.raises(LinkError):
            acc.infer(np.zeros((1, 10), dtype=np.int8))
    assert server.error.startswith(f"the device at {board.url} is gone: ")
    assert server.error in lines and "client 127.0.0.1:" in lines[0]


def test_loop_url_is_served_too():
    """A device without a file descriptor (``loop://`` echoes): the bytes come back."""
    with BoardServer("loop://") as server, \
            socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw:
        request = encode_request(Opcode.INFO, 9)
        raw.sendall(request)
        data = b""
        while len(data) < len(request):
            data += raw.recv(4096)
        assert data == request


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"device": 5}, TypeError, "device must be a pyserial URL string, not 5"),
    ({"device": ""}, TypeError, "device must be a pyserial URL string"),
    ({"host": None}, TypeError, "host must be an address string, not None"),
    ({"port": 70000}, ValueError, "port must be an int in 0..65535 (0: any free port), not 70000"),
    ({"port": True}, ValueError, "not True"),
    ({"baudrate": 0}, ValueError, "baudrate must be an int > 0, not 0"),
    ({"settle": -1}, ValueError, "settle must be a number of seconds >= 0, not -1"),
])
def test_bad_arguments_are_refused(kwargs, error, message):
    with pytest.raises(error) as info:
        BoardServer(**{"device": "loop://", **kwargs})
    assert message in str(info.value)


def test_start_errors_leave_nothing_open(board):
    with pytest.raises(OSError, match="could not open port"):
        BoardServer("/dev/nonexistent-hwgen-port").start()
    with BoardServer(board.url) as first:
        with pytest.raises(OSError, match="Address already in use"):
            BoardServer(board.url, port=first.port).start()
        # The failed server closed its link to the board again: the first still works.
        with Accelerator(first.url, config=WS) as acc:
            check_inference(acc, 9)


# -- the command line ------------------------------------------------------------------------------

def hwgen_command(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "hwgen", *args], capture_output=True,
                          text=True, timeout=60, check=False, **kwargs)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_serve_command(board, stop):
    proc = subprocess.Popen([sys.executable, "-m", "hwgen", "serve", "--device", board.url,
                             "--port", "0", "--verbose"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        match = re.fullmatch(rf"serving {re.escape(board.url)} on "
                             r"(socket://127\.0\.0\.1:(\d+))\n", line)
        assert match, line
        with Accelerator(match.group(1), config=WS) as acc:
            check_inference(acc, 10)
            with pytest.raises(DeviceError, match="REFUSED"):
                Accelerator(match.group(1))
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert "refused: another client is connected" in err and err.endswith("stopped\n")
    assert reconnects(board.url)  # the board's link was released


def test_serve_command_reports_a_vanished_device(board):
    proc = subprocess.Popen([sys.executable, "-m", "hwgen", "serve", "--device", board.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("serving ")
        board.process.kill()
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 1
    assert err.splitlines()[-1].startswith(f"hwgen serve: error: the device at {board.url} is "
                                           "gone: ")


def test_serve_command_help():
    result = hwgen_command("serve", "--help")
    assert result.returncode == 0
    for option in ("--device", "--port", "--host", "--baud", "--board", "--build", "127.0.0.1",
                   "3000000"):
        assert option in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--device", "loop://", "--port", "70000"],
     "hwgen serve: error: argument --port: 70000 is out of range; allowed: an integer in "
     "0..65535"),
    (["--device", "loop://", "--baud", "0"],
     "hwgen serve: error: argument --baud: 0 is out of range; allowed: an integer in "
     "300..12000000"),
    (["--device", "/dev/nonexistent-hwgen-port"],
     "hwgen serve: error: --device /dev/nonexistent-hwgen-port: cannot open it: "),
    (["--device", "loop://", "--host", "not-a-host.invalid"],
     "hwgen serve: error: cannot listen on not-a-host.invalid:0: "),
])
def test_serve_command_errors_are_one_line(args, message):
    result = hwgen_command("serve", *args)
    assert result.returncode == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""


def test_serve_command_needs_a_device():
    result = hwgen_command("serve")
    assert result.returncode == 2 and "--device" in result.stderr
