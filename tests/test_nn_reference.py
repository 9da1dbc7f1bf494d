"""The integer reference against a naive per-element model of section 3 of the brief."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import Dense, QuantizedNetwork, accumulator_bound, requantize

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- the naive model: Python ints, loops, rounding by exact fractions ---------------------------

def model_requant(acc, mult, shift, out_bits):
    """Round ``acc * mult / 2**shift`` half towards +infinity, then saturate."""
    p = acc * mult
    r = p if shift == 0 else math.floor(Fraction(p, 2 ** shift) + Fraction(1, 2))
    return min(max(r, -(2 ** (out_bits - 1))), 2 ** (out_bits - 1) - 1)


def model_forward(x_rows, layers, in_bits):
    """Return every layer's output as nested lists, computed one element at a time."""
    outputs = []
    rows = [[int(v) for v in row] for row in x_rows]
    for w, b, mult, shift, activation, output in layers:
        k_count, n_count = len(w), len(w[0])
        new_rows = []
        for row in rows:
            new_row = []
            for n in range(n_count):
                acc = b[n]
                for k in range(k_count):
                    acc += row[k] * w[k][n]
                if output == "raw":
                    new_row.append(acc)
                    continue
                y = model_requant(acc, mult[n], shift[n], in_bits)
                new_row.append(max(y, 0) if activation == "relu" else y)
            new_rows.append(new_row)
        outputs.append(new_rows)
        rows = new_rows
    return outputs


# -- strategies ---------------------------------------------------------------------------------

@st.composite
def networks(draw, max_layers=3, max_width=5):
    """Draw ``(widths, raw layer tuples, x rows)`` with accumulators that fit acc_bits."""
    in_bits = draw(st.integers(2, 12))
    w_bits = draw(st.integers(2, 12))
    mult_bits = draw(st.integers(1, 32))
    count = draw(st.integers(1, max_layers))
    sizes = [draw(st.integers(1, max_width)) for _ in range(count + 1)]
    bias_bits = draw(st.integers(1, 40))
    # Wide enough for the worst case, sometimes wider than int64 arithmetic can take.
    need = (2 ** (in_bits + w_bits - 2)) * max(sizes) + 2 ** bias_bits
    acc_bits = draw(st.integers(need.bit_length() + 1, 64))
    max_shift = acc_bits + mult_bits - 1

    def signed(bits):
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)

    layers = []
    for i in range(count):
        k, n = sizes[i], sizes[i + 1]
        w = [[draw(signed(w_bits)) for _ in range(n)] for _ in range(k)]
        b = [draw(signed(bias_bits)) for _ in range(n)]
        mult = [draw(st.integers(0, 2 ** mult_bits - 1)) for _ in range(n)]
        # Hit the extremes of the shift range on purpose.
        shift = [draw(st.sampled_from([0, 1, max_shift]) | st.integers(0, max_shift))
                 for _ in range(n)]
        activation = draw(st.sampled_from(["relu", "identity"]))
        output = draw(st.sampled_from(["requant", "raw"])) if i == count - 1 else "requant"
        layers.append((w, b, mult, shift, activation, output))
    m = draw(st.integers(1, 4))
    x = [[draw(signed(in_bits)) for _ in range(sizes[0])] for _ in range(m)]
    widths = {"in_bits": in_bits, "w_bits": w_bits, "acc_bits": acc_bits, "mult_bits": mult_bits}
    return widths, layers, x


def build(widths, layers):
    dense = [Dense(np.array(w), np.array(b), np.array(m), np.array(s),
                   activation=a, output=o) for w, b, m, s, a, o in layers]
    return QuantizedNetwork(dense, **widths)


# -- requantize ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("acc", "mult", "shift", "expected"), [
    (5, 1, 1, 3),        # 2.5 -> 3
    (-5, 1, 1, -2),      # -2.5 -> -2: ties go to +infinity, not away from zero
    (-3, 1, 1, -1),      # -1.5 -> -1
    (3, 1, 1, 2),        # 1.5 -> 2
    (-6, 1, 2, -1),      # -1.5 -> -1
    (7, 3, 0, 21),       # shift 0: no rounding at all
    (1000, 1, 0, 127),   # saturates high
    (-1000, 1, 0, -128),  # saturates low
    (-129, 1, 0, -128),
    (128, 1, 0, 127),
    (-(2 ** 31), 65535, 47, -1),  # the default maximum shift: -0.99998 -> -1
    (2 ** 31 - 1, 65535, 47, 1),  # 0.99998 -> 1
    (-(2 ** 31), 65535, 46, -2),
])
def test_requantize_table(acc, mult, shift, expected):
    assert requantize(np.array([acc]), np.array([mult]), np.array([shift]), 8)[0] == expected
    assert model_requant(acc, mult, shift, 8) == expected


