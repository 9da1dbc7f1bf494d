"""The activation areas and the batch (hwgen.compiler.activations): the largest batch that
fits, the refusals of activations, raw outputs and batches that do not, and areas allocated by
the tensors' lifetimes (a chain's two alternating areas, a graph's live tensors apart)."""

import dataclasses
import math

import numpy as np
import pytest
from support import compile_refused as refused
from support import random_dense_network as random_network
from support import small_dense_network as small_network

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, compile_network
from hwgen.compiler.activations import assign_areas, plan_activations
from hwgen.compiler.kinds import lower_network
from hwgen.nn import Conv2D, Dense, Flatten, MaxPool2D, Node, QuantizedNetwork


def test_largest_batch_is_chosen():
    config = AcceleratorConfig(rows=2, cols=2, act_depth=100, out_depth=60, acc_depth=256)
    network = random_network(np.random.default_rng(3), config, [5, 7, 3], style="uniform",
                             last_raw=True)
    program = compile_network(network, config)
    # Areas: input 3 words per row; layer 0 output 4 words per row; raw output 2 words per row.
    assert program.batch == min(100 // 7, 60 // 2) == 14
    compile_network(network, config, batch=14)
    with pytest.raises(CompileError, match="act_depth=100"):
        compile_network(network, config, batch=15)
    assert compile_network(network, AcceleratorConfig(acc_depth=5)).batch == 5


def test_refuses_activation_overflow():
    config = AcceleratorConfig(rows=1, cols=1, act_depth=64, max_k=64, acc_bits=24)
    network = small_network(config, (10, 20, 3), acc_bits=24)
    # 10 + 20 words per row, the last layer writes its 3 outputs back into area 0 (10 wide).
    assert compile_network(network, config).batch == 2
    refused(network, config, "batch=3", "need 90 ACT words", "act_depth=64",
            "input of layer 1", batch=3)
    wide = small_network(config, (40, 30, 3), acc_bits=24)
    refused(wide, config, "not even batch=1 fits", "need 70", "act_depth=64")


def test_refuses_output_overflow():
    config = AcceleratorConfig(rows=2, cols=2, out_depth=16)
    network = small_network(config, (3, 9), last_raw=True)
    assert compile_network(network, config).batch == 3  # 5 words per row
    refused(network, config, "layer 0", "need 20 OUTPUT words", "out_depth=16", batch=4)
    refused(small_network(config, (3, 40), last_raw=True), config, "not even batch=1",
            "out_depth=16")


def test_refuses_batch_outside_capacity():
    config = AcceleratorConfig(acc_depth=8)
    network = small_network(config)
    refused(network, config, "batch=9", "1..8", "acc_depth", batch=9)
    refused(network, config, "batch=0", batch=0)
    refused(network, config, "batch=-1", batch=-1)



# -- tensors and their lifetimes ----------------------------------------------------------------

def test_passes_name_the_tensors_they_read_and_write():
    rng = np.random.default_rng(0)
    conv = Conv2D(rng.integers(-9, 9, (2, 2, 1, 3)), np.zeros(3, int), np.ones(3, int),
                  np.zeros(3, int))
    dense = Dense(rng.integers(-9, 9, (12, 2)), np.zeros(2, int), np.ones(2, int),
                  np.zeros(2, int), output="raw")
    network = QuantizedNetwork([Node("c", conv, "input"), Node("flat", Flatten(), "c"),
                                Node("d", dense, "flat")], input_shape=(3, 3, 1))
    passes = lower_network(network, AcceleratorConfig())
    # The Flatten is no tensor of its own: the dense pass reads the image it flattens.
    assert [(p.name, p.inputs) for p in passes] == [("c", ("input",)), ("d", ("c",))]
    assert passes[1].in_shape == (2, 2, 3)


def pool_passes(count, side=7):
    """Return ``count`` pool passes of shrinking images (``side``, ``side - 1``, ...), whose
    inputs the tests then rewire into a graph."""
    network = QuantizedNetwork([MaxPool2D(2, 1) for _ in range(count)],
                               input_shape=(side, side, 1))
    return lower_network(network, AcceleratorConfig())


def rewire(passes, inputs):
    return [dataclasses.replace(p, name=name, inputs=tuple(reads))
            for p, (name, reads) in zip(passes, inputs.items(), strict=True)]


# a is read by b and c, the input by a and d: four tensors are live at pass 2.
GRAPH = {"a": ["input"], "b": ["a"], "c": ["a", "b"], "d": ["c", "input"]}


def live_spans(inputs):
    """Each tensor's first and last pass, from the graph alone (the output: to the end)."""
    names = ["input", *inputs]
    spans = {name: [i - 1, i - 1] for i, name in enumerate(names)}
    for index, reads in enumerate(inputs.values()):
        for name in reads:
            spans[name][1] = index
    spans[names[-1]][1] = len(inputs)
    return spans


def test_assign_areas_alternates_on_a_chain_and_reuses_the_lowest_free_area():
    assert assign_areas([(-1, 0), (0, 1), (1, 2), (2, 3), (3, 4)]) == [0, 1, 0, 1, 0]
    spans = list(live_spans(GRAPH).values())
    assert spans == [[-1, 3], [0, 2], [1, 2], [2, 3], [3, 4]]
    assert assign_areas(spans) == [0, 1, 2, 3, 1]


@pytest.mark.parametrize("readout", [False, True])
def test_live_tensors_never_share_words(readout):
    config = AcceleratorConfig(act_depth=1 << 12)
    passes = rewire(pool_passes(4), GRAPH)
    plan = plan_activations((7, 7, 1), passes, config, 3, readout=readout)
    assert plan.names == ("input", "a", "b", "c", "d")
    assert plan.inputs == ((0,), (1,), (1, 2), (3, 0))
    assert [plan.source(i) for i in range(4)] == [0, 1, 1, 3]
    sides = [7, 6, 5, 4, 3]
    words = [3 * side * side for side in sides]  # 3 samples, one word per pixel
    spans = list(live_spans(GRAPH).values())
    ranges = [(plan.base(m), plan.base(m) + words[m]) for m in range(5)]
    for m, (low, high) in enumerate(ranges):
        assert low >= 0 and high <= config.act_depth
        for other in range(m):
            live_together = spans[other][1] >= spans[m][0]
            if live_together or readout:
                assert high <= ranges[other][0] or ranges[other][1] <= low, (m, other)
    # Areas as large as their largest tensor: d (3x3) reuses a's area (6x6).
    expected = [0, 1, 2, 3, 4] if readout else [0, 1, 2, 3, 1]
    assert list(plan.areas) == expected
    sizes = [max(w for w, a in zip(words, expected, strict=True) if a == area)
             for area in range(max(expected) + 1)]
    assert list(plan.area_base) == [sum(sizes[:a]) for a in range(len(sizes))]


def test_a_graph_that_does_not_fit_names_the_tensor():
    passes = rewire(pool_passes(4), GRAPH)
    config = AcceleratorConfig(act_depth=200)
    assert plan_activations((7, 7, 1), passes, config, None).batch == 1  # 49 + 36 + 25 + 16 words
    with pytest.raises(CompileError) as info:
        plan_activations((7, 7, 1), passes, config, 2)
    message = str(info.value)
    for fragment in ("need 252 ACT words", "(49 + 36 + 25 + 16) words of the 4 areas the "
                     "tensors' lifetimes need", "widest: tensor 'input', the input of layer 0",
                     "live from pass 0 to 3", "limit act_depth=200"):
        assert fragment in message, (fragment, message)
    assert (info.value.need, info.value.limit, info.value.resource) == (252, 200, "act_depth")


def test_a_pass_reading_an_unwritten_tensor_is_refused():
    passes = rewire(pool_passes(2), {"a": ["input"], "b": ["x"]})
    with pytest.raises(CompileError, match=r"pass 1 reads the tensor 'x', which no earlier pass "
                                           r"writes; allowed: one of \['input', 'a'\]"):
        plan_activations((7, 7, 1), passes, AcceleratorConfig(), 1)


def old_bases(shapes, lanes, batch, readout):
    """The ACT word of each matrix of a chain as the compiler placed them before areas were
    allocated by liveness: area ``i % 2``, or area ``i`` with read-out."""
    words = [math.prod(s[:-1]) * math.ceil(s[-1] / lanes) for s in shapes]
    if readout:
        return [batch * sum(words[:i]) for i in range(len(words))]
    return [0 if i % 2 == 0 else batch * max(words[0::2]) for i in range(len(words))]


@pytest.mark.parametrize("readout", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_chains_keep_the_two_alternating_areas(seed, readout):
    rng = np.random.default_rng(seed)
    config = AcceleratorConfig(rows=2, cols=3, act_depth=1 << 12)
    sizes = [int(s) for s in rng.integers(1, 20, int(rng.integers(2, 6)))]
    network = random_network(rng, config, sizes, style="uniform", last_raw=bool(seed % 2))
    program = compile_network(network, config, readout=readout)
    shapes = [(s,) for s in sizes[:len(sizes) - seed % 2]]
    bases = old_bases(shapes, config.act_lanes, program.batch, readout)
    for index, d in enumerate(program.descriptors):
        assert d["src_base"] == bases[index]
        assert d["dst_base"] == (0 if d["raw"] else bases[index + 1])
    # Images without padding: the walk's origin is the area's first word.
    network = QuantizedNetwork([MaxPool2D(2), MaxPool2D(1), MaxPool2D(2, 1)],
                               input_shape=(9, 9, 5))
    program = compile_network(network, config, readout=readout)
    shapes = [(9, 9, 5), (4, 4, 5), (4, 4, 5), (3, 3, 5)]
    bases = old_bases(shapes, config.act_lanes, program.batch, readout)
    assert [d["src_base"] for d in program.descriptors] == bases[:3]
    assert [d["dst_base"] for d in program.descriptors] == bases[1:]


@pytest.mark.parametrize("seed", range(3))
def test_split_act_keeps_area_0_below_the_single_port_words(seed):
    """With ``act_spram_depth`` the input's area lies below it and every other area above, so
    no pass reads and writes the single-port words at once (a pass's input and output never
    share an area); the largest batch counts both parts."""
    rng = np.random.default_rng(seed)
    config = AcceleratorConfig(rows=2, cols=2, act_depth=96, act_spram_depth=64,
                               spatial=False, residual=False)
    sizes = [int(s) for s in rng.integers(1, 9, int(rng.integers(3, 6)))]
    net = random_network(rng, config, sizes, style="uniform", last_raw=bool(seed % 2))
    passes = lower_network(net, config)
    plan = plan_activations((sizes[0],), passes, config, None)
    words = [math.ceil(s[-1] / 2) for s in plan.shapes]
    area0 = max(w for w, a in zip(words, plan.areas, strict=True) if a == 0)
    others = [max(w for w, a in zip(words, plan.areas, strict=True) if a == area)
              for area in range(1, max(plan.areas) + 1)]
    assert plan.batch == min(64 // area0, 32 // sum(others) if others else 64,
                             config.acc_depth)
    for index, area in enumerate(plan.areas):
        low, high = plan.base(index), plan.base(index) + plan.batch * words[index]
        assert (high <= 64) if area == 0 else (low >= 64 and high <= 96), (index, area)
    with pytest.raises(CompileError, match=r"area 0 in the 64 single-port words"):
        plan_activations((sizes[0],), passes, config, plan.batch + 1)
