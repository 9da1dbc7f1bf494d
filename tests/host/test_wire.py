"""The packed wire end to end on the in-process device: scores, argmax and top-k bit-exact with
hwgen.nn (and NumPy's argmax / stable argsort of its scores), the same on a protocol version 5
device (words, classes picked on the host), the bytes of each direction equal to
hwgen.throughput's model, the next chunk's LOADs in flight behind the last one's answer within
the device's rx_fifo, and the errors of a bad output mode."""

import numpy as np
import pytest
from support.older_device import ByteCounter, Version5Device

import hwgen
from host import Accelerator
from host.frames import RequestDecoder, ResponseDecoder
from hwgen.config import AcceleratorConfig
from hwgen.protocol import Features, Opcode
from hwgen.throughput import wire_bytes_by_direction
from sim.inprocess import InProcessDevice
from sim.netgen import random_cnn, random_image, random_input, random_network

CONFIG = AcceleratorConfig(rows=3, cols=4, act_depth=4096, weight_depth=2048, param_depth=64,
                           acc_depth=32, out_depth=512, prog_depth=16)
MODES = ["scores", "argmax", ("top_k", 1), ("top_k", 3), ("top_k", 7)]


def _expected(scores, mode):
    if mode == "scores":
        return scores
    if mode == "argmax":
        return np.argmax(scores, axis=1)
    return np.argsort(-scores, axis=1, kind="stable")[:, :mode[1]]


def _mlp(seed, raw=True, batch=None):
    rng = np.random.default_rng(seed)
    net = random_network(rng, CONFIG, widths=[23, 11, 7], raw=raw)
    return net, hwgen.compile(net, CONFIG, batch=batch), rng


@pytest.mark.parametrize("device", ["v6", "v5", "v6-no-classes"])
@pytest.mark.parametrize("raw", [True, False])
def test_every_mode_is_bit_exact_with_the_reference(device, raw):
    net, program, rng = _mlp(1 if raw else 2, raw=raw, batch=6)
    x = random_input(rng, CONFIG, 20, 23)   # chunks of 6, 6, 6, 2
    x[3] = x[2]   # equal scores in a row: ties too
    transport = {"v6": lambda: InProcessDevice(CONFIG),
                 "v5": lambda: Version5Device(CONFIG),
                 "v6-no-classes": lambda: InProcessDevice(CONFIG, features=Features.PACKED)}
    scores = net.forward(x)
    with Accelerator(transport[device](), config=CONFIG) as acc:
        acc.load(program)
        for mode in MODES:
            got = acc.infer(x, output=mode)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, _expected(scores, mode))
        assert acc.infer(x[:0], output=("top_k", 2)).shape == (0, 2)
        assert acc.infer(x[:0], output="argmax").shape == (0,)


def test_the_program_s_mode_is_the_default_and_a_call_overrides_it():
    net, _, rng = _mlp(3)
    program = hwgen.compile(net, CONFIG, output="top_k", k=2)
    x = random_input(rng, CONFIG, 9, 23)
    with Accelerator(InProcessDevice(CONFIG)) as acc:
        acc.load(program)
        np.testing.assert_array_equal(acc.infer(x), _expected(net.forward(x), ("top_k", 2)))
        np.testing.assert_array_equal(acc.infer(x, output="scores"), net.forward(x))


def test_images_in_and_classes_out():
    rng = np.random.default_rng(5)
    net = random_cnn(rng, CONFIG, input_shape=(7, 6, 2), blocks=2, max_channels=5, raw=True,
                     dense=6)
    program = hwgen.compile(net, CONFIG, batch=4)
    x = random_image(rng, CONFIG, 11, (7, 6, 2))
    scores = net.forward(x)
    for transport in (InProcessDevice(CONFIG), Version5Device(CONFIG)):
        with Accelerator(transport) as acc:
            acc.load(program)
            np.testing.assert_array_equal(acc.infer(x), scores)
            np.testing.assert_array_equal(acc.infer(x, output=("top_k", 3)),
                                          _expected(scores, ("top_k", 3)))


