"""The bit-exact integer model of a quantized network: the oracle of every hardware test.

Everything here follows sections 3 and 3.1 of the architecture brief (the arithmetic contract)
to the bit:

- ``acc[m, n] = sum_k x[m, k] * W[k, n] + b[n]``, exact, for a :class:`Dense` layer and for
  every output pixel's patch of a :class:`Conv2D`;
- ``p = acc * mult[n]``; ``r = (p + (1 << (shift[n] - 1))) >> shift[n]`` when ``shift[n] > 0``,
  else ``r = p`` (``>>`` is the arithmetic shift, so ties round towards +infinity);
- ``y = clamp(r, -2**(in_bits - 1), 2**(in_bits - 1) - 1)``, then ``relu`` or ``identity``;
- an output layer may return ``acc`` itself (``output="raw"``);
- :class:`MaxPool2D` takes the maximum of each window's ints; :class:`Flatten` reorders nothing
  (NHWC memory, feature ``(y*W + x)*C + c``).
"""

import math
import numbers

import numpy as np

from ._ints import check_range, int_array, sample_shape, signed_range
from .conv import Conv2D
from .dense import Dense, accumulate
from .flatten import Flatten
from .maxpool import MaxPool2D
from .requantization import requantize

__all__ = ["QuantizedNetwork"]

LAYER_TYPES = (Dense, Conv2D, MaxPool2D, Flatten)

# Width limits of the reference model itself. Parameters are stored as int64, so no width may
# exceed 64 bits (mult is unsigned, hence 63). The hardware configuration is usually narrower.
_WIDTH_RANGES = {
    "in_bits": (2, 64),
    "w_bits": (2, 64),
    "acc_bits": (2, 64),
    "mult_bits": (1, 63),
}


