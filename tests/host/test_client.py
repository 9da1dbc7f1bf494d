"""host.client.DeviceClient against the frame engine in the simulator, and against scripted ports.

:class:`SimPort` is a pyserial-like port whose far end is :class:`hwgen.link.frame.FrameEngine`
with the behavioural accelerator of ``tests/support/frame_bench.py``, run in the Amaranth
simulator: bytes written go into the simulated link, and ``read`` runs the simulation until the
bytes are there or a cycle budget is spent. :class:`ScriptedPort` answers from a small Python
device model with faults injected on request, for the retry and timeout paths.
"""

import random
import time

import numpy as np
import pytest
import serial
from amaranth.sim import Simulator
from protocol_helpers import pack_info
from support import TINY, LinkDriver, rows_per_run
from support import build_frame_bench as build

from host.client import BusyTimeout, DeviceClient, DeviceError, LinkError, LinkTimeout
from host.frames import RequestDecoder
from host.info import DeviceInfo
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    MAX_PAYLOAD,
    CounterValues,
    Opcode,
    Status,
    encode_response,
    pack_counters,
    pack_words,
    unpack_access,
    unpack_run,
    unpack_words,
)
from sim.inprocess import InProcessDevice

SIM_BUSY_CYCLES = 1500


class SimPort:
    """A port whose far end is the frame engine in the Amaranth simulator.

    ``corrupt_response(offset)`` flips a bit of the byte ``offset`` bytes into the next response
    on its way to the host; ``corrupt_request(offset)`` does the same to the next request on its
    way to the device.
    """

    STEP = 16  # cycles simulated at a time while waiting for bytes

    def __init__(self, config=TINY, *, budget=3000, gap=0.2, stall=0.2, **kwargs):
        self.top, self.engine, self.target, link = build(config, **kwargs)
        self.driver = LinkDriver(link, gap, stall)
        self.timeout = None
        self.budget = budget
        self.starts = 0  # programs the accelerator started, updated as the simulation runs
        self.requests = []  # every frame written, as the host sent it
        self._pending = bytearray()
        self._cycle = 0
        self._flip_rx = None
        self._flip_tx = None
        self._rx_mark = 0
        self._sim = Simulator(self.top)
        self._sim.add_clock(1e-6)
        self._sim.add_testbench(self.driver.receiver, background=True)
        self._sim.add_testbench(self._feeder, background=True)

    async def _feeder(self, ctx):
        self.driver.setup(ctx)
        while True:
            if self._pending:
                self.driver.push(ctx, bytes(self._pending))
                self._pending.clear()
            self.starts = ctx.get(self.target.starts)
            await ctx.delay(8e-6)

    def corrupt_response(self, offset):
        self._flip_rx = self._rx_mark + offset

    def corrupt_request(self, offset):
        self._flip_tx = offset

    def write(self, data):
        self.requests.append(bytes(data))
        data = bytearray(data)
        if self._flip_tx is not None:
            data[self._flip_tx] ^= 0x04
            self._flip_tx = None
        self._pending += data
        return len(data)

    def _advance(self, cycles):
        self._cycle += cycles
        self._sim.run_until(self._cycle * 1e-6)

    def read(self, n):
        rx = self.driver.rx
        spent = 0
        while len(rx) < n and spent < self.budget:
            self._advance(self.STEP)
            spent += self.STEP
        out = bytearray(rx[:n])
        del rx[:n]
        if self._flip_rx is not None and self._flip_rx < self._rx_mark + len(out):
            out[self._flip_rx - self._rx_mark] ^= 0x04
            self._flip_rx = None
        self._rx_mark += len(out)
        return bytes(out)

    def settle(self, cycles=2000):
        """Let the simulation run (e.g. until a lost answer would have arrived)."""
        self._advance(cycles)
        self._rx_mark += len(self.driver.rx)
        self.driver.rx.clear()


@pytest.fixture
def sim_port():
    return SimPort(max_payload=48, busy_cycles=SIM_BUSY_CYCLES, timeout_cycles=500)


def random_words(rng, geometry, count):
    return [rng.getrandbits(geometry.word_bits) for _ in range(count)]


# -- against the simulated gateware --------------------------------------------------------------

