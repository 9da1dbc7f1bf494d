"""The general Conv2D of section 3.2 (groups, rectangular kernels, per-axis strides, four-sided
padding, activation bounds, leaky ReLU) against a per-element model written here.

The model loops over m, oy, ox, n, ky, kx and the group's channels, pads by bounds checks, picks
``mult`` or ``mult_neg`` by the accumulator's sign, rounds with the exact-fraction ``requant``
of ``conftest.py`` and clamps to the bounds: it shares no code with :mod:`hwgen.nn`.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import Conv2D, Dense, QuantizedNetwork, accumulator_bound

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def signed(bits):
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def finish(naive, acc, layer, n, in_bits):
    """One accumulator of channel ``n`` to the layer's output value (section 3.2)."""
    if layer["output"] == "raw":
        return acc
    leaky = layer["activation"] == "leaky_relu"
    mult = layer["mult_neg"][n] if leaky and acc < 0 else layer["mult"][n]
    y = naive.requant(acc, mult, layer["shift"][n], in_bits)
    low, high = -(2 ** (in_bits - 1)), 2 ** (in_bits - 1) - 1
    lo = layer["act_min"] if layer["act_min"] is not None else \
        (0 if layer["activation"] == "relu" else low)
    hi = layer["act_max"] if layer["act_max"] is not None else high
    return min(max(y, lo), hi)


def conv_loops(naive, x, layer, in_bits):
    """NHWC ``x`` through a general convolution, one element at a time."""
    w, b, g = layer["weight"], layer["bias"], layer["groups"]
    (sy, sx), (top, bottom, left, right) = layer["strides"], layer["pads"]
    h, wd = len(x[0]), len(x[0][0])
    kh, kw, cg, c_out = len(w), len(w[0]), len(w[0][0]), len(w[0][0][0])
    ng = c_out // g
    oh, ow = (h + top + bottom - kh) // sy + 1, (wd + left + right - kw) // sx + 1
    out = np.zeros((len(x), oh, ow, c_out), dtype=object)
    for m in range(len(x)):
        for oy in range(oh):
            for ox in range(ow):
                for n in range(c_out):
                    j = n // ng
                    acc = b[n]
                    for ky in range(kh):
                        for kx in range(kw):
                            iy, ix = oy * sy + ky - top, ox * sx + kx - left
                            if not (0 <= iy < h and 0 <= ix < wd):
                                continue
                            for c in range(cg):
                                acc += x[m][iy][ix][j * cg + c] * w[ky][kx][c][n]
                    out[m, oy, ox, n] = finish(naive, acc, layer, n, in_bits)
    return out


@st.composite
def activation_fields(draw, n, in_bits, mult_bits):
    """Draw ``activation``, ``act_min``, ``act_max`` and ``mult_neg`` (given iff leaky)."""
    activation = draw(st.sampled_from(["relu", "identity", "leaky_relu"]))
    low, high = -(2 ** (in_bits - 1)), 2 ** (in_bits - 1) - 1
    floor = 0 if activation == "relu" else low
    act_min = draw(st.none() | st.integers(floor, high))
    act_max = draw(st.none() | st.integers(floor if act_min is None else act_min, high))
    mult_neg = ([draw(st.integers(0, 2 ** mult_bits - 1)) for _ in range(n)]
                if activation == "leaky_relu" else None)
    return {"activation": activation, "act_min": act_min, "act_max": act_max,
            "mult_neg": mult_neg}


