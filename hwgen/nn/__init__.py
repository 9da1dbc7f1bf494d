"""The NumPy side of hwgen: float networks, training, quantization and the integer oracle.

- :class:`MLP`, :class:`CNN` (:class:`FloatDense`, :class:`FloatConv2D`,
  :class:`FloatAvgPool2D`, :class:`FloatGlobalAvgPool2D`, :class:`FloatAdd` layers; chains or
  graphs of :class:`Node`): float networks, chains trained with NumPy alone;
  :func:`load_digits_split`, :func:`load_digits_images`, :func:`digits_cnn`,
  :func:`train_digits_cnn`: the bundled digits and the default CNN;
- :func:`quantize`: post-training quantization to a :class:`QuantizedNetwork`;
- :class:`Dense`, :class:`Conv2D` (grouped, depthwise), :class:`MaxPool2D`, :class:`AvgPool2D`,
  :class:`GlobalAvgPool2D`, :class:`Flatten`, :class:`Add` (two tensors),
  :class:`QuantizedNetwork` (a chain of layers, or a graph of :class:`Node` over named
  :class:`Tensor`), :func:`requantize`, :func:`accumulator_bound`: the bit-exact integer
  reference of docs/arithmetic.md, which every hardware test
  compares against (:class:`MaxPool2D` and :class:`Flatten` serve the float :class:`CNN` too);
- :func:`to_bf16`: a float model rounded to the :class:`Bf16Network`, the bit-exact
  bfloat16 reference (bf16 multiplies, fp32 sums in the array's tile order; see
  :mod:`hwgen.nn.bf16`);
- :func:`from_torch`, :func:`from_onnx`: importers (PyTorch and ONNX are optional).
"""

from .add import Add
from .avgpool import AvgPool2D, GlobalAvgPool2D
from .bf16_network import Bf16Network, to_bf16
from .cnn import CNN
from .conv import Conv2D
from .dense import Dense, accumulator_bound
from .digits import digits_cnn, load_digits_images, load_digits_split, train_digits_cnn
from .flatten import Flatten
from .float_add import FloatAdd
from .float_layers import FloatConv2D, FloatDense
from .float_pool import FloatAvgPool2D, FloatGlobalAvgPool2D
from .graph import INPUT, Node, Tensor
from .import_chain import UnsupportedModelError
from .import_onnx import from_onnx
from .import_torch import from_torch
from .maxpool import MaxPool2D
from .mlp import MLP
from .quantization import quantize
from .quantized_network import QuantizedNetwork
from .requantization import requant_params, requantize

__all__ = [
    "CNN",
    "INPUT",
    "MLP",
    "Add",
    "AvgPool2D",
    "Bf16Network",
    "Conv2D",
    "Dense",
    "Flatten",
    "FloatAdd",
    "FloatAvgPool2D",
    "FloatConv2D",
    "FloatDense",
    "FloatGlobalAvgPool2D",
    "GlobalAvgPool2D",
    "MaxPool2D",
    "Node",
    "QuantizedNetwork",
    "Tensor",
    "UnsupportedModelError",
    "accumulator_bound",
    "digits_cnn",
    "from_onnx",
    "from_torch",
    "load_digits_images",
    "load_digits_split",
    "quantize",
    "requant_params",
    "requantize",
    "to_bf16",
    "train_digits_cnn",
]
