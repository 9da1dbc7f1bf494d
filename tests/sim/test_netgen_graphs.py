"""sim.netgen.random_graph: each block kind draws the structure it promises (read off the
network's nodes and consumers), and the graphs are valid networks of the shapes asked for."""

import numpy as np
import pytest
from support import COMPILER_CONFIGS as CONFIGS

from hwgen.nn import INPUT, Add, Conv2D, Dense
from sim.netgen import GRAPH_BLOCKS, random_graph


def _one_block(kind, seed, images=True):
    rng = np.random.default_rng(seed)
    return random_graph(rng, CONFIGS["8x8"], images=images, blocks=1, kinds=[kind],
                        head=False, input_shape=(5, 6, 3) if images else (7,))


def _depth(net, name):
    """Layers from the network input to tensor ``name`` along its first inputs."""
    nodes = {node.name: node for node in net.nodes}
    depth = 0
    while name != INPUT:
        name = nodes[name].inputs[0]
        depth += 1
    return depth


@pytest.mark.parametrize("images", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_each_block_kind_has_its_structure(seed, images):
    identity = _one_block("identity", seed, images)
    last = identity.nodes[-1]
    assert isinstance(last.layer, Add) and INPUT in last.inputs
    assert len(identity.nodes) == 3

    projection = _one_block("projection", seed, images)
    layers = [n.layer for n in projection.nodes]
    assert isinstance(layers[-1], Add) and INPUT not in projection.nodes[-1].inputs
    if images:
        convs = [layer for layer in layers if isinstance(layer, Conv2D)]
        assert sorted(c.weight.shape[0] for c in convs) == [1, 3, 3]
        assert sorted(c.strides for c in convs) == [(1, 1), (2, 2), (2, 2)]
    else:
        assert sum(isinstance(layer, Dense) for layer in layers) == 3

    branches = _one_block("branches", seed, images)
    a, b = branches.nodes[-1].inputs
    assert _depth(branches, a) != _depth(branches, b)

    adds = _one_block("add_of_adds", seed, images)
    consumers = {t.name: t.consumers for t in adds.tensors.values()}
    nodes = {n.name: n for n in adds.nodes}
    assert isinstance(adds.nodes[-1].layer, Add)
    assert any(isinstance(nodes[name].layer, Add) for name in adds.nodes[-1].inputs
               if name in nodes)   # an add feeding an add
    assert len(consumers[INPUT]) == 3

    three = _one_block("three_consumers", seed, images)
    counts = [len(t.consumers) for t in three.tensors.values()]
    assert max(counts) == 3


@pytest.mark.parametrize("seed", range(6))
def test_graphs_are_networks_of_the_shape_asked_for(seed):
    rng = np.random.default_rng(seed)
    config = CONFIGS["3x2"]
    images = seed % 2 == 0
    net = random_graph(rng, config, images=images, blocks=2, max_channels=5)
    assert len(net.input_shape) == (3 if images else 1)
    assert net.input_shape[-1] <= (5 if images else 4 * 5)
    assert any(isinstance(layer, Add) for layer in net.layers)
    x = np.zeros((2, *net.input_shape), dtype=np.int64)
    assert net.forward(x).shape == (2, *net.output_shape)


def test_unknown_block_kind_is_refused():
    with pytest.raises(ValueError, match="block kind 'loop'; allowed: " + ", ".join(GRAPH_BLOCKS)):
        random_graph(np.random.default_rng(0), CONFIGS["3x2"], blocks=1, kinds=["loop"])
