"""The simulated board's process (sim.board.process): the real device Verilog under Verilator,
spoken to over real TCP.

Requests are built with :mod:`hwgen.protocol` and sent on a raw socket (:class:`RawLink`), so the
device's own error handling is what is tested: every malformed request gets its status and
changes nothing (all memories are read back), garbage is skipped, a truncated frame times out on
the device's clock. The life cycle of the harness process (ports, signals, a dying parent) is
tested here too; the host driver on top is in ``tests/host/test_accelerator.py``, the
``hwgen sim-board`` command in ``tests/cli/test_sim_board.py``.

Each configuration is built once (cached across sessions, see :mod:`sim.board.cache`) and each
module starts one board per configuration.
"""

import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from protocol_helpers import (
    RequestLink,
    check_memories,
    error_cases,
    fill_regions,
    random_words,
)
from support import BOARD_SMALL as SMALL
from support import BOARD_WS as WS
from support import host_port
from support import port_refused as refused
from support import started_board as started

import hwgen
from host.client import DeviceClient
from hwgen.config import AcceleratorConfig
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    DEFAULT_BAUD,
    FRAME_OVERHEAD,
    Status,
    encode_request,
    info_bytes,
    pack_read,
    pack_run,
    pack_write,
)
from hwgen.protocol import Opcode as Op
from sim.board import BoardError, SimulatedBoard, frame_timeout_cycles
from sim.netgen import random_input, random_network

# The UART needs at least 4 clock cycles per bit at the boards' 1 Mbaud.
UART = AcceleratorConfig(rows=2, cols=2, clock_hz=4_000_000, **SMALL)

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def board():
    with started(WS) as b:
        yield b


class RawLink(RequestLink):
    """A TCP connection to a board that sends bytes and decodes the response frames."""

    def __init__(self, url, timeout=TIMEOUT):
        super().__init__()
        self.sock = socket.create_connection(host_port(url), timeout=timeout)
        self.timeout = timeout

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def receive(self, count=1, timeout=None):
        """Return the next ``count`` response frames; fewer if ``timeout`` passes first."""
        frames = []
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while len(frames) < count:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                break
            chunk = self.sock.recv(65536)
            assert chunk, "the board closed the connection"
            frames += self.decoder.feed(chunk)
        return frames


@pytest.fixture
def link(board):
    raw = RawLink(board.url)
    yield raw
    raw.close()


@pytest.fixture
def filled(link):
    """Every region of the board filled with random words; returns ``{Region: words}``."""
    return fill_regions(link, WS, np.random.default_rng(7))


def test_info_is_the_configs(link):
    assert link.ok(Op.INFO) == info_bytes(WS)


def test_write_read_round_trip_every_region(link, filled):
    rng = np.random.default_rng(1)
    for region, geometry in regions(WS).items():
        addr = geometry.depth // 3
        words = random_words(rng, geometry, 5)
        link.ok(Op.WRITE, pack_write(geometry, addr, words))
        filled[region][addr:addr + 5] = words
    check_memories(link, WS, filled)  # the words landed, and nothing else moved


def test_errors_get_their_status_and_change_nothing(link, filled):
    for name, request, status in error_cases(WS):
        frame = link.request(None, raw=request)
        assert (frame.status, frame.payload) == (status, b""), name
        assert link.ok(Op.INFO) == info_bytes(WS), f"after {name}"
    counters = link.counters()
    assert (counters.runs, counters.program_loaded, counters.busy) == (0, False, False)
    check_memories(link, WS, filled)


def test_garbage_is_skipped(link, filled):
    rng = np.random.default_rng(3)
    garbage = bytearray(rng.bytes(3000))
    garbage[::97] = b"\xa5" * len(garbage[::97])  # plenty of false sync bytes
    # Zeros close any false header the garbage ends with (it fails its CRC), as a pause would.
    link.send(bytes(garbage) + bytes(FRAME_OVERHEAD))
    assert link.ok(Op.INFO) == info_bytes(WS)
    assert link.receive(timeout=0.2) == [], "garbage was answered"
    check_memories(link, WS, filled)


@pytest.mark.parametrize("cut", [1, 5, 9, 20, -1])
def test_truncated_frame_times_out(board, link, filled, cut):
    act = regions(WS)[Region.ACT]
    frame = encode_request(Op.WRITE, 50, pack_write(act, 0, list(range(1, 9))))
    link.send(frame[:cut])
    # The device drops the partial frame after timeout_cycles idle cycles of its own clock; a
    # quiet board has run longer than that since the last byte.
    before = board.stats()
    after = board.wait_quiet()
    assert after.cycles - before.cycles > frame_timeout_cycles(WS) // 2
    assert link.ok(Op.INFO) == info_bytes(WS)
    assert link.receive(timeout=0.1) == []
    check_memories(link, WS, filled)


def test_bad_header_crc_gets_no_answer(link):
    request = bytearray(encode_request(Op.INFO, 60))
    request[6] ^= 0x01
    link.send(bytes(request))
    assert link.receive(timeout=0.2) == []
    assert link.ok(Op.INFO) == info_bytes(WS)


def compiled(config, seed=0, widths=(7, 9, 5), batch=None):
    rng = np.random.default_rng(seed)
    net = random_network(rng, config, widths=list(widths))
    return net, hwgen.compile(net, config, batch=batch)


def load(link, program):
    geo = regions(program.config)
    for region, (base, words) in program.images.items():
        link.write_region(geo[region], base, words)


