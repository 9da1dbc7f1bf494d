"""host.Accelerator end to end: the real host driver over the byte protocol, on in-process
devices (:class:`sim.inprocess.InProcessDevice`, no Verilator) and, for the paths a board
adds (TCP, the gateware, a process that dies, the command line), on the real device in
Verilator.

Every expected output comes from :meth:`hwgen.nn.QuantizedNetwork.forward` and every expected
cycle count from :func:`hwgen.cycles.program_cycles`, never from the device. Random networks
(:func:`sim.netgen.random_network`) run on a weight-stationary and an output-stationary board,
with batch sizes that exercise the chunking: 1, exactly one run, one more, several runs and a
remainder.
"""

import contextlib
import dataclasses
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from support import BOARD_OS as OS
from support import BOARD_WS as WS
from support import host_port
from support import started_board as started

import hwgen
from host import Accelerator, IncompatibleDevice, InferCounters, LinkError
from host.client import LinkTimeout
from hwgen import AcceleratorConfig
from hwgen.cli import main
from hwgen.cycles import program_cycles
from hwgen.protocol import (
    CRC_BYTES,
    FRAME_OVERHEAD,
    HEADER_BYTES,
    PROTOCOL_VERSION,
    SYNC_REQUEST,
    SYNC_RESPONSE,
)
from sim.inprocess import InProcessDevice
from sim.netgen import random_input, random_network

CONFIGS = {"ws": WS, "os": OS}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def board(request):
    """A simulated board (Verilator) of each configuration."""
    with started(CONFIGS[request.param]) as b:
        yield b


@dataclasses.dataclass(frozen=True)
class InProcess:
    """Where most tests open their device: a new in-process device of ``config`` each time."""

    config: AcceleratorConfig

    def open(self):
        return InProcessDevice(self.config)


@pytest.fixture(params=sorted(CONFIGS))
def target(request):
    return InProcess(CONFIGS[request.param])


@pytest.fixture
def acc(target):
    with Accelerator(target.open(), config=target.config) as a:
        yield a


def network(config, seed, *, layers=None, batch=None, widths=None):
    rng = np.random.default_rng(seed)
    net = random_network(rng, config, layers=layers, max_width=17, widths=widths)
    return net, hwgen.compile(net, config, batch=batch)


def expected_cycles(program, rows):
    """The cycle model's count for ``rows`` rows run in chunks of ``program.batch``."""
    return sum(program_cycles(program, min(program.batch, rows - start))
               for start in range(0, rows, program.batch))


def check_random_network(acc, config, seed):
    net, program = network(config, seed, batch=int(np.random.default_rng(seed).integers(3, 9)))
    rows = 2 * program.batch + 3
    x = random_input(np.random.default_rng(100 + seed), config, rows, net.in_features)
    acc.load(program)
    y = acc.infer(x)
    np.testing.assert_array_equal(y, net.forward(x))
    c = acc.counters()
    assert (c.rows, c.runs) == (rows, 3)
    assert c.cycles == expected_cycles(program, rows)
    assert c.macs == rows * program.padded_macs_per_row
    assert c.payload_bytes > 0 and c.wire_bytes > c.payload_bytes


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_networks_are_bit_exact(acc, target, seed):
    check_random_network(acc, target.config, seed)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_networks_are_bit_exact_on_the_board(board, seed):
    with Accelerator(board.url, config=board.config) as acc:
        check_random_network(acc, board.config, seed)


