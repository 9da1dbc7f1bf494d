"""The simulated board (the device's Verilog under Verilator, over TCP) answers LOAD, FETCH and
CLASSES byte for byte as sim.inprocess.InProcessDevice answers the same requests, on random
streams over memories filled alike; CLASSES also equals NumPy's stable argsort of the scores.
(Its malformed requests are protocol_helpers.error_cases', in test_process.py.)"""

import random
import select
import socket
import time

import numpy as np
import pytest
from protocol_helpers import RequestLink, random_words
from support import BOARD_WS as WS
from support import host_port
from support import started_board as started

from hwgen.memmap import Region, regions
from hwgen.protocol import (
    Opcode,
    Status,
    pack_classes,
    pack_fetch,
    pack_load,
    pack_write,
    stream_lanes,
    stream_words,
    unpack_indices,
    write_chunk_words,
)
from sim.inprocess import InProcessDevice


class _Twin(RequestLink):
    """Each request to the board over TCP and to an InProcessDevice; the answers must be the
    same bytes."""

    def __init__(self, url):
        super().__init__()
        self.sock = socket.create_connection(host_port(url), timeout=10)
        self.model = InProcessDevice(WS)
        self.model_frames = []

    def send(self, data):
        self.sock.sendall(data)
        self.model.write(data)
        self.model_frames += self.decoder.__class__().feed(self.model.read(1 << 20))

    def receive(self):
        frames, deadline = [], time.monotonic() + 20
        while not frames and time.monotonic() < deadline:
            if select.select([self.sock], [], [], 1)[0]:
                chunk = self.sock.recv(65536)
                assert chunk, "the board closed the connection"
                frames += self.decoder.feed(chunk)
        (expect,) = self.model_frames
        self.model_frames = []
        assert [(f.status, f.payload) for f in frames] == [(expect.status, expect.payload)]
        return frames


@pytest.fixture(scope="module")
def twin():
    with started(WS) as board:
        link = _Twin(board.url)
        rng = np.random.default_rng(11)
        for region in (Region.ACT, Region.OUTPUT):
            g = regions(WS)[region]
            words = random_words(rng, g, g.depth)
            chunk = write_chunk_words(g, 1024)
            for a in range(0, g.depth, chunk):
                link.ok(Opcode.WRITE, pack_write(g, a, words[a:a + chunk]))
        yield link
        link.sock.close()


@pytest.mark.parametrize("seed", range(3))
def test_load_and_fetch_as_the_model(twin, seed):
    rng = random.Random(seed)
    for _ in range(10):
        region = rng.choice([Region.ACT, Region.OUTPUT])
        lanes, lane_bits = stream_lanes(WS, region)
        run = rng.randint(1, 24)
        lead = rng.choice([0, rng.randint(1, 5)])
        pitch = lead + run + rng.choice([0, rng.randint(1, 3 * lanes)])
        runs = rng.randint(1, 12)
        bits = rng.randint(1, lane_bits)
        depth = regions(WS)[region].depth
        addr = rng.randint(0, depth - stream_words(runs, pitch, lanes))
        shape = {"runs": runs, "run": run, "lead": lead, "pitch": pitch, "bits": bits}
        if region == Region.ACT and rng.random() < 0.5:
            values = [rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
                      for _ in range(runs * run)]
            twin.ok(Opcode.LOAD, pack_load(region, addr, values, **shape))
        else:
            twin.ok(Opcode.FETCH, pack_fetch(region, addr, **shape))


@pytest.mark.parametrize("n", [1, 4, 10])
def test_classes_as_numpy(twin, n):
    cols, acc_bits = WS.cols, WS.acc_bits
    out = regions(WS)[Region.OUTPUT]
    rng = np.random.default_rng(n)
    wps = -(-n // cols)
    samples = min(16, out.depth // wps)
    scores = rng.integers(-4, 4, (samples, wps * cols))   # many ties
    words = [sum((int(v) & ((1 << acc_bits) - 1)) << (i * acc_bits)
                 for i, v in enumerate(scores[s, w * cols:(w + 1) * cols]))
             for s in range(samples) for w in range(wps)]
    twin.ok(Opcode.WRITE, pack_write(out, 0, words))
    for k in sorted({1, min(3, n), n}):
        raw = twin.ok(Opcode.CLASSES, pack_classes(0, samples, wps * cols, n, k))
        expect = np.argsort(-scores[:, :n], axis=1, kind="stable")[:, :k]
        assert (unpack_indices(raw, samples, k, n) == expect).all()
    frame = twin.request(Opcode.CLASSES, pack_classes(0, samples, wps * cols, n, n + 1))
    assert frame.status == Status.BAD_LENGTH