def test_sim_info_and_config_check(sim_port):
    client = DeviceClient(sim_port, timeout=5.0)
    info = client.info()
    assert info == DeviceInfo.from_config(TINY, 48)
    client.check_config(TINY)
    with pytest.raises(ValueError, match="config_hash"):
        client.check_config(TINY.__class__(**{**TINY.to_dict(), "acc_depth": 4}))


def test_sim_write_read_every_region_chunked(sim_port):
    client = DeviceClient(sim_port, timeout=5.0)
    rng = random.Random(1)
    model = {}
    for region, g in regions(TINY).items():
        words = random_words(rng, g, g.depth)
        client.write(region, 0, words if region != Region.ACT else np.array(words))
        model[region] = words
    for region, g in regions(TINY).items():
        got = client.read(region, 0, g.depth)
        assert [int(w) for w in got] == model[region], region
        assert got.dtype == (np.uint64 if g.word_bits <= 64 else object)
    # ACT is 32 words of 3 bytes: 96 bytes, more than the 48-byte payload buffer, so the client
    # had to split it; every frame it sent fits the buffer.
    assert all(len(r) - 10 <= 48 for r in sim_port.requests)
    writes = [unpack_access(r[8:-2]) for r in sim_port.requests if r[1] == Opcode.WRITE.value]
    act = [(addr, count) for region, addr, count, _ in writes if region == Region.ACT]
    assert act == [(0, 13), (13, 13), (26, 6)]
    assert client.read(Region.ACT, 30, 2).tolist() == model[Region.ACT][30:]


def test_sim_run_counters_reset(sim_port):
    client = DeviceClient(sim_port, timeout=5.0)
    with pytest.raises(DeviceError, match=r"RUN batch=2 failed: NO_PROGRAM"):
        client.run(2)
    client.write(Region.PROGRAM, 0, [123])
    client.run(2)
    assert client.counters().busy
    with pytest.raises(DeviceError, match="BUSY"):
        client.run(1)
    with pytest.raises(DeviceError, match=r"READ ACT\[0:1\] failed: BUSY"):
        client.read(Region.ACT, 0, 1)
    done = client.wait_idle(timeout=30)
    rows = rows_per_run(SIM_BUSY_CYCLES)
    assert (done.busy, done.runs, done.cycles, done.busy_cycles) == (False, 1, SIM_BUSY_CYCLES,
                                                                     rows)
    assert done.macs == rows * TINY.rows * TINY.cols
    assert sim_port.starts == 1
    client.reset()
    after = client.counters()
    assert (after.runs, after.program_loaded) == (0, False)
    assert (after.cycles, after.busy_cycles, after.macs) == (0, 0, 0)
    with pytest.raises(DeviceError, match="NO_PROGRAM"):
        client.run(1)
    assert client.read(Region.PROGRAM, 0, 1).tolist() == [123]  # memory stays


def test_sim_damaged_read_answer_is_retried(sim_port):
    client = DeviceClient(sim_port, timeout=5.0)
    client.write(Region.WEIGHT, 4, [0xABCDEF, 0x123456])
    sim_port.corrupt_response(9)  # a payload byte: the payload CRC fails
    assert client.read(Region.WEIGHT, 4, 2).tolist() == [0xABCDEF, 0x123456]
    assert client.stats["retries"] == 1 and client.stats["corrupt"] == 1


def test_sim_damaged_write_request_is_resent(sim_port):
    client = DeviceClient(sim_port, timeout=5.0)
    client.info()
    sim_port.corrupt_request(16)  # a word byte: the device answers BAD_CRC and writes nothing
    client.write(Region.OUTPUT, 1, [5, 6])
    # The damaged frame goes again halved: a WRITE of each word.
    writes = [unpack_access(r[8:-2])[1:3] for r in sim_port.requests
              if r[1] == Opcode.WRITE.value]
    assert writes == [(1, 2), (1, 1), (2, 1)]
    assert client.plan.damage == {"bad_crc": 1}
    assert client.read(Region.OUTPUT, 0, 4).tolist() == [0, 5, 6, 0]


def test_sim_damaged_run_answer_is_not_resent(sim_port):
    client = DeviceClient(sim_port, timeout=5.0)
    client.write(Region.PROGRAM, 0, [1])
    client.counters()
    sim_port.corrupt_response(9)  # the RUN answer's payload CRC
    client.run(3)  # the client asks the device instead of starting a second run
    assert sum(r[1] == Opcode.RUN.value for r in sim_port.requests) == 1
    client.wait_idle(timeout=30)
    assert sim_port.starts == 1