def test_every_layer_s_output_comes_packed_too():
    rng = np.random.default_rng(6)
    net = random_network(rng, CONFIG, widths=[10, 9, 5, 4], raw=True)
    program = hwgen.compile(net, CONFIG, batch=5, readout=True)
    x = random_input(rng, CONFIG, 12, 10)
    with Accelerator(InProcessDevice(CONFIG)) as acc:
        acc.load(program)
        for got, expected in zip(acc.infer(x, outputs="all"), net.forward_trace(x),
                                 strict=True):
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("mode", ["scores", "argmax", ("top_k", 4)])
def test_the_bytes_of_each_direction_are_the_model_s(packed, mode):
    _, program, rng = _mlp(7, batch=8)
    x = random_input(rng, CONFIG, 21, 23)   # chunks of 8, 8, 5
    device = InProcessDevice(CONFIG, max_payload=64) if packed else \
        Version5Device(CONFIG, max_payload=64)   # small frames: several LOADs and FETCHes
    counter = ByteCounter(device)
    with Accelerator(counter) as acc:
        acc.load(program)
        counter.reset()
        acc.infer(x, output=mode)
        c = acc.counters()
    model = [wire_bytes_by_direction(program, m, output=mode, max_payload=64, packed=packed)
             for m in (8, 8, 5)]
    assert sum(counter.sent.values()) == c.bytes_sent == sum(s for s, _ in model)
    assert sum(counter.received.values()) == c.bytes_received == sum(r for _, r in model)
    if packed:
        assert set(counter.sent) == {"LOAD", "RUN", "COUNTERS",
                                     "FETCH" if mode == "scores" else "CLASSES"}
        assert counter.sent["LOAD"] > 3 * 24   # more than one LOAD per chunk
    else:
        assert set(counter.sent) == {"WRITE", "RUN", "COUNTERS", "READ"}


def test_a_class_output_sends_one_byte_per_sample_back():
    _, program, rng = _mlp(8, batch=16)
    counter = ByteCounter(InProcessDevice(CONFIG))
    with Accelerator(counter) as acc:
        acc.load(program)
        counter.reset()
        acc.infer(random_input(rng, CONFIG, 16, 23), output="argmax")
        assert acc.counters().payload_bytes == 16 * 23 + 16
    assert counter.received["CLASSES"] == 10 + 16


class _Flight:
    """A transport that records, at each request written, the request bytes written after the
    oldest request whose answer the host has not read (decoding both streams)."""

    def __init__(self, port):
        self.port = port
        self.synchronous = True
        self.url = port.url
        self.timeout = None
        self.unread = []            # (opcode, size) of requests not yet answered to the host
        self.ahead = []             # bytes behind the oldest, at each write
        self.overlapped = 0         # LOADs written while an answer to FETCH/CLASSES was unread
        self._requests = RequestDecoder()
        self._answers = ResponseDecoder()

    def write(self, data):
        for frame in self._requests.feed(bytes(data)):
            size = 10 + len(frame.payload)
            if frame.opcode == Opcode.LOAD and any(
                    op in (Opcode.FETCH, Opcode.CLASSES) for op, _ in self.unread):
                self.overlapped += 1
            self.unread.append((frame.opcode, size))
            self.ahead.append(sum(s for _, s in self.unread[1:]))
        return self.port.write(data)

    def read(self, size=1):
        data = self.port.read(size)
        for _ in self._answers.feed(data):
            self.unread.pop(0)
        return data


@pytest.mark.parametrize("rx_fifo", [0, 64, 5000])
def test_the_next_loads_go_behind_the_last_answer_within_rx_fifo(rx_fifo):
    net, program, rng = _mlp(9, batch=4)
    flight = _Flight(InProcessDevice(CONFIG, rx_fifo=rx_fifo, max_payload=48))
    x = random_input(rng, CONFIG, 14, 23)
    with Accelerator(flight) as acc:
        acc.load(program)
        np.testing.assert_array_equal(acc.infer(x, output="argmax"),
                                      np.argmax(net.forward(x), axis=1))
    assert max(flight.ahead) <= rx_fifo
    # 48-byte payloads: a LOAD frame is at most 58 bytes, so 64 bytes of FIFO take one.
    assert (flight.overlapped > 0) == (rx_fifo > 0)


