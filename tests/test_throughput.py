"""hwgen.throughput against the bytes the real host driver moves to the simulated board.

The host counts every byte it writes and reads (:meth:`host.Accelerator.counters`); the model
must give the same number for the same chunk. The host polls COUNTERS until a run is over, so
the polls are counted here by wrapping the client's ``counters`` method, and the model is asked
for that many. The networks are chosen so that the input takes several WRITEs and, with a raw
output, the output several READs (see the byte counts in the comments).
"""

import math

import numpy as np
import pytest

import hwgen
from host import Accelerator
from hwgen.config import AcceleratorConfig
from hwgen.memmap import regions
from hwgen.protocol import MAX_PAYLOAD, read_chunk_words, write_chunk_words
from hwgen.throughput import BITS_PER_BYTE, link_bound_rate, wire_bytes_per_run
from sim.board import SimulatedBoard, board_missing
from sim.netgen import random_cnn, random_image, random_input, random_network

# A small design whose simulated board the other suites build too (cached across sessions).
SMALL = {"act_depth": 512, "weight_depth": 512, "param_depth": 32, "acc_depth": 32,
         "out_depth": 128, "prog_depth": 8}
CONFIG = AcceleratorConfig(rows=2, cols=3, clock_hz=1_000_000, **SMALL)

# 45 inputs: 15 ACT words of 3 bytes per row, so a full batch (30 or 32 rows) takes two WRITEs
# of at most 339 words. A raw output of 9 channels: 3 OUTPUT words of 12 bytes per row, 96 words
# at 32 rows, two READs of at most 85. A requantized output of 9 channels: one READ.
NETWORKS = {"raw": ([45, 3, 9], True), "requant": ([45, 6, 9], False)}


@pytest.fixture(scope="module")
def board():
    reason = board_missing()
    if reason:
        pytest.skip(reason)
    with SimulatedBoard(CONFIG) as b:
        yield b


def _program(kind, batch=None):
    widths, raw = NETWORKS[kind]
    net = random_network(np.random.default_rng(3), CONFIG, widths=widths, raw=raw)
    return net, hwgen.compile(net, CONFIG, batch=batch)


class _PollCounter:
    """Count the COUNTERS requests an Accelerator makes (the polls of its runs)."""

    def __init__(self, acc):
        self.count = 0
        self._inner = acc.client.counters
        acc.client.counters = self

    def __call__(self):
        self.count += 1
        return self._inner()


def _infer(board, program, rows, seed):
    x = random_input(np.random.default_rng(seed), CONFIG, rows, program.input.features)
    with Accelerator(board.url, config=CONFIG) as acc:
        acc.load(program)
        polls = _PollCounter(acc)
        acc.infer(x)
        assert acc.client.stats["retries"] == 0
        return acc.counters(), polls.count


@pytest.mark.parametrize("kind", sorted(NETWORKS))
def test_one_chunk_matches_the_bytes_the_host_counts(board, kind):
    _, program = _program(kind)
    geometry = regions(CONFIG)
    writes = math.ceil(program.batch * program.input.stride
                       / write_chunk_words(geometry[program.input.region], MAX_PAYLOAD))
    reads = math.ceil(program.output_words(program.batch)[2]
                      / read_chunk_words(geometry[program.output.region], MAX_PAYLOAD))
    assert (writes, reads) == ((2, 2) if kind == "raw" else (2, 1))   # as the comments say
    for rows in (1, 5, program.batch):
        counters, polls = _infer(board, program, rows, seed=rows)
        assert counters.runs == 1
        assert counters.wire_bytes == wire_bytes_per_run(program, rows, polls=polls)


def test_several_chunks_add_up(board):
    _, program = _program("raw", batch=13)
    rows = 2 * program.batch + 5
    counters, polls = _infer(board, program, rows, seed=9)
    sizes = [program.batch, program.batch, 5]
    assert counters.runs == len(sizes) and polls >= len(sizes)
    # Each chunk polls at least once; the polls beyond one each cost one COUNTERS exchange.
    poll = wire_bytes_per_run(program, 5, polls=2) - wire_bytes_per_run(program, 5, polls=1)
    expect = sum(wire_bytes_per_run(program, m) for m in sizes) + (polls - len(sizes)) * poll
    assert counters.wire_bytes == expect


def test_link_bound_rate_at_full_batches(board):
    _, program = _program("raw")
    counters, polls = _infer(board, program, program.batch, seed=4)
    poll = wire_bytes_per_run(program, 1, polls=2) - wire_bytes_per_run(program, 1, polls=1)
    one_poll = counters.wire_bytes - (polls - 1) * poll   # the chunk as if polled once
    for baud in (115_200, 1_000_000):
        expect = program.batch * baud / (BITS_PER_BYTE * one_poll)
        assert math.isclose(link_bound_rate(program, baud), expect, rel_tol=1e-12)


def test_an_image_chunk_matches_the_bytes_the_host_counts(board):
    # Only the image crosses the link: 7x6 pixels of 5 channels, two 3-lane words a pixel.
    rng = np.random.default_rng(11)
    net = random_cnn(rng, CONFIG, input_shape=(7, 6, 5), blocks=1, max_channels=4)
    program = hwgen.compile(net, CONFIG, batch=4)
    assert program.input.words_per_sample == 7 * 6 * 2
    x = random_image(rng, CONFIG, 3, (7, 6, 5))
    with Accelerator(board.url, config=CONFIG) as acc:
        acc.load(program)
        polls = _PollCounter(acc)
        np.testing.assert_array_equal(acc.infer(x), net.forward(x))
        counters = acc.counters()
    assert counters.wire_bytes == wire_bytes_per_run(program, 3, polls=polls.count)
    out_bytes = program.output_words(3)[2] * regions(CONFIG)[program.output.region].word_bytes
    assert counters.payload_bytes == 3 * 7 * 6 * 2 * 3 + out_bytes


def test_smaller_payload_buffers_cost_more_frames():
    _, program = _program("raw")
    m = program.batch
    sizes = [wire_bytes_per_run(program, m, max_payload=p) for p in (MAX_PAYLOAD, 256, 64, 16)]
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    assert link_bound_rate(program, max_payload=64) < link_bound_rate(program)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"m": 0}, r"m=0; allowed: an integer in 1\.\.32"),
    ({"m": 33}, r"m=33; allowed: an integer in 1\.\.32"),
    ({"m": 2.0}, r"m=2\.0; allowed"),
    ({"m": 1, "polls": 0}, r"polls=0; allowed: an integer >= 1"),
    ({"m": 1, "max_payload": 8}, r"max_payload=8 cannot carry one 3-byte ACT word"),
])
def test_wire_bytes_refuses_bad_arguments(kwargs, match):
    _, program = _program("raw")
    with pytest.raises(ValueError, match=match):
        wire_bytes_per_run(program, **kwargs)


@pytest.mark.parametrize("baud", [0, -9600, float("nan"), True, "1000000"])
def test_link_bound_rate_refuses_bad_baud(baud):
    _, program = _program("raw")
    with pytest.raises(ValueError, match="allowed: a positive number of bits per second"):
        link_bound_rate(program, baud)