def test_sim_damaged_run_request_is_resent(sim_port):
    client = DeviceClient(sim_port, timeout=5.0)
    client.write(Region.PROGRAM, 0, [1])
    client.counters()
    sim_port.corrupt_request(8)  # RUN's payload: the device answers BAD_CRC and does nothing
    client.run(3)
    assert sum(r[1] == Opcode.RUN.value for r in sim_port.requests) == 2
    client.wait_idle(timeout=30)
    assert sim_port.starts == 1


def test_sim_lost_run_request_is_resent():
    # A damaged header gets no answer at all: the client times out, finds that the run count did
    # not move, and sends RUN again.
    port = SimPort(timeout_cycles=200, busy_cycles=SIM_BUSY_CYCLES)
    client = DeviceClient(port, timeout=0.5)
    client.write(Region.PROGRAM, 0, [1])
    client.counters()
    port.corrupt_request(3)
    client.run(1)
    assert sum(r[1] == Opcode.RUN.value for r in port.requests) == 2
    client.wait_idle(timeout=30)
    assert port.starts == 1


# -- a scripted device ---------------------------------------------------------------------------

class PyDevice:
    """A plain Python device: memories, a RUN that stays busy for ``busy_polls`` COUNTERS."""

    def __init__(self, config=TINY, max_payload=MAX_PAYLOAD, busy_polls=2):
        self.info = DeviceInfo.from_config(config, max_payload)
        self.geometry = regions(config)
        self.mem = {r: [0] * g.depth for r, g in self.geometry.items()}
        self.busy_polls = busy_polls
        self.busy = 0
        self.runs = 0
        self.starts = 0
        self.loaded = False
        self.handled = []
        self.frames = []

    def answer(self, frame):
        """Return ``(status, payload)`` for a request frame."""
        self.handled.append(frame.opcode)
        self.frames.append(frame)
        return getattr(self, f"_{frame.opcode.name.lower()}")(frame.payload)

    def _info(self, payload):
        return Status.OK, pack_info(self.info)

    def _counters(self, payload):
        busy = self.busy > 0
        self.busy = max(0, self.busy - 1)
        return Status.OK, pack_counters(CounterValues(busy, self.loaded, self.runs, 1, 2, 3))

    def _reset(self, payload):
        self.runs, self.loaded = 0, False
        return Status.OK, b""

    def _run(self, payload):
        if self.busy:
            return Status.BUSY, b""
        if not self.loaded:
            return Status.NO_PROGRAM, b""
        assert 1 <= unpack_run(payload) <= self.info.acc_depth
        self.busy, self.runs, self.starts = self.busy_polls, self.runs + 1, self.starts + 1
        return Status.OK, b""

    def _access(self, payload):
        region, addr, count, rest = unpack_access(payload)
        geometry = self.geometry[region]
        assert count > 0 and addr + count <= geometry.depth
        return geometry, addr, count, rest

    def _write(self, payload):
        assert len(payload) <= self.info.max_payload
        geometry, addr, count, rest = self._access(payload)
        self.mem[geometry.region][addr:addr + count] = unpack_words(geometry, rest)
        self.loaded |= geometry.region == Region.PROGRAM
        return Status.OK, b""

    def _read(self, payload):
        geometry, addr, count, _ = self._access(payload)
        assert count * geometry.word_bytes <= self.info.max_payload
        return Status.OK, pack_words(geometry, self.mem[geometry.region][addr:addr + count])


class ScriptedPort:
    """A port in front of a :class:`PyDevice`.

    ``faults`` maps the index of a request (0, 1, ... in the order received) to what happens to
    it: ``"drop"`` (no answer), ``"corrupt"`` (payload CRC of the answer damaged), ``"stale"``
    (an answer with another sequence number first), ``"drop-request"`` (the device never sees
    it).
    """

    def __init__(self, device, faults=None):
        self.device = device
        self.faults = faults or {}
        self.timeout = None
        self.count = 0
        self._decoder = RequestDecoder()
        self._out = bytearray()

    def write(self, data):
        for frame in self._decoder.feed(data):
            fault = self.faults.get(self.count)
            self.count += 1
            if fault == "drop-request":
                continue
            status, payload = self.device.answer(frame)
            raw = bytearray(encode_response(frame.opcode, frame.seq, status, payload))
            if fault == "stale":
                self._out += encode_response(frame.opcode, (frame.seq - 1) & 0xFF, Status.OK,
                                             payload)
            if fault == "corrupt":
                raw[-1] ^= 0x01
            if fault != "drop":
                self._out += raw
        return len(data)

    def read(self, n):
        if not self._out:
            time.sleep(self.timeout)  # a real port would wait this long for nothing
        out = bytes(self._out[:n])
        del self._out[:n]
        return out


