"""The chain the importers build: shapes, the flatten-order conversion, the collected error."""

import numpy as np
import pytest

from hwgen.nn import CNN, MLP, Flatten, FloatConv2D, FloatDense, MaxPool2D, UnsupportedModelError
from hwgen.nn.import_chain import Chain, same_pair


def test_dense_chain_builds_an_mlp():
    chain = Chain("Test", None)
    assert chain.dense("a", "Linear", np.ones((3, 4)), None)
    chain.relu("r", "ReLU")
    chain.flatten("f", "Flatten")  # a no-op on rows
    assert chain.dense("b", "Linear", np.ones((4, 2)), 0.5)
    model = chain.build()
    assert isinstance(model, MLP) and model.sizes == [3, 4, 2] and model.relu == [True, False]
    np.testing.assert_array_equal(model.layers[1][1], [0.5, 0.5])


def test_flatten_permutes_the_next_dense_rows():
    # A source weight whose row index is the source feature (c*H + y)*W + x.
    h, w, c = 2, 3, 4
    source = np.arange(h * w * c, dtype=np.float64)[:, None] * [1.0, -1.0]
    chain = Chain("Test", (h, w, c))
    chain.flatten("f", "Flatten")
    chain.dense("d", "Linear", source, None)
    model = chain.build()
    assert isinstance(model, CNN) and isinstance(model.layers[0], Flatten)
    ours = model.layers[1].weight
    for y, x, ch in np.ndindex(h, w, c):
        assert ours[(y * w + x) * c + ch, 0] == (ch * h + y) * w + x


def test_relu_folds_through_pool_and_flatten():
    chain = Chain("Test", (4, 4, 1))
    chain.conv("c", "Conv", np.ones((3, 3, 1, 2)), None, stride=1, padding=1)
    chain.pool("p", "Pool", 2, 2)
    chain.relu("r", "ReLU")
    chain.flatten("f", "Flatten")
    chain.relu("r2", "ReLU")
    chain.dense("d", "Linear", np.ones((8, 3)), None)
    model = chain.build()
    assert [type(layer) for layer in model.layers] == [FloatConv2D, MaxPool2D, Flatten,
                                                        FloatDense]
    assert model.layers[0].relu and not model.layers[3].relu
    assert chain.shape == (3,)


def test_offenders_are_collected_and_the_shape_forgotten():
    chain = Chain("Test", (4, 4, 1))
    chain.relu("r", "ReLU")
    chain.offender("s", "Sigmoid", "not supported")
    # After an offender the shape is unknown: nothing is checked, nothing wrongly reported.
    chain.conv("c", "Conv", np.ones((9, 9, 5, 2)), None, stride=1, padding=0)
    chain.dense("d", "Linear", np.ones((7, 3)), None)
    with pytest.raises(UnsupportedModelError) as info:
        chain.build()
    assert info.value.offenders == [
        ("r", "ReLU", "a ReLU before the first dense or convolution layer cannot be mapped"),
        ("s", "Sigmoid", "not supported")]
    assert str(info.value) == (
        "Test model has 2 unsupported layer(s)/node(s):\n"
        "  - r (ReLU): a ReLU before the first dense or convolution layer cannot be mapped\n"
        "  - s (Sigmoid): not supported")


def test_pending_flatten_and_empty_models():
    chain = Chain("Test", (2, 2, 1))
    chain.flatten("f", "Flatten")
    with pytest.raises(UnsupportedModelError, match=r"f \(Flatten\): flattens \(2, 2, 1\) in "
                                                    r"\(c, h, w\) order but no dense layer"):
        chain.build()
    with pytest.raises(UnsupportedModelError, match=r"<model> \(-\): no dense layer"):
        Chain("Test", None).build()


def test_helpers():
    assert same_pair(3, "stride") == (3, None)
    assert same_pair((2, 2), "stride") == (2, None)
    assert same_pair((1, 2), "stride") == (None, "stride=(1, 2); supported: the same on both "
                                                 "axes")