@st.composite
def conv_cases(draw):
    """Draw ``(widths, layer dict, input_shape, x)`` over every field of section 3.2."""
    in_bits, w_bits, mult_bits = draw(st.integers(2, 10)), draw(st.integers(2, 8)), \
        draw(st.integers(1, 20))
    # groups from 1 to C_in: cg = 1 is depthwise (ng > 1: a depth multiplier).
    g = draw(st.integers(1, 4))
    cg, ng = draw(st.sampled_from([1]) | st.integers(1, 3)), draw(st.integers(1, 3))
    c_in, c_out = g * cg, g * ng
    h, w = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
    ph, pw = h + pads[0] + pads[1], w + pads[2] + pads[3]
    # 1x1, kernels as large as the padded input, and everything between, per axis.
    kh = draw(st.sampled_from([1, ph]) | st.integers(1, ph))
    kw = draw(st.sampled_from([1, pw]) | st.integers(1, pw))
    strides = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    bias_bits = draw(st.integers(1, 20))
    need = 2 ** (in_bits + w_bits - 2) * kh * kw * cg + 2 ** bias_bits
    acc_bits = draw(st.integers(need.bit_length() + 1, 64))
    max_shift = acc_bits + mult_bits - 1
    layer = {
        "strides": strides, "pads": pads, "groups": g,
        "weight": [[[[draw(signed(w_bits)) for _ in range(c_out)] for _ in range(cg)]
                    for _ in range(kw)] for _ in range(kh)],
        "bias": [draw(signed(bias_bits)) for _ in range(c_out)],
        "mult": [draw(st.integers(0, 2 ** mult_bits - 1)) for _ in range(c_out)],
        "shift": [draw(st.sampled_from([0, 1, max_shift]) | st.integers(0, max_shift))
                  for _ in range(c_out)],
        "output": draw(st.sampled_from(["requant", "requant", "raw"])),
        **draw(activation_fields(c_out, in_bits, mult_bits)),
    }
    # Every form of the arguments: one int where both axes (or all sides) agree.
    layer["stride"] = strides[0] if strides[0] == strides[1] and draw(st.booleans()) \
        else strides
    layer["padding"] = draw(st.sampled_from(
        [pads] + ([(pads[0], pads[2])] if pads[0] == pads[1] and pads[2] == pads[3] else [])
        + ([pads[0]] if len(set(pads)) == 1 else [])))
    m = draw(st.integers(1, 3))
    x = [[[[draw(signed(in_bits)) for _ in range(c_in)] for _ in range(w)] for _ in range(h)]
         for _ in range(m)]
    widths = {"in_bits": in_bits, "w_bits": w_bits, "acc_bits": acc_bits, "mult_bits": mult_bits}
    return widths, layer, (h, w, c_in), x


def make(layer):
    mult_neg = None if layer["mult_neg"] is None else np.array(layer["mult_neg"])
    return Conv2D(np.array(layer["weight"]), np.array(layer["bias"]), np.array(layer["mult"]),
                  np.array(layer["shift"]), stride=layer["stride"], padding=layer["padding"],
                  groups=layer["groups"], activation=layer["activation"],
                  output=layer["output"], act_min=layer["act_min"], act_max=layer["act_max"],
                  mult_neg=mult_neg)


@FAST
@given(conv_cases())
def test_general_conv_matches_loops(naive, case):
    widths, layer, shape, x = case
    conv = make(layer)
    net = QuantizedNetwork([conv], input_shape=shape, **widths)
    want = conv_loops(naive, x, layer, widths["in_bits"])
    got = net.forward(np.array(x, dtype=object))
    assert got.shape == want.shape == (len(x), *net.output_shape)
    assert got.tolist() == want.tolist()
    # The layer's own forward is the network's.
    assert conv.forward(np.array(x), widths["in_bits"], widths["acc_bits"]).tolist() \
        == got.tolist()


@FAST
@given(conv_cases())
def test_normalised_properties(case):
    _, layer, (h, w, c_in), _ = case
    conv = make(layer)
    kh, kw = len(layer["weight"]), len(layer["weight"][0])
    cg = len(layer["weight"][0][0])
    assert conv.stride == layer["stride"] and conv.padding == layer["padding"]
    assert conv.strides == layer["strides"] and conv.pads == layer["pads"]
    assert conv.groups == layer["groups"] and conv.in_channels == c_in
    assert conv.kernel_size == (kh, kw) and conv.patch_size == kh * kw * cg
    assert conv.out_channels == len(layer["bias"])
    assert conv.matrix.shape == (kh * kw * cg, conv.out_channels)
    top, bottom, left, right = layer["pads"]
    sy, sx = layer["strides"]
    assert conv.output_shape((h, w, c_in)) == ((h + top + bottom - kh) // sy + 1,
                                               (w + left + right - kw) // sx + 1,
                                               conv.out_channels)


def test_arguments_read_back_as_given():
    args = (np.ones((3, 1, 2, 4), int), np.zeros(4, int), np.ones(4, int), np.zeros(4, int))
    conv = Conv2D(*args, stride=2, padding=(1, 0), groups=2, activation="leaky_relu",
                  act_min=-5, act_max=9, mult_neg=[1, 2, 3, 4])
    assert (conv.stride, conv.padding, conv.groups) == (2, (1, 0), 2)
    assert (conv.strides, conv.pads) == ((2, 2), (1, 1, 0, 0))
    assert (conv.activation, conv.act_min, conv.act_max) == ("leaky_relu", -5, 9)
    assert conv.mult_neg.tolist() == [1, 2, 3, 4]
    assert conv.in_channels == 4 and conv.patch_size == 3 * 1 * 2
    assert conv.bounds(8) == (-5, 9)
    assert "groups=2" in repr(conv) and "act_min=-5" in repr(conv)
    plain = Conv2D(*args[:1], *args[1:])
    assert (plain.stride, plain.padding, plain.groups, plain.mult_neg) == (1, 0, 1, None)
    assert plain.bounds(8) == (0, 127) and plain.in_channels == 2