def client_for(faults=None, **kwargs):
    device = PyDevice(**kwargs)
    port = ScriptedPort(device, faults)
    return DeviceClient(port, timeout=0.2, retries=2), device, port


def test_corrupt_answer_is_retried():
    client, device, _ = client_for({1: "corrupt"})
    client.write(Region.ACT, 0, [1, 2, 3])  # request 0: INFO, request 1: the WRITE
    assert client.stats == {"retries": 1, "discarded": 0, "corrupt": 1}
    assert device.mem[Region.ACT][:4] == [1, 2, 3, 0]


def test_stale_answer_is_discarded():
    client, _, _ = client_for({0: "stale"})
    assert client.info().rows == TINY.rows
    assert client.stats == {"retries": 0, "discarded": 1, "corrupt": 0}


def test_lost_answer_is_retried():
    client, device, _ = client_for({1: "drop"})
    client.write(Region.WEIGHT, 2, [7])
    # The link has lost a frame lately: a probe (COUNTERS) follows the WRITE sent again.
    assert device.handled == [Opcode.INFO, Opcode.WRITE, Opcode.WRITE, Opcode.COUNTERS]
    assert client.stats["retries"] == 1


def test_only_damaged_answers_raise_link_error():
    # retries=2: 16 * 3 damaged answers in a row are a dead link; the READ went in halves.
    client, _, _ = client_for(dict.fromkeys(range(1, 100), "corrupt"))
    client.info()
    with pytest.raises(LinkError, match=r"^no intact answer to READ WEIGHT\[0:2\] in 48 "
                                        r"attempts in a row \(pieces of 6, 3 data bytes tried\); "
                                        r"damage seen: 48 damaged answers$"):
        client.read(Region.WEIGHT, 0, 2)


def test_a_damaged_piece_alone_goes_again_in_halves():
    """Of a WRITE of 8 words whose first attempt is damaged, halves go, then a half's halves
    where it is damaged again; the words all land, and the link's payload size is halved until
    intact answers grow it back."""
    # Requests 3 and 5 are the probes (COUNTERS) behind each half on a link that damages.
    client, device, _ = client_for({1: "corrupt", 4: "corrupt"})
    client.write(Region.ACT, 0, list(range(1, 9)))
    counts = [unpack_access(frame.payload)[2] for frame in device.frames
              if frame.opcode == Opcode.WRITE]
    # 8 (damaged) -> its halves 4 and 4 (damaged again) -> the second one's halves, 2 and 2.
    assert counts == [8, 4, 4, 2, 2]
    assert device.mem[Region.ACT][:8] == list(range(1, 9))
    assert client.plan.damage == {"damaged": 2} and client.plan.limit < MAX_PAYLOAD


def test_silent_port_raises_link_timeout_naming_the_request():
    port = serial.serial_for_url("loop://", timeout=0.05)  # the client hears only its own echo
    client = DeviceClient(port, timeout=0.2, retries=1)
    start = time.monotonic()
    with pytest.raises(LinkTimeout, match=r"no answer to INFO within 0\.2 s, 2 attempt") as error:
        client.info()
    assert isinstance(error.value, TimeoutError)
    assert time.monotonic() - start < 10   # gave up: two attempts, not an endless wait


def test_device_error_names_request_status_and_meaning():
    client, _, _ = client_for()
    with pytest.raises(DeviceError) as error:
        client.run(1)
    assert error.value.status == Status.NO_PROGRAM
    assert str(error.value) == ("RUN batch=1 failed: NO_PROGRAM (RUN before any WRITE to the "
                                "PROGRAM region since reset)")


