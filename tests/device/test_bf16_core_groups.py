"""The bf16 core's grouped convolutions (issue 52) in the Amaranth simulator: block-diagonal
tiles whose entries off a group's block are the weight 0x8000, which the multiplier makes
+0.0 whatever the activation; an Inf in one group's channel reaches no other group, bit for
bit with Bf16Network.forward, the cycles the model's."""

import pytest
from compiler.test_bf16_groups import GROUPED, grouped_net, leaks_nowhere
from device.test_bf16_core import _check, _spatial

from sim.bf16_runs import bf16_rows

# (test_bf16_groups.GROUPED's cases: design, groups, kernel, stride, padding.)
_CASES = {
    # One group a tile, 3x3, padding 1: each tile's window its group's channels.
    "one_group_a_tile": "bf16",
    # Two groups a tile, stride 2: a tile's window holds another group's channels.
    "two_groups_a_tile": "raw",
    # Three outputs a group on cols=4: every tile's window is all channels.
    "dense_window": "bf16",
    # Windows of two channels starting inside a word, where the feeder rotates lanes.
    "rotated_windows": "raw",
    # Fewer columns than rows (the feeder rotates lanes), a 2x3 kernel.
    "fewer_cols": "bf16",
    # A 1x1 kernel, three channels a group on rows=2: each group starts a tile, its last
    # tile padded with the next group's channels, no products.
    "one_by_one": "raw",
}


@pytest.mark.parametrize("name", list(_CASES))
def test_grouped_convolutions_run_bit_for_bit(name):
    net = grouped_net(name, output=_CASES[name], seed=1, hot=5)
    x = bf16_rows(net, 2, seed=3, scale=4.0)
    leaks_nowhere(net, x, hot=5)
    (rows, cols), *_ = GROUPED[name]
    _check(net, _spatial(rows, cols, weight_depth=512, act_depth=1024, out_depth=256), [x])
