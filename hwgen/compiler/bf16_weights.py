"""What a bf16 matrix pass runs: its weights and biases as bit patterns (issue 52)."""

import dataclasses

import numpy as np

__all__ = ["NO_PRODUCT", "Bf16Matrix"]


@dataclasses.dataclass(frozen=True, eq=False)
class Bf16Matrix:
    """What a bf16 matrix pass runs, as bit patterns: the fields of a :class:`~hwgen.nn.Dense`
    the matrix pass's layout reads (:mod:`hwgen.passes.matrix`).

    Attributes
    ----------
    weight : numpy.ndarray of int64, shape (K, N)
        bf16 bit patterns (0..0xFFFF).
    bias : numpy.ndarray of int64, shape (N,)
        fp32 bit patterns (0..0xFFFFFFFF).
    activation : str
        ``"relu"`` or ``"identity"`` (informative: ReLU is in ``act_min``).
    output : str
        ``"raw"`` (fp32 scores to OUTPUT) or ``"bf16"``.
    act_min, act_max : int or None
        bf16 bit patterns of the bounds (None for a raw layer).
    """

    weight: np.ndarray
    bias: np.ndarray
    activation: str
    output: str
    act_min: int | None = None
    act_max: int | None = None
    # No requantization: param_image's lanes that the bf16 layout does not have.
    mult = shift = 0
    mult_neg = None


#: The weight pattern of no product: -0.0, which the zero rule leaves no weight; the
#: multiplier gives +0.0 for it whatever the activation (:func:`hwgen.nn.bf16.no_product`).
NO_PRODUCT = 0x8000