def test_chunking_at_default_max_payload():
    config = TINY.__class__(**{**TINY.to_dict(), "act_depth": 1000})
    client, device, port = client_for(config=config)
    words = np.arange(1000, dtype=np.int64) * 7919 % (1 << 24)
    client.write(Region.ACT, 0, words)
    per_write = (MAX_PAYLOAD - 7) // 3
    assert device.handled.count(Opcode.WRITE) == -(-1000 // per_write)
    assert device.mem[Region.ACT] == words.tolist()
    back = client.read(Region.ACT, 0, 1000)
    assert device.handled.count(Opcode.READ) == -(-1000 // (MAX_PAYLOAD // 3))
    assert np.array_equal(back, words.astype(np.uint64))
    del port


def test_run_answer_lost_but_started():
    client, device, _ = client_for({3: "drop"}, config=TINY)
    client.write(Region.PROGRAM, 0, [1])  # requests 0 (INFO) and 1 (WRITE)
    client.run(1)  # request 2: COUNTERS (first run), 3: RUN with its answer lost, 4: COUNTERS
    assert device.starts == 1   # (5: the probe behind 4 on a link that has lost a frame)
    assert device.handled[2:] == [Opcode.COUNTERS, Opcode.RUN, Opcode.COUNTERS, Opcode.COUNTERS]


def test_run_request_lost_is_resent():
    client, device, _ = client_for({3: "drop-request"})
    client.write(Region.PROGRAM, 0, [1])
    client.run(1)
    assert device.starts == 1   # the lost RUN's check (COUNTERS) and its probe, then the RUN
    assert device.handled[2:] == [Opcode.COUNTERS, Opcode.COUNTERS, Opcode.COUNTERS, Opcode.RUN]


def test_run_count_moved_unexpectedly():
    client, device, _ = client_for({3: "drop"})
    client.write(Region.PROGRAM, 0, [1])
    client.counters()
    device.runs += 5  # someone else ran programs meanwhile
    with pytest.raises(LinkError, match="cannot tell whether this RUN started"):
        client.run(1)


def test_wait_idle():
    client, device, _ = client_for(busy_polls=3)
    client.write(Region.PROGRAM, 0, [1])
    client.run(1)
    assert client.wait_idle(timeout=5, interval=0).busy is False
    device.busy = 10**6
    with pytest.raises(BusyTimeout, match=r"still busy after 0\.05 s"):
        client.wait_idle(timeout=0.05, interval=0.01)


def test_range_checks_send_nothing():
    client, device, port = client_for()
    client.info()
    sent = port.count
    with pytest.raises(ValueError, match=r"WRITE ACT\[30:33\]: 3 words at 30 run past the "
                                         r"region's depth of 32 words"):
        client.write(Region.ACT, 30, [1, 2, 3])
    with pytest.raises(ValueError, match=r"word 1 = 16777216 does not fit ACT words of 24 bits"):
        client.write(Region.ACT, 0, [1, 1 << 24])
    with pytest.raises(ValueError, match="region 9 is none of PROGRAM"):
        client.write(9, 0, [1])
    with pytest.raises(ValueError, match="addr must be an int >= 0"):
        client.read(Region.ACT, -1, 1)
    with pytest.raises(ValueError, match="count must be an int >= 0"):
        client.read(Region.ACT, 0, -1)
    with pytest.raises(ValueError, match=r"batch must be an int in 1..8"):
        client.run(0)
    with pytest.raises(ValueError, match="1-D"):
        client.write(Region.ACT, 0, [[1, 2]])
    assert port.count == sent
    assert device.mem[Region.ACT] == [0] * 32


def test_client_parameter_checks():
    port = ScriptedPort(PyDevice())
    with pytest.raises(ValueError, match="timeout"):
        DeviceClient(port, timeout=0)
    with pytest.raises(ValueError, match="retries"):
        DeviceClient(port, retries=-1)


def test_client_over_a_url_and_over_the_in_process_device():
    client = DeviceClient("loop://", timeout=0.2, retries=0)  # opened from the URL
    with pytest.raises(LinkTimeout, match="no answer to INFO"):
        client.info()
    client.close()
    assert not client.port.is_open
    device = InProcessDevice(TINY)
    client = DeviceClient(device, timeout=1.0)
    assert client.url == device.url and client.info() == DeviceInfo.from_config(TINY)
    words = [3, 1 << 23, 7]
    client.write(Region.ACT, 29, words)
    assert client.read(Region.ACT, 29, 3).tolist() == words
    with pytest.raises(DeviceError, match="NO_PROGRAM"):
        client.run(1)
    client.close()  # not the client's to close
    assert client.counters().runs == 0
    with pytest.raises(TypeError, match="allowed: a pyserial URL string or an object with read"):
        DeviceClient(object())
