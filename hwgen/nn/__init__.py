"""The NumPy side of hwgen: float networks, training, quantization and the integer oracle.

- :class:`MLP`, :func:`load_digits_split`: a float network trained with NumPy alone;
- :func:`quantize`: post-training quantization to a :class:`QuantizedNetwork`;
- :class:`Dense`, :class:`QuantizedNetwork`, :func:`requantize`, :func:`accumulator_bound`: the
  bit-exact integer reference of section 3 of the architecture brief, which every hardware test
  compares against;
- :func:`from_torch`, :func:`from_onnx`: importers (PyTorch and ONNX are optional).
"""

from .importers import UnsupportedModelError, from_onnx, from_torch
from .mlp import MLP, load_digits_split
from .quantization import quantize, requant_params
from .reference import Dense, QuantizedNetwork, accumulator_bound, requantize

__all__ = [
    "MLP",
    "Dense",
    "QuantizedNetwork",
    "UnsupportedModelError",
    "accumulator_bound",
    "from_onnx",
    "from_torch",
    "load_digits_split",
    "quantize",
    "requant_params",
    "requantize",
]
