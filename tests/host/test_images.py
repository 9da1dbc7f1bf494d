"""Images through the host driver: ``Accelerator.infer``, ``AcceleratorPool.infer`` and
``hwgen infer`` take and return the program's sample shapes (NHWC ``[M, H, W, C]`` inputs of a
spatial first layer, ``[M, H', W', C']`` outputs of a spatial last layer, every layer's own
shape with ``outputs="all"``), on in-process devices (the real driver and byte protocol, no
Verilator) and, for the gateware and the command line, on simulated boards.

Every expected output comes from :meth:`hwgen.nn.QuantizedNetwork.forward` (or
``forward_trace``) and every expected cycle count from :func:`hwgen.cycles.program_cycles`,
never from a device. Random CNNs come from :func:`sim.netgen.random_cnn`.
"""

import numpy as np
import pytest
from support import BOARD_WS as CONFIG

import hwgen
from host import Accelerator, AcceleratorPool
from hwgen.cli import main
from hwgen.cycles import program_cycles
from hwgen.nn import Conv2D, MaxPool2D, QuantizedNetwork
from sim.inprocess import InProcessDevice
from sim.netgen import random_cnn, random_image


@pytest.fixture(scope="module")
def board(module_board_factory):
    return module_board_factory(CONFIG)


@pytest.fixture
def acc():
    with Accelerator(InProcessDevice(CONFIG), config=CONFIG) as a:
        yield a


def cnn(seed, **kwargs):
    """A random CNN of a few small layers for the board, its program (``kwargs`` for
    :func:`hwgen.compile`) and its input shape."""
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(4, 8)), int(rng.integers(3, 8)), int(rng.integers(1, 5)))
    net = random_cnn(rng, CONFIG, input_shape=shape, blocks=2, max_channels=5,
                     dense=bool(seed % 2), raw=seed % 3 == 0)
    return net, hwgen.compile(net, CONFIG, **kwargs), shape


def images(seed, m, shape):
    """``m`` random NHWC images, each different in its first pixel (so a swap or a repeat
    shows)."""
    x = random_image(np.random.default_rng(seed), CONFIG, m, shape)
    x[:, 0, 0, 0] = np.arange(m) % 250 - 125
    return x


def expected_cycles(program, m):
    """The cycle model's count for ``m`` samples run in chunks of ``program.batch``."""
    return sum(program_cycles(program, min(program.batch, m - start))
               for start in range(0, m, program.batch))


def check_random_cnn(acc, seed):
    net, program, shape = cnn(seed, batch=3)
    m = 2 * program.batch + 1
    x = images(seed, m, shape)
    acc.load(program)
    y = acc.infer(x)
    assert y.shape == (m, *net.output_shape) and y.dtype == np.int64
    np.testing.assert_array_equal(y, net.forward(x))
    c = acc.counters()
    assert (c.rows, c.runs) == (m, 3)
    assert c.cycles == expected_cycles(program, m)
    assert c.macs == m * program.padded_macs_per_row


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_cnns_are_bit_exact_and_cycle_exact(acc, seed):
    check_random_cnn(acc, seed)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_cnns_on_the_board(board, seed):
    with Accelerator(board.url, config=CONFIG) as acc:
        check_random_cnn(acc, seed)


def test_an_image_network_with_no_samples(acc):
    net, program, shape = cnn(5)
    acc.load(program)
    y = acc.infer(np.zeros((0, *shape), dtype=np.int8))
    assert y.shape == (0, *net.output_shape)


def test_every_layer_reads_out_in_its_own_shape(acc):
    conv = Conv2D(np.arange(3 * 3 * 2 * 4).reshape(3, 3, 2, 4) % 11 - 5, np.arange(4) - 2,
                  np.full(4, 700), np.full(4, 14), stride=1, padding=1)
    net = QuantizedNetwork([conv, MaxPool2D(2)], input_shape=(5, 4, 2))
    program = hwgen.compile(net, CONFIG, batch=2, readout=True)
    acc.load(program)
    x = images(9, 5, (5, 4, 2))
    outputs = acc.infer(x, outputs="all")
    trace = net.forward_trace(x)
    assert [o.shape for o in outputs] == [(5, 5, 4, 4), (5, 2, 2, 4)]
    for got, expected in zip(outputs, trace, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_images_given_nchw_are_refused_with_the_hint(acc):
    _, program, shape = cnn(6)
    acc.load(program)
    x = images(6, 3, shape)
    sent = acc.bytes_sent
    h, w, c = shape
    with pytest.raises(ValueError) as info:
        acc.infer(x.transpose(0, 3, 1, 2))
    message = str(info.value)
    assert message.startswith(f"infer: x has shape (3, {c}, {h}, {w}); allowed: (samples, "
                              f"{h}, {w}, {c})"), message
    assert "images are NHWC: x.transpose(0, 2, 3, 1) converts NCHW" in message
    with pytest.raises(ValueError, match=r"allowed: \(samples, .*\(one sample: x.reshape"):
        acc.infer(x[0])
    with pytest.raises(ValueError, match=r"x has shape \(3, \d+\); allowed: \(samples, "):
        acc.infer(x.reshape(3, -1))
    assert acc.bytes_sent == sent  # refused before anything is sent


def test_pool_splits_images_and_keeps_their_order():
    net, program, shape = cnn(7, batch=2, readout=True)
    x = images(7, 9, shape)
    with AcceleratorPool([InProcessDevice(CONFIG), InProcessDevice(CONFIG)],
                         config=CONFIG) as pool:
        pool.load(program)
        y = pool.infer(x)
        np.testing.assert_array_equal(y, net.forward(x))
        assert y.shape == (9, *net.output_shape)
        trace = pool.infer(x, outputs="all")
        for got, expected in zip(trace, net.forward_trace(x), strict=True):
            np.testing.assert_array_equal(got, expected)
        c = pool.counters()
        assert c.total.rows == 9 and c.total.cycles == expected_cycles(program, 9)
        with pytest.raises(ValueError, match="images are NHWC"):
            pool.infer(x.transpose(0, 3, 1, 2))


def test_infer_command_takes_and_writes_images(board, tmp_path, capsys):
    net, program, shape = cnn(8, batch=3)  # an image output
    assert len(net.output_shape) == 3
    program.save(tmp_path / "p.npz")
    x = images(8, 7, shape)
    np.save(tmp_path / "x.npy", x)
    args = ["infer", "--url", board.url, "--program", str(tmp_path / "p.npz")]
    assert main([*args, "--input", str(tmp_path / "x.npy"), "--output",
                 str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy")
    np.testing.assert_array_equal(y, net.forward(x))
    out = capsys.readouterr().out
    assert "7 samples in" in out and f"{expected_cycles(program, 7):,} cycles" in out
    assert f"wrote {tmp_path / 'y.npy'}: {' x '.join(map(str, y.shape))} int64" in out
    # An NCHW file: one line that says the allowed shape and how to convert.
    np.save(tmp_path / "nchw.npy", x.transpose(0, 3, 1, 2))
    assert main([*args, "--input", str(tmp_path / "nchw.npy")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("hwgen infer: error: --input "), err
    assert f"allowed: (samples, {', '.join(map(str, shape))})" in err
    assert "x.transpose(0, 2, 3, 1)" in err
