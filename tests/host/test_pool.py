"""host.AcceleratorPool: the real driver over the byte protocol, on in-process devices
(:class:`sim.inprocess.InProcessDevice`, no Verilator) for the split, the checks and mixed
devices, and on simulated boards (real TCP, the device in Verilator) for devices that die.

Every expected output comes from :meth:`hwgen.nn.QuantizedNetwork.forward` and every expected
cycle count from :func:`hwgen.cycles.program_cycles`, never from a device. Rows are made
distinct so that a row run twice, lost or put in the wrong place shows. Devices are killed
(SIGKILL: the link breaks) or frozen (SIGSTOP: it goes silent) in the middle of a call.
"""

import signal
import threading
import time

import numpy as np
import pytest
from support import BOARD_OS as OS
from support import BOARD_WS as WS

import hwgen
from host import Accelerator, AcceleratorPool, IncompatibleDevice, LinkError, NoDeviceLeft
from host.pool import chunk_runs
from hwgen.cycles import program_cycles
from sim.inprocess import InProcessDevice
from sim.netgen import random_input, random_network


def network(config, seed, *, widths, batch=None):
    net = random_network(np.random.default_rng(seed), config, widths=widths)
    return net, hwgen.compile(net, config, batch=batch)


def inputs(config, rows, features, seed=0):
    """Random rows, each different in its first column (so a swap or a repeat shows)."""
    if not rows:
        return np.zeros((0, features), dtype=np.int64)
    x = random_input(np.random.default_rng(seed), config, rows, features)
    x[:, 0] = np.arange(rows) % 250 - 125
    return x


def expected_cycles(program, rows):
    """The cycle model's count for ``rows`` rows run in runs of ``program.batch``."""
    return sum(program_cycles(program, min(program.batch, rows - start))
               for start in range(0, rows, program.batch))


@pytest.fixture(scope="module")
def pair(module_board_factory):
    """Two boards of the same design, shared by the tests that leave them running."""
    return module_board_factory(WS), module_board_factory(WS)


@pytest.fixture
def pool():
    """Two in-process devices of WS."""
    with AcceleratorPool([InProcessDevice(WS), InProcessDevice(WS)], config=WS) as p:
        yield p


def reconnects(url):
    """Whether a new client gets an answer from the board at ``url`` (the board serves one
    client at a time, so only when every earlier connection is closed)."""
    try:
        with Accelerator(url, timeout=0.5, retries=0):
            return True
    except LinkError:
        return False


# -- the split -------------------------------------------------------------------------------------

