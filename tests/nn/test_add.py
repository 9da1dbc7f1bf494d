"""Add against a per-element loop written here (section 3.2), its refusals, and graph networks
with adds against an independent computation: NumPy for the adds, the naive loops of
``conftest.py`` for the convolutions and dense layers."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hwgen.nn import INPUT, Add, Conv2D, Dense, Flatten, MaxPool2D, Node, QuantizedNetwork

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def signed(bits):
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def channel(value, c):
    return value if isinstance(value, int) else value[c]


def add_loops(naive, a, b, fields, in_bits):
    """``a + b`` per the contract, one element at a time, in Python integers."""
    a, b = np.array(a, dtype=object), np.array(b, dtype=object)
    low, high = -(2 ** (in_bits - 1)), 2 ** (in_bits - 1) - 1
    lo = fields["act_min"] if fields["act_min"] is not None else \
        (0 if fields["activation"] == "relu" else low)
    hi = fields["act_max"] if fields["act_max"] is not None else high
    out = np.zeros(a.shape, dtype=object)
    for index in np.ndindex(a.shape):
        c = index[-1]
        p = a[index] * channel(fields["mult_a"], c) + b[index] * channel(fields["mult_b"], c)
        out[index] = min(max(naive.requant(p, 1, channel(fields["shift"], c), in_bits), lo), hi)
    return out


@st.composite
def add_cases(draw):
    """Draw ``(widths, fields, shape, a, b)``: rows or images, scalars or per-channel fields,
    widths up to the model's limits (so that some sums leave int64)."""
    in_bits, mult_bits = draw(st.integers(2, 64)), draw(st.integers(1, 63))
    acc_bits = draw(st.integers(2, 64))
    max_shift = acc_bits + mult_bits - 1
    shape = draw(st.sampled_from([(draw(st.integers(1, 5)),),
                                  (draw(st.integers(1, 3)), draw(st.integers(1, 3)),
                                   draw(st.integers(1, 4)))]))
    channels = shape[-1]

    def per_channel(values):
        scalar = draw(values)
        return scalar if draw(st.booleans()) else [draw(values) for _ in range(channels)]

    mults = st.sampled_from([0, 1, 2 ** mult_bits - 1]) | st.integers(0, 2 ** mult_bits - 1)
    activation = draw(st.sampled_from(["identity", "relu"]))
    low, high = -(2 ** (in_bits - 1)), 2 ** (in_bits - 1) - 1
    floor = 0 if activation == "relu" else low
    act_min = draw(st.none() | st.integers(floor, high))
    act_max = draw(st.none() | st.integers(floor if act_min is None else act_min, high))
    fields = {"mult_a": per_channel(mults), "mult_b": per_channel(mults),
              "shift": per_channel(st.sampled_from([0, 1, max_shift])
                                   | st.integers(0, max_shift)),
              "activation": activation, "act_min": act_min, "act_max": act_max}
    m = draw(st.integers(1, 3))
    size = m * math.prod(shape)
    tensor = st.lists(signed(in_bits), min_size=size, max_size=size)
    a, b = (np.array(draw(tensor), dtype=np.int64).reshape(m, *shape) for _ in range(2))
    widths = {"in_bits": in_bits, "acc_bits": acc_bits, "mult_bits": mult_bits}
    return widths, fields, shape, a, b


@FAST
@given(add_cases())
def test_add_matches_loops(naive, case):
    widths, fields, shape, a, b = case
    add = Add(**fields)
    want = add_loops(naive, a, b, fields, widths["in_bits"])
    direct = add.forward(a, b, widths["in_bits"], widths["acc_bits"])
    assert direct.dtype == np.int64 and direct.tolist() == want.tolist()
    # In a network: the input is a, a 1x1 identity convolution would change nothing, so the
    # second operand is the input itself; add(x, x) against the loop.
    net = QuantizedNetwork([Node("sum", add, [INPUT, INPUT])], input_shape=shape, **widths)
    assert net.forward(a).tolist() == add_loops(naive, a, a, fields, widths["in_bits"]).tolist()
    assert net.output_shape == shape and net.tensors["input"].consumers == ("sum",)


