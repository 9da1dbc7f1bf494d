"""WRITEs behind READs: a device without LOAD and FETCH whose receive FIFO holds a WRITE (the
iCEBreaker's) gets the next chunk's input while the last chunk's output streams out, over a
real socket, with answers equal to hwgen.nn's and the bytes the model counts."""

import numpy as np
import pytest
from support.tcp_device import TcpDevice

import hwgen
from host import Accelerator
from host.frames import ResponseDecoder
from hwgen.boards import BOARDS, board_config
from hwgen.protocol import RX_FIFO, SYNC_REQUEST, Features, Opcode
from sim.netgen import random_input, random_network


class Recorder:
    """A port that passes everything to ``port`` and notes, for each request frame written,
    its opcode and how many READs were then still unanswered (answers decoded so far)."""

    def __init__(self, port):
        self.port = port
        self.decoder = ResponseDecoder()
        self.reads_sent = 0
        self.reads_answered = 0
        self.writes = []     # READs in flight as each WRITE went out

    def write(self, data):
        # (a driver's zeros after a lost answer are no request)
        opcode = Opcode(data[1]) if len(data) > 1 and data[0] == SYNC_REQUEST else None
        if opcode == Opcode.WRITE:
            self.writes.append(self.reads_sent - self.reads_answered)
        self.reads_sent += opcode == Opcode.READ
        return self.port.write(data)

    def read(self, size=1):
        data = self.port.read(size)
        for frame in self.decoder.feed(data):
            self.reads_answered += frame.opcode == Opcode.READ
        return data

    def __getattr__(self, name):
        return getattr(self.port, name)


@pytest.mark.parametrize("rx_fifo", [1024, RX_FIFO])
def test_writes_go_behind_reads_when_the_fifo_holds_one(rx_fifo):
    board = BOARDS["icebreaker"]
    config = board_config(board)
    assert board.implementation.rx_fifo == 1024 and not board.implementation.packed_wire
    rng = np.random.default_rng(5)
    net = random_network(rng, config, widths=[64, 32, 10], raw=True)
    program = hwgen.compile(net, config, output="argmax")
    assert program.batch == 64
    x = random_input(rng, config, 3 * program.batch, 64)
    with TcpDevice(config, features=Features.NONE, rx_fifo=rx_fifo) as device, \
            Accelerator(device.url, config=config) as acc:
        assert acc.info.rx_fifo == rx_fifo
        acc.load(program)
        recorder = Recorder(acc.client.port)
        acc.client.port = recorder
        got = acc.infer(x)
    np.testing.assert_array_equal(got, np.argmax(net.forward(x), axis=1))
    # The first chunk's WRITEs go alone; the next two chunks' go behind READs (five WRITEs
    # each) when the FIFO holds a WRITE; a 64-byte one does not: each answer is read first.
    ahead = sum(n > 0 for n in recorder.writes)
    assert len(recorder.writes) == 3 * 5
    assert ahead == (2 * 3 if rx_fifo == 1024 else 0), recorder.writes