def test_rows_are_split_across_the_devices_and_kept_in_order(pool):
    net, program = network(WS, 1, widths=[16, 12, 8], batch=8)
    pool.load(program)
    rows = 150 * program.batch + 5
    x = inputs(WS, rows, 16)
    y = pool.infer(x)
    np.testing.assert_array_equal(y, net.forward(x))
    c = pool.counters()
    assert set(c.devices) == set(pool.urls)
    per_device = [d.rows for d in c.devices.values()]
    assert sum(per_device) == c.total.rows == rows
    assert all(n > 0 for n in per_device), per_device
    # Chunks are whole runs, so the pool runs exactly what one device would.
    assert c.total.runs == -(-rows // program.batch)
    assert c.total.cycles == expected_cycles(program, rows)
    assert c.total.macs == rows * program.padded_macs_per_row
    assert c.total.seconds > 0 and c.total.rows_per_second > 0
    assert all(rate > 0 for rate in pool.rates.values())


@pytest.mark.parametrize("rows", [0, 1, 7, 8, 9, 17])
def test_few_rows(pool, rows):
    """Fewer runs than devices, exactly one run, a remainder, no rows at all."""
    net, program = network(WS, 2, widths=[9, 6, 4], batch=8)
    pool.load(program)
    x = inputs(WS, rows, 9, seed=rows)
    y = pool.infer(x)
    assert y.shape == (rows, 4) and y.dtype == np.int64
    np.testing.assert_array_equal(y, net.forward(x))
    c = pool.counters()
    assert c.total.rows == rows and c.total.cycles == expected_cycles(program, rows)


def test_calls_in_a_row_and_a_saved_program(pool, tmp_path):
    net_a, prog_a = network(WS, 3, widths=[5, 7], batch=4)
    net_b, prog_b = network(WS, 4, widths=[8, 3, 2])
    prog_a.save(tmp_path / "a.npz")
    pool.load(tmp_path / "a.npz")
    for seed in range(3):
        x = inputs(WS, 40 + seed, 5, seed)
        np.testing.assert_array_equal(pool.infer(x), net_a.forward(x))
    pool.load(prog_b)
    assert pool.program is prog_b and all(acc.program is prog_b for acc in pool.devices)
    x = inputs(WS, 100, 8)
    np.testing.assert_array_equal(pool.infer(x), net_b.forward(x))


@pytest.mark.parametrize(("free", "share", "expected"), [
    (100, 0.5, 25),   # half of its half
    (100, 0.75, 32),  # capped at the largest chunk
    (40, 0.75, 15),
    (40, 0.25, 5),    # a slower device takes less
    (3, 0.5, 1),      # at least one run
    (1, 0.01, 1),
])
def test_chunk_follows_the_share(free, share, expected):
    assert chunk_runs(free, share) == expected
    assert chunk_runs(free, share, max_runs=2) == min(2, expected)


class SlowTransport:
    """An in-process device behind a slow link: every request waits ``delay`` seconds."""

    def __init__(self, delay):
        self.device = InProcessDevice(WS)
        self.url = f"slow+{self.device.url}"
        self.delay = delay

    def write(self, data):
        time.sleep(self.delay)
        return self.device.write(data)

    def read(self, size):
        return self.device.read(size)


def test_a_slow_device_gets_fewer_rows():
    """Each request to the slow device waits 10 ms: it runs far slower, so its share of the
    rows is far smaller (no assertion on a time)."""
    net, program = network(WS, 5, widths=[16, 12, 8], batch=8)
    fast, slow = InProcessDevice(WS), SlowTransport(delay=0.01)
    with AcceleratorPool([fast, slow], config=WS) as p:
        p.load(program)
        x = inputs(WS, 200 * program.batch, 16)
        np.testing.assert_array_equal(p.infer(x), net.forward(x))
        c = p.counters().devices
        assert 0 < c[slow.url].rows < c[fast.url].rows / 2, c
        assert p.rates[slow.url] < p.rates[fast.url]


# -- devices given open, closing -------------------------------------------------------------------

class Delegate:
    """An open device that is no host.Accelerator: ``load``, ``infer`` and ``counters`` passed
    on to one (the pool must take it by what it does, not by its class)."""

    def __init__(self, acc):
        self.acc = acc
        self.url = f"delegate+{acc.url}"
        self.loads = 0

    def load(self, program):
        self.loads += 1
        self.acc.load(program)

    def infer(self, x, outputs="last"):
        return self.acc.infer(x, outputs=outputs)

    def counters(self):
        return self.acc.counters()


def test_open_accelerators_are_used_and_left_open(pair):
    """A URL (a board), a transport (an in-process device) and open devices (an Accelerator,
    another object with load/infer/counters) in one pool."""
    net, program = network(WS, 6, widths=[6, 5], batch=8)
    transport = InProcessDevice(WS)
    with Accelerator(InProcessDevice(WS), config=WS) as mine, \
            Accelerator(InProcessDevice(WS), config=WS) as inner:
        other = Delegate(inner)
        with AcceleratorPool([mine, pair[1].url, transport, other]) as p:
            assert p.devices[0] is mine and p.devices[3] is other
            assert p.urls == [mine.url, pair[1].url, transport.url, other.url]
            p.load(program)
            x = inputs(WS, 300, 6)
            np.testing.assert_array_equal(p.infer(x), net.forward(x))
            assert other.loads == 1  # (its share of the rows depends on the threads' luck)
        # The pool closed what it opened (the board takes a new client, the transport is
        # closed) and not `mine` nor `other`.
        assert reconnects(pair[1].url)
        with pytest.raises(ConnectionError, match="closed"):
            transport.read(1)
        x = inputs(WS, 20, 6, seed=1)
        np.testing.assert_array_equal(mine.infer(x), net.forward(x))
        np.testing.assert_array_equal(other.infer(x), net.forward(x))
    with pytest.raises(RuntimeError, match="infer: the pool is closed"):
        p.infer(x)


def test_mixed_in_process_devices_without_a_board():
    net, program = network(WS, 13, widths=[7, 6, 3], batch=4)
    with Accelerator(InProcessDevice(WS), config=WS) as inner:
        devices = [InProcessDevice(WS), inner, Delegate(Accelerator(InProcessDevice(WS)))]
        with AcceleratorPool(devices, config=WS) as p:
            p.load(program)
            x = inputs(WS, 61, 7)
            np.testing.assert_array_equal(p.infer(x), net.forward(x))
            c = p.counters()
            assert c.total.rows == 61 and c.total.cycles == expected_cycles(program, 61)
            assert set(c.devices) == {d.url for d in devices}


# -- devices that fail -----------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["killed", "frozen"])
def test_a_device_that_dies_mid_run_is_dropped_and_nothing_is_lost(board_factory, how):
    boards = [board_factory(WS), board_factory(WS)]
    victim = boards[1]
    net, program = network(WS, 7, widths=[16, 12, 8], batch=8)
    rows = 2500 * program.batch
    x = inputs(WS, rows, 16)
    result = {}
    with AcceleratorPool([b.url for b in boards], config=WS, timeout=0.5, retries=1) as p:
        p.load(program)
        worker = threading.Thread(target=lambda: result.setdefault("y", p.infer(x)))
        worker.start()
        while p.rates[victim.url] is None and worker.is_alive():
            time.sleep(0.001)  # until the victim has finished a chunk: it is mid-run
        victim.process.send_signal(signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        worker.join(timeout=120)
        assert not worker.is_alive(), "infer hangs after a device died"
        if how == "frozen":
            victim.process.kill()
        np.testing.assert_array_equal(result["y"], net.forward(x))
        assert p.urls == [boards[0].url]
        why = p.dropped[victim.url]
        assert "dropped during infer (rows " in why
        assert ("LinkError" if how == "killed" else "LinkTimeout") in why, why
        c = p.counters()
        # The victim keeps the chunks it finished; its unfinished one was run by the other.
        assert c.devices[victim.url].rows > 0
        assert c.total.rows == sum(d.rows for d in c.devices.values()) == rows
        # The next call runs on the device that is left.
        x2 = inputs(WS, 50, 16, seed=2)
        np.testing.assert_array_equal(p.infer(x2), net.forward(x2))
        assert set(p.counters().devices) == {boards[0].url}


def test_a_device_that_fails_while_loading_is_dropped(board_factory):
    boards = [board_factory(WS), board_factory(WS)]
    net, program = network(WS, 12, widths=[7, 5], batch=8)
    with AcceleratorPool([b.url for b in boards], config=WS, timeout=0.5, retries=1) as p:
        boards[0].process.kill()
        p.load(program)
        assert p.urls == [boards[1].url]
        assert p.dropped[boards[0].url].startswith("dropped during load: LinkError: ")
        x = inputs(WS, 30, 7)
        np.testing.assert_array_equal(p.infer(x), net.forward(x))


def test_no_device_left_names_each_device_and_why(board_factory):
    boards = [board_factory(WS), board_factory(WS)]
    _, program = network(WS, 8, widths=[16, 12, 8], batch=8)
    with AcceleratorPool([b.url for b in boards], config=WS, timeout=0.5, retries=1) as p:
        p.load(program)
        x = inputs(WS, 2000 * program.batch, 16)
        errors = []

        def run():
            try:
                p.infer(x)
            except NoDeviceLeft as exc:
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        while any(rate is None for rate in p.rates.values()) and worker.is_alive():
            time.sleep(0.001)
        for b in boards:
            b.process.kill()
        worker.join(timeout=60)
        assert not worker.is_alive()
        (error,) = errors
        text = str(error)
        assert text.startswith(f"infer of {len(x)} rows: no device is left in the pool")
        for b in boards:
            assert f"{b.url}: dropped during infer (rows " in text
            assert b.url in error.reasons
        assert "LinkError" in text
        with pytest.raises(NoDeviceLeft, match="no device is left"):
            p.infer(x[:5])
        with pytest.raises(NoDeviceLeft, match="load: no device is left"):
            p.load(program)


# -- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("devices", "error", "message"), [
    ([], ValueError, "needs at least one device (a pyserial URL or an Accelerator); got none"),
    ((), ValueError, "got none"),
    ("socket://127.0.0.1:1", TypeError, "not one str (write ['socket://127.0.0.1:1'])"),
    (None, TypeError, "not NoneType"),
    ([1234], TypeError, "devices[0] is a int (1234); allowed: a pyserial URL string"),
    (["loop://", "loop://"], ValueError, "devices[1]: loop:// is in the pool twice"),
])
def test_bad_device_lists_are_refused(devices, error, message):
    with pytest.raises(error) as info:
        AcceleratorPool(devices)
    assert message in str(info.value)


