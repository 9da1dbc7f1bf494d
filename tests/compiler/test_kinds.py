"""The layer kinds the compiler takes (hwgen.compiler.kinds): each lowered to a device pass by
its pass kind (hwgen.passes);
a device without spatial layers (``spatial=False``) refuses the passes over images."""

import numpy as np
import pytest
from support import compile_refused
from support import small_dense_network as small_network

from hwgen import AcceleratorConfig
from hwgen.compiler import CompileError, compile_network
from hwgen.compiler.kinds import lower_network
from hwgen.memmap import PassKind
from hwgen.nn import Conv2D, Dense, Flatten, MaxPool2D, QuantizedNetwork
from hwgen.passes.matrix import padded_matrix


def _conv(kh, kw, c, n, **kw_args):
    rng = np.random.default_rng(kh * 100 + kw * 10 + c)
    return Conv2D(rng.integers(-3, 4, (kh, kw, c, n)), np.zeros(n, int), np.ones(n, int),
                  np.zeros(n, int), **kw_args)


def test_a_dense_layer_over_rows_runs_as_itself():
    config = AcceleratorConfig()
    net = small_network(config)
    (p, *_) = lower_network(net, config)
    layer = net.layers[0]
    assert (p.kind, p.kernel, p.spatial) == (PassKind.MATRIX, None, False)
    np.testing.assert_array_equal(p.matrix.weight, layer.weight)
    assert p.k == layer.weight.shape[0] and p.source == 0


def test_padded_matrix_puts_each_kernel_positions_channels_in_whole_tiles():
    weight = np.arange(2 * 3 * 5 * 4).reshape(2, 3, 5, 4)
    padded = padded_matrix(weight, rows=4)          # 5 channels -> 2 groups of 4
    assert padded.shape == (2 * 3 * 8, 4)
    for ky in range(2):
        for kx in range(3):
            block = padded[(ky * 3 + kx) * 8:(ky * 3 + kx + 1) * 8]
            np.testing.assert_array_equal(block[:5], weight[ky, kx])
            assert not block[5:].any()


def test_convolution_pooling_and_flatten_then_dense():
    """A Flatten costs nothing: the Dense after it runs as a convolution over the whole
    image, its weight rows in (h, w, c) order."""
    config = AcceleratorConfig(rows=2, cols=2)
    conv = _conv(3, 3, 2, 3, stride=2, padding=1)
    dense = Dense(np.arange(2 * 2 * 3 * 4).reshape(12, 4) % 7 - 3, np.zeros(4, int),
                  np.ones(4, int), np.zeros(4, int))
    net = QuantizedNetwork([conv, MaxPool2D(2, 1), Flatten(), dense], input_shape=(5, 5, 2))
    passes = lower_network(net, config)
    assert [p.kind for p in passes] == [PassKind.MATRIX, PassKind.MAXPOOL, PassKind.MATRIX]
    assert [p.source for p in passes] == [0, 1, 3]
    assert passes[0].kernel == (3, 3, (2, 2), (1, 1, 1, 1), 0) and passes[0].k == 18
    assert passes[1].kernel == (2, 2, (1, 1), (0, 0, 0, 0), 0) and passes[1].matrix is None
    assert passes[2].in_shape == (2, 2, 3) and passes[2].kernel == (2, 2, (1, 1), (0,) * 4, 0)
    np.testing.assert_array_equal(passes[2].matrix.weight,
                                  padded_matrix(dense.weight.reshape(2, 2, 3, 4), 2))


def test_a_kind_without_lowering_is_refused_by_name():
    class Upsample:
        in_features = 4
        output = "requant"

    net = small_network(AcceleratorConfig())
    net.layers.insert(1, Upsample())
    with pytest.raises((CompileError, TypeError)) as info:
        lower_network(net, AcceleratorConfig())
    assert "Upsample" in str(info.value)


def test_lowering_proves_the_layer():
    # max_k = 4 sizes k_tiles for one tile of 8 rows (1 bit): K <= 8 over rows.
    config = AcceleratorConfig(max_k=4)
    lower_network(QuantizedNetwork([Dense(np.ones((8, 2), int), [0, 0], [1, 1], [0, 0])]),
                  config)
    net = QuantizedNetwork([Dense(np.ones((9, 2), int), [0, 0], [1, 1], [0, 0])])
    with pytest.raises(CompileError, match="K=9"):
        lower_network(net, config)
    # A convolution's reduction is its patch: 3 x 3 positions of 1 channel, a tile each.
    net = QuantizedNetwork([_conv(3, 3, 1, 2)], input_shape=(4, 4, 1))
    with pytest.raises(CompileError, match=r"K=9 unpadded\), 9 tiles"):
        lower_network(net, config)
    # And its accumulator, from the weights: 9 products of 127 by -128 need more than 18 bits.
    conv = Conv2D(np.full((3, 3, 1, 2), 127), np.zeros(2, int), np.ones(2, int),
                  np.zeros(2, int))
    net = QuantizedNetwork([conv], input_shape=(4, 4, 1), acc_bits=18)
    with pytest.raises(CompileError, match=r"output channel 0 \(and 1 more"):
        lower_network(net, AcceleratorConfig(acc_bits=18))


#: A device without spatial layers (no patch walker over images, no pooler).
NO_SPATIAL = AcceleratorConfig(rows=2, cols=2, spatial=False)


def _dense(k, n):
    return Dense(np.arange(k * n).reshape(k, n) % 5 - 2, np.zeros(n, int), np.ones(n, int),
                 np.zeros(n, int))


@pytest.mark.parametrize(("layers", "shape", "index", "what"), [
    (lambda: [_conv(3, 3, 2, 3, padding=1), Flatten(), _dense(48, 2)], (4, 4, 2), 0,
     "a Conv2D"),
    (lambda: [Flatten(), _dense(12, 3)], (2, 2, 3), 1, "a Dense after a Flatten"),
    (lambda: [MaxPool2D(2), Flatten(), _dense(3, 2)], (2, 2, 3), 0, "a MaxPool2D"),
], ids=["conv", "flatten-dense", "pool"])
def test_a_device_without_spatial_layers_refuses_them_naming_the_option(layers, shape, index,
                                                                       what):
    net = QuantizedNetwork(layers(), input_shape=shape)
    lower_network(net, AcceleratorConfig(rows=2, cols=2))      # fine with spatial layers
    with pytest.raises(CompileError) as info:
        lower_network(net, NO_SPATIAL)
    error = info.value
    assert (error.layer, error.resource) == (index, "spatial")
    for fragment in (f"layer {index}", what, "spatial=False", "allowed", "spatial=True"):
        assert fragment in str(error), (fragment, str(error))
    # The same through the whole compiler.
    compile_refused(net, NO_SPATIAL, what, "spatial=False")


def test_a_dense_network_compiles_alike_with_and_without_spatial_layers():
    """Layers over rows need nothing of the walk over images: the same program either way
    (only the configuration it names differs)."""
    net = small_network(AcceleratorConfig(), (5, 4, 3))
    with_spatial = compile_network(net, AcceleratorConfig(rows=2, cols=2), batch=3)
    without = compile_network(net, NO_SPATIAL, batch=3)
    assert without.config == NO_SPATIAL
    assert without.config_hash == NO_SPATIAL.hash != with_spatial.config_hash
    assert without.descriptors == with_spatial.descriptors
    assert without.images.keys() == with_spatial.images.keys()
    for region, (base, words) in without.images.items():
        assert base == with_spatial.images[region][0]
        np.testing.assert_array_equal(words, with_spatial.images[region][1])