@FAST
@given(st.data())
def test_requantize_matches_model(data):
    acc_bits = data.draw(st.integers(2, 64))
    mult_bits = data.draw(st.integers(1, 32))
    out_bits = data.draw(st.integers(2, 16))
    max_shift = acc_bits + mult_bits - 1
    n = data.draw(st.integers(1, 6))
    m = data.draw(st.integers(1, 4))
    acc = [[data.draw(st.integers(-(2 ** (acc_bits - 1)), 2 ** (acc_bits - 1) - 1))
            for _ in range(n)] for _ in range(m)]
    mult = [data.draw(st.integers(0, 2 ** mult_bits - 1)) for _ in range(n)]
    shift = [data.draw(st.sampled_from([0, max_shift]) | st.integers(0, max_shift))
             for _ in range(n)]
    got = requantize(np.array(acc, dtype=np.int64), np.array(mult), np.array(shift), out_bits)
    assert got.dtype == np.int64
    expected = [[model_requant(a, mult[j], shift[j], out_bits) for j, a in enumerate(row)]
                for row in acc]
    assert got.tolist() == expected


@FAST
@given(k=st.integers(-300, 300), shift=st.integers(1, 54), mult=st.integers(1, 2 ** 16 - 1),
       out_bits=st.integers(2, 10))