def test_a_url_that_cannot_be_opened_is_named_and_the_others_closed(pair):
    with pytest.raises(LinkError, match=r"cannot open socket://127\.0\.0\.1:1"):
        AcceleratorPool([pair[0].url, "socket://127.0.0.1:1"], timeout=1)
    assert reconnects(pair[0].url)


def test_devices_of_different_configurations_are_refused(pair, module_board_factory):
    other = module_board_factory(OS)
    _, program = network(WS, 9, widths=[4, 4])
    with AcceleratorPool([pair[0].url, other.url]) as p:
        sent = [acc.bytes_sent for acc in p.devices]
        with pytest.raises(IncompatibleDevice) as info:
            p.load(program)
        text = str(info.value)
        assert "different configurations" in text
        assert f"{pair[0].url}: {WS.hash}" in text and f"{other.url}: {OS.hash}" in text
        assert [acc.bytes_sent for acc in p.devices] == sent  # nothing written
        assert p.program is None
    with pytest.raises(IncompatibleDevice) as info:
        AcceleratorPool([pair[0].url, other.url], config=WS)
    assert OS.hash in str(info.value) and WS.hash in str(info.value)
    assert reconnects(pair[0].url)  # the pool that failed to open closed what it had opened
    with Accelerator(other.url) as acc, pytest.raises(IncompatibleDevice, match=other.url):
        AcceleratorPool([acc], config=WS)