def test_a_lost_answer_in_flight_is_asked_for_again():
    class Lossy(InProcessDevice):
        """Drops the first answer to a CLASSES request that has LOADs behind it."""

        dropped = 0

        def write(self, data):
            before = len(self._out)
            n = super().write(data)
            frames = ResponseDecoder().feed(bytes(self._out[before:]))
            if not self.dropped and any(f.opcode == Opcode.CLASSES for f in frames) \
                    and self.runs_seen > 1:
                del self._out[before:]
                Lossy.dropped = 1
            return n

        @property
        def runs_seen(self):
            return self.counters.runs

    net, program, rng = _mlp(10, batch=4)
    x = random_input(rng, CONFIG, 13, 23)
    device = Lossy(CONFIG, rx_fifo=4096)
    with Accelerator(device, timeout=0.2) as acc:
        acc.load(program)
        np.testing.assert_array_equal(acc.infer(x, output="argmax"),
                                      np.argmax(net.forward(x), axis=1))
    assert Lossy.dropped == 1


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"output": ("top_k", 0)}, "infer: output='top_k' with k=0; allowed: k an integer >= 1"),
    ({"output": ("top_k", 8)}, "asks for more classes than the 7 scores per sample; allowed: "
                               "k in 1..7"),
    ({"output": "max"}, "infer: output='max'; allowed: 'scores', 'argmax', or ('top_k', k)"),
    ({"output": "argmax", "outputs": "all"}, "allowed with output='scores'"),
    ({"output": "argmax", "probabilities": True}, "probabilities=True needs the scores"),
])
def test_bad_output_modes_are_refused_before_anything_is_sent(kwargs, fragment):
    net, _, rng = _mlp(11)
    program = hwgen.compile(net, CONFIG, readout=True)
    counter = ByteCounter(InProcessDevice(CONFIG))
    with Accelerator(counter) as acc:
        acc.load(program)
        counter.reset()
        with pytest.raises(ValueError) as info:
            acc.infer(random_input(rng, CONFIG, 2, 23), **kwargs)
        assert fragment in str(info.value), str(info.value)
    assert not counter.sent


def test_classes_of_an_image_output_are_refused():
    from hwgen.nn import Conv2D, QuantizedNetwork

    rng = np.random.default_rng(12)
    conv = Conv2D(rng.integers(-3, 4, (2, 2, 2, 3)), np.zeros(3, int), np.ones(3, int),
                  np.zeros(3, int), output="raw")
    program = hwgen.compile(QuantizedNetwork([conv], input_shape=(9, 9, 2)), CONFIG, batch=2)
    assert program.output.pixels == 64
    with Accelerator(InProcessDevice(CONFIG)) as acc:
        acc.load(program)
        with pytest.raises(ValueError, match=r"rows \(pixels\) per sample"):
            acc.infer(random_image(rng, CONFIG, 1, (9, 9, 2)), output="argmax")


def test_a_row_wider_than_a_frame_goes_in_words():
    # 70 int8 inputs do not fit a 64-byte LOAD, nor 40 raw scores a 64-byte FETCH answer:
    # both go as WRITEs and READs of words, the rest as on the packed wire.
    from hwgen.streams import fits_fetch, fits_load

    rng = np.random.default_rng(13)
    net = random_network(rng, CONFIG, widths=[70, 5, 40], raw=True)
    program = hwgen.compile(net, CONFIG, batch=4)
    assert not fits_load(program.input, 64) and not fits_fetch(program.output, 64)
    x = random_input(rng, CONFIG, 10, 70)
    counter = ByteCounter(InProcessDevice(CONFIG, max_payload=64))
    with Accelerator(counter) as acc:
        acc.load(program)
        for mode in ("scores", ("top_k", 5)):
            counter.reset()
            np.testing.assert_array_equal(acc.infer(x, output=mode),
                                          _expected(net.forward(x), mode))
            model = [wire_bytes_by_direction(program, m, output=mode, max_payload=64)
                     for m in (4, 4, 2)]
            assert sum(counter.sent.values()) == sum(s for s, _ in model)
            assert sum(counter.received.values()) == sum(r for _, r in model)
            assert "WRITE" in counter.sent and "LOAD" not in counter.sent
            assert ("READ" in counter.sent) == (mode == "scores")


def test_an_output_in_the_input_s_words_is_read_before_the_next_input_goes():
    # Two layers: the second writes into the first's input area (the ping-pong areas), so
    # the next chunk's LOADs wait for the FETCH's answer, and the bound adds the directions.
    from hwgen.streams import loads_may_pass
    from hwgen.throughput import link_bound_rate

    net, program, rng = _mlp(14, raw=False, batch=4)
    assert program.output.region == program.input.region
    assert not loads_may_pass(program, [program.output])
    flight = _Flight(InProcessDevice(CONFIG, rx_fifo=5000))
    x = random_input(rng, CONFIG, 11, 23)
    with Accelerator(flight) as acc:
        acc.load(program)
        np.testing.assert_array_equal(acc.infer(x), net.forward(x))
    assert flight.overlapped == 0
    sent, received = wire_bytes_by_direction(program, 4)
    assert link_bound_rate(program, 1_000_000) == pytest.approx(4 * 100_000 / (sent + received))