def test_run_while_busy_is_refused(link):
    _, program = compiled(WS)
    load(link, program)
    before = link.counters()
    m = program.batch
    # Two RUNs in one go: the second arrives while the first is running.
    link.send(encode_request(Op.RUN, 70, pack_run(m)) + encode_request(Op.RUN, 71, pack_run(m)))
    first, second = link.receive(2)
    assert (first.seq, first.status) == (70, Status.OK)
    assert (second.seq, second.status) == (71, Status.BUSY)
    # a READ while busy is refused too, and does not disturb the run
    frame = link.request(Op.READ, pack_read(regions(WS)[Region.ACT], 0, 1))
    assert frame.status in (Status.BUSY, Status.OK)
    deadline = time.monotonic() + TIMEOUT
    while (counters := link.counters()).busy:
        assert time.monotonic() < deadline
    assert counters.runs == before.runs + 1


def test_one_client_at_a_time_and_the_next_one_is_served(board):
    first = RawLink(board.url)
    assert first.ok(Op.INFO) == info_bytes(WS)
    second = RawLink(board.url)  # connects (backlog) but is served only after the first leaves
    second.send(encode_request(Op.INFO, 9))
    assert second.receive(timeout=0.2) == []
    first.close()
    (frame,) = second.receive()
    assert (frame.seq, frame.status, frame.payload) == (9, Status.OK, info_bytes(WS))
    second.close()


def test_board_sleeps_when_quiet_and_counts_cycles_when_not(board, link):
    link.ok(Op.INFO)
    quiet = board.wait_quiet()
    time.sleep(0.2)
    again = board.stats()
    assert again.quiet and again.cycles == quiet.cycles, "a quiet board is still clocking"
    assert again.cpu_s - quiet.cpu_s < 0.05
    link.ok(Op.INFO)
    after = board.stats()
    frame = FRAME_OVERHEAD + len(info_bytes(WS))
    assert after.cycles - again.cycles > frame  # at most one byte per cycle each way
    assert after.wall_s > again.wall_s and after.run_s > again.run_s


# -- UART pins -----------------------------------------------------------------------------------

def test_uart_board_serves_the_same_protocol():
    from host.accelerator import Accelerator

    with started(UART, uart=True) as board:
        link = RawLink(board.url)
        # The device behind UART pins reports its rate (the boards' 1 Mbaud by default).
        assert link.ok(Op.INFO) == info_bytes(UART, baud=DEFAULT_BAUD)
        frame = link.request(Op.RUN, pack_run(0))
        assert frame.status == Status.BAD_BATCH
        link.close()
        net, program = compiled(UART, seed=4, widths=(5, 4, 3), batch=4)
        x = random_input(np.random.default_rng(5), UART, 9, 5)
        with Accelerator(board.url, config=UART) as acc:
            acc.load(program)
            np.testing.assert_array_equal(acc.infer(x), net.forward(x))


# -- the process -------------------------------------------------------------------------------

def state_of(pid):
    """Return the process state letter of ``pid``, or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def gone(pid):
    return state_of(pid) in (None, "Z", "X")


def port_is_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_exit_stops_the_process_and_frees_the_port():
    with started(WS) as b:
        pid, port = b.pid, b.port
        assert not gone(pid)
        with RawLink(b.url) as link:
            link.ok(Op.INFO)
    assert gone(pid) and refused(port) and port_is_free(port)


def test_exception_inside_with_stops_the_process():
    with pytest.raises(KeyError), started(WS) as b:
        pid, port = b.pid, b.port
        raise KeyError("boom")
    assert gone(pid) and refused(port) and port_is_free(port)


def test_fixed_port_and_port_in_use():
    with started(WS) as first:
        with pytest.raises(BoardError, match="bind"):
            SimulatedBoard(WS, port=first.port).start()
        port = first.port
    with started(WS, port=port) as again:
        assert again.url == f"socket://127.0.0.1:{port}"
        with RawLink(again.url) as link:
            assert link.ok(Op.INFO) == info_bytes(WS)


def test_harness_exits_when_python_dies(board):
    script = ("import os, signal; from hwgen.config import AcceleratorConfig; "
              "from sim.board import SimulatedBoard; "
              f"b = SimulatedBoard(AcceleratorConfig.from_json({WS.to_json()!r})).start(); "
              "print(b.pid, flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pid = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 10
    while not gone(pid):
        assert time.monotonic() < deadline, f"harness {pid} outlived its parent"
        time.sleep(0.05)


def test_board_arguments_are_checked():
    with pytest.raises(TypeError, match="AcceleratorConfig"):
        SimulatedBoard({"rows": 2})
    with pytest.raises(ValueError, match="port"):
        SimulatedBoard(WS, port=70000)
    with pytest.raises(TypeError, match=r"^launcher must be a sequence of str"):
        SimulatedBoard(WS, launcher="valgrind --tool=callgrind")


def test_client_over_pyserial(board):
    """DeviceClient over pyserial's socket:// port, the way every host opens a board."""
    import serial

    port = serial.serial_for_url(board.url, timeout=0.05)
    try:
        client = DeviceClient(port, timeout=TIMEOUT)
        client.check_config(WS)
        words = list(range(300))  # more than one WRITE and one READ frame
        client.write(Region.ACT, 100, words)
        assert client.read(Region.ACT, 100, 300).tolist() == words
    finally:
        port.close()

