"""Per-tensor quantization of the training's operands (hwgen.train.operands)."""

import numpy as np
import pytest

from hwgen.train.operands import qmax, quantize_tensor


@pytest.mark.parametrize("bits", [2, 8, 16])
def test_largest_magnitude_takes_the_top_value(bits):
    a = np.random.default_rng(bits).normal(size=(7, 5))
    q, scale = quantize_tensor(a, bits)
    top = 2 ** (bits - 1) - 1
    assert q.dtype == np.int64 and np.abs(q).max() == top
    assert scale == pytest.approx(np.abs(a).max() / top)
    # Round to nearest: no element is off by more than half a step.
    assert np.all(np.abs(q * scale - a) <= scale / 2 + 1e-12)


def test_all_zeros_get_scale_one():
    q, scale = quantize_tensor(np.zeros((3, 2)), 8)
    assert scale == 1.0 and not q.any()


def test_ties_round_to_even():
    q, _ = quantize_tensor(np.array([127.0, 0.5, 1.5, -2.5]), 8)
    assert q.tolist() == [127, 0, 2, -2]


def test_empty_tensor():
    q, scale = quantize_tensor(np.zeros((0, 4)), 8)
    assert q.shape == (0, 4) and scale == 1.0


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_values_are_refused(value):
    with pytest.raises(ValueError, match=r"NaN or infinity.*smaller learning rate"):
        quantize_tensor(np.array([1.0, value]), 8)


@pytest.mark.parametrize("bits", [1, 65, 8.0, True])
def test_bad_widths_are_refused(bits):
    with pytest.raises(ValueError, match=r"allowed: an integer in 2\.\.64"):
        qmax(bits)
