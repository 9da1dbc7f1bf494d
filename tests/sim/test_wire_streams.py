"""LOAD, FETCH and CLASSES on sim.inprocess.InProcessDevice (sim.wire_streams), against
references written from the protocol's definition in another direction: a word's lanes from
their stream positions (LOAD), the stream's elements from words read back with READ (FETCH),
NumPy's stable argsort (CLASSES). The gateware is held to the same answers
(tests/link/test_wire_gateware.py, tests/sim/board/test_wire_board.py)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protocol_helpers import RequestLink, check_memories, fill_regions, random_words
from support import BOARD_WS, TINY

from hwgen.memmap import Region, regions
from hwgen.protocol import (
    Features,
    Opcode,
    Status,
    info_bytes,
    pack_classes,
    pack_fetch,
    pack_load,
    pack_read,
    pack_write,
    packed_bytes,
    stream_lanes,
    unpack_elements,
    unpack_indices,
    unpack_words,
)
from sim.inprocess import InProcessDevice


class DeviceLink(RequestLink):
    def __init__(self, device):
        super().__init__()
        self.device = device

    def send(self, data):
        self.device.write(data)

    def receive(self):
        return self.decoder.feed(self.device.read(1 << 20))


def lanes_of(word, lanes, bits):
    out = []
    for i in range(lanes):
        v = (word >> (i * bits)) & ((1 << bits) - 1)
        out.append(v - (1 << bits) if v >> (bits - 1) else v)
    return out


def expected_words(shape, values, lanes, lane_bits):
    """Each word's lanes from their stream positions: position E is run E // pitch's element
    E % pitch - lead if that is in 0 .. run - 1, else 0."""
    runs, run, lead, pitch = shape
    words = []
    for w in range(-(-runs * pitch // lanes)):
        word = 0
        for i in range(lanes):
            e = w * lanes + i
            j, off = divmod(e, pitch)
            off -= lead
            value = values[j * run + off] if j < runs and 0 <= off < run else 0
            word |= (value & ((1 << lane_bits) - 1)) << (i * lane_bits)
        words.append(word)
    return words


@st.composite
def stream_shapes(draw, lanes, depth):
    """``(runs, run, lead, pitch)`` of at most 200 elements that fit ``depth`` words."""
    most = min(200, depth * lanes)
    run = draw(st.integers(1, min(20, most)))
    lead = draw(st.integers(0, min(6, most - run)))
    pitch = draw(st.integers(lead + run, min(most, lead + run + 2 * lanes)))
    runs = draw(st.integers(1, most // pitch))
    return runs, run, lead, pitch


@pytest.mark.parametrize("config", [BOARD_WS, TINY], ids=["ws", "tiny"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_load_writes_the_streams_words(config, data):
    lanes, lane_bits = stream_lanes(config, Region.ACT)
    act = regions(config)[Region.ACT]
    shape = data.draw(stream_shapes(lanes, act.depth))
    bits = data.draw(st.integers(1, lane_bits))
    runs, run, lead, pitch = shape
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), runs * run).tolist()
    link = DeviceLink(InProcessDevice(config))
    addr = data.draw(st.integers(0, act.depth - len(expected_words(shape, values, lanes,
                                                                   lane_bits))))
    before = random_words(rng, act, 2)
    link.ok(Opcode.WRITE, pack_write(act, act.depth - 2, before))
    link.ok(Opcode.LOAD, pack_load(Region.ACT, addr, values, runs=runs, run=run, lead=lead,
                                   pitch=pitch, bits=bits))
    words = expected_words(shape, values, lanes, lane_bits)
    got = unpack_words(act, link.ok(Opcode.READ, pack_read(act, addr, len(words))))
    assert got == words
    if addr + len(words) <= act.depth - 2:  # words after the stream keep their values
        tail = unpack_words(act, link.ok(Opcode.READ, pack_read(act, act.depth - 2, 2)))
        assert tail == before


@pytest.mark.parametrize("region", [Region.ACT, Region.OUTPUT])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_fetch_answers_the_runs_low_bits(region, data):
    config = BOARD_WS
    lanes, lane_bits = stream_lanes(config, region)
    geometry = regions(config)[region]
    runs, run, lead, pitch = data.draw(stream_shapes(lanes, geometry.depth))
    bits = data.draw(st.integers(1, lane_bits))
    link = DeviceLink(InProcessDevice(config))
    count = -(-runs * pitch // lanes)
    addr = data.draw(st.integers(0, geometry.depth - count))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    link.ok(Opcode.WRITE, pack_write(geometry, addr, random_words(rng, geometry, count)))
    words = unpack_words(geometry, link.ok(Opcode.READ, pack_read(geometry, addr, count)))
    stream = [v for w in words for v in lanes_of(w, lanes, lane_bits)]
    expect = []
    for j in range(runs):
        for i in range(run):
            low = stream[j * pitch + lead + i] & ((1 << bits) - 1)
            expect.append(low - (1 << bits) if low >> (bits - 1) else low)
    raw = link.ok(Opcode.FETCH, pack_fetch(region, addr, runs=runs, run=run, lead=lead,
                                           pitch=pitch, bits=bits))
    assert len(raw) == packed_bytes(runs * run, bits)
    assert unpack_elements(raw, bits, runs * run).tolist() == expect


@pytest.mark.parametrize("n", [1, 5, 10, 300])
def test_classes_match_numpy_argsort(n):
    config = BOARD_WS
    cols, acc_bits = config.cols, config.acc_bits
    out = regions(config)[Region.OUTPUT]
    rng = np.random.default_rng(n)
    wps = -(-n // cols)
    samples = min(4, out.depth // wps)
    link = DeviceLink(InProcessDevice(config))
    for spread in (3, 1 << (acc_bits - 1)):   # many ties, then the full range
        scores = rng.integers(-spread, spread, (samples, wps * cols))
        words = [sum((int(v) & ((1 << acc_bits) - 1)) << (i * acc_bits)
                     for i, v in enumerate(scores[s, w * cols:(w + 1) * cols]))
                 for s in range(samples) for w in range(wps)]
        link.write_region(out, 0, words)
        for k in sorted({1, min(3, n), min(n, 100)}):
            raw = link.ok(Opcode.CLASSES, pack_classes(0, samples, wps * cols, n, k))
            expect = np.argsort(-scores[:, :n], axis=1, kind="stable")[:, :k]
            assert (unpack_indices(raw, samples, k, n) == expect).all(), (spread, k)


def test_without_features_the_commands_are_unknown():
    link = DeviceLink(InProcessDevice(BOARD_WS, features=Features.CLASSES, rx_fifo=512))
    assert link.ok(Opcode.INFO) == info_bytes(BOARD_WS, rx_fifo=512, features=Features.CLASSES)
    fetch = pack_fetch(Region.ACT, 0, runs=1, run=1, bits=2)
    assert link.request(Opcode.FETCH, fetch).status == Status.BAD_OPCODE
    assert link.request(Opcode.CLASSES, pack_classes(0, 1, 4, 4, 1)).status == Status.OK
    link = DeviceLink(InProcessDevice(BOARD_WS, features=Features.PACKED))
    assert link.request(Opcode.CLASSES, pack_classes(0, 1, 4, 4, 1)).status == Status.BAD_OPCODE
    assert link.request(Opcode.FETCH, fetch).status == Status.OK


def test_a_failed_load_writes_nothing():
    config = BOARD_WS
    link = DeviceLink(InProcessDevice(config))
    contents = fill_regions(link, config, np.random.default_rng(5))
    lanes = config.act_lanes
    act = regions(config)[Region.ACT]
    bad = pack_load(Region.ACT, act.depth - 1, [1] * (lanes + 1), runs=1, run=lanes + 1,
                    bits=2)
    assert link.request(Opcode.LOAD, bad).status == Status.BAD_ADDRESS
    check_memories(link, config, contents)
