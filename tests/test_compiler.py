"""The compiler against a naive interpreter of the documented memory images.

:class:`Device` executes a :class:`~hwgen.compiler.Program` the way the hardware will: it decodes
descriptors with the documented field order, reads weights, parameters and activations at the
documented addresses, accumulates tile by tile and requantizes with Python integers (section 3
of the architecture brief). It shares no code with the compiler; its results are compared with
:meth:`hwgen.nn.QuantizedNetwork.forward`.
"""

import itertools
import json
import math
import random
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hwgen
from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, Program, compile_network
from hwgen.memmap import Region, descriptor_layout, param_lane_layout, regions
from hwgen.nn import Dense, QuantizedNetwork


def descriptor_fields(config):
    """Descriptor fields, least significant first, as documented in hwgen.memmap: each as wide
    as the largest value the compiler can put there."""
    nt = max(1, min(config.param_depth, config.weight_depth // config.rows))
    ad = max(config.act_depth, config.out_depth)
    limits = [1, 1, 1, -(-config.max_k // config.rows), nt, nt * config.cols,
              config.act_depth - 1, min(-(-config.max_k // config.act_lanes), config.act_depth),
              ad - 1, min(nt, ad), config.weight_depth - 1, config.param_depth - 1]
    names = ["relu", "raw", "last", "k_tiles", "n_tiles", "n", "src_base", "src_stride",
             "dst_base", "dst_stride", "w_base", "p_base"]
    return [(name, max(1, limit.bit_length())) for name, limit in zip(names, limits, strict=True)]


CONFIGS = {
    "1x1": AcceleratorConfig(rows=1, cols=1, act_depth=1 << 16, weight_depth=1 << 18,
                             param_depth=4096, out_depth=1 << 14, prog_depth=4),
    "2x3": AcceleratorConfig(rows=2, cols=3, in_bits=4, w_bits=6, acc_bits=24, mult_bits=8,
                             act_depth=1 << 15, weight_depth=1 << 16, param_depth=512,
                             out_depth=1 << 13),
    "3x2": AcceleratorConfig(rows=3, cols=2, act_depth=1 << 15, weight_depth=1 << 17,
                             param_depth=512, out_depth=1 << 13, acc_depth=64),
    "4x4": AcceleratorConfig(rows=4, cols=4, in_bits=16, w_bits=16, acc_bits=64, mult_bits=32,
                             act_depth=1 << 14, weight_depth=1 << 16, param_depth=256,
                             out_depth=1 << 12),
    "8x8": AcceleratorConfig(act_depth=1 << 13, weight_depth=1 << 15, out_depth=1 << 13),
    # Output-stationary, and acc_bits as small as max_k allows: headroom is tight.
    "os5x7": AcceleratorConfig(rows=5, cols=7, dataflow="os", in_bits=6, w_bits=3, acc_bits=19,
                               mult_bits=5, act_depth=1 << 13, weight_depth=1 << 15,
                               out_depth=1 << 12),
}


def signed(value, bits):
    """Return the two's complement value of the low ``bits`` bits of ``value``."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def signed_range(bits):
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


# -- the interpreter ----------------------------------------------------------------------------

class Device:
    """Memories of ``config`` and a controller that runs programs from them.

    Words never written read as garbage (fixed per address), as a block RAM after power-up
    would; so padding the hardware does not write is never assumed to be zero.
    """

    def __init__(self, config, seed=0):
        self.config = config
        self.seed = seed
        self.b = max(config.rows, config.cols)
        self.shift_bits = (config.acc_bits + config.mult_bits - 1).bit_length()
        self.p_lane = config.acc_bits + config.mult_bits + self.shift_bits
        self.word_bits = {
            Region.PROGRAM: sum(w for _, w in descriptor_fields(config)),
            Region.WEIGHT: config.cols * config.w_bits,
            Region.PARAM: config.cols * self.p_lane,
            Region.ACT: self.b * config.in_bits,
            Region.OUTPUT: config.cols * config.acc_bits,
        }
        self.lane_shape = {Region.WEIGHT: (config.cols, config.w_bits),
                           Region.ACT: (self.b, config.in_bits),
                           Region.OUTPUT: (config.cols, config.acc_bits)}
        self.depth = {Region.PROGRAM: config.prog_depth, Region.WEIGHT: config.weight_depth,
                      Region.PARAM: config.param_depth, Region.ACT: config.act_depth,
                      Region.OUTPUT: config.out_depth}
        self.mem = {region: {} for region in Region}
        self.decoded = {}

    def read(self, region, addr):
        if addr not in self.mem[region]:
            garbage = random.Random(f"{self.seed}/{region.value}/{addr}")
            self.mem[region][addr] = garbage.getrandbits(self.word_bits[region])
        return self.mem[region][addr]

    def write(self, region, addr, word):
        assert 0 <= addr < self.depth[region], (region, addr)
        assert 0 <= word < 1 << self.word_bits[region], (region, word)
        self.mem[region][addr] = word
        self.decoded.pop((region, addr), None)

    def lanes(self, region, addr):
        """Return the signed lanes of a word of WEIGHT, ACT or OUTPUT."""
        key = (region, addr)
        if key not in self.decoded:
            count, bits = self.lane_shape[region]
            word = self.read(region, addr)
            self.decoded[key] = [signed(word >> (j * bits), bits) for j in range(count)]
        return self.decoded[key]

    def write_lane(self, region, addr, lane, value):
        bits = self.lane_shape[region][1]
        assert signed_range(bits)[0] <= value <= signed_range(bits)[1], (region, value)
        mask = ((1 << bits) - 1) << (lane * bits)
        word = self.read(region, addr) & ~mask | (value << (lane * bits)) & mask
        self.write(region, addr, word)

    def descriptor(self, addr):
        word, fields, offset = self.read(Region.PROGRAM, addr), {}, 0
        for name, width in descriptor_fields(self.config):
            fields[name] = (word >> offset) & ((1 << width) - 1)
            offset += width
        return fields

    def params(self, addr, lane):
        """Return ``(bias, mult, shift)`` of one lane of a PARAM word."""
        c = self.config
        v = self.read(Region.PARAM, addr) >> (lane * self.p_lane)
        bias = signed(v, c.acc_bits)
        mult = (v >> c.acc_bits) & ((1 << c.mult_bits) - 1)
        shift = (v >> (c.acc_bits + c.mult_bits)) & ((1 << self.shift_bits) - 1)
        return bias, mult, shift

    def load(self, program, x):
        for region, (base, words) in program.images.items():
            for i, word in enumerate(words):
                self.write(region, base + i, word)
        for i, word in enumerate(program.pack_input(x)):
            self.write(Region.ACT, program.input.base + i, word)

    def run(self, m):
        """Run the program in PROGRAM from word 0 on ``m`` rows; return the last descriptor."""
        for pc in range(self.depth[Region.PROGRAM]):
            d = self.descriptor(pc)
            self.run_layer(d, m)
            if d["last"]:
                return d
        raise AssertionError("no descriptor with last=1")

    def run_layer(self, d, m):
        c, b = self.config, self.b
        rows, cols = c.rows, c.cols
        assert not (d["raw"] and d["relu"]), "relu is documented for requantized layers only"
        acc_low, acc_high = signed_range(c.acc_bits)
        # Python integers where int64 could be too narrow for the accumulator.
        dtype = object if c.acc_bits > 62 else np.int64
        k_padded = d["k_tiles"] * rows
        x = np.zeros((m, k_padded), dtype=dtype)
        reads, writes = set(), set()
        for r in range(m):
            for f in range(k_padded):
                addr = d["src_base"] + r * d["src_stride"] + f // b
                if f < d["src_stride"] * b:
                    reads.add(addr)
                # Past the row's words (k_tiles * rows > stride * B) the hardware reads
                # whatever is there; the zero weights of those rows must cancel it.
                x[r, f] = self.lanes(Region.ACT, addr)[f % b]
        for nt in range(d["n_tiles"]):
            acc = np.zeros((m, cols), dtype=dtype)
            for kt in range(d["k_tiles"]):
                first = d["w_base"] + (nt * d["k_tiles"] + kt) * rows
                w = np.array([self.lanes(Region.WEIGHT, first + i) for i in range(rows)],
                             dtype=dtype)
                acc = acc + x[:, kt * rows:(kt + 1) * rows] @ w
                assert acc_low <= acc.min() and acc.max() <= acc_high
            for j in range(cols):
                n = nt * cols + j
                if n >= d["n"]:
                    continue
                bias, mult, shift = self.params(d["p_base"] + nt, j)
                for r in range(m):
                    a = int(acc[r, j]) + bias
                    assert acc_low <= a <= acc_high
                    if d["raw"]:
                        addr = d["dst_base"] + r * d["dst_stride"] + n // cols
                        self.write_lane(Region.OUTPUT, addr, n % cols, a)
                        continue
                    p = a * mult
                    y = (p + (1 << (shift - 1))) >> shift if shift > 0 else p
                    y = min(max(y, -(1 << (c.in_bits - 1))), (1 << (c.in_bits - 1)) - 1)
                    if d["relu"]:
                        y = max(y, 0)
                    addr = d["dst_base"] + r * d["dst_stride"] + n // b
                    writes.add(addr)
                    self.write_lane(Region.ACT, addr, n % b, y)
        assert not reads & writes, "a layer overwrote its own input"

    def result(self, d, m):
        """Return the output matrix of the last layer ``d``, read at the documented places."""
        region, lanes = (Region.OUTPUT, self.config.cols) if d["raw"] else (Region.ACT, self.b)
        return np.array(
            [[self.lanes(region, d["dst_base"] + r * d["dst_stride"] + n // lanes)[n % lanes]
              for n in range(d["n"])] for r in range(m)], dtype=np.int64).reshape(m, d["n"])


def run_on_device(program, x, seed=0):
    """Run ``program`` on ``x``; return (interpreter's output, unpack_output's output)."""
    device = Device(program.config, seed)
    m = len(x)
    device.load(program, x)
    last = device.run(m)
    region, base, count = program.output_words(m)
    words = [device.read(region, base + i) for i in range(count)]
    return device.result(last, m), program.unpack_output(words, m)


# -- random networks ----------------------------------------------------------------------------

def random_layer(rng, config, k, n, *, style, activation, output, acc_bits, mult_bits):
    """Return a Dense layer whose accumulator provably fits ``acc_bits``."""
    w_low, w_high = signed_range(config.w_bits)
    if style == "extreme":
        weight = rng.choice([w_low, w_high, 0, -1, 1], size=(k, n))
    elif style == "sparse":
        weight = rng.integers(w_low, w_high + 1, size=(k, n)) * (rng.random((k, n)) < 0.1)
    else:
        weight = rng.integers(w_low, w_high + 1, size=(k, n))
    weight = weight.astype(np.int64)
    limit = (1 << (acc_bits - 1)) - 1
    headroom = [limit - (1 << (config.in_bits - 1)) * int(np.abs(weight[:, j]).sum())
                for j in range(n)]
    assert min(headroom) >= 0  # the configs' acc_bits cover max_k worst-case products
    bias = np.zeros(n, dtype=np.int64)
    for j in range(n):
        h = headroom[j]
        small = min(h, 1 << (config.in_bits + config.w_bits))
        bias[j] = rng.choice([h, -h]) if rng.random() < 0.15 else rng.integers(-small, small + 1)
    mult_high = (1 << mult_bits) - 1
    mult = rng.integers(0, mult_high + 1, size=n).astype(np.int64)
    mult[rng.random(n) < 0.1] = mult_high
    mult[rng.random(n) < 0.05] = 0
    # Aim the shift at the typical accumulator so that outputs are not all saturated.
    typical = (1 << (config.in_bits - 1)) * (1 << (config.w_bits - 1)) * max(1, math.isqrt(k))
    max_shift = acc_bits + mult_bits - 1
    shift = np.array([min(max((typical * max(int(mu), 1)).bit_length() - config.in_bits
                               + int(rng.integers(-3, 4)), 0), max_shift) for mu in mult])
    shift[rng.random(n) < 0.05] = 0
    shift[rng.random(n) < 0.05] = max_shift
    return Dense(weight, bias, mult, shift, activation=activation, output=output)


def random_network(rng, config, sizes, *, style, last_raw, acc_bits=None, mult_bits=None):
    acc_bits = acc_bits or config.acc_bits
    mult_bits = mult_bits or config.mult_bits
    layers = []
    for i, (k, n) in enumerate(itertools.pairwise(sizes)):
        last = i == len(sizes) - 2
        layers.append(random_layer(
            rng, config, k, n, style=style, acc_bits=acc_bits, mult_bits=mult_bits,
            activation=str(rng.choice(["relu", "identity"])),
            output="raw" if last and last_raw else "requant"))
    return QuantizedNetwork(layers, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=acc_bits, mult_bits=mult_bits)


def random_input(rng, config, m, k):
    low, high = signed_range(config.in_bits)
    x = rng.integers(low, high + 1, size=(m, k))
    x[rng.random((m, k)) < 0.05] = low
    return x


def check_against_reference(network, config, m, *, batch=None, seed=0):
    program = compile_network(network, config, batch=batch)
    m = min(m, program.batch)
    x = random_input(np.random.default_rng(seed), config, m, network.in_features)
    expected = network.forward(x)
    interpreted, unpacked = run_on_device(program, x, seed)
    np.testing.assert_array_equal(interpreted, expected)
    np.testing.assert_array_equal(unpacked, expected)
    return program


MAX_WIDTH = {"1x1": 60, "2x3": 120}
FAST = settings(max_examples=10, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("name", list(CONFIGS))
@FAST
@given(data=st.data())
def test_matches_reference(name, data):
    config = CONFIGS[name]
    count = data.draw(st.integers(1, 4), label="layers")
    max_width = MAX_WIDTH.get(name, 200)
    sizes = data.draw(st.lists(st.integers(1, max_width) | st.sampled_from([1, max_width]),
                               min_size=count + 1, max_size=count + 1), label="sizes")
    style = data.draw(st.sampled_from(["uniform", "extreme", "sparse"]), label="style")
    last_raw = data.draw(st.booleans(), label="last_raw")
    batch = data.draw(st.none() | st.integers(1, 64), label="batch")
    seed = data.draw(st.integers(0, 2 ** 32 - 1), label="seed")
    rng = np.random.default_rng(seed)
    network = random_network(rng, config, sizes, style=style, last_raw=last_raw)
    capacity = batch or min(64, config.acc_depth)
    m = data.draw(st.integers(1, capacity) | st.just(capacity), label="m")
    check_against_reference(network, config, m, batch=batch, seed=seed)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_narrower_network_widths(name):
    # A network may use fewer accumulator and multiplier bits than the design has.
    config = CONFIGS[name]
    rng = np.random.default_rng(1)
    acc_bits = max(config.min_acc_bits(config.in_bits, config.w_bits, 40), config.acc_bits - 3)
    network = random_network(rng, config, [40, 9, 5], style="extreme", last_raw=True,
                             acc_bits=acc_bits, mult_bits=config.mult_bits - 1)
    check_against_reference(network, config, 7, seed=1)


@pytest.mark.parametrize("config_name", list(CONFIGS))
def test_descriptor_layout_as_documented(config_name):
    config = CONFIGS[config_name]
    offset = 0
    layout = descriptor_layout(config)
    for (name, width), (field_name, field) in zip(descriptor_fields(config), layout, strict=True):
        assert (name, width, offset) == (field_name, field.width, field.offset)
        offset += width
    assert Device(config).p_lane == param_lane_layout(config).size
    assert {r: g.word_bits for r, g in regions(config).items()} == Device(config).word_bits


def test_tiny_golden_layout():
    # 3 x 5 weights on a 2 x 3 array: k_tiles 2, n_tiles 2, rows = 2 words per tile.
    config = CONFIGS["2x3"]
    weight = np.arange(15).reshape(3, 5) - 7
    net = QuantizedNetwork([Dense(weight, [1, -2, 3, -4, 5], [1, 2, 3, 4, 5], [0, 1, 2, 3, 4])],
                           in_bits=4, w_bits=6, acc_bits=24, mult_bits=8)
    program = compile_network(net, config, batch=2)
    base, words = program.images[Region.WEIGHT]
    assert base == 0 and len(words) == 2 * 2 * 2

    def lanes(word):
        return [signed(word >> (6 * j), 6) for j in range(3)]

    assert lanes(words[0]) == list(weight[0, 0:3])         # (nt 0, kt 0) row 0
    assert lanes(words[3]) == [0, 0, 0]                    # (nt 0, kt 1) row 1: k = 3
    assert lanes(words[5]) == [*weight[1, 3:5], 0]         # (nt 1, kt 0) row 1
    assert lanes(words[6]) == [*weight[2, 3:5], 0]         # (nt 1, kt 1) row 0
    d = program.descriptors[0]
    assert (d["k_tiles"], d["n_tiles"], d["n"], d["relu"], d["raw"], d["last"]) == \
        (2, 2, 5, 1, 0, 1)
    # B = 3 lanes: inputs (3) take 1 word per row, outputs (5) take 2.
    assert (d["src_base"], d["src_stride"], d["dst_base"], d["dst_stride"]) == (0, 1, 2, 2)
    device = Device(config)
    _, params = program.images[Region.PARAM]
    device.write(Region.PARAM, 1, params[1])
    assert device.params(1, 0) == (-4, 4, 3)
    assert device.params(1, 2) == (0, 0, 0)  # beyond N


def test_program_attributes():
    config = CONFIGS["3x2"]
    network = random_network(np.random.default_rng(2), config, [7, 5, 3], style="uniform",
                             last_raw=False)
    program = hwgen.compile(network, config)
    assert program.config == config and program.config_hash == config.hash
    assert program.macs_per_row == 7 * 5 + 5 * 3
    assert program.padded_macs_per_row == 3 * 3 * 3 * 2 + 2 * 3 * 2 * 2
    assert [d["last"] for d in program.descriptors] == [0, 1]
    assert program.input.region == Region.ACT and program.input.base == 0
    assert (program.input.stride, program.output.stride) == (3, 1)  # B = 3
    assert program.output.region == Region.ACT and program.output.kind == "requant"
    # The second layer's destination is the first layer's source area.
    assert program.output.base == program.descriptors[1]["dst_base"] == 0
    text = program.summary()
    assert "k_tiles" in text and program.config_hash in text
    assert len(text.splitlines()[2].split()) == 9  # layer, K, N, tiles x2, act, out, words x2


def test_largest_batch_is_chosen():
    config = AcceleratorConfig(rows=2, cols=2, act_depth=100, out_depth=60, acc_depth=256)
    network = random_network(np.random.default_rng(3), config, [5, 7, 3], style="uniform",
                             last_raw=True)
    program = compile_network(network, config)
    # Areas: input 3 words per row; layer 0 output 4 words per row; raw output 2 words per row.
    assert program.batch == min(100 // 7, 60 // 2) == 14
    compile_network(network, config, batch=14)
    with pytest.raises(CompileError, match="act_depth=100"):
        compile_network(network, config, batch=15)
    assert compile_network(network, AcceleratorConfig(acc_depth=5)).batch == 5


# -- refusals -----------------------------------------------------------------------------------

def small_network(config, sizes=(4, 3), *, last_raw=False, seed=0, **widths):
    return random_network(np.random.default_rng(seed), config, list(sizes), style="uniform",
                          last_raw=last_raw, **widths)


def refused(network, config, *fragments, error=CompileError, **kwargs):
    with pytest.raises(error) as info:
        compile_network(network, config, **kwargs)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    return info.value


def test_refuses_non_network():
    config = AcceleratorConfig()
    refused([], config, "QuantizedNetwork", error=TypeError)
    refused(small_network(config), config.to_dict(), "AcceleratorConfig", error=TypeError)
    refused(small_network(config), config, "batch", error=TypeError, batch=2.0)
    refused(small_network(config), config, "batch", error=TypeError, batch=True)


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("in_bits", 7, "in_bits=8"),
    ("w_bits", 6, "w_bits=8"),
    ("acc_bits", 33, "acc_bits <= 32"),
    ("mult_bits", 17, "mult_bits <= 16"),
])
def test_refuses_width_mismatch(field, value, fragment):
    config = AcceleratorConfig()
    widths = {"in_bits": 8, "w_bits": 8, "acc_bits": 32, "mult_bits": 16, field: value}
    layer = Dense(np.ones((2, 2), int), [0, 0], [1, 1], [0, 0])
    error = refused(QuantizedNetwork([layer], **widths), config, fragment, f"{field}={value}")
    assert isinstance(error, ValueError) and error.resource == field


def test_refuses_wide_reduction():
    config = AcceleratorConfig(max_k=64, acc_bits=24)
    network = small_network(config, (3, 65, 2), acc_bits=24)
    error = refused(network, config, "layer 1", "K=65", "max_k=64")
    assert (error.layer, error.need, error.limit) == (1, 65, 64)


def test_refuses_unprovable_accumulator():
    # acc_bits=20 covers 16 worst-case products (2**18) but not with a bias of 300000 on top.
    config = AcceleratorConfig(max_k=16, acc_bits=20)
    layer = Dense(np.full((16, 2), -128), [1, 300000], [1, 1], [0, 0])
    network = QuantizedNetwork([layer], acc_bits=20)
    error = refused(network, config, "layer 0", "no accumulator can leave acc_bits=20",
                    "562144", "524287")
    assert error.resource == "acc_bits"
    layer.bias[1] = 300000 - 562144 + 524287  # exactly at the limit: accepted
    compile_network(network, config)


def test_refuses_shift_outside_config():
    # QuantizedNetwork's own checks stop this first; the compiler checks again anyway.
    config = AcceleratorConfig()
    network = small_network(config)
    network.layers[0].shift[1] = 48
    network.validate = lambda: None
    refused(network, config, "layer 0", "shift[1]=48", "0..47")


def test_refuses_weight_overflow():
    config = AcceleratorConfig(rows=2, cols=2, weight_depth=16)
    # Each layer: 2 x 2 tiles of 2 rows = 8 words; the third one overflows.
    network = small_network(config, (4, 4, 4, 4))
    error = refused(network, config, "layer 2", "need 24 words", "weight_depth=16")
    assert (error.layer, error.need, error.limit) == (2, 24, 16)


def test_refuses_param_overflow():
    config = AcceleratorConfig(rows=2, cols=2, param_depth=2)
    refused(small_network(config, (2, 2, 3)), config, "layer 1", "need 3 words",
            "param_depth=2")


def test_refuses_too_many_layers():
    config = AcceleratorConfig(prog_depth=2)
    refused(small_network(config, (3, 3, 3, 3)), config, "3 layers", "prog_depth=2", "layer 2")


def test_refuses_activation_overflow():
    config = AcceleratorConfig(rows=1, cols=1, act_depth=64, max_k=64, acc_bits=24)
    network = small_network(config, (10, 20, 3), acc_bits=24)
    # 10 + 20 words per row, the last layer writes its 3 outputs back into area 0 (10 wide).
    assert compile_network(network, config).batch == 2
    refused(network, config, "batch=3", "need 90 ACT words", "act_depth=64",
            "input of layer 1", batch=3)
    wide = small_network(config, (40, 30, 3), acc_bits=24)
    refused(wide, config, "not even batch=1 fits", "need 70", "act_depth=64")


def test_refuses_output_overflow():
    config = AcceleratorConfig(rows=2, cols=2, out_depth=16)
    network = small_network(config, (3, 9), last_raw=True)
    assert compile_network(network, config).batch == 3  # 5 words per row
    refused(network, config, "layer 0", "need 20 OUTPUT words", "out_depth=16", batch=4)
    refused(small_network(config, (3, 40), last_raw=True), config, "not even batch=1",
            "out_depth=16")


def test_refuses_batch_outside_capacity():
    config = AcceleratorConfig(acc_depth=8)
    network = small_network(config)
    refused(network, config, "batch=9", "1..8", "acc_depth", batch=9)
    refused(network, config, "batch=0", batch=0)
    refused(network, config, "batch=-1", batch=-1)


def test_descriptor_fields_reach_their_bounds():
    # The widest layer a configuration takes fills its count fields to the top: the layout is
    # as narrow as it can be, and whatever the checks before it allow still fits.
    config = AcceleratorConfig(rows=2, cols=4, max_k=40, act_depth=256, weight_depth=1024,
                               param_depth=16, out_depth=64, acc_depth=4)
    n = 16 * config.cols  # every PARAM word
    wide = Dense(np.ones((40, n), int), np.zeros(n, int), np.ones(n, int), np.zeros(n, int),
                 output="raw")
    (d,) = compile_network(QuantizedNetwork([wide]), config, batch=1).descriptors
    assert (d["k_tiles"], d["n_tiles"], d["n"], d["dst_stride"]) == (20, 16, 64, 16)
    widths = dict(descriptor_fields(config))
    for name in ("k_tiles", "n_tiles", "n", "dst_stride"):
        assert d[name].bit_length() == widths[name], name
    refused(QuantizedNetwork([Dense(np.ones((41, 4), int), np.zeros(4, int), np.ones(4, int),
                                    np.zeros(4, int))]), config, "K=41", "max_k=40")


# -- running a program --------------------------------------------------------------------------

@pytest.fixture
def program():
    config = CONFIGS["2x3"]
    network = small_network(config, (5, 4), last_raw=True, acc_bits=24, seed=4)
    return compile_network(network, config, batch=4)


@pytest.mark.parametrize(("x", "fragment"), [
    (np.zeros((2, 5), dtype=np.float64), "dtype float64"),
    (np.zeros((2, 5), dtype=bool), "dtype bool"),
    (np.zeros(5, dtype=int), "shape (5,)"),
    (np.zeros((2, 6), dtype=int), "(M, 5)"),
    (np.zeros((5, 5), dtype=int), "batch=4"),
    (np.full((1, 5), 8), "x[0, 0] = 8 is outside"),
    (np.full((1, 5), -9), "-8..7"),
    (np.array([[1, 2, 3, 4, 2.5]], dtype=object), "float"),
])
def test_pack_input_errors(program, x, fragment):
    with pytest.raises(ValueError, match="pack_input") as info:
        program.pack_input(x)
    assert fragment in str(info.value)


def test_pack_input_layout(program):
    # B = 3 lanes of 4 bits: row 0 = [1, -1, 2 | 3, -8, pad], row 1 = [0, ...].
    words = program.pack_input(np.array([[1, -1, 2, 3, -8], [0, 0, 0, 0, 7]], dtype=np.int8))
    assert words == [0x2F1, 0x083, 0x000, 0x070]
    assert program.pack_input(np.zeros((0, 5), dtype=int)) == []


@pytest.mark.parametrize(("words", "m", "fragment"), [
    ([0] * 3, 2, "exactly m * stride = 4"),
    ([0, 0, -1, 0], 2, "word 2 is -1"),
    ([0, 1 << 72, 0, 0], 2, "word 1"),
    ([0, 0, 0, 1.0], 2, "float"),
    ([0] * 10, 5, "0..4"),
    ([], -1, "m=-1"),
])
def test_unpack_output_errors(program, words, m, fragment):
    with pytest.raises(ValueError) as info:
        program.unpack_output(words, m)
    assert fragment in str(info.value)


def test_unpack_output_ignores_padding_lanes(program):
    # cols = 3 lanes of 24 bits, N = 4: lane 2 of the second word is padding.
    garbage = 0x123456 << 48
    words = [(5 & 0xFFFFFF) | ((-1 & 0xFFFFFF) << 24) | ((-(1 << 23) & 0xFFFFFF) << 48),
             ((1 << 23) - 1) | garbage]
    got = program.unpack_output(words, 1)
    assert got.dtype == np.int64
    assert got.tolist() == [[5, -1, -(1 << 23), (1 << 23) - 1]]
    assert program.output_words(1) == (Region.OUTPUT, 0, 2)
    assert program.unpack_output([], 0).shape == (0, 4)


# -- files --------------------------------------------------------------------------------------

def test_save_load_round_trip(tmp_path):
    config = CONFIGS["4x4"]
    rng = np.random.default_rng(5)
    network = random_network(rng, config, [30, 20, 9], style="extreme", last_raw=True)
    program = compile_network(network, config, batch=6)
    path = tmp_path / "model.hwprog"
    program.save(path)
    loaded = Program.load(path)
    assert loaded == program
    x = random_input(rng, config, 6, 30)
    interpreted, unpacked = run_on_device(loaded, x)
    np.testing.assert_array_equal(interpreted, network.forward(x))
    np.testing.assert_array_equal(unpacked, network.forward(x))


def rewrite(path, **changes):
    """Rewrite a saved program with some metadata fields or arrays replaced."""
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    meta = json.loads(arrays["meta"].tobytes())
    for key, value in changes.items():
        if key in meta:
            meta[key] = value
        else:
            arrays[key] = value
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.fixture
def saved(tmp_path, program):
    path = tmp_path / "p.npz"
    program.save(path)
    return path


def load_fails(path, fragment):
    with pytest.raises(ValueError) as info:
        Program.load(path)
    assert str(path) in str(info.value) and fragment in str(info.value), str(info.value)


@pytest.mark.parametrize("version", [1, 3])
def test_load_refuses_other_version(saved, version):
    # Version 1 files hold descriptors of the fixed 171-bit layout.
    rewrite(saved, version=version)
    load_fails(saved, f"version {version}")


def test_load_refuses_other_format(saved):
    rewrite(saved, format="something-else")
    load_fails(saved, "something-else")


def test_load_refuses_damaged_image(saved, program):
    with np.load(saved) as npz:
        weight = npz["WEIGHT"].copy()
    weight[0, 0] ^= 1
    rewrite(saved, WEIGHT=weight)
    load_fails(saved, "WEIGHT")


def test_load_refuses_damaged_config(saved):
    rewrite(saved, config_hash="0" * 16)
    load_fails(saved, "hash")


def test_load_refuses_garbage(tmp_path, saved):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a program at all")
    load_fails(garbage, "not an")
    data = bytearray(saved.read_bytes())
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(bytes(data[:len(data) // 2]))
    load_fails(truncated, "not a readable")
    with zipfile.ZipFile(saved) as z:
        assert "meta.npy" in z.namelist()
    # A single .npy array is not a program either.
    single = tmp_path / "single.npz"
    with open(single, "wb") as f:
        np.savez(f, other=np.zeros(3))
    load_fails(single, "meta")
    with pytest.raises(OSError):
        Program.load(tmp_path / "missing.npz")