@pytest.mark.parametrize(("activation", "act_min", "act_max", "bits", "want"), [
    ("relu", None, None, 8, (0, 127)),
    ("identity", None, None, 8, (-128, 127)),
    ("leaky_relu", None, None, 4, (-8, 7)),
    ("relu", 3, 6, 8, (3, 6)),              # a ReLU6 in steps of 1
    ("identity", -1, 1, 2, (-1, 1)),        # a Hardtanh at the widest 2-bit range
])
def test_bounds_defaults_follow_activation(activation, act_min, act_max, bits, want):
    mult_neg = [1] if activation == "leaky_relu" else None
    layer = Dense([[1]], [0], [1], [0], activation=activation, act_min=act_min,
                  act_max=act_max, mult_neg=mult_neg)
    assert layer.bounds(bits) == want


@st.composite
def dense_cases(draw):
    in_bits, w_bits, mult_bits = draw(st.integers(2, 10)), draw(st.integers(2, 8)), \
        draw(st.integers(1, 20))
    k, n = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    need = 2 ** (in_bits + w_bits - 2) * k + 2 ** 16
    acc_bits = draw(st.integers(need.bit_length() + 1, 64))
    max_shift = acc_bits + mult_bits - 1
    layer = {
        "weight": [[draw(signed(w_bits)) for _ in range(n)] for _ in range(k)],
        "bias": [draw(signed(16)) for _ in range(n)],
        "mult": [draw(st.integers(0, 2 ** mult_bits - 1)) for _ in range(n)],
        "shift": [draw(st.integers(0, max_shift)) for _ in range(n)],
        "output": "requant",
        **draw(activation_fields(n, in_bits, mult_bits)),
    }
    x = [[draw(signed(in_bits)) for _ in range(k)] for _ in range(draw(st.integers(1, 4)))]
    widths = {"in_bits": in_bits, "w_bits": w_bits, "acc_bits": acc_bits, "mult_bits": mult_bits}
    return widths, layer, x


@FAST
@given(dense_cases())
def test_dense_bounds_and_leaky_match_loops(naive, case):
    widths, layer, x = case
    dense = Dense(np.array(layer["weight"]), np.array(layer["bias"]), np.array(layer["mult"]),
                  np.array(layer["shift"]), activation=layer["activation"],
                  act_min=layer["act_min"], act_max=layer["act_max"],
                  mult_neg=layer["mult_neg"])
    want = [[finish(naive, layer["bias"][n] + sum(row[i] * layer["weight"][i][n]
                                                  for i in range(len(row))),
                    layer, n, widths["in_bits"])
             for n in range(len(layer["bias"]))] for row in x]
    assert QuantizedNetwork([dense], **widths).forward(np.array(x)).tolist() == want


def test_depthwise_costs_the_group_only():
    # The accumulator bound of a depthwise layer sums one channel's kernel, not C_in of them.
    weight = np.full((3, 3, 1, 8), 2)
    conv = Conv2D(weight, np.zeros(8, int), np.ones(8, int), np.zeros(8, int), groups=8)
    assert accumulator_bound(conv, 8) == 128 * 9 * 2
    assert conv.patch_size == 9


# -- errors ------------------------------------------------------------------------------------

def conv_args(**changes):
    args = {"weight": np.ones((2, 2, 2, 4), int), "bias": np.zeros(4, int),
            "mult": np.ones(4, int), "shift": np.zeros(4, int)}
    return args | changes


@pytest.mark.parametrize(("args", "pattern"), [
    (conv_args(groups=0), r"Conv2D: field 'groups' is 0; allowed: an integer >= 1, dividing "
                          r"C_in and C_out"),
    (conv_args(groups=2.0), r"'groups' is 2.0; allowed: an integer >= 1"),
    (conv_args(groups=3), r"'groups' is 3 but 'weight' has C_out=4 \(2, 2, 2, 4\); allowed: a "
                          r"divisor of C_out"),
    (conv_args(stride=(1, 0)), r"'stride' is \(1, 0\); allowed: an integer >= 1, or a pair of "
                               r"them \(sy, sx\)"),
    (conv_args(stride=(1, 2.0)), r"'stride' is \(1, 2.0\)"),
    (conv_args(padding=(1, 2, 3)), r"'padding' is \(1, 2, 3\); allowed: an integer >= 0, "
                                   r"\(ph, pw\) or \(top, bottom, left, right\)"),
    (conv_args(padding=(0, 0, -1, 0)), r"'padding' is \(0, 0, -1, 0\); allowed"),
    (conv_args(padding="same"), r"'padding' is 'same'; allowed"),
    (conv_args(activation="leaky_relu"), r"'mult_neg' is None but 'activation' is "
                                         r"'leaky_relu'; allowed: one unsigned multiplier"),
    (conv_args(mult_neg=[1, 1, 1, 1]), r"'mult_neg' is given but 'activation' is 'relu'; "
                                       r"allowed: mult_neg=None, or activation='leaky_relu'"),
    (conv_args(activation="leaky_relu", mult_neg=[1, 1]),
     r"'mult_neg' has shape \(2,\); allowed: \(4,\), one value per output channel"),
    (conv_args(activation="leaky_relu", mult_neg=[1.0] * 4), r"'mult_neg' has dtype float64"),
    (conv_args(act_min=0.5), r"'act_min' is 0.5; allowed: an integer or None"),
    (conv_args(act_max="6"), r"'act_max' is '6'; allowed: an integer or None"),
    (conv_args(activation="sigmoid"),
     r"'activation' is 'sigmoid'; allowed: 'relu', 'identity', 'leaky_relu'"),
])
def test_conv_field_errors(args, pattern):
    positional = [args.pop(f) for f in ("weight", "bias", "mult", "shift")]
    with pytest.raises(ValueError, match=pattern):
        Conv2D(*positional, **args)


