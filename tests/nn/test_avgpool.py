"""AvgPool2D and GlobalAvgPool2D against per-element window sums written here, and their
``as_conv``: the depthwise convolution of ones they are (section 3.2)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import (
    AvgPool2D,
    Conv2D,
    Dense,
    Flatten,
    GlobalAvgPool2D,
    MaxPool2D,
    QuantizedNetwork,
)

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def signed(bits):
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def pool_loops(naive, x, geometry, fields, in_bits):
    """NHWC ``x`` through an average pool: each window's sum, requantized per channel,
    saturated and clamped, one element at a time."""
    (kh, kw), (sy, sx) = geometry
    h, w, channels = len(x[0]), len(x[0][0]), len(x[0][0][0])
    oh, ow = (h - kh) // sy + 1, (w - kw) // sx + 1
    low, high = -(2 ** (in_bits - 1)), 2 ** (in_bits - 1) - 1
    lo = fields["act_min"] if fields["act_min"] is not None else \
        (0 if fields["activation"] == "relu" else low)
    hi = fields["act_max"] if fields["act_max"] is not None else high
    out = np.zeros((len(x), oh, ow, channels), dtype=object)
    for m in range(len(x)):
        for oy in range(oh):
            for ox in range(ow):
                for c in range(channels):
                    total = sum(x[m][oy * sy + ky][ox * sx + kx][c]
                                for ky in range(kh) for kx in range(kw))
                    y = naive.requant(total, fields["mult"][c], fields["shift"][c], in_bits)
                    out[m, oy, ox, c] = min(max(y, lo), hi)
    return out


@st.composite
def pool_cases(draw, global_pool=False):
    in_bits, mult_bits = draw(st.integers(2, 10)), draw(st.integers(1, 20))
    h, w, channels = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 4))
    if global_pool:
        window, strides, size, stride = (h, w), (1, 1), None, None
    else:
        window = (draw(st.sampled_from([1, h]) | st.integers(1, h)),
                  draw(st.sampled_from([1, w]) | st.integers(1, w)))
        strides = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
        size = window[0] if window[0] == window[1] and draw(st.booleans()) else window
        stride = draw(st.sampled_from([None, strides]))
        if stride is None:
            strides = window
    acc_bits = (2 ** (in_bits - 1) * h * w).bit_length() + 1 + draw(st.integers(0, 30))
    acc_bits = min(acc_bits, 64)
    max_shift = acc_bits + mult_bits - 1
    activation = draw(st.sampled_from(["identity", "relu"]))
    low, high = -(2 ** (in_bits - 1)), 2 ** (in_bits - 1) - 1
    floor = 0 if activation == "relu" else low
    act_min = draw(st.none() | st.integers(floor, high))
    act_max = draw(st.none() | st.integers(floor if act_min is None else act_min, high))
    fields = {"mult": [draw(st.integers(0, 2 ** mult_bits - 1)) for _ in range(channels)],
              "shift": [draw(st.sampled_from([0, max_shift]) | st.integers(0, max_shift))
                        for _ in range(channels)],
              "activation": activation, "act_min": act_min, "act_max": act_max}
    x = [[[[draw(signed(in_bits)) for _ in range(channels)] for _ in range(w)]
          for _ in range(h)] for _ in range(draw(st.integers(1, 3)))]
    widths = {"in_bits": in_bits, "acc_bits": acc_bits, "mult_bits": mult_bits}
    return widths, (size, stride, window, strides), fields, x


def make(geometry, fields):
    size, stride, _, _ = geometry
    if size is None:
        return GlobalAvgPool2D(**fields)
    return AvgPool2D(size, stride, **fields)


@FAST
@given(st.booleans().flatmap(pool_cases))
def test_pool_matches_loops(naive, case):
    widths, geometry, fields, x = case
    pool = make(geometry, fields)
    shape = (len(x[0]), len(x[0][0]), len(x[0][0][0]))
    net = QuantizedNetwork([pool], input_shape=shape, **widths)
    want = pool_loops(naive, x, geometry[2:], fields, widths["in_bits"])
    got = net.forward(np.array(x))
    assert got.shape == want.shape == (len(x), *pool.output_shape(shape))
    assert got.tolist() == want.tolist()


@FAST
@given(st.booleans().flatmap(pool_cases))
def test_as_conv_is_the_depthwise_conv_of_ones(case):
    widths, geometry, fields, x = case
    pool = make(geometry, fields)
    h, w, channels = len(x[0]), len(x[0][0]), len(x[0][0][0])
    conv = pool.as_conv((h, w, channels)) if geometry[0] is None else pool.as_conv(channels)
    kh, kw = geometry[2]
    assert conv.weight.shape == (kh, kw, 1, channels) and (conv.weight == 1).all()
    assert (conv.bias == 0).all() and conv.groups == channels
    assert conv.pads == (0, 0, 0, 0) and conv.strides == geometry[3]
    assert conv.mult.tolist() == fields["mult"] and conv.shift.tolist() == fields["shift"]
    assert (conv.activation, conv.act_min, conv.act_max) == \
        (fields["activation"], fields["act_min"], fields["act_max"])
    in_bits = widths["in_bits"]
    assert conv.bounds(in_bits) == pool.bounds(in_bits)
    conv_net = QuantizedNetwork([conv], input_shape=(h, w, channels), w_bits=2, **widths)
    pool_net = QuantizedNetwork([pool], input_shape=(h, w, channels), **widths)
    assert conv_net.forward(np.array(x)).tolist() == pool_net.forward(np.array(x)).tolist()


def test_global_pool_in_a_network():
    # Conv -> global average -> Flatten -> Dense, as the end of a DS-CNN or a MobileNet.
    rng = np.random.default_rng(3)
    conv = Conv2D(rng.integers(-3, 4, (3, 3, 1, 4)), np.zeros(4, int), np.full(4, 3),
                  np.full(4, 4), padding=1, groups=4)
    pool = GlobalAvgPool2D(mult=np.full(4, 41), shift=np.full(4, 10))
    dense = Dense(rng.integers(-3, 4, (4, 2)), np.zeros(2, int), np.ones(2, int),
                  np.zeros(2, int), output="raw")
    net = QuantizedNetwork([conv, pool, Flatten(), dense], input_shape=(5, 5, 4))
    assert net.shapes[1] == ((5, 5, 4), (1, 1, 4))
    x = rng.integers(-128, 128, (3, 5, 5, 4))
    feature = net.forward_trace(x)[0]
    # 41 / 2**10 is about 1 / 25: the average of the 5x5 image, rounded.
    sums = feature.sum(axis=(1, 2))
    want = np.clip((sums * 41 + 512) >> 10, -128, 127)
    assert net.forward_trace(x)[1].reshape(3, 4).tolist() == want.tolist()


def test_arguments_read_back_and_repr():
    pool = AvgPool2D((2, 3), mult=[1, 2], shift=[3, 4], activation="relu", act_max=6)
    assert (pool.size, pool.stride, pool.kernel_size, pool.strides) == \
        ((2, 3), (2, 3), (2, 3), (2, 3))
    assert pool.mult.tolist() == [1, 2] and pool.shift.tolist() == [3, 4]
    assert (pool.activation, pool.act_min, pool.act_max) == ("relu", None, 6)
    assert pool.bounds(8) == (0, 6) and pool.channels == 2
    assert repr(pool) == ("AvgPool2D(size=(2, 3), stride=(2, 3), channels=2, "
                          "activation='relu', act_max=6)")
    square = AvgPool2D(2, 1, mult=[1], shift=[0])
    assert (square.size, square.stride, square.strides) == (2, 1, (1, 1))
    assert square.output_shape((5, 4, 1)) == (4, 3, 1)
    glob = GlobalAvgPool2D(mult=[1, 2, 3], shift=[0, 0, 0])
    assert glob.output_shape((7, 2, 3)) == (1, 1, 3)
    assert glob.bounds(4) == (-8, 7)
    assert repr(glob) == "GlobalAvgPool2D(channels=3, activation='identity')"


def pool_args(**changes):
    return {"mult": [1, 1], "shift": [0, 0]} | changes


@pytest.mark.parametrize(("make_pool", "pattern"), [
    (lambda: AvgPool2D(0, **pool_args()), r"AvgPool2D: field 'size' is 0; allowed: an "
                                          r"integer >= 1, or a pair of them \(kh, kw\)"),
    (lambda: AvgPool2D((2, 2, 2), **pool_args()), r"'size' is \(2, 2, 2\)"),
    (lambda: AvgPool2D(2, (1, 0), **pool_args()), r"'stride' is \(1, 0\); allowed: an integer "
                                                  r">= 1, or a pair of them \(sy, sx\)"),
    (lambda: AvgPool2D(2, **pool_args(mult=[1.0, 2.0])), r"'mult' has dtype float64"),
    (lambda: AvgPool2D(2, **pool_args(mult=5)), r"'mult' has shape \(\); allowed: \(C,\)"),
    (lambda: AvgPool2D(2, **pool_args(shift=[0])), r"'shift' has shape \(1,\); allowed: "
                                                   r"\(2,\), the shape of 'mult'"),
    (lambda: AvgPool2D(2, **pool_args(activation="leaky_relu")),
     r"'activation' is 'leaky_relu'; allowed: 'identity', 'relu'"),
    (lambda: GlobalAvgPool2D(**pool_args(act_max=1.5)), r"GlobalAvgPool2D: field 'act_max' is "
                                                        r"1.5; allowed: an integer or None"),
])
def test_pool_field_errors(make_pool, pattern):
    with pytest.raises(ValueError, match=pattern):
        make_pool()


@pytest.mark.parametrize(("layers", "shape", "pattern"), [
    ([AvgPool2D((2, 5), **pool_args())], (4, 4, 2),
     r"layer 0: field 'size' is \(2, 5\) but input_shape gives \(4, 4, 2\); allowed: kh <= 4 "
     r"and kw <= 4 \(no padding\)"),
    ([AvgPool2D(2, **pool_args())], (4, 4, 3),
     r"layer 0: field 'mult' has 2 channels but input_shape gives \(4, 4, 3\); allowed: mult "
     r"and shift of shape \(3,\)"),
    ([GlobalAvgPool2D(**pool_args())], (4, 4, 1), r"layer 0: field 'mult' has 2 channels"),
    ([GlobalAvgPool2D(**pool_args(act_min=-200, activation="identity"))], (4, 4, 2),
     r"layer 0: field 'act_min' is -200; allowed: -128\.\.127"),
    ([GlobalAvgPool2D(**pool_args(mult=[1, 1 << 16]))], (4, 4, 2),
     r"layer 0: field 'mult' has 65536 at index 1; allowed: unsigned mult_bits=16"),
    ([GlobalAvgPool2D(**pool_args(shift=[0, 48]))], (4, 4, 2),
     r"layer 0: field 'shift' has 48 at index 1; allowed: acc_bits \+ mult_bits - 1 = 47"),
    ([MaxPool2D(2), Flatten(), GlobalAvgPool2D(**pool_args())], (4, 4, 2),
     r"layer 2: GlobalAvgPool2D needs a spatial input \(H, W, C\) but layer 1 gives \(8,\)"),
])
def test_pool_network_errors(layers, shape, pattern):
    with pytest.raises(ValueError, match=pattern):
        QuantizedNetwork(layers, input_shape=shape)


def test_as_conv_refuses_other_channels():
    with pytest.raises(ValueError, match=r"AvgPool2D: field 'mult' has 2 channels but the input "
                                         r"has 3; allowed: mult and shift of shape \(3,\)"):
        AvgPool2D(2, **pool_args()).as_conv(3)
    with pytest.raises(ValueError, match=r"GlobalAvgPool2D: GlobalAvgPool2D needs a spatial "
                                         r"input"):
        GlobalAvgPool2D(**pool_args()).as_conv((4, 2))


def test_accumulator_overflow_names_the_layer():
    # A 4x4 window of 127 sums to 2032, outside a signed 11-bit accumulator.
    net = QuantizedNetwork([AvgPool2D(4, **pool_args())], input_shape=(4, 4, 2), acc_bits=11)
    with pytest.raises(ValueError, match=r"layer 0: accumulator reaches 2032, outside signed "
                                         r"acc_bits=11"):
        net.forward(np.full((1, 4, 4, 2), 127))
