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
from support import BOARD_WS

import hwgen
from host import Accelerator
from hwgen.config import AcceleratorConfig
from hwgen.memmap import regions
from hwgen.protocol import MAX_PAYLOAD, read_chunk_words, write_chunk_words
from hwgen.throughput import (
    BITS_PER_BYTE,
    link_bound_rate,
    wire_bytes_by_direction,
    wire_bytes_per_run,
)
from sim.board import SimulatedBoard, board_missing
from sim.netgen import random_cnn, random_image, random_input, random_network

# The design whose simulated board the other suites build too.
CONFIG = BOARD_WS

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
    # The chunk as if polled once: a COUNTERS poll is 10 bytes out, 10 + 29 back.
    sent = counters.bytes_sent - (polls - 1) * 10
    received = counters.bytes_received - (polls - 1) * 39
    assert sent > received   # the input is the busier direction, the raw output in OUTPUT
    for baud in (115_200, 1_000_000):
        expect = program.batch * baud / (BITS_PER_BYTE * sent)   # full duplex
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
    # The packed wire: the images' 7 * 6 * 5 int8 values, the output at its wire width.
    out = program.output
    out_bytes = math.ceil(3 * out.pixels * out.features * out.wire_bits / 8)
    assert out_bytes <= MAX_PAYLOAD   # one FETCH
    assert counters.payload_bytes == 3 * 7 * 6 * 5 + out_bytes


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


# -- the packed wire's model, by hand (no board) --------------------------------------------------

def _mlp_64_32_10(output):
    config = AcceleratorConfig()   # 8x8, int8, acc_bits 32, max_payload 1024 by default
    net = random_network(np.random.default_rng(5), config, widths=[64, 32, 10], raw=True)
    return hwgen.compile(net, config, batch=64, output=output)


def test_the_packed_wire_by_hand():
    program = _mlp_64_32_10("argmax")
    # Frames: 8 header bytes (6 + CRC) and a 2-byte payload CRC. StreamArgs 14 bytes, RUN's
    # 2, ClassArgs 12, COUNTERS' answer 29. 64 samples of 64 int8 values: 4096 bytes, LOADs
    # of at most (1024 - 14) // 64 = 15 samples: 15, 15, 15, 15, 4.
    sent = 5 * (10 + 14) + 4096 + (10 + 2) + 10 + (10 + 12)
    # Five empty LOAD answers, RUN's, COUNTERS' and CLASSES' 64 one-byte indices.
    received = 5 * 10 + 10 + (10 + 29) + (10 + 64)
    assert wire_bytes_by_direction(program, 64) == (sent, received)
    assert wire_bytes_per_run(program, 64) == sent + received
    # The busier direction bounds the rate: 64 samples per 4260 bytes of 10 bits.
    assert math.isclose(link_bound_rate(program, 6_000_000), 64 * 600_000 / sent)
    assert sent / 64 <= 68 and link_bound_rate(program, 6_000_000) >= 8_800


def test_the_scores_of_the_packed_wire_by_hand():
    program = _mlp_64_32_10("scores")
    bits = program.output.wire_bits
    assert 1 < bits < 32
    # FETCHes of as many samples' 10 scores at their proved width as 1024 bytes hold.
    per = 1024 * 8 // (10 * bits)
    sizes = [min(per, 64 - first) for first in range(0, 64, per)]
    fetched = sum(math.ceil(n * 10 * bits / 8) for n in sizes)
    sent = 5 * (10 + 14) + 4096 + (10 + 2) + 10 + len(sizes) * (10 + 14)
    received = 5 * 10 + 10 + (10 + 29) + len(sizes) * 10 + fetched
    assert wire_bytes_by_direction(program, 64) == (sent, received)
    assert fetched < 64 * 10 * 4   # less than the 32-bit lanes


def test_the_old_wire_adds_both_directions():
    program = _mlp_64_32_10("argmax")
    # 64 samples of 8 words of 8 bytes: WRITEs of at most (1024 - 7) // 8 = 127 words.
    words = 64 * 8
    chunk = write_chunk_words(regions(program.config)[program.input.region], MAX_PAYLOAD)
    writes = math.ceil(words / chunk)
    # 64 samples of 10 scores: 2 OUTPUT words of 8 lanes x 32 bits each (32 bytes), READs of
    # at most 1024 // 32 = 32 words: four.
    sent = writes * (10 + 7) + words * 8 + (10 + 2) + 10 + 4 * (10 + 7)
    received = writes * 10 + 10 + (10 + 29) + 4 * 10 + 64 * 2 * 32
    assert wire_bytes_by_direction(program, 64, packed=False) == (sent, received)
    assert math.isclose(link_bound_rate(program, 1_000_000, packed=False),
                        64 * 100_000 / (sent + received))


def test_bad_output_modes_of_the_model_are_refused():
    program = _mlp_64_32_10("scores")
    with pytest.raises(ValueError, match=r"k in 1\.\.10"):
        wire_bytes_by_direction(program, 4, output=("top_k", 11))