def test_requantize_exact_ties(k, shift, mult, out_bits):
    # p = acc * mult lands exactly on k + 1/2 after the shift; choose acc = p / mult.
    p = k * 2 ** shift + 2 ** (shift - 1)
    expected = min(max(k + 1, -(2 ** (out_bits - 1))), 2 ** (out_bits - 1) - 1)
    got = requantize(np.array([p]), np.array([1]), np.array([shift]), out_bits)[0]
    assert got == expected
    # The same tie reached through a multiplier, where mult divides p.
    if p % mult == 0:
        got = requantize(np.array([p // mult]), np.array([mult]), np.array([shift]), out_bits)
        assert got[0] == expected


def test_requantize_object_path_agrees():
    # acc_bits 64 * mult_bits 32 overflows int64: the exact path must take over.
    acc = np.array([2 ** 63 - 1, -(2 ** 63), 12345, -12345], dtype=np.int64)
    mult = np.array([2 ** 32 - 1, 2 ** 32 - 1, 2 ** 31, 3])
    shift = np.array([95, 60, 31, 1])
    expected = [model_requant(int(a), int(m), int(s), 16)
                for a, m, s in zip(acc, mult, shift, strict=True)]
    assert requantize(acc, mult, shift, 16).tolist() == expected
    assert expected == [1, -32768, 12345, -18517]  # ~0.99999..., -2**35, exact, -18517.5
    # Accumulators wider than int64 are accepted as Python integers.
    wide = np.array([2 ** 70 + 2 ** 59, -(2 ** 70) - 2 ** 59, 2 ** 80], dtype=object)
    assert requantize(wide, np.array([1]), np.array([60]), 16).tolist() == [1025, -1024, 32767]
    with pytest.raises(ValueError, match=r"'acc' holds float 1\.5"):
        requantize(np.array([1.5], dtype=object), np.array([1]), np.array([0]), 8)


def test_requantize_rejects_bad_operands():
    with pytest.raises(ValueError, match="out_bits"):
        requantize(np.array([1]), np.array([1]), np.array([0]), 0)
    with pytest.raises(ValueError, match="'mult'"):
        requantize(np.array([1]), np.array([-1]), np.array([0]), 8)
    with pytest.raises(ValueError, match="'shift'"):
        requantize(np.array([1]), np.array([1]), np.array([-1]), 8)
    with pytest.raises(ValueError, match=r"'acc'.*dtype float64"):
        requantize(np.array([1.0]), np.array([1]), np.array([0]), 8)


# -- the network ---------------------------------------------------------------------------------

@FAST
@given(networks())
def test_forward_matches_model(case):
    widths, layers, x = case
    net = build(widths, layers)
    trace = net.forward_trace(np.array(x, dtype=np.int64))
    expected = model_forward(x, layers, widths["in_bits"])
    assert [t.tolist() for t in trace] == expected
    assert all(t.dtype == np.int64 for t in trace)
    assert net.forward(np.array(x)).tolist() == expected[-1]


def test_saturation_both_sides_and_relu():
    w = np.array([[1, -1, 1, -1]])
    layer = Dense(w, np.zeros(4, dtype=int), np.ones(4, dtype=int), np.zeros(4, dtype=int),
                  activation="identity")
    net = QuantizedNetwork([layer], in_bits=4, w_bits=4, acc_bits=16, mult_bits=8)
    # Scale up through the mult so that both rails are hit.
    layer.mult[:] = 200
    assert net.forward(np.array([[7], [-8], [0]])).tolist() == [
        [7, -8, 7, -8], [-8, 7, -8, 7], [0, 0, 0, 0]]
    layer.activation = "relu"
    assert net.forward(np.array([[7], [-8]])).tolist() == [[7, 0, 7, 0], [0, 7, 0, 7]]


def test_large_batch_matches_model():
    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, size=(64, 16))
    b = rng.integers(-5000, 5000, size=16)
    mult = rng.integers(2 ** 15, 2 ** 16, size=16)
    shift = rng.integers(20, 26, size=16)
    layers = [(w.tolist(), b.tolist(), mult.tolist(), shift.tolist(), "relu", "requant")]
    net = build({"in_bits": 8, "w_bits": 8, "acc_bits": 32, "mult_bits": 16}, layers)
    x = rng.integers(-128, 128, size=(3000, 64))
    got = net.forward(x)
    assert got.shape == (3000, 16)
    rows = rng.choice(3000, size=40, replace=False)
    assert got[rows].tolist() == model_forward(x[rows].tolist(), layers, 8)[-1]


def test_wide_accumulators_are_exact():
    # 64-bit accumulators whose sums exceed float64's exact range but fit int64, and a raw
    # output: both the int64 and the exact path must agree with Python integers.
    w = [[2 ** 40 - 1, -(2 ** 40)], [2 ** 40 - 3, 2 ** 40 - 5]]
    layers = [(w, [2 ** 50 + 1, -7], [1, 1], [0, 0], "identity", "raw")]
    net = build({"in_bits": 16, "w_bits": 42, "acc_bits": 64, "mult_bits": 16}, layers)
    x = [[32767, -32768], [-32768, -32768], [12345, 1]]
    assert net.forward(np.array(x)).tolist() == model_forward(x, layers, 16)[-1]


def test_accumulator_bound_beyond_int64_is_still_exact():
    # The worst case overflows int64, so the sums are done with Python integers; these inputs
    # keep the actual accumulators inside acc_bits=64, and the requantization is wide too.
    w = [[2 ** 59 - 1, -(2 ** 59)], [-(2 ** 59) + 3, 2 ** 58]]
    layers = [(w, [5, -5], [2 ** 32 - 1, 12345], [70, 40], "identity", "requant")]
    net = build({"in_bits": 16, "w_bits": 61, "acc_bits": 64, "mult_bits": 32}, layers)
    assert accumulator_bound(net.layers[0], 16) > 2 ** 63
    x = [[7, -8], [-8, -8], [3, 3]]
    assert net.forward(np.array(x)).tolist() == model_forward(x, layers, 16)[-1]


def test_empty_batch():
    layer = Dense([[1, 2]], [0, 0], [1, 1], [0, 0])
    assert QuantizedNetwork([layer]).forward(np.zeros((0, 1), dtype=int)).shape == (0, 2)


def test_dense_attributes():
    weight = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int8)
    layer = Dense(weight, [1, 2, 3], [1, 1, 1], [0, 0, 0])
    weight[0, 0] = 99  # the layer keeps its own copy
    assert layer.weight.dtype == np.int64 and layer.weight[0, 0] == 1
    assert all(a.dtype == np.int64 for a in (layer.bias, layer.mult, layer.shift))
    assert (layer.in_features, layer.out_features) == (2, 3)
    assert (layer.activation, layer.output) == ("relu", "requant")


def test_accumulator_bound():
    w = np.array([[3, -4], [-128, 7], [0, 127]])
    b = np.array([-1000, 5])
    layer = Dense(w, b, [1, 1], [0, 0])
    # Column sums of |W| are 131 and 138: 128 * 131 + 1000 = 17768, 128 * 138 + 5 = 17669.
    assert accumulator_bound(layer, 8) == 17768
    assert accumulator_bound(layer, 2) == 2 * 131 + 1000


@FAST
@given(st.data())
def test_accumulator_bound_covers_every_partial_sum(data):
    in_bits = data.draw(st.integers(2, 8))
    k = data.draw(st.integers(1, 4))
    w = np.array([[data.draw(st.integers(-128, 127))] for _ in range(k)])
    b = data.draw(st.integers(-1000, 1000))
    layer = Dense(w, [b], [1], [0])
    extremes = (-(2 ** (in_bits - 1)), 2 ** (in_bits - 1) - 1)
    # Every subset of products at extreme inputs, the bias added or not.
    worst = 0
    sums = {0}
    for row in w[:, 0].tolist():
        sums |= {s + x * row for s in sums for x in extremes}
    worst = max(abs(s + extra) for s in sums for extra in (0, b))
    bound = accumulator_bound(layer, in_bits)
    assert bound >= worst
    assert bound == 2 ** (in_bits - 1) * sum(abs(v) for v in w[:, 0].tolist()) + abs(b)


def test_accumulator_overflow_at_forward_time():
    layer0 = Dense([[127, 127]], [0, 0], [1, 1], [0, 0])
    layer1 = Dense([[127], [127]], [0], [1], [0], output="raw")
    net = QuantizedNetwork([layer0, layer1], acc_bits=16)
    assert net.forward(np.array([[1]])).tolist() == [[2 * 127 * 127]]
    with pytest.raises(ValueError, match=r"layer 0: accumulator reaches 16129.*acc_bits=14"):
        QuantizedNetwork([layer0, layer1], acc_bits=14).forward(np.array([[127]]))
    with pytest.raises(ValueError, match=r"layer 1: accumulator reaches 32258.*acc_bits=15"):
        QuantizedNetwork([layer0, layer1], acc_bits=15).forward(np.array([[127]]))


def test_quantize_input_and_predict():
    layer = Dense([[1, -1], [1, 1]], [0, 0], [1, 1], [0, 0], output="raw")
    net = QuantizedNetwork([layer], in_bits=4, input_scale=0.5)
    q = net.quantize_input(np.array([[0.75, -0.25], [100.0, -100.0], [-1.0, 0.24]]))
    assert q.tolist() == [[2, 0], [7, -8], [-2, 0]]  # rint: 1.5 -> 2, -0.5 -> 0
    # Quantized to [-2, 2] and [2, 2]: outputs (x0 + x1, x1 - x0) = (0, 4) and (4, 0).
    assert net.predict(np.array([[-1.0, 1.0], [1.0, 1.0]])).tolist() == [1, 0]
    with pytest.raises(ValueError, match="no input_scale"):
        QuantizedNetwork([layer]).quantize_input(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="NaN"):
        net.quantize_input(np.array([[np.nan, 0.0]]))


# -- every ValueError path ----------------------------------------------------------------------

def dense(k=2, n=2, **kw):
    args = {"weight": np.ones((k, n), dtype=int), "bias": np.zeros(n, dtype=int),
            "mult": np.ones(n, dtype=int), "shift": np.zeros(n, dtype=int)}
    args.update(kw)
    return args


def make(args):
    positional = [args.pop(f) for f in ("weight", "bias", "mult", "shift")]
    return Dense(*positional, **args)


@pytest.mark.parametrize(("args", "pattern"), [
    (dense(weight=np.ones((2, 2))), r"Dense: field 'weight' has dtype float64.*integer"),
    (dense(bias=np.array([True, False])), r"'bias' has dtype bool.*integer"),
    (dense(mult=np.array([1, 2.5])), r"'mult' has dtype float64"),
    (dense(shift=np.array([1, "a"], dtype=object)), r"'shift' holds str"),
    (dense(weight=np.ones(3, dtype=int)), r"'weight' has shape \(3,\).*\(K, N\)"),
    (dense(weight=np.ones((0, 2), dtype=int)), r"'weight' has shape \(0, 2\)"),
    (dense(bias=np.zeros(3, dtype=int)), r"'bias' has shape \(3,\); allowed: \(2,\)"),
    (dense(mult=np.ones((1, 2), dtype=int)), r"'mult' has shape \(1, 2\); allowed: \(2,\)"),
    (dense(shift=np.zeros(1, dtype=int)), r"'shift' has shape \(1,\); allowed: \(2,\)"),
    (dense(activation="sigmoid"), r"'activation' is 'sigmoid'; allowed: 'relu', 'identity'"),
    (dense(output="float"), r"'output' is 'float'; allowed: 'requant', 'raw'"),
    (dense(bias=np.array([2 ** 70, 0], dtype=object)), r"'bias' holds .* does not fit int64"),
])
def test_dense_errors(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        make(args)


def mutate(field, value):
    """Return layers whose layer 1 has ``field`` replaced after construction."""
    layers = [make(dense(4, 3)), make(dense(3, 2)), make(dense(2, 2, output="raw"))]
    setattr(layers[1], field, value)
    return layers


@pytest.mark.parametrize(("layers", "kwargs", "pattern"), [
    (mutate("weight", np.full((3, 2), 128)), {},
     r"layer 1: field 'weight' has 128 at index \(0, 0\); allowed: signed w_bits=8, -128..127"),
    (mutate("weight", np.full((3, 2), -129)), {}, r"layer 1: field 'weight' has -129"),
    (mutate("bias", np.array([0, -(2 ** 31) - 1])), {},
     r"layer 1: field 'bias' has -2147483649 at index 1; allowed: signed acc_bits=32"),
    (mutate("mult", np.array([2 ** 16, 0])), {},
     r"layer 1: field 'mult' has 65536 at index 0; allowed: unsigned mult_bits=16, 0..65535"),
    (mutate("mult", np.array([-1, 0])), {}, r"layer 1: field 'mult' has -1"),
    (mutate("shift", np.array([0, 48])), {},
     r"layer 1: field 'shift' has 48 at index 1; allowed: acc_bits \+ mult_bits - 1 = 47"),
    (mutate("shift", np.array([-1, 0])), {}, r"layer 1: field 'shift' has -1"),
    (mutate("weight", np.ones((2, 2), dtype=int)), {},
     r"layer 1: field 'weight' has 2 inputs but layer 0 has 3 outputs"),
    (mutate("weight", np.ones((3, 3), dtype=int)), {}, r"layer 1: field 'bias' has shape \(2,\)"),
    (mutate("weight", np.ones((3, 2))), {}, r"layer 1: field 'weight' has dtype float64"),
    (mutate("output", "raw"), {}, r"layer 1: field 'output' is 'raw' but the layer is not the"),
    (mutate("activation", "tanh"), {}, r"layer 1: field 'activation' is 'tanh'"),
    ([], {}, r"field 'layers' is empty"),
    ([make(dense())], {"in_bits": 1}, r"in_bits=1; allowed: an integer in 2..64"),
    ([make(dense())], {"acc_bits": 65}, r"acc_bits=65; allowed"),
    ([make(dense())], {"mult_bits": 8.0}, r"mult_bits=8.0; allowed"),
    ([make(dense())], {"input_scale": -1.0}, r"input_scale=-1.0"),
    ([make(dense())], {"output_scale": [1.0]}, r"output_scale has shape \(1,\); allowed: \(2,\)"),
])
def test_network_errors(layers, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        QuantizedNetwork(layers, **kwargs)


def test_layer_type_error():
    with pytest.raises(TypeError, match="layer 0: tuple is not a Dense layer"):
        QuantizedNetwork([(1, 2)])


def test_mutation_after_construction_is_caught_at_forward():
    net = QuantizedNetwork([make(dense(2, 2))])
    net.layers[0].weight = np.full((2, 2), 1000)
    with pytest.raises(ValueError, match="layer 0: field 'weight' has 1000"):
        net.forward(np.zeros((1, 2), dtype=int))


@pytest.mark.parametrize(("x", "pattern"), [
    (np.zeros(2, dtype=int), r"input: field 'x' has shape \(2,\); allowed: 2-D \(M, 2\)"),
    (np.zeros((1, 3), dtype=int), r"'x' has shape \(1, 3\); allowed: \(M, 2\)"),
    (np.zeros((1, 2)), r"'x' has dtype float64"),
    (np.array([[0, 128]]), r"'x' has 128 at index \(0, 1\); allowed: signed in_bits=8"),
    (np.array([[-129, 0]]), r"'x' has -129"),
])
def test_input_errors(x, pattern):
    net = QuantizedNetwork([make(dense(2, 2))])
    with pytest.raises(ValueError, match=pattern):
        net.forward(x)
