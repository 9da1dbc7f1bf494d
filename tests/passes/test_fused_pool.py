"""A max pool fused into the convolution before it (hwgen.passes.fused_pool): random
convolution + max-pool shapes (kernels, strides, padding, channels, pool sides 2..4, a conv
output not a multiple of the pool, taps or not, fewer requantization lanes) compiled with and
without fusion, run on the program interpreter bit-exact against hwgen.nn; the walk order and
the cycle model against independent counts; what is and is not fused."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import assert_interpreted

import hwgen
from hwgen import AcceleratorConfig
from hwgen.cycles import program_cycles
from hwgen.memmap import PassKind
from hwgen.nn import Conv2D, Dense, Flatten, MaxPool2D, QuantizedNetwork
from hwgen.passes.fused_pool import walk

_BUFFERS = {"act_depth": 1 << 12, "weight_depth": 1 << 13, "param_depth": 256,
            "out_depth": 1 << 11, "prog_depth": 32, "acc_depth": 144}
DESIGNS = {"8x8": (8, 8, None), "4x4": (4, 4, None), "3x2": (3, 2, None),
           "8x8/2": (8, 8, 2), "4x8": (4, 8, None)}


def _conv(rng, shape, *, stride, padding, activation="relu"):
    kh, kw, c, n = shape
    leaky = {"mult_neg": rng.integers(1, 1 << 10, n)} if activation == "leaky_relu" else {}
    return Conv2D(rng.integers(-128, 128, (kh, kw, c, n)), rng.integers(-900, 900, n),
                  rng.integers(1, 1 << 12, n), rng.integers(10, 18, n), stride=stride,
                  padding=padding, activation=activation, **leaky)


def _run(net, config, x, **kwargs):
    program = hwgen.compile(net, config, **kwargs)
    return assert_interpreted(program, net, x)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.fixed_dictionaries({
    "design": st.sampled_from(sorted(DESIGNS)), "h": st.integers(2, 10), "w": st.integers(2, 10),
    "kh": st.integers(1, 4), "kw": st.integers(1, 4), "sy": st.integers(1, 2),
    "sx": st.integers(1, 2), "pads": st.tuples(*[st.integers(0, 2)] * 4),
    "c": st.integers(1, 10), "n": st.integers(1, 12), "pool": st.integers(2, 4),
    "leaky": st.booleans(), "dense": st.booleans(), "m": st.integers(1, 4),
    "seed": st.integers(0, 999)}))
def test_fused_pool_is_bit_exact_and_costs_no_pass(case):
    rows, cols, post = DESIGNS[case["design"]]
    top, bottom, left, right = case["pads"]
    h, w = case["h"], case["w"]
    kh, kw = min(case["kh"], h + top + bottom), min(case["kw"], w + left + right)
    oh = (h + top + bottom - kh) // case["sy"] + 1
    ow = (w + left + right - kw) // case["sx"] + 1
    side = min(case["pool"], oh, ow)
    config = AcceleratorConfig(rows=rows, cols=cols, post_lanes=post, **_BUFFERS)
    rng = np.random.default_rng(case["seed"])
    n = case["n"]
    conv = _conv(rng, (kh, kw, case["c"], n), stride=(case["sy"], case["sx"]),
                 padding=case["pads"], activation="leaky_relu" if case["leaky"] else "relu")
    layers = [conv, MaxPool2D(side)]
    out = ((oh - side) // side + 1) * ((ow - side) // side + 1) * n
    if case["dense"]:
        layers += [Flatten(), Dense(rng.integers(-128, 128, (out, 5)), rng.integers(-99, 99, 5),
                                    np.ones(5, int), np.zeros(5, int), output="raw")]
    net = QuantizedNetwork(layers, input_shape=(h, w, case["c"]))
    x = rng.integers(-128, 128, (case["m"], h, w, case["c"]))
    fused = _run(net, config, x)
    plain = _run(net, config, x, fuse_pool=False)
    fusable = side >= 2 and config.acc_depth % (side * side) == 0
    assert len(fused.descriptors) == len(plain.descriptors) - fusable
    kinds = [d["kind"] for d in fused.descriptors]
    assert (PassKind.MAXPOOL.value not in kinds) == fusable
    if fusable:
        # The conv pixels the windows cover, and no cycle of a pooling pass.
        g = fused.descriptors[0]["geometry"]
        assert (g["oh"], g["ow"], g["pool"]) == ((oh - side) // side + 1,
                                                 (ow - side) // side + 1, side - 1)
        assert program_cycles(fused, case["m"]) < program_cycles(plain, case["m"])


@pytest.mark.parametrize("side", [2, 3])
def test_the_walk_visits_each_window_in_turn(side):
    # An independent enumeration of the window order, against the walk of the steps the
    # compiler writes (words of a 7x8 image of 2-word pixels, stride 1, no padding).
    net = QuantizedNetwork([_conv(np.random.default_rng(side), (1, 1, 12, 3), stride=1,
                                  padding=0), MaxPool2D(side)], input_shape=(7, 8, 12))
    config = AcceleratorConfig(rows=8, cols=8, **_BUFFERS)
    program = hwgen.compile(net, config, batch=2)
    d = program.descriptors[0]
    g = d["geometry"]
    oy, ox, words, _ = walk(g, 2, d["src_base"], wrap=config.act_depth)
    want = [(m, y * side + wy, x * side + wx) for m in range(2) for y in range(7 // side)
            for x in range(8 // side) for wy in range(side) for wx in range(side)]
    assert list(zip(oy.tolist(), ox.tolist(), strict=True)) == [(y, x) for _, y, x in want]
    stride = d["src_stride"]
    assert stride == 2
    assert words.tolist() == [d["src_base"] + ((m * 7 + y) * 8 + x) * stride
                              for m, y, x in want]


def test_what_is_not_fused():
    rng = np.random.default_rng(3)
    conv = _conv(rng, (3, 3, 2, 4), stride=1, padding=1)
    config = AcceleratorConfig(rows=4, cols=4, **_BUFFERS)

    def passes(layers, cfg=config, **kwargs):
        net = QuantizedNetwork(layers, input_shape=(6, 6, 2))
        x = rng.integers(-128, 128, (2, 6, 6, 2))
        return [d["kind"] for d in _run(net, cfg, x, **kwargs).descriptors]

    pool = PassKind.MAXPOOL.value
    assert passes([conv, MaxPool2D(2)]) == [0]
    # Overlapping windows, a design without the feature, compile(fuse_pool=False), a
    # read-out of every layer, windows that would straddle a chunk of acc_depth rows.
    assert passes([conv, MaxPool2D(3, stride=1)]) == [0, pool]
    assert passes([conv, MaxPool2D(2)], AcceleratorConfig(rows=4, cols=4, fuse_pool=False,
                                                          **_BUFFERS)) == [0, pool]
    assert passes([conv, MaxPool2D(2)], fuse_pool=False) == [0, pool]
    assert passes([conv, MaxPool2D(2)], readout=True) == [0, pool]
    assert passes([conv, MaxPool2D(2)], AcceleratorConfig(rows=4, cols=4, **{
        **_BUFFERS, "acc_depth": 18})) == [0, pool]
    # A pool after a pool: the first fuses, the second is a pass.
    assert passes([conv, MaxPool2D(2), MaxPool2D(1)]) == [0, pool]


def test_a_design_without_fused_pools_keeps_its_geometry():
    # Without fuse_pool the geometry has no pool fields, as before (same words, same hash).
    from hwgen.memmap import POOL_FIELDS, geometry_layout
    plain = AcceleratorConfig(fuse_pool=False)
    assert not set(POOL_FIELDS) & set(geometry_layout(plain).members)
    assert AcceleratorConfig().hash == AcceleratorConfig.from_dict(
        AcceleratorConfig().to_dict()).hash
    assert "fuse_pool" in plain.to_dict() and "fuse_pool" not in AcceleratorConfig().to_dict()