def network(input_shape=(4, 4, 4), in_bits=8, mult_bits=16, **changes):
    args = conv_args(**changes)
    positional = [args.pop(f) for f in ("weight", "bias", "mult", "shift")]
    return QuantizedNetwork([Conv2D(*positional, **args)], input_shape=input_shape,
                            in_bits=in_bits, mult_bits=mult_bits)


@pytest.mark.parametrize(("changes", "pattern"), [
    # bounds outside the saturation range, or reversed
    ({"act_max": 128}, r"layer 0: field 'act_max' is 128; allowed: -128\.\.127, inside the "
                       r"saturation range of signed 8 bits \(in_bits=8\)"),
    ({"act_min": -129, "activation": "identity"}, r"layer 0: field 'act_min' is -129; allowed: "
                                                  r"-128\.\.127"),
    ({"act_min": 9, "act_max": 3}, r"layer 0: field 'act_min' is 9 but 'act_max' is 3; "
                                   r"allowed: act_min <= act_max"),
    ({"act_max": -1}, r"layer 0: field 'act_min' is 0 but 'act_max' is -1"),   # relu's floor
    ({"act_min": -3}, r"layer 0: field 'act_min' is -3 but 'activation' is 'relu'; allowed: "
                      r"act_min >= 0 \(a negative floor is activation='identity'\)"),
    ({"activation": "leaky_relu", "mult_neg": [1, 2, 3, 1 << 16]},
     r"layer 0: field 'mult_neg' has 65536 at index 3; allowed: unsigned mult_bits=16, "
     r"0\.\.65535"),
    ({"activation": "leaky_relu", "mult_neg": [1, -2, 3, 4]},
     r"layer 0: field 'mult_neg' has -2 at index 1; allowed: unsigned mult_bits=16"),
    # groups that do not divide C_in: the weight's C_in // groups times groups is not C
    ({"groups": 2, "input_shape": (4, 4, 3)},
     r"layer 0: field 'weight' has C_in=4 \(C_in // groups = 2, groups=2\) but input_shape "
     r"gives 3 channels \(4, 4, 3\); allowed: groups dividing 3"),
    ({"groups": 2, "input_shape": (4, 4, 6)},
     r"C_in=4 \(C_in // groups = 2, groups=2\) but input_shape gives 6 channels \(4, 4, 6\); "
     r"allowed: weight of shape \(KH, KW, 3, C_out\) with groups=2"),
    # a kernel larger than the padded input on one axis only
    ({"weight": np.ones((5, 2, 2, 4), int), "padding": (0, 0, 0, 0)},
     r"layer 0: field 'weight' has KH=5 but input_shape gives \(4, 4, 2\), 4 wide on that axis "
     r"with padding=\(0, 0, 0, 0\); allowed: KH <= 4"),
    ({"weight": np.ones((2, 6, 2, 4), int), "padding": (3, 3, 1, 0)},
     r"field 'weight' has KW=6 but input_shape gives \(4, 4, 2\), 5 wide on that axis with "
     r"padding=\(3, 3, 1, 0\); allowed: KW <= 5"),
])
def test_network_field_errors(changes, pattern):
    changes = {"input_shape": (4, 4, 2)} | changes
    with pytest.raises(ValueError, match=pattern):
        network(**changes)


def test_raw_output_ignores_bounds():
    # The bounds apply to requantized outputs only: a raw last layer returns its accumulators.
    conv = Conv2D(np.ones((1, 1, 1, 1), int), [0], [1], [0], output="raw", act_max=1)
    net = QuantizedNetwork([conv], input_shape=(1, 1, 1))
    assert net.forward(np.array([[[[100]]]])).tolist() == [[[[100]]]]