class QuantizedNetwork:
    """A chain of integer layers, computed bit-exactly as the hardware does.

    Layers are :class:`Dense`, :class:`Conv2D`, :class:`MaxPool2D` and :class:`Flatten`.
    Between spatial layers the data are NHWC, ``(M, H, W, C)``; a :class:`Flatten` turns them
    into rows ``(M, H*W*C)`` for the :class:`Dense` layers that follow. A network that ends in
    a spatial layer returns ``(M, H', W', C')``.

    Parameters
    ----------
    layers : sequence of Dense, Conv2D, MaxPool2D or Flatten
        At least one layer; each layer's input is the previous layer's output (checked, see
        :attr:`shapes`). Only the last layer may have ``output="raw"``.
    in_bits, w_bits, acc_bits, mult_bits : int
        Signed activation width (inputs and outputs of requantized layers), signed weight
        width, signed accumulator width (bias and raw outputs) and unsigned multiplier width.
    input_scale : float, optional
        Real value of one input step, for :meth:`quantize_input` and :meth:`predict`.
    output_scale : array_like of float, optional
        Real value of one output step per element of the output's last axis (``(N_last,)``:
        classes, or channels of a spatial output), for dequantizing the outputs; informative
        only.
    input_shape : tuple of int, optional
        Shape of one input sample: ``(H, W, C)`` (NHWC inputs ``(M, H, W, C)``) or ``(K,)``.
        Required unless the first layer is a :class:`Dense`, whose ``K`` it then defaults to.

    Attributes
    ----------
    layers : list
    in_bits, w_bits, acc_bits, mult_bits : int
    input_scale : float or None
    output_scale : numpy.ndarray or None
    input_shape : tuple of int or None
        As given; ``shapes[0][0]`` is the shape in effect.

    Raises
    ------
    ValueError
        Naming the layer index, the field and the allowed range, dtype or shape: a weight outside
        signed ``w_bits``, a bias outside signed ``acc_bits``, ``mult`` outside
        ``[0, 2**mult_bits)``, ``shift`` outside ``0 .. acc_bits + mult_bits - 1``, a layer
        whose input does not fit it (a :class:`Dense` after a spatial layer without a
        :class:`Flatten`, a channel count that differs from ``C_in``, a kernel or window larger
        than the (padded) input, a missing ``input_shape``), ``"raw"`` before the last layer,
        an empty layer list, or a width outside the supported range.
    TypeError
        If a layer is not one of the four layer types.
    """

    def __init__(self, layers, *, in_bits=8, w_bits=8, acc_bits=32, mult_bits=16,
                 input_scale=None, output_scale=None, input_shape=None):
        widths = {"in_bits": in_bits, "w_bits": w_bits, "acc_bits": acc_bits,
                  "mult_bits": mult_bits}
        for name, value in widths.items():
            low, high = _WIDTH_RANGES[name]
            if (not isinstance(value, numbers.Integral) or isinstance(value, bool)
                    or not low <= value <= high):
                raise ValueError(f"QuantizedNetwork: {name}={value!r}; "
                                 f"allowed: an integer in {low}..{high}")
        self.in_bits = int(in_bits)
        self.w_bits = int(w_bits)
        self.acc_bits = int(acc_bits)
        self.mult_bits = int(mult_bits)
        if input_scale is not None:
            input_scale = float(input_scale)
            if not (math.isfinite(input_scale) and input_scale > 0):
                raise ValueError(f"QuantizedNetwork: input_scale={input_scale!r}; "
                                 "allowed: a finite float > 0, or None")
        self.input_scale = input_scale
        self.input_shape = sample_shape(input_shape, "QuantizedNetwork")
        self.layers = list(layers)
        if not self.layers:
            raise ValueError("QuantizedNetwork: field 'layers' is empty; "
                             "allowed: at least one layer")
        self.validate()
        if output_scale is not None:
            output_scale = np.array(output_scale, dtype=np.float64)
            if output_scale.shape != (self.out_features,):
                raise ValueError(f"QuantizedNetwork: output_scale has shape "
                                 f"{output_scale.shape}; allowed: ({self.out_features},)")
        self.output_scale = output_scale

    @property
    def shapes(self):
        """``[(input_shape, output_shape)]`` of every layer, per sample (no batch axis).

        Spatial shapes are ``(H, W, C)``, flat ones ``(K,)``; ``shapes[i][1] ==
        shapes[i + 1][0]``. Computed from the layers as they are now (see :meth:`validate`).
        """
        return self._check()

    @property
    def output_shape(self):
        """Shape of one output sample: ``(N,)`` or ``(H', W', C')``."""
        return self.shapes[-1][1]

    @property
    def in_features(self):
        """Number of input values per sample: ``K``, or ``H*W*C`` for a spatial input."""
        if self.input_shape is None:
            return self.layers[0].in_features
        return math.prod(self.input_shape)

    @property
    def out_features(self):
        """Length of the output's last axis: ``N`` (classes) or ``C'`` for a spatial output."""
        return self.output_shape[-1]

    def __repr__(self):
        shapes = [self.shapes[0][0]] + [out for _, out in self.shapes]
        sizes = " -> ".join(str(s[0]) if len(s) == 1 else str(s) for s in shapes)
        return (f"QuantizedNetwork({sizes}, in_bits={self.in_bits}, w_bits={self.w_bits}, "
                f"acc_bits={self.acc_bits}, mult_bits={self.mult_bits})")

    def validate(self):
        """Check every layer against the widths and its input; called before each computation.

        Layers are mutable objects, so the check is repeated by :meth:`forward` and
        :attr:`shapes`.

        Raises
        ------
        ValueError, TypeError
            As described for the class.
        """
        self._check()

    def _check(self):
        weight_range = signed_range(self.w_bits)
        bias_range = signed_range(self.acc_bits)
        mult_high = (1 << self.mult_bits) - 1
        shift_high = self.acc_bits + self.mult_bits - 1
        shape, source = self.input_shape, "input_shape"
        shapes = []
        for index, layer in enumerate(self.layers):
            if not isinstance(layer, LAYER_TYPES):
                raise TypeError(f"layer {index}: {type(layer).__name__} is not a Dense, Conv2D, "
                                "MaxPool2D or Flatten layer")
            where = f"layer {index}"
            layer.check(where)
            if isinstance(layer, Dense | Conv2D):
                check_range(layer.weight, where, "weight", weight_range,
                            f"signed w_bits={self.w_bits}")
                check_range(layer.bias, where, "bias", bias_range,
                            f"signed acc_bits={self.acc_bits}")
                check_range(layer.mult, where, "mult", (0, mult_high),
                            f"unsigned mult_bits={self.mult_bits}")
                check_range(layer.shift, where, "shift", (0, shift_high),
                            f"acc_bits + mult_bits - 1 = {shift_high} at most")
                if layer.output == "raw" and index != len(self.layers) - 1:
                    raise ValueError(f"{where}: field 'output' is 'raw' but the layer is not "
                                     f"the last of {len(self.layers)}; allowed: 'requant'")
            if shape is None:
                if not isinstance(layer, Dense):
                    raise ValueError(f"QuantizedNetwork: field 'input_shape' is None but layer "
                                     f"0 is a {type(layer).__name__}; allowed: (H, W, C), the "
                                     "shape of one NHWC input sample")
                shape = (layer.in_features,)
            out = layer._output_shape(shape, where, source)
            shapes.append((shape, out))
            shape, source = out, f"layer {index}"
        return shapes

    def _check_input(self, x, shape):
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
        check_range(x, "input", "x", signed_range(self.in_bits), f"signed in_bits={self.in_bits}")
        return x

    def forward_trace(self, x):
        """Run the network and return the output of every layer.

        Parameters
        ----------
        x : array_like of int, shape (M, K) or (M, H, W, C)
            Signed ``in_bits`` inputs, one sample per index of the first axis (``M = 0`` gives
            empty outputs); NHWC for a spatial ``input_shape``.

        Returns
        -------
        list of numpy.ndarray of int64
            ``outputs[i]`` is layer ``i``'s result, ``(M, *shapes[i][1])``: saturated
            ``in_bits`` values after the activation, the accumulator for a ``"raw"`` layer, the
            window maxima of a :class:`MaxPool2D`, the rows of a :class:`Flatten`.

        Raises
        ------
        ValueError
            If ``x`` does not have the input shape or holds values outside signed ``in_bits``,
            if the network is inconsistent (see the class), or if an accumulator leaves the
            signed ``acc_bits`` range (naming the layer).
        """
        shapes = self._check()
        x = self._check_input(x, shapes[0][0])
        outputs = []
        for index, layer in enumerate(self.layers):
            if isinstance(layer, Dense | Conv2D):
                y = self._compute(index, layer, x)
            else:
                y = layer.forward(x).astype(np.int64)
            outputs.append(y)
            x = y
        return outputs

    def _compute(self, index, layer, x):
        """Return the output of a Dense or Conv2D layer (accumulate, requantize, activate)."""
        if isinstance(layer, Conv2D):
            patches = layer.patches(x)
            acc = accumulate(patches.reshape(-1, layer.patch_size), layer, self.in_bits)
            acc = acc.reshape(*patches.shape[:3], layer.out_channels)
        else:
            acc = accumulate(x, layer, self.in_bits)
        acc_low, acc_high = signed_range(self.acc_bits)
        if acc.size:
            low, high = int(acc.min()), int(acc.max())
            if low < acc_low or high > acc_high:
                raise ValueError(
                    f"layer {index}: accumulator reaches {low if low < acc_low else high}, "
                    f"outside signed acc_bits={self.acc_bits} ({acc_low}..{acc_high})")
        if layer.output == "raw":
            return acc.astype(np.int64)
        y = requantize(acc, layer.mult, layer.shift, self.in_bits)
        if layer.activation == "relu":
            y = np.maximum(y, 0)
        return y

    def forward(self, x):
        """Run the network on integer inputs ``x``; return the last layer's output.

        See :meth:`forward_trace` for the parameters and errors.

        Returns
        -------
        numpy.ndarray of int64, shape (M, N_last) or (M, H', W', C')
        """
        return self.forward_trace(x)[-1]

    def quantize_input(self, x):
        """Return ``clamp(round(x / input_scale))`` to signed ``in_bits``, as int64.

        Elementwise, so ``x`` may have any shape (rows ``(M, K)`` or NHWC ``(M, H, W, C)``).
        Rounding is NumPy's ``rint`` (half to even).

        Raises
        ------
        ValueError
            If the network has no ``input_scale`` or ``x`` holds a NaN or infinity.
        """
        if self.input_scale is None:
            raise ValueError("quantize_input: the network has no input_scale; "
                             "pass input_scale= to QuantizedNetwork")
        x = np.asarray(x, dtype=np.float64)
        if not np.all(np.isfinite(x)):
            raise ValueError("quantize_input: field 'x' holds NaN or infinity; "
                             "allowed: finite values")
        low, high = signed_range(self.in_bits)
        return np.clip(np.rint(x / self.input_scale), low, high).astype(np.int64)

    def predict(self, x):
        """Return the class of each float input: ``argmax(forward(quantize_input(x)), axis=1)``.

        Ties go to the lowest index, as with :func:`numpy.argmax`.

        Raises
        ------
        ValueError
            If the network's output is spatial (it has no classes), or as for
            :meth:`quantize_input` and :meth:`forward`.
        """
        if len(self.output_shape) != 1:
            raise ValueError(f"predict: the network's output has shape {self.output_shape}; "
                             "allowed: a flat output (N,) of class scores")
        return np.argmax(self.forward(self.quantize_input(x)), axis=1)
