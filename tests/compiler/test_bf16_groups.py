"""bf16 grouped convolutions (not depthwise) on the matrix pass (issue 52): its block-diagonal
tiles hold the weight 0x8000 (no product: +0.0 whatever the activation) off a group's block,
so the programs run bit for bit (vs :meth:`hwgen.nn.Bf16Network.forward`) on the interpreter,
an Inf in one group's channel leaking into no other group; where a group's tiles would not be
the contract's, the compiler refuses the layer, naming why and what is allowed."""

import re

import numpy as np
import pytest
from support.bf16_programs import bf16_config, check_program, grouped_cnn

import hwgen
from hwgen.compiler import CompileError
from hwgen.compiler import bf16 as bf16_compiler
from hwgen.compiler.bf16 import NO_PRODUCT, bf16_passes
from hwgen.memmap import PassKind, Region
from hwgen.nn import to_bf16
from sim.bf16_runs import bf16_rows


def _spatial(rows, cols, **kwargs):
    return bf16_config(rows, cols, act_depth=512, **kwargs)


# (rows, cols), (groups, c_group, outputs), kernel, stride, padding: a group's outputs
# dividing cols (one group a tile, two a tile, a window starting inside a word where the
# feeder rotates lanes) and not (every tile's window all channels), c_group rows and 2 * rows.
GROUPED = {
    "one_group_a_tile": ((4, 4), (2, 4, 8), (3, 3), 1, 1),
    "two_groups_a_tile": ((4, 4), (4, 4, 8), (3, 3), 2, 1),
    "dense_window": ((4, 4), (2, 8, 6), (3, 3), 1, 0),
    "rotated_windows": ((2, 4), (4, 2, 16), (3, 3), 2, (1, 0, 0, 1)),
    "fewer_cols": ((4, 2), (2, 4, 4), (2, 3), 1, 1),
    "one_by_one": ((2, 4), (2, 3, 8), (1, 1), 1, 0),
}


def grouped_net(name, *, output="raw", seed=0, hot=None):
    """The network of :data:`GROUPED`'s case ``name`` for its rows."""
    (rows, _), (groups, c_group, outputs), kernel, stride, padding = GROUPED[name]
    model = grouped_cnn(seed + rows, groups, c_group, outputs, kernel, stride=stride,
                        padding=padding, hot=hot)
    return to_bf16(model, rows=rows, output=output)


def leaks_nowhere(net, x, hot):
    """Assert that the hidden image holds Inf in channel ``hot`` and that the grouped layer's
    outputs outside ``hot``'s group are finite (so a leak would show)."""
    got = net.forward_tensors(x)
    tensors = [np.asarray(got[node.name], np.float32) for node in net.nodes]
    assert np.isinf(tensors[0][..., hot]).any()
    layer = net.nodes[1].layer
    outputs = layer.weight.shape[3]
    n_group = outputs // layer.groups
    group = hot // layer.weight.shape[2]
    mine = np.arange(outputs) // n_group == group
    assert np.isfinite(tensors[1][..., ~mine]).all()
    assert not np.isfinite(tensors[1][..., mine]).all()


@pytest.mark.parametrize("name", list(GROUPED))
@pytest.mark.parametrize("output", ["raw", "bf16"])
def test_grouped_convolutions_run_bit_for_bit(name, output):
    (rows, cols), (_, c_group, _), *_ = GROUPED[name]
    hot = c_group + 1    # in group 1
    net = grouped_net(name, output=output, hot=hot)
    x = bf16_rows(net, 2, seed=rows + cols, scale=4.0)
    leaks_nowhere(net, x, hot)
    program, _ = check_program(net, _spatial(rows, cols), x)
    assert [layer.kind for layer in program.layers] == [PassKind.MATRIX] * 2


def test_zeros_off_the_blocks_would_leak_nan(monkeypatch):
    # The seeded bug: +0.0 off the blocks, as the int8 pass writes them. Inf * +0.0 = NaN
    # in the other groups' sums.
    monkeypatch.setattr(bf16_compiler, "NO_PRODUCT", 0)
    for name in ("two_groups_a_tile", "dense_window"):
        net = grouped_net(name, hot=5)
        x = bf16_rows(net, 2, seed=8, scale=4.0)
        with pytest.raises(AssertionError):
            check_program(net, _spatial(4, 4), x)


def test_off_block_weights_are_no_products():
    # The grouped pass's weights are the layer's own on each group's block, 0x8000 (which
    # the reference takes as no product too) everywhere else; the WEIGHT words hold them.
    net = grouped_net("two_groups_a_tile")
    config = _spatial(4, 4)
    weight = bf16_passes(net, config)[1].matrix.weight
    real = np.asarray(net.nodes[1].layer.weight).view(np.uint16)
    assert sorted(weight[weight != NO_PRODUCT].tolist()) == sorted(real.ravel().tolist())
    assert (weight == NO_PRODUCT).sum() == weight.size - real.size
    lanes = [word >> (16 * j) & 0xFFFF for word in hwgen.compile(net, config)
             .images[Region.WEIGHT][1] for j in range(config.cols)]
    assert lanes.count(NO_PRODUCT) >= (weight == NO_PRODUCT).sum()


@pytest.mark.parametrize(("layer", "design", "why"), [
    # Two channels a group on rows=4, a 3x3 kernel: the pass pads a position's channels.
    ((2, 2, 4, (3, 3)), (4, 4), r"a grouped convolution of 2 input channels a group: the "
                                r"matrix pass pads each kernel position's channels of a "
                                r"group to tiles of rows=4"),
    # One channel a group, two outputs each: not depthwise.
    ((4, 1, 8, (3, 3)), (4, 4), r"a grouped convolution of 1 input channels a group"),
    # A 1x1 kernel, one channel a group, two groups a tile of rows=2: group 1 starts at
    # channel 1 of its tile's window.
    ((4, 1, 8, (1, 1)), (2, 4), r"a grouped convolution whose output channel 2's group "
                                r"starts at channel 1 of its tile's window, inside a tile "
                                r"of rows=2"),
])
def test_other_grouped_convolutions_are_refused(layer, design, why):
    (groups, *_), (rows, cols) = layer, design
    net = to_bf16(grouped_cnn(groups, *layer), rows=rows)
    with pytest.raises(CompileError) as info:
        hwgen.compile(net, _spatial(rows, cols, depthwise=True))
    message = str(info.value)
    assert "layer 1 (Bf16Conv2D: a grouped convolution" in message, message
    assert "layer 0" not in message, message
    assert re.search(why, message), message
    assert (f"allowed: a group's input channels a multiple of rows={rows} (a 1x1 kernel: "
            "every group starting a tile), or a depthwise convolution") in message, message
