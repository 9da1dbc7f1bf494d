"""The integer network against the naive per-element models of ``conftest.py``."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import Conv2D, Dense, Flatten, MaxPool2D, QuantizedNetwork, accumulator_bound

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def signed(bits):
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def channel_fields(draw, n, mult_bits, max_shift, bias_bits):
    return {
        "bias": [draw(signed(bias_bits)) for _ in range(n)],
        "mult": [draw(st.integers(0, 2 ** mult_bits - 1)) for _ in range(n)],
        # Hit the extremes of the shift range on purpose.
        "shift": [draw(st.sampled_from([0, 1, max_shift]) | st.integers(0, max_shift))
                  for _ in range(n)],
        "activation": draw(st.sampled_from(["relu", "identity"])),
        "output": "requant",
    }


@st.composite
def dense_networks(draw, max_layers=3, max_width=5):
    """Draw ``(widths, layer dicts, None, x rows)`` with accumulators that fit acc_bits."""
    in_bits, w_bits, mult_bits = (draw(st.integers(2, 12)), draw(st.integers(2, 12)),
                                  draw(st.integers(1, 32)))
    count = draw(st.integers(1, max_layers))
    sizes = [draw(st.integers(1, max_width)) for _ in range(count + 1)]
    bias_bits = draw(st.integers(1, 40))
    # Wide enough for the worst case, sometimes wider than int64 arithmetic can take.
    need = (2 ** (in_bits + w_bits - 2)) * max(sizes) + 2 ** bias_bits
    acc_bits = draw(st.integers(need.bit_length() + 1, 64))
    layers = []
    for i in range(count):
        k, n = sizes[i], sizes[i + 1]
        layer = {"kind": "dense", "weight": [[draw(signed(w_bits)) for _ in range(n)]
                                             for _ in range(k)]}
        layer.update(channel_fields(draw, n, mult_bits, acc_bits + mult_bits - 1, bias_bits))
        layers.append(layer)
    layers[-1]["output"] = draw(st.sampled_from(["requant", "raw"]))
    m = draw(st.integers(1, 4))
    x = [[draw(signed(in_bits)) for _ in range(sizes[0])] for _ in range(m)]
    widths = {"in_bits": in_bits, "w_bits": w_bits, "acc_bits": acc_bits, "mult_bits": mult_bits}
    return widths, layers, None, x


@st.composite
def spatial_networks(draw):
    """Draw conv/pool chains, optionally flattened into dense layers, with their inputs."""
    in_bits, w_bits, mult_bits = (draw(st.integers(2, 8)), draw(st.integers(2, 8)),
                                  draw(st.integers(1, 20)))
    bias_bits = draw(st.integers(1, 16))
    acc_bits = 64 - draw(st.integers(0, 8))  # generous: the worst case is checked below
    max_shift = acc_bits + mult_bits - 1
    shape = (draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.integers(1, 3)))
    input_shape, layers = shape, []
    for _ in range(draw(st.integers(1, 3))):
        h, w, c = shape
        if draw(st.booleans()):
            size = draw(st.integers(1, min(h, w)))
            stride = draw(st.integers(1, 3))
            layers.append({"kind": "pool", "size": size, "stride": stride})
            shape = ((h - size) // stride + 1, (w - size) // stride + 1, c)
            continue
        n, p = draw(st.integers(1, 3)), draw(st.integers(0, 2))
        kh = draw(st.sampled_from([1, h + 2 * p]) | st.integers(1, h + 2 * p))
        kw = draw(st.sampled_from([1, w + 2 * p]) | st.integers(1, w + 2 * p))
        s = draw(st.integers(1, 3))
        layer = {"kind": "conv", "stride": s, "padding": p,
                 "weight": [[[[draw(signed(w_bits)) for _ in range(n)] for _ in range(c)]
                             for _ in range(kw)] for _ in range(kh)]}
        layer.update(channel_fields(draw, n, mult_bits, max_shift, bias_bits))
        layers.append(layer)
        shape = ((h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1, n)
    if draw(st.booleans()):
        layers.append({"kind": "flatten"})
        k = shape[0] * shape[1] * shape[2]
        for _ in range(draw(st.integers(0, 2))):
            n = draw(st.integers(1, 4))
            layer = {"kind": "dense", "weight": [[draw(signed(w_bits)) for _ in range(n)]
                                                 for _ in range(k)]}
            layer.update(channel_fields(draw, n, mult_bits, max_shift, bias_bits))
            layers.append(layer)
            k = n
    if layers[-1]["kind"] in ("conv", "dense"):
        layers[-1]["output"] = draw(st.sampled_from(["requant", "raw"]))
    m = draw(st.integers(1, 3))
    h, w, c = input_shape
    x = [[[[draw(signed(in_bits)) for _ in range(c)] for _ in range(w)] for _ in range(h)]
         for _ in range(m)]
    widths = {"in_bits": in_bits, "w_bits": w_bits, "acc_bits": acc_bits, "mult_bits": mult_bits}
    return widths, layers, input_shape, x


def make(layer):
    kind = layer["kind"]
    if kind == "pool":
        return MaxPool2D(layer["size"], layer["stride"])
    if kind == "flatten":
        return Flatten()
    args = [np.array(layer[f]) for f in ("weight", "bias", "mult", "shift")]
    kwargs = {"activation": layer["activation"], "output": layer["output"]}
    if kind == "conv":
        return Conv2D(*args, stride=layer["stride"], padding=layer["padding"], **kwargs)
    return Dense(*args, **kwargs)


def build(widths, layers, input_shape=None):
    return QuantizedNetwork([make(layer) for layer in layers], input_shape=input_shape, **widths)


@FAST
@given(dense_networks() | spatial_networks())
def test_forward_matches_model(naive, case):
    widths, layers, input_shape, x = case
    net = build(widths, layers, input_shape)
    for layer in net.layers:  # the drawn widths leave room for the worst case
        if hasattr(layer, "weight"):
            assert accumulator_bound(layer, widths["in_bits"]) < 2 ** (widths["acc_bits"] - 1)
    trace = net.forward_trace(np.array(x, dtype=np.int64))
    expected = naive.network(x, layers, widths["in_bits"])
    assert [t.tolist() for t in trace] == expected
    assert all(t.dtype == np.int64 for t in trace)
    assert [t.shape[1:] for t in trace] == [out for _, out in net.shapes]
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


def test_large_batch_matches_model(naive):
    rng = np.random.default_rng(1)
    layer = {"kind": "dense", "weight": rng.integers(-128, 128, size=(64, 16)).tolist(),
             "bias": rng.integers(-5000, 5000, size=16).tolist(),
             "mult": rng.integers(2 ** 15, 2 ** 16, size=16).tolist(),
             "shift": rng.integers(20, 26, size=16).tolist(), "activation": "relu",
             "output": "requant"}
    net = build({"in_bits": 8, "w_bits": 8, "acc_bits": 32, "mult_bits": 16}, [layer])
    x = rng.integers(-128, 128, size=(3000, 64))
    got = net.forward(x)
    assert got.shape == (3000, 16)
    rows = rng.choice(3000, size=40, replace=False)
    assert got[rows].tolist() == naive.dense(x[rows].tolist(), layer, 8)


def wide(weight, bias, mult, shift, *, output="requant"):
    return {"kind": "dense", "weight": weight, "bias": bias, "mult": mult, "shift": shift,
            "activation": "identity", "output": output}


def test_wide_accumulators_are_exact(naive):
    # 64-bit accumulators whose sums exceed float64's exact range but fit int64, and a raw
    # output: both the int64 and the exact path must agree with Python integers.
    w = [[2 ** 40 - 1, -(2 ** 40)], [2 ** 40 - 3, 2 ** 40 - 5]]
    layers = [wide(w, [2 ** 50 + 1, -7], [1, 1], [0, 0], output="raw")]
    net = build({"in_bits": 16, "w_bits": 42, "acc_bits": 64, "mult_bits": 16}, layers)
    x = [[32767, -32768], [-32768, -32768], [12345, 1]]
    assert net.forward(np.array(x)).tolist() == naive.network(x, layers, 16)[-1]


def test_accumulator_bound_beyond_int64_is_still_exact(naive):
    # The worst case overflows int64, so the sums are done with Python integers; these inputs
    # keep the actual accumulators inside acc_bits=64, and the requantization is wide too.
    w = [[2 ** 59 - 1, -(2 ** 59)], [-(2 ** 59) + 3, 2 ** 58]]
    layers = [wide(w, [5, -5], [2 ** 32 - 1, 12345], [70, 40])]
    net = build({"in_bits": 16, "w_bits": 61, "acc_bits": 64, "mult_bits": 32}, layers)
    assert accumulator_bound(net.layers[0], 16) > 2 ** 63
    x = [[7, -8], [-8, -8], [3, 3]]
    assert net.forward(np.array(x)).tolist() == naive.network(x, layers, 16)[-1]


def test_empty_batch():
    layer = Dense([[1, 2]], [0, 0], [1, 1], [0, 0])
    assert QuantizedNetwork([layer]).forward(np.zeros((0, 1), dtype=int)).shape == (0, 2)
    spatial = QuantizedNetwork([Conv2D(np.ones((2, 2, 1, 3), int), [0] * 3, [1] * 3, [0] * 3),
                                MaxPool2D(2), Flatten()], input_shape=(5, 5, 1))
    assert [t.shape for t in spatial.forward_trace(np.zeros((0, 5, 5, 1), int))] == [
        (0, 4, 4, 3), (0, 2, 2, 3), (0, 12)]


def test_accumulator_overflow_at_forward_time():
    layer0 = Dense([[127, 127]], [0, 0], [1, 1], [0, 0])
    layer1 = Dense([[127], [127]], [0], [1], [0], output="raw")
    net = QuantizedNetwork([layer0, layer1], acc_bits=16)
    assert net.forward(np.array([[1]])).tolist() == [[2 * 127 * 127]]
    with pytest.raises(ValueError, match=r"layer 0: accumulator reaches 16129.*acc_bits=14"):
        QuantizedNetwork([layer0, layer1], acc_bits=14).forward(np.array([[127]]))
    with pytest.raises(ValueError, match=r"layer 1: accumulator reaches 32258.*acc_bits=15"):
        QuantizedNetwork([layer0, layer1], acc_bits=15).forward(np.array([[127]]))
    conv = Conv2D(np.full((2, 2, 1, 1), 127), [0], [1], [0], output="raw")
    with pytest.raises(ValueError, match=r"layer 1: accumulator reaches -65024.*acc_bits=16"):
        QuantizedNetwork([MaxPool2D(1), conv], acc_bits=16, input_shape=(2, 2, 1)).forward(
            np.full((1, 2, 2, 1), -128))


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


def test_spatial_network_properties_and_predict():
    conv = Conv2D(np.ones((3, 3, 1, 2), int), [0, 0], [1, 1], [0, 0], padding=1)
    head = Dense(np.eye(8, 3, dtype=int) - np.eye(8, 3, k=-1, dtype=int), [0] * 3, [1] * 3,
                 [0] * 3, output="raw")
    net = QuantizedNetwork([conv, MaxPool2D(2), Flatten(), head], input_shape=(4, 4, 1),
                           input_scale=0.5, output_scale=[1.0, 2.0, 3.0])
    assert net.shapes == [((4, 4, 1), (4, 4, 2)), ((4, 4, 2), (2, 2, 2)), ((2, 2, 2), (8,)),
                          ((8,), (3,))]
    assert (net.in_features, net.out_features, net.output_shape) == (16, 3, (3,))
    assert repr(net).startswith("QuantizedNetwork((4, 4, 1) -> (4, 4, 2) -> (2, 2, 2) -> 8 -> 3")
    x = np.zeros((2, 4, 4, 1))
    x[0, 0, 0, 0] = 1.0  # 2 after quantization; only pooled pixel (0, 0): features 0, 1 = 2
    x[1, 3, 3, 0] = 1.0  # only pooled pixel (1, 1): features 6, 7, whose rows are zero
    scores = net.forward(net.quantize_input(x))
    # Rows 0 and 1 of the head are (1, 0, 0) and (-1, 1, 0).
    assert scores.tolist() == [[0, 2, 0], [0, 0, 0]]
    assert net.predict(x).tolist() == [1, 0]
    spatial = QuantizedNetwork([conv], input_shape=(4, 4, 1), input_scale=1.0,
                               output_scale=[1.0, 1.0])
    assert (spatial.output_shape, spatial.out_features) == ((4, 4, 2), 2)
    with pytest.raises(ValueError, match=r"predict: the network's output has shape \(4, 4, 2\)"):
        spatial.predict(x)
    assert net.quantize_input(x).shape == (2, 4, 4, 1)


# -- every ValueError path ----------------------------------------------------------------------

def dense(k=2, n=2, **kw):
    return Dense(np.ones((k, n), dtype=int), np.zeros(n, dtype=int), np.ones(n, dtype=int),
                 np.zeros(n, dtype=int), **kw)


def conv(c_in=1, c_out=2, k=3, **kw):
    return Conv2D(np.ones((k, k, c_in, c_out), dtype=int), np.zeros(c_out, dtype=int),
                  np.ones(c_out, dtype=int), np.zeros(c_out, dtype=int), **kw)


def mutate(field, value):
    """Return layers whose layer 1 has ``field`` replaced after construction."""
    layers = [dense(4, 3), dense(3, 2), dense(2, 2, output="raw")]
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
     r"layer 1: field 'weight' has 2 inputs but layer 0 has 3 outputs; allowed: weight of "
     r"shape \(3, N\)"),
    (mutate("weight", np.ones((3, 3), dtype=int)), {}, r"layer 1: field 'bias' has shape \(2,\)"),
    (mutate("weight", np.ones((3, 2))), {}, r"layer 1: field 'weight' has dtype float64"),
    (mutate("output", "raw"), {}, r"layer 1: field 'output' is 'raw' but the layer is not the"),
    (mutate("activation", "tanh"), {}, r"layer 1: field 'activation' is 'tanh'"),
    ([], {}, r"field 'layers' is empty"),
    ([dense()], {"in_bits": 1}, r"in_bits=1; allowed: an integer in 2..64"),
    ([dense()], {"acc_bits": 65}, r"acc_bits=65; allowed"),
    ([dense()], {"mult_bits": 8.0}, r"mult_bits=8.0; allowed"),
    ([dense()], {"input_scale": -1.0}, r"input_scale=-1.0"),
    ([dense()], {"output_scale": [1.0]}, r"output_scale has shape \(1,\); allowed: \(2,\)"),
    # -- spatial chains
    ([dense()], {"input_shape": (3,)},
     r"layer 0: field 'weight' has 2 inputs but input_shape gives \(3,\); allowed: weight of "
     r"shape \(3, N\)"),
    ([dense()], {"input_shape": (1, 2, 1)},
     r"layer 0: Dense needs a flat input \(K,\) but input_shape gives \(1, 2, 1\); allowed: a "
     r"Flatten before the Dense"),
    ([conv(), dense(32, 2)], {"input_shape": (4, 4, 1)},
     r"layer 1: Dense needs a flat input \(K,\) but layer 0 gives \(2, 2, 2\); allowed: a "
     r"Flatten before the Dense"),
    ([conv(), Flatten(), dense(7, 2)], {"input_shape": (4, 4, 1)},
     r"layer 2: field 'weight' has 7 inputs but layer 1 has 8 outputs"),
    ([conv()], {}, r"QuantizedNetwork: field 'input_shape' is None but layer 0 is a Conv2D; "
                   r"allowed: \(H, W, C\)"),
    ([Flatten(), dense(4)], {}, r"'input_shape' is None but layer 0 is a Flatten"),
    ([conv()], {"input_shape": (4, 4)},
     r"field 'input_shape' is \(4, 4\); allowed: \(H, W, C\) or \(K,\), positive integers"),
    ([conv()], {"input_shape": (4, 0, 1)}, r"field 'input_shape' is \(4, 0, 1\)"),
    ([conv()], {"input_shape": 16}, r"field 'input_shape' is 16"),
    ([conv(), conv(c_in=3)], {"input_shape": (6, 6, 1)},
     r"layer 1: field 'weight' has C_in=3 but layer 0 gives 2 channels \(4, 4, 2\); allowed: "
     r"weight of shape \(KH, KW, 2, C_out\)"),
    ([conv(k=5)], {"input_shape": (3, 9, 1)},
     r"layer 0: field 'weight' has KH=5 but input_shape gives \(3, 9, 1\), 3 wide on that axis "
     r"with padding=0; allowed: KH <= 3"),
    ([conv(k=5, padding=1)], {"input_shape": (9, 2, 1)},
     r"layer 0: field 'weight' has KW=5 .* 4 wide on that axis with padding=1; allowed: KW <= 4"),
    ([dense(4, 4), conv()], {}, r"layer 1: Conv2D needs a spatial input \(H, W, C\) but layer 0 "
                                r"gives \(4,\)"),
    ([conv(), MaxPool2D(3)], {"input_shape": (4, 4, 1)},
     r"layer 1: field 'size' is 3 but layer 0 gives \(2, 2, 2\); allowed: size <= 2"),
    ([conv(), Flatten(), Flatten()], {"input_shape": (4, 4, 1)},
     r"layer 2: Flatten needs a spatial input \(H, W, C\) but layer 1 gives \(8,\)"),
    ([conv(output="raw"), MaxPool2D(1)], {"input_shape": (4, 4, 1)},
     r"layer 0: field 'output' is 'raw' but the layer is not the last of 2"),
    ([conv()], {"input_shape": (4, 4, 1), "output_scale": [1.0] * 8},
     r"output_scale has shape \(8,\); allowed: \(2,\)"),
])
def test_network_errors(layers, kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        QuantizedNetwork(layers, **kwargs)


def test_layer_type_error():
    with pytest.raises(TypeError, match="layer 0: tuple is not a Dense, Conv2D, MaxPool2D, "
                                        "Flatten, AvgPool2D, GlobalAvgPool2D or Add layer"):
        QuantizedNetwork([(1, 2)])


def test_mutation_after_construction_is_caught_at_forward():
    net = QuantizedNetwork([dense(2, 2)])
    net.layers[0].weight = np.full((2, 2), 1000)
    with pytest.raises(ValueError, match="layer 0: field 'weight' has 1000"):
        net.forward(np.zeros((1, 2), dtype=int))
    spatial = QuantizedNetwork([conv(), MaxPool2D(2)], input_shape=(5, 5, 1))
    spatial.layers[0].stride = 3  # (5 - 3) // 3 + 1 = 1: the pool no longer fits
    with pytest.raises(ValueError, match=r"layer 1: field 'size' is 2 but layer 0 gives \(1, 1"):
        spatial.forward(np.zeros((1, 5, 5, 1), dtype=int))


@pytest.mark.parametrize(("x", "pattern"), [
    (np.zeros(2, dtype=int), r"input: field 'x' has shape \(2,\); allowed: 2-D \(M, 2\)"),
    (np.zeros((1, 3), dtype=int), r"'x' has shape \(1, 3\); allowed: \(M, 2\)"),
    (np.zeros((1, 2)), r"'x' has dtype float64"),
    (np.array([[0, 128]]), r"'x' has 128 at index \(0, 1\); allowed: signed in_bits=8"),
    (np.array([[-129, 0]]), r"'x' has -129"),
])
def test_input_errors(x, pattern):
    net = QuantizedNetwork([dense(2, 2)])
    with pytest.raises(ValueError, match=pattern):
        net.forward(x)


@pytest.mark.parametrize(("x", "pattern"), [
    (np.zeros((2, 16), dtype=int), r"input: field 'x' has shape \(2, 16\); allowed: "
                                   r"\(M, 4, 4, 1\), NHWC with input_shape \(4, 4, 1\)"),
    (np.zeros((2, 1, 4, 4), dtype=int), r"'x' has shape \(2, 1, 4, 4\)"),
    (np.full((1, 4, 4, 1), 200), r"'x' has 200 at index \(0, 0, 0, 0\)"),
])
def test_spatial_input_errors(x, pattern):
    net = QuantizedNetwork([conv()], input_shape=(4, 4, 1))
    with pytest.raises(ValueError, match=pattern):
        net.forward(x)