def test_a_program_for_another_configuration_is_refused(pool):
    _, program = network(OS, 10, widths=[4, 4])
    with pytest.raises(IncompatibleDevice) as info:
        pool.load(program)
    text = str(info.value)
    assert f"compiled for {OS.name} (config hash {OS.hash})" in text
    assert WS.hash in text and all(url in text for url in pool.urls)
    with pytest.raises(TypeError, match="not int"):
        pool.load(3)


@pytest.mark.parametrize(("x", "message"), [
    (np.zeros((2, 6)), "dtype float64; allowed: an integer dtype"),
    (np.zeros(6, dtype=np.int8), "shape (6,); allowed: (rows, 6) (one row: x.reshape(1, 6))"),
    (np.zeros((2, 5), dtype=np.int8), "shape (2, 5); allowed: (rows, 6)"),
    (np.zeros((2, 6, 1), dtype=np.int8), "shape (2, 6, 1)"),
    (np.full((40, 6), 128), "x[0, 0] = 128 is outside signed in_bits=8 (-128..127)"),
])
def test_wrong_inputs_are_refused_before_sending(pool, x, message):
    _, program = network(WS, 11, widths=[6, 2], batch=8)
    pool.load(program)
    sent = [acc.bytes_sent for acc in pool.devices]
    with pytest.raises(ValueError) as info:
        pool.infer(x)
    assert message in str(info.value)
    assert [acc.bytes_sent for acc in pool.devices] == sent


def test_infer_needs_a_program():
    with AcceleratorPool([InProcessDevice(WS)]) as p, \
            pytest.raises(RuntimeError, match=r"no program is loaded; call load\(program\)"):
        p.infer(np.zeros((1, 3), dtype=np.int8))
