"""sim.inprocess.InProcessDevice: the byte protocol served by the program interpreter.

Requests are built with :mod:`hwgen.protocol` and written to the device as bytes; the answers
are decoded with :class:`host.frames.ResponseDecoder`. The malformed requests and their
statuses are the table the simulated board's gateware is held to
(:func:`protocol_helpers.error_cases`), so both devices answer alike. Outputs are compared
with :meth:`hwgen.nn.QuantizedNetwork.forward`, counters with the cycle model.
"""

import time

import numpy as np
import pytest
from protocol_helpers import (
    RequestLink,
    check_memories,
    error_cases,
    fill_regions,
    random_words,
)
from support import BOARD_OS, BOARD_WS

import hwgen
from hwgen.cycles import program_cycles
from hwgen.memmap import Region, regions
from hwgen.protocol import (
    FRAME_OVERHEAD,
    FRAME_TIMEOUT_MS,
    Opcode,
    Status,
    encode_request,
    info_bytes,
    pack_read,
    pack_run,
    pack_write,
    unpack_words,
)
from sim.inprocess import InProcessDevice
from sim.netgen import random_input, random_network

WS = BOARD_WS


class DeviceLink(RequestLink):
    """Raw requests to an in-process device, written as bytes and answered at once."""

    def __init__(self, device):
        super().__init__()
        self.device = device

    def send(self, data):
        self.device.write(data)

    def receive(self):
        return self.decoder.feed(self.device.read(1 << 20))


@pytest.fixture
def link():
    return DeviceLink(InProcessDevice(WS))


@pytest.fixture
def filled(link):
    """Every region filled with random words; returns ``{Region: words}``."""
    return fill_regions(link, WS, np.random.default_rng(7))


def test_info_is_the_configs(link):
    assert link.ok(Opcode.INFO) == info_bytes(WS)
    assert DeviceLink(InProcessDevice(WS, max_payload=100)).ok(Opcode.INFO) == info_bytes(WS, 100)


def test_write_read_round_trip_every_region(link, filled):
    rng = np.random.default_rng(1)
    for region, geometry in regions(WS).items():
        addr = geometry.depth // 3
        words = random_words(rng, geometry, 5)
        link.ok(Opcode.WRITE, pack_write(geometry, addr, words))
        filled[region][addr:addr + 5] = words
    check_memories(link, WS, filled)  # the words landed, and nothing else moved


def test_errors_get_their_status_and_change_nothing(link, filled):
    """Bad CRC, unknown opcode, bad lengths, a region out of range, addresses past the end,
    bad batches, RUN before a program: each its status, no payload, no change."""
    cases = error_cases(WS)
    assert {status for _, _, status in cases} >= {
        Status.BAD_CRC, Status.BAD_OPCODE, Status.BAD_LENGTH, Status.BAD_REGION,
        Status.BAD_ADDRESS, Status.BAD_BATCH, Status.NO_PROGRAM}
    for name, request, status in cases:
        frame = link.request(None, raw=request)
        assert (frame.status, frame.payload) == (status, b""), name
        assert link.ok(Opcode.INFO) == info_bytes(WS), f"after {name}"
    counters = link.counters()
    assert (counters.runs, counters.program_loaded, counters.busy) == (0, False, False)
    assert (counters.cycles, counters.busy_cycles, counters.macs) == (0, 0, 0)
    check_memories(link, WS, filled)


def test_a_longer_write_than_the_payload_buffer_is_bad_length():
    link = DeviceLink(InProcessDevice(WS, max_payload=64))
    act = regions(WS)[Region.ACT]
    words = list(range(30))  # 7 + 30 * 3 bytes: more than 64
    frame = link.request(Opcode.WRITE, pack_write(act, 0, words))
    assert frame.status == Status.BAD_LENGTH
    assert unpack_words(act, link.ok(Opcode.READ, pack_read(act, 0, 20))) != words[:20]