def test_arguments_read_back_and_repr():
    add = Add(mult_a=[1, 2], mult_b=3, shift=[4, 5], activation="relu", act_max=6)
    assert add.mult_a.tolist() == [1, 2] and add.mult_b.tolist() == 3
    assert add.shift.tolist() == [4, 5] and add.mult_b.dtype == np.int64
    assert (add.activation, add.act_min, add.act_max) == ("relu", None, 6)
    assert add.bounds(8) == (0, 6) and add.channels == 2
    assert [v.tolist() for v in add.per_channel(2)] == [[1, 2], [3, 3], [4, 5]]
    assert repr(add) == "Add(channels=2, activation='relu', act_max=6)"
    plain = Add(mult_a=1, mult_b=1, shift=0)
    assert (plain.activation, plain.act_min, plain.act_max, plain.channels) == \
        ("identity", None, None, None)
    assert plain.bounds(4) == (-8, 7) and plain.output_shape((2, 2, 7), (2, 2, 7)) == (2, 2, 7)
    assert [v.tolist() for v in plain.per_channel(3)] == [[1] * 3, [1] * 3, [0] * 3]
    # The fields are copies: changing the caller's array changes nothing.
    given_mult = np.array([7, 7])
    copied = Add(mult_a=given_mult, mult_b=given_mult, shift=0)
    given_mult[0] = 0
    assert copied.mult_a.tolist() == [7, 7]


def fields(**changes):
    return {"mult_a": [1, 1], "mult_b": [1, 1], "shift": [0, 0]} | changes


@pytest.mark.parametrize(("changes", "pattern"), [
    ({"mult_a": [1.0, 2.0]}, r"Add: field 'mult_a' has dtype float64; allowed: an integer "
                             r"dtype"),
    ({"mult_b": [True, False]}, r"Add: field 'mult_b' has dtype bool"),
    ({"shift": [[0, 0]]}, r"Add: field 'shift' has shape \(1, 2\); allowed: a single "
                          r"integer, or \(C,\) with C >= 1, one value per channel"),
    ({"mult_a": np.array([], dtype=np.int64)},
     r"Add: field 'mult_a' has shape \(0,\); allowed: a single integer"),
    ({"mult_b": [1, 1, 1]}, r"Add: field 'mult_b' has shape \(3,\); allowed: \(2,\), the shape "
                            r"of 'mult_a' \(one value per channel\), or a single integer"),
    ({"mult_a": 1, "shift": [0]}, r"Add: field 'shift' has shape \(1,\); allowed: \(2,\), the "
                                  r"shape of 'mult_b'"),
    ({"activation": "leaky_relu"}, r"Add: field 'activation' is 'leaky_relu'; allowed: "
                                   r"'identity', 'relu'"),
    ({"activation": "relu6"}, r"Add: field 'activation' is 'relu6'"),
    ({"act_max": 1.5}, r"Add: field 'act_max' is 1.5; allowed: an integer or None"),
    ({"act_min": "0"}, r"Add: field 'act_min' is '0'; allowed: an integer or None"),
])
def test_field_errors(changes, pattern):
    with pytest.raises(ValueError, match=pattern):
        Add(**fields(**changes))


def test_the_fields_are_keyword_only():
    with pytest.raises(TypeError):
        Add([1], [1], [0])  # positional: which multiplier is which would be a guess


