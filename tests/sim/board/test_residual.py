"""A residual network on the simulated board (the Device's Verilog under Verilator, behind its
UART framing), through the host driver: a ResNet-style graph (an identity and a projection
shortcut, then a head) bit-exact with hwgen.nn, its cycles those of hwgen.cycles, over more
samples than one run holds."""

import numpy as np
from support import BOARD_WS as CONFIG
from support import started_board

import hwgen
from host import Accelerator
from hwgen.cycles import program_cycles
from sim.netgen import random_graph, random_image


def test_a_residual_network_on_the_board():
    rng = np.random.default_rng(32)
    net = random_graph(rng, CONFIG, images=True, input_shape=(6, 5, 3),
                       kinds=("identity", "projection"), blocks=2, max_channels=5, head=True,
                       raw=True)
    assert sum(type(layer).__name__ == "Add" for layer in net.layers) == 2
    program = hwgen.compile(net, CONFIG, batch=2)
    m = 2 * program.batch + 1
    x = random_image(rng, CONFIG, m, net.input_shape)
    with started_board(CONFIG) as board, Accelerator(board.url, config=CONFIG) as acc:
        acc.load(program)
        y = acc.infer(x)
        counters = acc.counters()
    np.testing.assert_array_equal(y, net.forward(x))
    assert counters.cycles == sum(program_cycles(program, min(program.batch, m - start))
                                  for start in range(0, m, program.batch))