def test_chunk_sizes_keep_every_row_in_order(acc, target):
    config = target.config
    net, program = network(config, 7, widths=[9, 6, 4], batch=5)
    acc.load(program)
    b = program.batch
    for rows in (1, b, b + 1, 3 * b + 7):
        x = random_input(np.random.default_rng(rows), config, rows, 9)
        x[:, 0] = np.arange(rows) % 100 - 50  # rows differ, so a swap or a repeat shows
        y = acc.infer(x)
        assert y.shape == (rows, 4)
        np.testing.assert_array_equal(y, net.forward(x), err_msg=f"{rows} rows")
        c = acc.counters()
        assert (c.rows, c.runs) == (rows, -(-rows // b))
        assert c.cycles == expected_cycles(program, rows)


def test_largest_batch_and_zero_rows(acc, target):
    config = target.config
    net, program = network(config, 11, widths=[12, 10, 3])  # batch chosen by the compiler
    assert program.batch == config.acc_depth
    acc.load(program)
    x = random_input(np.random.default_rng(0), config, program.batch, 12)
    np.testing.assert_array_equal(acc.infer(x), net.forward(x))
    empty = acc.infer(np.zeros((0, 12), dtype=np.int8))
    assert empty.shape == (0, 3)
    assert acc.counters() == InferCounters(rows=0, runs=0, seconds=acc.counters().seconds)


def test_load_a_saved_program_and_reload_another(acc, target, tmp_path):
    config = target.config
    net_a, prog_a = network(config, 21, widths=[5, 7])
    net_b, prog_b = network(config, 22, widths=[8, 3, 2], batch=4)
    prog_a.save(tmp_path / "a.npz")
    acc.load(tmp_path / "a.npz")
    x = random_input(np.random.default_rng(1), config, 11, 5)
    np.testing.assert_array_equal(acc.infer(x), net_a.forward(x))
    acc.load(str(tmp_path / "a.npz"))
    acc.load(prog_b)
    x = random_input(np.random.default_rng(2), config, 11, 8)
    np.testing.assert_array_equal(acc.infer(x), net_b.forward(x))
    assert acc.program is prog_b


def test_device_counters_are_cumulative(acc, target):
    _, program = network(target.config, 5, widths=[4, 4], batch=3)
    acc.load(program)
    before = acc.device_counters()
    x = random_input(np.random.default_rng(3), target.config, 7, 4)
    acc.infer(x)
    after = acc.device_counters()
    assert after.cycles - before.cycles == acc.counters().cycles == expected_cycles(program, 7)
    assert after.runs - before.runs == 3 and not after.busy and after.program_loaded


@pytest.mark.parametrize(("x", "message"), [
    (np.zeros((2, 6)), "dtype float64; allowed: an integer dtype"),
    (np.zeros(6, dtype=np.int8), "shape (6,); allowed: (rows, 6) (one row: x.reshape(1, 6))"),
    (np.zeros((2, 5), dtype=np.int8), "shape (2, 5); allowed: (rows, 6)"),
    (np.full((2, 6), 128), "x[0, 0] = 128 is outside signed in_bits=8 (-128..127)"),
    (np.array([[1, 2, 3, 4, 5, -129]]), "x[0, 5] = -129 is outside"),
    (np.ones((1, 6), dtype=bool), "dtype bool"),
    ([[1, 2, 3, 4, 5, 6.5]], "dtype float64"),
])
def test_bad_input_is_refused_before_sending(acc, target, x, message):
    _, program = network(target.config, 9, widths=[6, 2])
    acc.load(program)
    sent = acc.bytes_sent
    with pytest.raises(ValueError) as info:
        acc.infer(x)
    assert message in str(info.value)
    assert acc.bytes_sent == sent


def test_infer_needs_a_program(target):
    with Accelerator(target.open()) as fresh, pytest.raises(RuntimeError, match="load"):
        fresh.infer(np.zeros((1, 3), dtype=np.int8))


def test_device_of_another_config_is_refused(target):
    other = WS if target.config is OS else OS
    with pytest.raises(IncompatibleDevice) as info:
        Accelerator(target.open(), config=other)
    text = str(info.value)
    assert target.config.hash in text and other.hash in text
    assert "rows: device" in text and "dataflow: device" in text
    assert info.value.device == target.config.hash and info.value.expected == other.hash


def test_program_for_another_config_is_refused(acc, target):
    other = WS if target.config is OS else OS
    _, program = network(other, 1, widths=[4, 4])
    with pytest.raises(IncompatibleDevice) as info:
        acc.load(program)
    assert other.hash in str(info.value) and target.config.hash in str(info.value)
    assert acc.program is None


def test_clock_only_difference_is_explained(target):
    other = dataclasses.replace(target.config, clock_hz=target.config.clock_hz * 2)
    with pytest.raises(IncompatibleDevice, match="a field INFO does not report differs"):
        Accelerator(target.open(), config=other)


def test_open_errors_name_the_url():
    with pytest.raises(LinkError, match=r"cannot open socket://127\.0\.0\.1:1"):
        Accelerator("socket://127.0.0.1:1", timeout=1)
    with pytest.raises(LinkTimeout, match="INFO"):  # an echo is no device
        Accelerator("loop://", timeout=0.2, retries=0)
    with pytest.raises(TypeError, match=r"device is a int .*allowed: a pyserial URL string or "
                                        r"an object with read"):
        Accelerator(1234)
    with pytest.raises(ValueError, match="timeout"):
        Accelerator("loop://", timeout=0)


def test_info_handshake(acc, target):
    assert acc.info.version == PROTOCOL_VERSION
    assert acc.config_hash == target.config.hash
    assert acc.config_hash in repr(acc)


@pytest.mark.parametrize("how", ["killed", "frozen"])
def test_board_dying_mid_run_gives_a_link_error_naming_the_request(how):
    """A killed board resets the connection; a frozen one (SIGSTOP) just stops answering."""
    config = WS
    _, program = network(config, 31, widths=[16, 12, 8], batch=8)
    # About 0.3 s per 2,000 rows here: the board dies long before these are done.
    x = random_input(np.random.default_rng(4), config, 40_000, 16)
    errors = []
    with started(config) as board, Accelerator(board.url, config=config, timeout=0.5,
                                               retries=1) as acc:
        acc.load(program)

        def run():
            try:
                acc.infer(x)
            except Exception as exc:  # whatever it is, the test looks at it
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(0.3)  # a few runs in
        board.process.send_signal(signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        worker.join(timeout=20)
        assert not worker.is_alive(), "infer hangs after the board died"
        if how == "frozen":
            board.process.kill()
    (error,) = errors
    text = str(error)
    # A frozen board times out: each request tries twice, and a lost RUN answer asks COUNTERS
    # whether it started.
    assert isinstance(error, LinkError if how == "killed" else LinkTimeout), repr(error)
    assert "infer rows " in text and " of 40000" in text, text
    assert any(op in text for op in ("WRITE", "READ", "RUN", "COUNTERS", "LOAD", "FETCH",
                                     "CLASSES")), text


class CorruptingProxy:
    """A TCP proxy that flips a bit in the payload CRC of every ``every``-th frame each way.

    A damaged request is answered BAD_CRC by the device, a damaged answer fails the host's
    check; either way the host must send the request again, and only then get its result.
    """

    def __init__(self, url, every):
        self.target = host_port(url)
        self.every = every
        self.flipped = {"request": 0, "response": 0}
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        client, _ = self.listener.accept()
        board = socket.create_connection(self.target)
        pumps = [threading.Thread(target=self._pump, args=(client, board, "request")),
                 threading.Thread(target=self._pump, args=(board, client, "response"))]
        for pump in pumps:
            pump.start()
        for pump in pumps:
            pump.join()
        client.close()
        board.close()

    def _pump(self, src, dst, direction):
        buf = bytearray()
        frames = 0
        while True:
            try:
                chunk = src.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            buf += chunk
            # Frames start at a sync byte; between them only the host's zeros (after a lost
            # answer, or behind its last request on a damaging link) pass as they are.
            while buf and buf[0] not in (SYNC_REQUEST, SYNC_RESPONSE):
                dst.sendall(buf[:1])
                del buf[:1]
            while len(buf) >= HEADER_BYTES:
                end = HEADER_BYTES + CRC_BYTES + int.from_bytes(buf[4:6], "little") + CRC_BYTES
                if len(buf) < end:
                    break
                frame, buf = bytearray(buf[:end]), buf[end:]
                frames += 1
                if frames % self.every == 0:
                    frame[-1] ^= 0x10
                    self.flipped[direction] += 1
                dst.sendall(frame)
                while buf and buf[0] not in (SYNC_REQUEST, SYNC_RESPONSE):
                    dst.sendall(buf[:1])
                    del buf[:1]

    def close(self):
        self.listener.close()


def test_damaged_frames_are_sent_again(board):
    config = board.config
    net, program = network(config, 51, widths=[11, 7, 6], batch=4)
    proxy = CorruptingProxy(board.url, every=5)
    try:
        with Accelerator(proxy.url, config=config, timeout=2, retries=3) as acc:
            acc.load(program)
            x = random_input(np.random.default_rng(6), config, 3 * program.batch + 7, 11)
            np.testing.assert_array_equal(acc.infer(x), net.forward(x))
            assert acc.counters().cycles == expected_cycles(program, len(x))
            assert acc.client.stats["retries"] >= 2 and acc.client.stats["corrupt"] >= 1
    finally:
        proxy.close()
    assert proxy.flipped["request"] >= 2 and proxy.flipped["response"] >= 2


class CorruptingTransport:
    """A bare transport (``read`` and ``write`` only: no ``timeout``, no ``close``) in front of
    an in-process device that flips a bit in the payload CRC of every ``every``-th frame each
    way, as :class:`CorruptingProxy` does on TCP."""

    def __init__(self, device, every):
        self.device = device
        self.every = every
        self.count = {"request": 0, "response": 0}
        self.flipped = {"request": 0, "response": 0}
        self.out = bytearray()

    def _pass(self, frame, direction):
        self.count[direction] += 1
        if self.count[direction] % self.every == 0:
            frame = bytearray(frame)
            frame[-1] ^= 0x10
            self.flipped[direction] += 1
        return bytes(frame)

    def write(self, data):  # the host writes one whole frame at a time (and zeros after it)
        end = FRAME_OVERHEAD + int.from_bytes(data[4:6], "little") \
            if data[:1] == bytes([SYNC_REQUEST]) else 0
        self.device.write(self._pass(data[:end], "request") + data[end:] if end else data)

    def read(self, size):
        raw = self.device.read(1 << 16)
        while raw:  # the device's answers are whole frames, nothing between them
            end = FRAME_OVERHEAD + int.from_bytes(raw[4:6], "little")
            self.out += self._pass(raw[:end], "response")
            raw = raw[end:]
        data = bytes(self.out[:size])
        del self.out[:size]
        return data


def test_damaged_frames_are_sent_again_over_a_bare_transport(target):
    config = target.config
    net, program = network(config, 51, widths=[11, 7, 6], batch=4)
    link = CorruptingTransport(target.open(), every=5)
    with Accelerator(link, config=config, timeout=2, retries=3) as acc:
        assert acc.url.startswith("CorruptingTransport@")
        acc.load(program)
        x = random_input(np.random.default_rng(6), config, 3 * program.batch + 7, 11)
        np.testing.assert_array_equal(acc.infer(x), net.forward(x))
        assert acc.counters().cycles == expected_cycles(program, len(x))
        assert acc.client.stats["retries"] >= 2 and acc.client.stats["corrupt"] >= 1
    assert link.flipped["request"] >= 2 and link.flipped["response"] >= 2


def test_progress_bar(acc, target, capsys):
    net, program = network(target.config, 8, widths=[3, 3], batch=2)
    acc.load(program)
    acc.progress = True
    x = random_input(np.random.default_rng(0), target.config, 9, 3)
    np.testing.assert_array_equal(acc.infer(x), net.forward(x))
    assert "infer:" in (err := capsys.readouterr().err) and "/9 " in err
    acc.progress = False
    acc.infer(x)
    assert capsys.readouterr().err == ""


# -- hwgen infer ---------------------------------------------------------------------------------

def test_infer_command_writes_the_outputs(board, tmp_path, capsys):
    net, program = network(board.config, 41, widths=[10, 6, 5], batch=6)
    program.save(tmp_path / "p.npz")
    x = random_input(np.random.default_rng(5), board.config, 20, 10)
    np.save(tmp_path / "x.npy", x)
    code = main(["infer", "--url", board.url, "--program", str(tmp_path / "p.npz"),
                 "--input", str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy")])
    assert code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), net.forward(x))
    out = capsys.readouterr().out
    assert "20 rows in" in out and f"{expected_cycles(program, 20):,} cycles" in out
    assert "wrote" in out
    # without --output the array goes to stdout, the summary to stderr
    assert main(["infer", "--url", board.url, "--program", str(tmp_path / "p.npz"),
                 "--input", str(tmp_path / "x.npy")]) == 0
    captured = capsys.readouterr()
    assert "20 rows in" in captured.err and str(net.forward(x)[0, 0]) in captured.out


@pytest.mark.parametrize("case", ["missing-program", "bad-input-shape", "other-config",
                                  "no-device"])
def test_infer_command_errors_are_one_line(board, tmp_path, case, capsys):
    """A command's error is one line, but for a device of another design: a headline, then a
    line per differing field, then the command that makes a matching program."""
    other = WS if board.config is OS else OS
    _, program = network(other if case == "other-config" else board.config, 2, widths=[4, 3])
    program.save(tmp_path / "p.npz")
    np.save(tmp_path / "x.npy", np.zeros((3, 5 if case == "bad-input-shape" else 4), np.int8))
    url = "socket://127.0.0.1:1" if case == "no-device" else board.url
    prog = tmp_path / ("nothing.npz" if case == "missing-program" else "p.npz")
    code = main(["infer", "--url", url, "--program", str(prog), "--input",
                 str(tmp_path / "x.npy")])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("hwgen infer: error: "), err
    if case == "other-config":
        assert lines[0].endswith("differing fields:"), err
        assert all(line.startswith("  ") and " vs program " in line for line in lines[1:-1])
        assert len(lines) > 2 and lines[-1].startswith("make a program for the device's design")
    else:
        assert len(lines) == 1, err
    expected = {"missing-program": "nothing.npz", "bad-input-shape": "shape (3, 5)",
                "other-config": other.hash, "no-device": "cannot open"}[case]
    assert expected in lines[0]


def test_infer_command_runs_as_a_program(board, tmp_path):
    """The entry point, in a process of its own: a usage error is one line, exit status 2."""
    proc = subprocess.run([sys.executable, "-m", "hwgen", "infer", "--url", board.url,
                           "--program", str(tmp_path / "none.npz"), "--input", "x.npy"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("hwgen infer: error: --program ") and \
        len(proc.stderr.strip().splitlines()) == 1