def test_garbage_is_skipped_and_a_bad_header_gets_no_answer(link, filled):
    rng = np.random.default_rng(3)
    garbage = bytearray(rng.bytes(3000))
    garbage[::97] = b"\xa5" * len(garbage[::97])  # plenty of false sync bytes
    link.send(bytes(garbage) + bytes(FRAME_OVERHEAD))
    assert link.receive() == [], "garbage was answered"
    request = bytearray(encode_request(Opcode.INFO, 60))
    request[6] ^= 0x01
    link.send(bytes(request))
    assert link.receive() == []
    assert link.ok(Opcode.INFO) == info_bytes(WS)
    check_memories(link, WS, filled)


@pytest.mark.parametrize("cut", [1, 9, -1])
def test_a_partial_frame_times_out(link, filled, cut):
    act = regions(WS)[Region.ACT]
    link.send(encode_request(Opcode.WRITE, 50, pack_write(act, 0, list(range(1, 9))))[:cut])
    time.sleep(1.5 * FRAME_TIMEOUT_MS / 1000)
    assert link.ok(Opcode.INFO) == info_bytes(WS)
    assert link.receive() == []
    check_memories(link, WS, filled)


def test_bytes_may_come_in_any_pieces(link):
    frames = encode_request(Opcode.INFO, 1) + encode_request(Opcode.COUNTERS, 2)
    answers = []
    for i in range(0, len(frames), 3):
        link.send(frames[i:i + 3])
        answers += link.receive()
    assert [(f.seq, f.status) for f in answers] == [(1, Status.OK), (2, Status.OK)]


@pytest.mark.parametrize("config", [WS, BOARD_OS], ids=["ws", "os"])
def test_run_is_exact_and_counted_as_the_cycle_model_says(config):
    """RUN runs the program to its end before answering: the device is never busy (so BUSY,
    which the gateware answers to a request during a run, never applies)."""
    link = DeviceLink(InProcessDevice(config))
    rng = np.random.default_rng(5)
    net = random_network(rng, config, max_width=12)
    program = hwgen.compile(net, config, batch=6)
    geometry = regions(config)
    for region, (base, words) in program.images.items():
        link.write_region(geometry[region], base, [int(w) for w in words])
    assert link.counters().program_loaded
    total = 0
    for m in (6, 2):
        x = random_input(rng, config, m, net.in_features)
        link.write_region(geometry[Region.ACT], program.input.base,
                          [int(w) for w in program.pack_input(x)])
        link.ok(Opcode.RUN, pack_run(m))
        counters = link.counters()
        assert not counters.busy
        total += program_cycles(program, m)
        region, base, count = program.output_words(m)
        words = unpack_words(geometry[region], link.ok(
            Opcode.READ, pack_read(geometry[region], base, count)))
        np.testing.assert_array_equal(program.unpack_output(words, m), net.forward(x))
    assert (counters.runs, counters.cycles) == (2, total)
    assert counters.macs == 8 * program.padded_macs_per_row
    assert counters.busy_cycles * config.rows * config.cols == counters.macs
    link.ok(Opcode.RESET)
    counters = link.counters()
    assert (counters.runs, counters.cycles, counters.macs, counters.program_loaded) == \
        (0, 0, 0, False)
    assert link.request(Opcode.RUN, pack_run(1)).status == Status.NO_PROGRAM


def test_closed_device_refuses_reads_and_writes():
    device = InProcessDevice(WS)
    device.close()
    with pytest.raises(ConnectionError, match=r"inprocess://\d+ is closed"):
        device.write(encode_request(Opcode.INFO, 1))


def test_arguments_are_checked():
    with pytest.raises(TypeError, match="config must be an AcceleratorConfig"):
        InProcessDevice({"rows": 2})
    with pytest.raises(ValueError, match=r"max_payload must be an int in \d+\.\.65535"):
        InProcessDevice(WS, max_payload=3)
    a, b = InProcessDevice(WS), InProcessDevice(WS)
    assert a.url != b.url and a.synchronous
