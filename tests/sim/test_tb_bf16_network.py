"""cocotb regression of the bf16 accelerator core (sim/tb_bf16_network.py) on the emitted
Verilog, loaded through its host port, each output checked against Bf16Network.forward bit
for bit and the device's counters against the cycle model's after each run:

- hypothesis-drawn bf16 MLPs (:func:`support.bf16_draws.dense_cases`: shapes, batches, ReLU
  and bounds, raw or bf16 outputs, values of tensors that give zeros, flushed products,
  overflow to Inf, Inf - Inf and Inf * 0), several a simulator run;
- random bf16 graphs of every layer kind (convolutions, max pools, a residual add, a
  depthwise convolution, average pools), the last overflowing to Inf and NaN, the one
  before flushing its products to zero.

Which run by default on which simulator: see each test. Icarus builds the bf16 core in a few
seconds and Verilator in tens (its C++), so the default run builds each design once.
"""

import json

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from support import need_simulator, on_simulators
from support.bf16_draws import dense_cases
from support.cocotb_builds import SharedBuilds

import hwgen
from hwgen.config import AcceleratorConfig
from hwgen.generate import emit_design
from sim.bf16_runs import differing_bits, from_dense_case
from sim.runner import run_cocotb

SMALL = {"act_depth": 600, "weight_depth": 512, "param_depth": 32, "acc_depth": 16,
         "out_depth": 128, "prog_depth": 8, "spatial": False, "residual": False}
# Every layer kind: the patch walker, the adder and the depthwise unit.
GRAPHS = {**SMALL, "act_depth": 1024, "prog_depth": 32, "spatial": True, "residual": True,
          "depthwise": True, "dw_lines": 4}

# name: (rows, cols, the widest layer, the largest batch) of a SMALL design.
MLP_DESIGNS = {"2x4": (2, 4, 9, 6), "4x2": (4, 2, 9, 6), "4x4": (4, 4, 13, 12),
               "8x8": (8, 8, 20, 16)}


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The module's designs, each built once per simulator."""
    return SharedBuilds(tmp_path_factory.mktemp("bf16_network"))


# Every example is a simulator run of several MLPs, so few examples, derandomized (the same in
# every run, as CI needs), no shrinking (each step would be a run; the failure names the case
# and its file stays beside the log).
@pytest.mark.parametrize(("design", "simulator"), on_simulators(
    [(name,) for name in MLP_DESIGNS], icarus={("2x4",), ("4x2",)},
    verilator={("8x8",)}))
@settings(max_examples=4, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.generate))
@given(data=st.data())
def test_drawn_bf16_mlps(design, simulator, builds, data):
    """Drawn MLPs bit for bit. By default 2x4 and 4x2 on Icarus (20 s each: more rows than
    columns and fewer), the square 8x8 on Verilator (whose C++ build of a core takes 40 to 60
    s), the others with ``-m slow``."""
    need_simulator(simulator)
    rows, cols, width, batch = MLP_DESIGNS[design]
    config = AcceleratorConfig(dtype="bf16", rows=rows, cols=cols, **SMALL)
    cases = data.draw(st.lists(dense_cases(config, max_width=width, max_batch=batch),
                               min_size=1, max_size=4), label="cases")
    ran = builds.run(design, lambda: emit_design(config, "accelerator", "dut")[1], simulator,
                     "sim.tb_bf16_network", testcase="test_drawn_bf16_mlps", cases=cases,
                     cases_env="HWGEN_BF16_CASES", env={"HWGEN_CONFIG": config.to_json()})
    assert ran == 1


# name: (design, config, seed, graphs, max batch, image, graphs on Icarus)
GRAPH_CASES = {"cnn4x4": (GRAPHS, {"rows": 4, "cols": 4}, 52, 10, 3, "6x6x4", 3)}


# On Icarus three graphs (one wide, one flushing, one overflowing): it runs a graph in about
# 8 s, Verilator in about 1 s once built.
@pytest.mark.parametrize(("name", "simulator"), on_simulators(
    [(name,) for name in GRAPH_CASES], icarus={("cnn4x4",)}))
def test_random_bf16_graphs(name, simulator, tmp_path):
    need_simulator(simulator)
    design, params, seed, graphs, batch, image, on_icarus = GRAPH_CASES[name]
    config = AcceleratorConfig(dtype="bf16", **design, **params)
    ran = run_cocotb(config, "sim.tb_bf16_network", tmp_path, top="accelerator",
                     simulator=simulator, testcase="test_random_bf16_graphs",
                     env={"HWGEN_SEED": str(seed), "HWGEN_MAX_BATCH": str(batch),
                          "HWGEN_NETWORKS": str(on_icarus if simulator == "icarus" else graphs),
                          "HWGEN_IMAGE": image})
    assert ran == 1


def _corners(net, x):
    """Which of the contract's corners ``net`` meets on ``x``: products flushed to zero, Inf,
    NaN."""
    tensors = list(net.forward_tensors(x).values())
    seen = set()
    for layer, inputs in zip(net.layers, tensors, strict=False):
        products = (np.asarray(inputs, dtype=np.float64)[:, :, None]
                    * np.asarray(layer.weight, dtype=np.float64)[None])
        if ((products != 0) & (np.abs(products) < 2.0 ** -126)).any():
            seen.add("flushed")
    values = np.concatenate([np.asarray(t, dtype=np.float32).ravel() for t in tensors])
    seen |= {"inf"} if np.isinf(values).any() else set()
    seen |= {"nan"} if np.isnan(values).any() else set()
    return seen


def test_drawn_cases_compile_and_reach_the_corners():
    """Without a simulator: the drawn MLPs survive their JSON, compile for their design with
    their batch, and between them flush products, overflow to Inf, make NaN and sum in an
    order that shows."""
    rows, cols, width, batch = MLP_DESIGNS["2x4"]
    config = AcceleratorConfig(dtype="bf16", rows=rows, cols=cols, **SMALL)
    seen = set()

    @settings(max_examples=40, deadline=None, derandomize=True, database=None)
    @given(case=dense_cases(config, max_width=width, max_batch=batch))
    def draw(case):
        net, x = from_dense_case(json.loads(json.dumps(case)), rows)
        assert len(x) <= hwgen.compile(net, config).batch
        with np.errstate(all="ignore"):
            found = _corners(net, x)
            other, _ = from_dense_case(case, rows + 1)
            if differing_bits(net.forward(x), other.forward(x)):
                found.add("order")
        seen.update(found)

    draw()
    assert seen == {"flushed", "inf", "nan", "order"}
