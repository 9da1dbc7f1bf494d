"""cocotb regression of the whole-network accelerator (sim/tb_network.py).

Every run compiles random networks (1 to 4 layers, relu/identity, raw/requant outputs, extreme
weights) and random convolutional networks (rectangular kernels 1..5, strides 1..2 per axis,
each padding side 0..2, grouped and depthwise convolutions, max and average pooling, flatten +
dense or spatial ends) and random residual graphs (identity and projection shortcuts, branches
of different depths, an add feeding an add, a tensor with three consumers, over images and
rows) and random CNNs whose first convolution reads fewer channels than rows (its input in
the taps layout) and random CNNs whose max pools run fused into their convolutions' passes,
checks the device output against hwgen.nn bit for bit and the device
counters against the cycle model. Across the configurations below, each CI run checks over
40 random networks, 13 random CNNs and 9 random graphs on Verilator, and fewer of each on
Icarus: each configuration but the 4x4 and the 8x8 once on Verilator (the same generator code
as the 2x3 and 3x2 at more simulation, in the slow run), and on Icarus a case per dataflow and
one depthwise case (Icarus's own behaviour, its X propagation and four-state memories, does
not depend on the feature; its depthwise case is the one of many chunks, Verilator's the one
of three line buffers); every case on both with ``-m slow``
(:func:`support.on_simulators`).
"""

import pytest
from support import need_simulator, on_simulators

from hwgen.config import AcceleratorConfig
from sim.runner import run_cocotb

# act_depth is not a power of two: a read past the memory would be X in Icarus, so the
# masking of lanes beyond a row's end is checked too.
SMALL = {"act_depth": 2000, "weight_depth": 8192, "param_depth": 64, "acc_depth": 64,
         "out_depth": 512, "prog_depth": 32}

# name: (config, networks, max width, max batch, CNNs, max channels of a CNN, graphs)
CASES = {
    "1x1": ({"rows": 1, "cols": 1}, 5, 12, 8, 1, 3, 1),
    "2x3": ({"rows": 2, "cols": 3}, 8, 40, 16, 2, 8, 2),
    "3x2": ({"rows": 3, "cols": 2}, 8, 40, 16, 2, 8, 2),
    "4x4": ({"rows": 4, "cols": 4}, 8, 120, 32, 2, 20, 1),
    "8x8": ({"rows": 8, "cols": 8}, 6, 200, 64, 2, 20, 1),
    "3x5_w4": ({"rows": 3, "cols": 5, "in_bits": 4, "w_bits": 4, "acc_bits": 20}, 5, 40, 16,
               1, 8, 1),
}


def _run_networks(case, config, simulator, tmp_path, *, name):
    """Run sim.tb_network's random networks, CNNs and graphs of a ``(params, networks, max
    width, max batch, CNNs, max channels, graphs)`` case on ``config``; return how many of
    its tests ran."""
    _, networks, width, batch, cnns, channels, graphs = case
    if simulator == "icarus":
        # Icarus is ~50x slower: fewer, smaller networks; the same code paths.
        networks, width, batch = max(2, networks // 3), min(width, 24), min(batch, 8)
        cnns, channels, graphs = min(cnns, 1), min(channels, 6), min(graphs, 1)
    return run_cocotb(config, "sim.tb_network", tmp_path, top="accelerator",
                      simulator=simulator,
                      env={"HWGEN_SEED": str(len(name) + networks),
                           "HWGEN_NETWORKS": str(networks), "HWGEN_MAX_WIDTH": str(width),
                           "HWGEN_MAX_BATCH": str(batch), "HWGEN_CNNS": str(cnns),
                           "HWGEN_MAX_CHANNELS": str(channels), "HWGEN_GENERAL": "1",
                           "HWGEN_GRAPHS": str(graphs), "HWGEN_TAPS": str(min(cnns, 1)),
                           "HWGEN_FUSED": str(min(cnns, 1))})


@pytest.mark.parametrize(("name", "dataflow", "simulator"), on_simulators(
    [(name, dataflow) for name in CASES for dataflow in ("ws", "os")],
    icarus={("2x3", "ws"), ("3x2", "os")},
    verilator={("1x1", "ws"), ("2x3", "os"), ("3x2", "ws"), ("3x5_w4", "os")}))
def test_network(name, dataflow, simulator, tmp_path):
    need_simulator(simulator)
    config = AcceleratorConfig(dataflow=dataflow, **SMALL, **CASES[name][0])
    assert _run_networks(CASES[name], config, simulator, tmp_path, name=name) == 7


# Fewer requantization lanes than columns (weight-stationary only): the rows of a requantized
# layer's last reduction tile enter the array spaced out.
LANE_CASES = {
    "4x4_lanes1": ({"rows": 4, "cols": 4, "post_lanes": 1}, 6, 60, 24, 2, 12, 1),
    "3x6_lanes2": ({"rows": 3, "cols": 6, "post_lanes": 2}, 6, 60, 16, 2, 12, 1),
    # Fewer activation banks than columns (max(rows, post_lanes)): an output tile's channels
    # over several words.
    "2x4_lanes1": ({"rows": 2, "cols": 4, "post_lanes": 1}, 4, 40, 16, 2, 10, 1),
    "8x16_lanes4": ({"rows": 8, "cols": 16, "post_lanes": 4}, 3, 120, 16, 2, 24, 1),
}


@pytest.mark.parametrize(("name", "simulator"), on_simulators(
    [(name,) for name in LANE_CASES], icarus=set(),
    # 3x6 with two lanes has 3 banks for 6 columns already: 2x4 and 8x16 (~2 min) run slow.
    verilator={("4x4_lanes1",), ("3x6_lanes2",)}))
def test_network_fewer_requant_lanes(name, simulator, tmp_path):
    need_simulator(simulator)
    config = AcceleratorConfig(**SMALL, **LANE_CASES[name][0])
    assert _run_networks(LANE_CASES[name], config, simulator, tmp_path, name=name) == 7


# The depthwise unit (weight-stationary, every column requantized per cycle): the random CNNs'
# depthwise convolutions and average pools run on it, where it can take them, between matrix
# passes; a small acc_depth and dw_depth make chunks many and send the widest to the matrix.
DW_CASES = {
    "4x4_dw": ({"rows": 4, "cols": 4, "depthwise": True, "acc_depth": 16, "dw_depth": 12},
               4, 40, 8, 3, 12, 1),
    # Two rows of the unit below the array's three: tiles of five taps.
    "3x6_dw_x2": ({"rows": 3, "cols": 6, "depthwise": True, "dw_lines": 3, "dw_extra_rows": 2},
                  3, 40, 8, 3, 12, 1),
}


@pytest.mark.parametrize(("name", "simulator"), on_simulators(
    [(name,) for name in DW_CASES], icarus={("4x4_dw",)}, verilator={("3x6_dw_x2",)}))
def test_network_depthwise(name, simulator, tmp_path):
    need_simulator(simulator)
    config = AcceleratorConfig(**{**SMALL, **DW_CASES[name][0]})
    assert _run_networks(DW_CASES[name], config, simulator, tmp_path, name=name) == 7
