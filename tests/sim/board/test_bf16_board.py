"""A bf16 design's simulated board (issue 52): the device top with the bf16 core, under
Verilator behind the byte link, runs compiled bf16 MLPs written, started and read with the
host client's plain WRITE, RUN and READ, bit for bit against Bf16Network.forward, each run's
cycles the cycle model's."""

import asyncio

import numpy as np
from support import started_board as started

import hwgen
from host.client import DeviceClient
from hwgen import AcceleratorConfig
from hwgen.cycles import program_cycles
from sim.bf16_runs import bf16_mlp, bf16_rows, differing_bits, run_bf16

# The bf16 demo's design (tests/cli/test_demo.py, tests/cli/test_train.py): one board build
# for the session's three bf16 boards.
BF16_BOARD = AcceleratorConfig(dtype="bf16", rows=4, cols=4)


class _ClientPort:
    """The client's blocking WRITE, RUN (and the wait for its end) and READ as the awaited
    ``write``/``run``/``read`` that :func:`sim.bf16_runs.run_bf16` drives."""

    def __init__(self, client):
        self.client = client

    async def write(self, region, base, words):
        self.client.write(region, base, [int(w) for w in words])

    async def run(self, batch):
        self.client.run(batch)
        self.client.wait_idle()

    async def read(self, region, base, count):
        return [int(w) for w in self.client.read(region, base, count)]


def test_bf16_mlps_on_the_simulated_board():
    rows = BF16_BOARD.rows
    nets = [bf16_mlp([5, 7, 3], seed=1, rows=rows), bf16_mlp([6, 9, 4], seed=2, rows=rows,
                                                             output="bf16"),
            bf16_mlp([4, 5, 3], seed=3, rows=rows, scale=1e30)]
    with started(BF16_BOARD) as board:
        client = DeviceClient(board.url, timeout=10.0)
        try:
            for seed, net in enumerate(nets):
                program = hwgen.compile(net, BF16_BOARD)
                x = bf16_rows(net, 3, seed, scale=1e10 if seed == 2 else 1.0)
                before = client.counters().cycles
                got, want = asyncio.run(run_bf16(_ClientPort(client), program, x)), net.forward(x)
                assert differing_bits(got, want) is None, differing_bits(got, want)
                # The run's cycles, as the device counts them: the cycle model's.
                assert client.counters().cycles - before == program_cycles(program, len(x))
            # The last network's sums overflow: Inf, and NaN of Inf - Inf.
            assert np.isinf(want).any() and np.isnan(want).any()
        finally:
            client.close()