def add_net(add, shapes=((4, 4, 2), (4, 4, 2)), **kwargs):
    """``Add`` of the input and a 1x1 convolution of it (a residual block of one layer)."""
    (h, w, c), (_, _, n) = shapes
    conv = Conv2D(np.ones((1, 1, c, n), dtype=np.int64), np.zeros(n, dtype=np.int64),
                  np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
    return QuantizedNetwork([Node("conv", conv, INPUT), Node("add", add, ["conv", INPUT])],
                            input_shape=(h, w, c), **kwargs)


@pytest.mark.parametrize(("make", "pattern"), [
    (lambda: add_net(Add(**fields(mult_a=[1, 1 << 16]))),
     r"layer 1 \('add'\): field 'mult_a' has 65536 at index 1; allowed: unsigned "
     r"mult_bits=16, 0\.\.65535"),
    (lambda: add_net(Add(**fields(mult_b=-1))),
     r"layer 1 \('add'\): field 'mult_b' has -1 at index 0; allowed: unsigned mult_bits=16"),
    (lambda: add_net(Add(**fields(shift=[0, 48]))),
     r"layer 1 \('add'\): field 'shift' has 48 at index 1; allowed: acc_bits \+ mult_bits - 1 "
     r"= 47 at most, 0\.\.47"),
    (lambda: add_net(Add(**fields(shift=-1))), r"field 'shift' has -1 at index 0"),
    (lambda: add_net(Add(**fields(act_min=-200))),
     r"layer 1 \('add'\): field 'act_min' is -200; allowed: -128\.\.127, inside the "
     r"saturation range of signed 8 bits \(in_bits=8\)"),
    (lambda: add_net(Add(**fields(act_min=5, act_max=4))),
     r"layer 1 \('add'\): field 'act_min' is 5 but 'act_max' is 4; allowed: act_min <= "
     r"act_max"),
    (lambda: add_net(Add(**fields(activation="relu", act_min=-1))),
     r"field 'act_min' is -1 but 'activation' is 'relu'; allowed: act_min >= 0"),
    (lambda: add_net(Add(**fields()), ((4, 4, 2), (4, 4, 3))),
     r"layer 1 \('add'\): an Add needs two inputs of one shape but input 'conv' gives "
     r"\(4, 4, 3\) and input 'input' gives \(4, 4, 2\); allowed: equal shapes"),
    (lambda: add_net(Add(**fields()), ((4, 4, 3), (4, 4, 3))),
     r"layer 1 \('add'\): field 'mult_a' has 2 channels but input 'conv' \(4, 4, 3\) has 3; "
     r"allowed: \(3,\), or a single integer"),
    (lambda: QuantizedNetwork([Node("add", Add(**fields()), INPUT)], input_shape=(2,)),
     r"layer 0 \('add'\): a Add takes 2 input\(s\) but the node names 1 \['input'\]; "
     r"allowed: 2"),
    (lambda: QuantizedNetwork([Node("add", Add(**fields()), [INPUT] * 3)], input_shape=(2,)),
     r"a Add takes 2 input\(s\) but the node names 3"),
    (lambda: QuantizedNetwork([Add(**fields())], input_shape=(2,)),
     r"layer 0: a Add takes 2 input\(s\) but the node names 1"),
    (lambda: QuantizedNetwork([Node("add", Add(**fields()), [INPUT, INPUT])]),
     r"field 'input_shape' is None but layer 0 \('add'\) is a Add; allowed: \(H, W, C\)"),
])
def test_network_errors(make, pattern):
    with pytest.raises(ValueError, match=pattern):
        make()


def test_forward_errors():
    add = Add(**fields())
    with pytest.raises(ValueError, match=r"Add: input a has shape \(2,\); allowed: \(M, C\) "
                                         r"rows or \(M, H, W, C\) images"):
        add.forward([1, 2], [1, 2])
    with pytest.raises(ValueError, match=r"Add: an Add needs two inputs of one shape but input "
                                         r"a gives \(1, 2\) and input b gives \(2, 2\)"):
        add.forward([[1, 2]], [[1, 2], [3, 4]])
    with pytest.raises(ValueError, match=r"Add: field 'mult_a' has 2 channels but the input "
                                         r"has 3"):
        add.per_channel(3)
    with pytest.raises(ValueError, match=r"Add: field 'act_min' is -9; allowed: -8\.\.7"):
        Add(**fields(act_min=-9)).forward([[1, 2]], [[1, 2]], 4)
    # A layer changed after the network was built is checked again before each computation.
    net = add_net(Add(**fields()))
    net.layers[1].mult_b = np.array([1, 2, 3])
    with pytest.raises(ValueError, match=r"field 'mult_b' has shape \(3,\); allowed: \(2,\)"):
        net.forward(np.zeros((1, 4, 4, 2), dtype=np.int64))


# --- Graphs with adds, against an independent computation ---------------------------------

def conv_dict(layer):
    return {"weight": layer.weight.tolist(), "bias": layer.bias.tolist(),
            "mult": layer.mult.tolist(), "shift": layer.shift.tolist(),
            "activation": layer.activation, "output": layer.output,
            "stride": layer.stride, "padding": layer.padding}


def random_conv(rng, c_in, c_out, k=3, **kw):
    return Conv2D(rng.integers(-8, 8, (k, k, c_in, c_out)), rng.integers(-50, 50, c_out),
                  rng.integers(1, 1 << 10, c_out), rng.integers(8, 12, c_out),
                  padding=k // 2, **kw)


def random_add(rng, c, **kw):
    return Add(mult_a=rng.integers(0, 1 << 12, c), mult_b=rng.integers(0, 1 << 12, c),
               shift=rng.integers(10, 14, c), **kw)


def apply_add(add, a, b, in_bits=8):
    """NumPy's add per the contract, for values small enough for int64."""
    lo, hi = (0 if add.activation == "relu" else -(1 << (in_bits - 1))), (1 << (in_bits - 1)) - 1
    lo = lo if add.act_min is None else add.act_min
    hi = hi if add.act_max is None else add.act_max
    p = np.asarray(a) * add.mult_a + np.asarray(b) * add.mult_b
    shift = add.shift
    r = np.where(shift > 0, (p + (1 << np.maximum(shift - 1, 0))) >> shift, p)
    return np.clip(r, lo, hi)


@pytest.mark.parametrize("seed", range(4))
def test_residual_block_with_identity_shortcut(naive, seed):
    # x -> conv(relu) -> conv(identity) -> add(., x) with relu -> flatten -> dense(raw)
    rng = np.random.default_rng(seed)
    first, second = random_conv(rng, 3, 3), random_conv(rng, 3, 3, activation="identity")
    add = random_add(rng, 3, activation="relu")
    dense = Dense(rng.integers(-8, 8, (48, 4)), rng.integers(-9, 9, 4), [1] * 4, [0] * 4,
                  output="raw")
    nodes = [Node("conv1", first, INPUT), Node("conv2", second, "conv1"),
             Node("add", add, ["conv2", INPUT]), Node("flat", Flatten(), "add"),
             Node("fc", dense, "flat")]
    net = QuantizedNetwork(nodes, input_shape=(4, 4, 3))
    x = rng.integers(-128, 128, (3, 4, 4, 3))
    h1 = np.array(naive.conv(x.tolist(), conv_dict(first), 8))
    h2 = np.array(naive.conv(h1.tolist(), conv_dict(second) | {"activation": "identity"}, 8))
    s = apply_add(add, h2, x)
    dense_dict = {"weight": dense.weight.tolist(), "bias": dense.bias.tolist(),
                  "output": "raw"}
    logits = naive.dense(s.reshape(3, -1).tolist(), dense_dict, 8)
    tensors = net.forward_tensors(x)
    assert list(tensors) == [INPUT, "conv1", "conv2", "add", "flat", "fc"]
    assert tensors["conv2"].tolist() == h2.tolist() and tensors["add"].tolist() == s.tolist()
    assert net.forward(x).tolist() == logits
    assert [t.tolist() for t in net.forward_trace(x)] == \
        [h1.tolist(), h2.tolist(), s.tolist(), s.reshape(3, -1).tolist(), logits]
    assert net.tensors[INPUT].consumers == ("conv1", "add")
    assert net.shapes[2] == ((4, 4, 3), (4, 4, 3))


@pytest.mark.parametrize("seed", range(4))
def test_projection_shortcut_and_an_add_feeding_an_add(naive, seed):
    # A stride-2 block with a 1x1 stride-2 projection, then an add of that add and a branch
    # of a different depth: add2 = add(add1, conv3(add1)).
    rng = np.random.default_rng(10 + seed)
    main = random_conv(rng, 2, 4, stride=2)
    projection = random_conv(rng, 2, 4, k=1, stride=2, activation="identity")
    add1, add2 = random_add(rng, 4), random_add(rng, 4, activation="relu", act_max=90)
    deeper = random_conv(rng, 4, 4)
    nodes = [Node("main", main, INPUT), Node("proj", projection, INPUT),
             Node("add1", add1, ["main", "proj"]), Node("conv3", deeper, "add1"),
             Node("add2", add2, ["add1", "conv3"])]
    net = QuantizedNetwork(nodes, input_shape=(6, 6, 2))
    x = rng.integers(-128, 128, (2, 6, 6, 2))
    m = np.array(naive.conv(x.tolist(), conv_dict(main), 8))
    p = np.array(naive.conv(x.tolist(), conv_dict(projection) | {"activation": "identity"}, 8))
    s1 = apply_add(add1, m, p)
    d = np.array(naive.conv(s1.tolist(), conv_dict(deeper), 8))
    s2 = apply_add(add2, s1, d)
    assert net.output_shape == (3, 3, 4) and s2.max() <= 90 and s2.min() >= 0
    assert net.forward(x).tolist() == s2.tolist()
    assert net.forward_tensors(x)["add1"].tolist() == s1.tolist()
    assert net.tensors["add1"].consumers == ("conv3", "add2")


def test_a_tensor_used_by_three_consumers_in_rows(naive):
    # t = dense(x); u = dense(t); v = dense(t); w = add(t, u); y = add(w, v); rows throughout,
    # and t read three times (u, v, w); the operands' order matters (mult_a != mult_b).
    rng = np.random.default_rng(7)

    def dense(k, n, **kw):
        return Dense(rng.integers(-20, 20, (k, n)), rng.integers(-99, 99, n),
                     rng.integers(1, 1 << 10, n), rng.integers(9, 13, n), **kw)

    t, u, v = dense(5, 6), dense(6, 6, activation="identity"), dense(6, 6)
    w_add, y_add = random_add(rng, 6), Add(mult_a=3, mult_b=[1, 2, 3, 4, 5, 6], shift=2)
    nodes = [Node("t", t, INPUT), Node("u", u, "t"), Node("v", v, "t"),
             Node("w", w_add, ["t", "u"]), Node("y", y_add, ["w", "v"])]
    net = QuantizedNetwork(nodes, input_shape=(5,))
    x = rng.integers(-128, 128, (4, 5))

    def layer_dict(layer):
        return {"weight": layer.weight.tolist(), "bias": layer.bias.tolist(),
                "mult": layer.mult.tolist(), "shift": layer.shift.tolist(),
                "activation": layer.activation, "output": "requant"}

    tt = np.array(naive.dense(x.tolist(), layer_dict(t), 8))
    uu = np.array(naive.dense(tt.tolist(), layer_dict(u), 8))
    vv = np.array(naive.dense(tt.tolist(), layer_dict(v), 8))
    ww = apply_add(w_add, tt, uu)
    yy = apply_add(y_add, ww, vv)
    assert net.tensors["t"].consumers == ("u", "v", "w")
    assert net.forward(x).tolist() == yy.tolist()
    assert [a.tolist() for a in net.forward_trace(x)] == \
        [tt.tolist(), uu.tolist(), vv.tolist(), ww.tolist(), yy.tolist()]
    swapped = QuantizedNetwork([*nodes[:4], Node("y", y_add, ["v", "w"])], input_shape=(5,))
    assert swapped.forward(x).tolist() == apply_add(y_add, vv, ww).tolist()


def test_add_after_pooling_and_as_the_output():
    # An add of two max pools of one tensor: both operands and the output on one scale.
    pool2, pool1 = MaxPool2D(2, 2), MaxPool2D(2, 2)
    add = Add(mult_a=1, mult_b=1, shift=1)
    net = QuantizedNetwork([Node("p", pool2, INPUT), Node("q", pool1, INPUT),
                            Node("mean", add, ["p", "q"])], input_shape=(4, 4, 1))
    x = np.arange(-64, -48).reshape(1, 4, 4, 1)
    # (2m + 1) >> 1 == m: the mean of two equal maxima is the maximum.
    assert net.forward(x).tolist() == pool2.forward(x).tolist()
    assert net.output == "mean" and net.out_features == 1


def test_sums_beyond_int64_are_exact(naive):
    # in_bits=64 and mult_bits=63: a * mult_a alone leaves int64, the result must not wrap.
    big = (1 << 63) - 1
    a = np.array([[-(1 << 63), big]], dtype=np.int64)
    b = np.array([[big, big]], dtype=np.int64)
    fields = {"mult_a": [big, 1], "mult_b": [big - 1, big], "shift": [62, 126],
              "activation": "identity", "act_min": None, "act_max": None}
    net = QuantizedNetwork([Node("add", Add(**fields), [INPUT, INPUT])], input_shape=(2,),
                           in_bits=64, acc_bits=64, mult_bits=63)
    got = Add(**fields).forward(a, b, 64, 64)
    want = add_loops(naive, a, b, fields, 64)
    # p = -2 * big, shifted by 62; p = big * 2**63, shifted by 126.
    assert got.tolist() == want.tolist() == [[-4, 1]]
    assert net.forward(a).tolist() == add_loops(naive, a, a, fields, 64).tolist()


def random_graph(seed):
    """A random graph of convolutions (3x3 or 1x1, stride 1, same size) and adds over 4x4
    images, its nodes in topological order; every tensor is read by a later node but the
    last, some by several. Returns ``(nodes, input_shape)``."""
    rng = np.random.default_rng(seed)
    shapes = {INPUT: (4, 4, int(rng.integers(1, 4)))}
    unread, nodes = {INPUT}, []

    def append(name, layer, inputs, shape):
        nodes.append(Node(name, layer, inputs))
        unread.difference_update(inputs)
        unread.add(name)
        shapes[name] = shape

    def conv_of(source, c_out, k):
        name = f"conv{len(nodes)}"
        layer = random_conv(rng, shapes[source][2], c_out, k=k,
                            activation=str(rng.choice(["relu", "identity"])))
        append(name, layer, [source], (4, 4, c_out))
        return name

    for _ in range(int(rng.integers(2, 7))):
        names = list(shapes)
        pairs = [(a, b) for a in names for b in names if shapes[a] == shapes[b]]
        if rng.random() < 0.5 and pairs:
            a, b = pairs[int(rng.integers(len(pairs)))]
            append(f"add{len(nodes)}", random_add(rng, shapes[a][2], activation=str(
                rng.choice(["relu", "identity"]))), [a, b], shapes[a])
        else:
            conv_of(names[int(rng.integers(len(names)))], int(rng.integers(1, 4)),
                    int(rng.choice([1, 3])))
    # Join every tensor nothing reads into one output: project it to the output's channels
    # with a 1x1 convolution where they differ, then add.
    while len(unread) > 1 or INPUT in unread:
        out = nodes[-1].name if nodes else conv_of(INPUT, 2, 1)
        others = sorted(unread - {out})
        if not others:
            break
        other = others[0]
        if shapes[other] != shapes[out]:
            other = conv_of(other, shapes[out][2], 1)
        append(f"add{len(nodes)}", random_add(rng, shapes[out][2]), [out, other], shapes[out])
    return nodes, shapes[INPUT]


@pytest.mark.parametrize("seed", range(16))
def test_random_graphs_against_an_independent_computation(naive, seed):
    nodes, shape = random_graph(seed)
    net = QuantizedNetwork(nodes, input_shape=shape)
    x = np.random.default_rng(100 + seed).integers(-128, 128, (2, *shape))
    want = {INPUT: x}
    for node in nodes:
        args = [want[name] for name in node.inputs]
        if isinstance(node.layer, Add):
            want[node.name] = apply_add(node.layer, *args)
        else:
            want[node.name] = np.array(naive.conv(args[0].tolist(), conv_dict(node.layer), 8))
    got = net.forward_tensors(x)
    assert list(got) == list(want)
    for name, value in want.items():
        assert got[name].tolist() == value.tolist(), name
    # Every tensor but the output is read by a later node (the graph is well formed).
    assert all(t.consumers for name, t in net.tensors.items() if name != net.output)
