"""What a :class:`~hwgen.nn.QuantizedNetwork` checks: its layer kinds, widths and tensors.

The table of layer kinds (:data:`LAYER_TYPES`, which of them requantize, how many tensors each
reads), the widths the reference model supports, and the checks of every node against the
widths and the shapes of the tensors it reads, of the per-tensor scales and of the input. The
network calls them before each computation, because layers are mutable objects.
"""

import math
import numbers

import numpy as np

from ._ints import check_range, int_array, signed_range
from .add import Add
from .avgpool import AvgPool2D, GlobalAvgPool2D
from .conv import Conv2D
from .dense import Dense
from .flatten import Flatten
from .graph import INPUT, check_layer_type, where
from .maxpool import MaxPool2D

__all__ = ["LAYER_TYPES", "REQUANTIZING", "arity", "check_input", "check_widths",
           "checked_scales", "tensor_shapes"]

LAYER_TYPES = (Dense, Conv2D, MaxPool2D, Flatten, AvgPool2D, GlobalAvgPool2D, Add)
# The layers that requantize: forward(*inputs, in_bits, acc_bits, where=...),
# bounds(out_bits).
REQUANTIZING = (Dense, Conv2D, AvgPool2D, GlobalAvgPool2D, Add)
# How many tensors each kind of layer reads (an Add: a, then b).
ARITY = dict.fromkeys(LAYER_TYPES, 1) | {Add: 2}
# The unsigned multipliers a requantizing layer may carry (checked where present).
_MULTIPLIERS = ("mult", "mult_neg", "mult_a", "mult_b")

# Width limits of the reference model itself. Parameters are stored as int64, so no width may
# exceed 64 bits (mult is unsigned, hence 63). The hardware configuration is usually narrower.
WIDTH_RANGES = {
    "in_bits": (2, 64),
    "w_bits": (2, 64),
    "acc_bits": (2, 64),
    "mult_bits": (1, 63),
}


def arity(layer):
    """Return how many tensors ``layer`` reads, or None if it is not a layer."""
    return next((count for kind, count in ARITY.items() if isinstance(layer, kind)), None)


def check_widths(widths):
    """Return ``widths`` (name -> value, e.g. ``in_bits``) as Python ints, checked against
    :data:`WIDTH_RANGES`; raise ``ValueError`` naming the width otherwise."""
    for name, value in widths.items():
        low, high = WIDTH_RANGES[name]
        if (not isinstance(value, numbers.Integral) or isinstance(value, bool)
                or not low <= value <= high):
            raise ValueError(f"QuantizedNetwork: {name}={value!r}; "
                             f"allowed: an integer in {low}..{high}")
    return {name: int(value) for name, value in widths.items()}


def check_params(at, layer, widths):
    """Check a requantizing layer's parameters against ``(in_bits, w_bits, acc_bits,
    mult_bits)``: weights, bias, every multiplier, shift and the activation bounds."""
    in_bits, w_bits, acc_bits, mult_bits = widths
    shift_high = acc_bits + mult_bits - 1
    if hasattr(layer, "weight"):
        check_range(layer.weight, at, "weight", signed_range(w_bits),
                    f"signed w_bits={w_bits}")
        check_range(layer.bias, at, "bias", signed_range(acc_bits),
                    f"signed acc_bits={acc_bits}")
    unsigned = (0, (1 << mult_bits) - 1)
    # An Add's single integer is every channel's: its errors name index 0.
    for field in _MULTIPLIERS:
        if getattr(layer, field, None) is not None:
            check_range(np.atleast_1d(getattr(layer, field)), at, field, unsigned,
                        f"unsigned mult_bits={mult_bits}")
    check_range(np.atleast_1d(layer.shift), at, "shift", (0, shift_high),
                f"acc_bits + mult_bits - 1 = {shift_high} at most")
    if getattr(layer, "output", "requant") == "requant":
        _check_bounds(at, layer, in_bits)


def _check_bounds(at, layer, in_bits):
    """Raise the layer's bounds error with ``at`` naming the layer."""
    try:
        layer.bounds(in_bits)
    except ValueError as exc:
        message = str(exc).split(": ", 1)[1]
        raise ValueError(f"{at}: {message} (in_bits={in_bits})") from None


def checked_scales(scales, input_scale, tensors):
    """Return ``scales`` (tensor name -> float) with ``input_scale`` as the input's, checked
    against the names of ``tensors``."""
    checked = {}
    for name, given in dict(scales or {}).items():
        if name not in tensors:
            raise ValueError(f"QuantizedNetwork: scales names {name!r}, not a tensor of the "
                             f"network; allowed: {list(tensors)}")
        value = float(given)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"QuantizedNetwork: scales[{name!r}]={value!r}; allowed: a "
                             "finite float > 0")
        checked[name] = value
    if input_scale is not None and checked.setdefault(INPUT, input_scale) != input_scale:
        raise ValueError(f"QuantizedNetwork: scales['input']={checked[INPUT]!r} but "
                         f"input_scale={input_scale!r}; allowed: the same value, or one "
                         "of them")
    return checked


def check_input(x, shape, in_bits):
    """Return the network input ``x`` as int64, checked against its shape and ``in_bits``."""
    x = int_array(x, "input", "x")
    if len(shape) == 1:
        if x.ndim != 2:
            raise ValueError(f"input: field 'x' has shape {x.shape}; "
                             f"allowed: 2-D (M, {shape[0]})")
        if x.shape[1] != shape[0]:
            raise ValueError(f"input: field 'x' has shape {x.shape}; "
                             f"allowed: (M, {shape[0]}), the width of layer 0")
    elif x.ndim != 4 or x.shape[1:] != shape:
        raise ValueError(f"input: field 'x' has shape {x.shape}; allowed: "
                         f"(M, {', '.join(map(str, shape))}), NHWC with input_shape {shape}")
    check_range(x, "input", "x", signed_range(in_bits), f"signed in_bits={in_bits}")
    return x


def tensor_shapes(nodes, input_shape, widths):
    """Check every node against its inputs and ``(in_bits, w_bits, acc_bits, mult_bits)``;
    return each tensor's per-sample shape by name, input first."""
    shapes = {INPUT: input_shape}
    position = {node.name: index for index, node in enumerate(nodes)}
    for index, node in enumerate(nodes):
        layer, at = node.layer, where(index, node.name)
        check_layer_type(layer, LAYER_TYPES, at)
        layer.check(at)
        if isinstance(layer, REQUANTIZING):
            check_params(at, layer, widths)
        if getattr(layer, "output", None) == "raw" and index != len(nodes) - 1:
            raise ValueError(f"{at}: field 'output' is 'raw' but the layer is not "
                             f"the last of {len(nodes)}; allowed: 'requant'")
        for name in node.inputs:
            if shapes[name] is None:
                if not isinstance(layer, Dense):
                    raise ValueError(f"QuantizedNetwork: field 'input_shape' is None but {at} "
                                     f"is a {type(layer).__name__}; allowed: (H, W, C), the "
                                     "shape of one NHWC input sample")
                shapes[name] = (layer.in_features,)
        if isinstance(layer, Add):  # names both tensors when their shapes differ
            shapes[node.name] = layer._output_shapes(
                [shapes[n] for n in node.inputs], at, [f"input {n!r}" for n in node.inputs])
        else:
            name = node.inputs[0]
            source = "input_shape" if name == INPUT else where(position[name], name)
            shapes[node.name] = layer._output_shape(shapes[name], at, source)
    return shapes
