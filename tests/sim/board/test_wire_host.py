"""The packed wire on the simulated board (the Device's Verilog under Verilator, behind its
frame engine), through the host driver: an MLP's scores, argmax and top-k and a CNN's classes
bit-exact with hwgen.nn (and NumPy's argmax / stable argsort of its scores) over several
chunks, the next chunk's LOADs in flight behind the last one's answer, and the bytes of each
direction equal to hwgen.throughput's model (the polls of each run counted on the link)."""

import numpy as np
from support import BOARD_WS as CONFIG
from support import started_board
from support.older_device import ByteCounter

import hwgen
from host import Accelerator
from host.transport import open_port
from hwgen.throughput import wire_bytes_by_direction
from sim.netgen import random_cnn, random_image, random_input, random_network

#: A COUNTERS poll: 10 bytes sent, 10 + 29 received.
POLL = (10, 39)


def _expected(scores, mode):
    if mode == "scores":
        return scores
    if mode == "argmax":
        return np.argmax(scores, axis=1)
    return np.argsort(-scores, axis=1, kind="stable")[:, :mode[1]]


def test_output_modes_and_bytes_on_the_board():
    rng = np.random.default_rng(33)
    mlp = random_network(rng, CONFIG, widths=[19, 8, 6], raw=True)
    mlp_program = hwgen.compile(mlp, CONFIG, batch=7)
    x = random_input(rng, CONFIG, 17, 19)          # chunks of 7, 7, 3
    x[4] = x[3]                                    # a tie or two among the scores
    cnn = random_cnn(rng, CONFIG, input_shape=(6, 5, 2), blocks=1, max_channels=4, raw=True,
                     dense=5)
    cnn_program = hwgen.compile(cnn, CONFIG, batch=3, output="top_k", k=2)
    images = random_image(rng, CONFIG, 7, (6, 5, 2))
    with started_board(CONFIG) as board:
        counter = ByteCounter(open_port(board.url))
        with Accelerator(counter, config=CONFIG) as acc:
            acc.load(mlp_program)
            for mode in ("scores", "argmax", ("top_k", 3)):
                counter.reset()
                got = acc.infer(x, output=mode)
                np.testing.assert_array_equal(got, _expected(mlp.forward(x), mode))
                polls = counter.sent["COUNTERS"] // POLL[0]
                model = [wire_bytes_by_direction(mlp_program, m, output=mode) for m in (7, 7, 3)]
                extra = polls - 3
                assert extra >= 0
                assert sum(counter.sent.values()) == sum(s for s, _ in model) + extra * POLL[0]
                assert sum(counter.received.values()) == \
                    sum(r for _, r in model) + extra * POLL[1]
            acc.load(cnn_program)
            np.testing.assert_array_equal(acc.infer(images),
                                          _expected(cnn.forward(images), ("top_k", 2)))
