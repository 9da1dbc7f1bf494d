"""Per-layer read-out over the protocol: ``Accelerator.infer(x, outputs="all")`` and
``AcceleratorPool.infer(x, outputs="all")`` on in-process devices (the real driver and byte
protocol, no Verilator), against
:meth:`hwgen.nn.QuantizedNetwork.forward_trace` (bf16: :meth:`hwgen.nn.Bf16Network.forward_trace`,
bit for bit); the refusals before anything is sent."""

import numpy as np
import pytest
from support import BOARD_WS
from support.bf16_programs import bf16_config, same_bits, wide

import hwgen
from host import Accelerator, AcceleratorPool
from hwgen.nn import CNN, Flatten, FloatConv2D, FloatDense, MaxPool2D, to_bf16
from sim.bf16_runs import bf16_mlp, bf16_rows
from sim.inprocess import InProcessDevice
from sim.netgen import random_input, random_network


def network(seed, widths, raw):
    return random_network(np.random.default_rng(seed), BOARD_WS, widths=widths, raw=raw)


@pytest.fixture
def pair():
    return InProcessDevice(BOARD_WS), InProcessDevice(BOARD_WS)


@pytest.fixture
def acc():
    with Accelerator(InProcessDevice(BOARD_WS), config=BOARD_WS) as a:
        yield a


@pytest.mark.parametrize(("seed", "widths", "raw"),
                         [(1, [7, 9, 5, 4], True), (2, [5, 11, 6], False), (3, [8, 3], True)])
def test_every_layer_of_every_run_is_read(acc, seed, widths, raw):
    net = network(seed, widths, raw)
    program = hwgen.compile(net, BOARD_WS, batch=5, readout=True)
    acc.load(program)
    x = random_input(np.random.default_rng(seed), BOARD_WS, 13, widths[0])  # runs of 5, 5, 3
    outputs = acc.infer(x, outputs="all")
    trace = net.forward_trace(x)
    assert isinstance(outputs, list) and len(outputs) == len(trace)
    for got, expected in zip(outputs, trace, strict=True):
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expected)
    assert acc.counters().runs == 3
    np.testing.assert_array_equal(acc.infer(x), trace[-1])  # "last": the output alone


def test_payload_counts_every_layer_read(acc):
    net = network(4, [6, 7, 5], True)
    program = hwgen.compile(net, BOARD_WS, readout=True)
    acc.load(program)
    x = random_input(np.random.default_rng(4), BOARD_WS, 4, 6)
    acc.infer(x)
    last = acc.counters().payload_bytes
    acc.infer(x, outputs="all")
    hidden = program.layer_outputs[0]
    # The packed wire: 4 samples of its 7 values at their width.
    assert hidden.features == 7
    assert acc.counters().payload_bytes == last + (4 * 7 * hidden.wire_bits + 7) // 8


def test_zero_rows(acc):
    net = network(5, [4, 6, 3], True)
    acc.load(hwgen.compile(net, BOARD_WS, readout=True))
    outputs = acc.infer(np.zeros((0, 4), dtype=np.int64), outputs="all")
    assert [o.shape for o in outputs] == [(0, 6), (0, 3)]


def test_pool_reads_every_layer_in_row_order(pair):
    net = network(6, [9, 10, 7, 5], False)
    program = hwgen.compile(net, BOARD_WS, batch=4, readout=True)
    x = random_input(np.random.default_rng(6), BOARD_WS, 37, 9)
    x[:, 0] = np.arange(37) - 18  # every row distinct: a swap or a repeat shows
    with AcceleratorPool(list(pair), config=BOARD_WS) as pool:
        pool.load(program)
        outputs = pool.infer(x, outputs="all")
        counters = pool.counters()
    for got, expected in zip(outputs, net.forward_trace(x), strict=True):
        np.testing.assert_array_equal(got, expected)
    assert counters.total.rows == 37


def test_program_without_readout_is_refused_before_sending(acc):
    net = network(7, [5, 6, 4], True)
    acc.load(hwgen.compile(net, BOARD_WS))
    x = random_input(np.random.default_rng(7), BOARD_WS, 3, 5)
    sent = acc.bytes_sent
    with pytest.raises(ValueError, match=r"compiled without read-out.*readout=True"):
        acc.infer(x, outputs="all")
    assert acc.bytes_sent == sent
    np.testing.assert_array_equal(acc.infer(x), net.forward(x))  # the device is fine


@pytest.mark.parametrize("outputs", ["first", None, 1])
def test_bad_outputs_value_is_refused(acc, outputs):
    acc.load(hwgen.compile(network(8, [5, 4], True), BOARD_WS, readout=True))
    with pytest.raises(ValueError, match=r"outputs=.*allowed: 'last'.*'all'"):
        acc.infer(np.zeros((1, 5), dtype=np.int64), outputs=outputs)


def test_pool_refuses_all_of_a_program_without_readout(pair):
    with AcceleratorPool([pair[1]], config=BOARD_WS) as pool:
        pool.load(hwgen.compile(network(9, [5, 6, 4], True), BOARD_WS))
        with pytest.raises(ValueError, match="readout=True"):
            pool.infer(np.zeros((2, 5), dtype=np.int64), outputs="all")


@pytest.mark.parametrize("output", ["raw", "bf16"])
def test_bf16_layers_are_read_bit_for_bit(output):
    """Every layer of a bf16 MLP (Inf and NaN among the hidden values of the large scale)
    comes back as the reference's bits, over several runs and on a pool of two devices."""
    config = bf16_config(4, 4, spatial=False, residual=False)
    net = bf16_mlp([9, 13, 6, 5], seed=11, rows=4, output=output, scale=1e19)
    program = hwgen.compile(net, config, batch=3, readout=True)
    x = bf16_rows(net, 7, seed=11, scale=1e19)      # runs of 3, 3, 1
    trace = net.forward_trace(x)
    assert np.isnan(np.asarray(trace[0], dtype=np.float32)).any()
    with Accelerator(InProcessDevice(config), config=config) as acc:
        acc.load(program)
        single = acc.infer(x, outputs="all")
    with AcceleratorPool([InProcessDevice(config), InProcessDevice(config)],
                         config=config) as pool:
        pool.load(program)
        pooled = pool.infer(x, outputs="all")
    for outputs in (single, pooled):
        assert len(outputs) == len(trace)
        for got, want in zip(outputs, trace, strict=True):
            same_bits(got, want)


def test_bf16_cnn_layers_are_read_bit_for_bit():
    """A bf16 CNN's images (convolution, pool, flatten) come back per layer as the
    reference's bits."""
    rng = np.random.default_rng(12)
    config = bf16_config(4, 4)
    float_cnn = CNN([FloatConv2D(wide(rng, 3, 3, 4, 4), wide(rng, 4), padding=(1, 1, 1, 1),
                                 activation="relu"),
                     MaxPool2D(2), Flatten(), FloatDense(wide(rng, 3 * 2 * 4, 3), wide(rng, 3))],
                    input_shape=(6, 5, 4))
    net = to_bf16(float_cnn, rows=4)
    program = hwgen.compile(net, config, readout=True)
    x = net.quantize_input(wide(rng, 5, 6, 5, 4))
    with Accelerator(InProcessDevice(config), config=config) as acc:
        acc.load(program)
        outputs = acc.infer(x, outputs="all")
    trace = net.forward_trace(x)
    assert [o.shape for o in outputs] == [t.shape for t in trace]
    for got, want in zip(outputs, trace, strict=True):
        same_bits(got, want)
