"""The bit-exact integer model of a quantized network: the oracle of every hardware test.

Everything here follows section 3 of the architecture brief (the arithmetic contract) to the bit:

- ``acc[m, n] = sum_k x[m, k] * W[k, n] + b[n]``, exact;
- ``p = acc * mult[n]``; ``r = (p + (1 << (shift[n] - 1))) >> shift[n]`` when ``shift[n] > 0``,
  else ``r = p`` (``>>`` is the arithmetic shift, so ties round towards +infinity);
- ``y = clamp(r, -2**(in_bits - 1), 2**(in_bits - 1) - 1)``, then ``relu`` or ``identity``;
- an output layer may return ``acc`` itself (``output="raw"``).

NumPy ``int64`` is used wherever the values provably fit (``float64`` BLAS for the matrix product
when every partial sum stays below ``2**53``, where it is exact too); exact Python integers in
object arrays otherwise. The two paths give identical results.
"""

import math
import numbers

import numpy as np

__all__ = ["Dense", "QuantizedNetwork", "accumulator_bound", "requantize"]

ACTIVATIONS = ("relu", "identity")
OUTPUTS = ("requant", "raw")

# Width limits of the reference model itself. Parameters are stored as int64, so no width may
# exceed 64 bits (mult is unsigned, hence 63). The hardware configuration is usually narrower.
_WIDTH_RANGES = {
    "in_bits": (2, 64),
    "w_bits": (2, 64),
    "acc_bits": (2, 64),
    "mult_bits": (1, 63),
}

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
# Every integer of magnitude up to 2**53 is exact in float64, so a float64 matrix product whose
# partial sums all stay within it is exact whatever order BLAS sums in.
_FLOAT64_EXACT = 1 << 53


def _signed_range(bits):
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _int_array(value, where, field, copy=False):
    """Return ``value`` as an int64 array, or raise ``ValueError`` naming ``where`` and ``field``.

    Accepts any integer dtype and object arrays of Python integers; booleans and floats (even
    integral ones) are refused, because a float weight almost always means a forgotten
    quantization step.
    """
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged nested lists and the like
        raise ValueError(f"{where}: field {field!r} is not an array ({exc}); "
                         "allowed: an integer array") from None
    if arr.dtype == object:
        _check_object_ints(arr, where, field)
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{where}: field {field!r} has dtype {arr.dtype}; "
                         "allowed: an integer dtype")
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < _INT64_MIN or high > _INT64_MAX:
            raise ValueError(f"{where}: field {field!r} holds {low if low < _INT64_MIN else high}, "
                             f"which does not fit int64; allowed: {_INT64_MIN}..{_INT64_MAX}")
    if copy:
        return np.array(arr, dtype=np.int64)
    return np.asarray(arr, dtype=np.int64)


def _check_object_ints(arr, where, field):
    bad = [v for v in arr.flat
           if not isinstance(v, numbers.Integral) or isinstance(v, bool | np.bool_)]
    if bad:
        raise ValueError(f"{where}: field {field!r} holds {type(bad[0]).__name__} "
                         f"{bad[0]!r}; allowed: an integer dtype")


def _check_range(arr, where, field, bounds, what):
    """Raise ``ValueError`` naming the first element of ``arr`` outside ``bounds = (low, high)``."""
    low, high = bounds
    if arr.size == 0:
        return
    bad = np.flatnonzero((arr < low) | (arr > high))
    if bad.size:
        index = np.unravel_index(bad[0], arr.shape)
        index = index[0] if len(index) == 1 else tuple(int(i) for i in index)
        raise ValueError(f"{where}: field {field!r} has {int(arr.flat[bad[0]])} at index {index}; "
                         f"allowed: {what}, {low}..{high}")


def _to_object(arr):
    # int64 -> object yields Python ints, whose arithmetic never wraps.
    return np.asarray(arr).astype(object)


def _max_abs(arr):
    """Return ``max |arr|`` as a Python int (0 for an empty array), without int64 overflow."""
    if arr.size == 0:
        return 0
    return max(-int(arr.min()), int(arr.max()), 0)


class Dense:
    """One fully connected layer of a :class:`QuantizedNetwork`, in integers.

    Computes ``acc = x @ weight + bias`` exactly, then either requantizes ``acc`` per output
    channel (``output="requant"``: multiply by ``mult[n]``, round-shift right by ``shift[n]``,
    saturate to the network's ``in_bits``, apply ``activation``) or returns ``acc`` itself
    (``output="raw"``, for logits; ``activation`` is then not applied). See section 3 of the
    architecture brief for the exact arithmetic.

    The constructor checks dtypes, shapes and names; the value ranges depend on the widths and
    are checked by :class:`QuantizedNetwork`, which knows them.

    Parameters
    ----------
    weight : array_like of int, shape (K, N)
        Signed weights; ``K`` inputs, ``N`` outputs.
    bias : array_like of int, shape (N,)
        Signed accumulator-width bias.
    mult : array_like of int, shape (N,)
        Unsigned per-channel requantization multiplier.
    shift : array_like of int, shape (N,)
        Per-channel right shift, ``0 .. acc_bits + mult_bits - 1``.
    activation : {"relu", "identity"}
        Applied after saturation of a ``"requant"`` layer.
    output : {"requant", "raw"}
        ``"raw"`` returns the accumulator; only the last layer of a network may do so.

    Attributes
    ----------
    weight, bias, mult, shift : numpy.ndarray of int64
        The parameters, copied.
    activation, output : str

    Raises
    ------
    ValueError
        Naming the field and what is allowed, for a non-integer dtype, a wrong shape or an
        unknown ``activation`` or ``output``.
    """

    def __init__(self, weight, bias, mult, shift, *, activation="relu", output="requant"):
        self.weight = _int_array(weight, "Dense", "weight", copy=True)
        self.bias = _int_array(bias, "Dense", "bias", copy=True)
        self.mult = _int_array(mult, "Dense", "mult", copy=True)
        self.shift = _int_array(shift, "Dense", "shift", copy=True)
        self.activation = activation
        self.output = output
        _check_structure(self, "Dense")

    @property
    def in_features(self):
        """Number of inputs ``K``."""
        return self.weight.shape[0]

    @property
    def out_features(self):
        """Number of outputs ``N``."""
        return self.weight.shape[1]

    def __repr__(self):
        return (f"Dense({self.in_features} -> {self.out_features}, "
                f"activation={self.activation!r}, output={self.output!r})")


def _check_structure(layer, where):
    """Check the width-independent properties of ``layer``: dtypes, shapes and names."""
    for field in ("weight", "bias", "mult", "shift"):
        setattr(layer, field, _int_array(getattr(layer, field), where, field))
    weight = layer.weight
    if weight.ndim != 2 or weight.shape[0] < 1 or weight.shape[1] < 1:
        raise ValueError(f"{where}: field 'weight' has shape {weight.shape}; "
                         "allowed: (K, N) with K >= 1 and N >= 1")
    n = weight.shape[1]
    for field in ("bias", "mult", "shift"):
        shape = getattr(layer, field).shape
        if shape != (n,):
            raise ValueError(f"{where}: field {field!r} has shape {shape}; "
                             f"allowed: ({n},), one value per output channel of 'weight'")
    if layer.activation not in ACTIVATIONS:
        raise ValueError(f"{where}: field 'activation' is {layer.activation!r}; allowed: "
                         + ", ".join(repr(a) for a in ACTIVATIONS))
    if layer.output not in OUTPUTS:
        raise ValueError(f"{where}: field 'output' is {layer.output!r}; allowed: "
                         + ", ".join(repr(o) for o in OUTPUTS))


def requantize(acc, mult, shift, out_bits):
    """Requantize and saturate accumulators, per section 3 of the architecture brief.

    Computes ``p = acc * mult``, ``r = (p + (1 << (shift - 1))) >> shift`` where ``shift > 0``
    (``r = p`` where ``shift == 0``) with ``>>`` the arithmetic shift (floor), and returns
    ``clamp(r, -2**(out_bits - 1), 2**(out_bits - 1) - 1)``. No activation is applied.

    Parameters
    ----------
    acc : array_like of int
        Accumulators, typically ``(M, N)``; any integer dtype or Python integers.
    mult, shift : array_like of int
        Non-negative multipliers and shifts, broadcast against ``acc`` (typically ``(N,)``, one
        per output channel).
    out_bits : int
        Signed width of the result, at least 1.

    Returns
    -------
    numpy.ndarray of int64
        The saturated values, with the broadcast shape of the operands.

    Raises
    ------
    ValueError
        If an operand is not integer, ``mult`` or ``shift`` is negative, or ``out_bits`` is not
        a positive integer (``<= 64``).
    """
    if not isinstance(out_bits, numbers.Integral) or not 1 <= out_bits <= 64:
        raise ValueError(f"requantize: out_bits={out_bits!r}; allowed: an integer in 1..64")
    acc = np.asarray(acc)
    if acc.dtype == object:
        # Object arrays may hold integers wider than int64, which the exact path handles.
        _check_object_ints(acc, "requantize", "acc")
    else:
        acc = _int_array(acc, "requantize", "acc")
    mult = _int_array(mult, "requantize", "mult")
    shift = _int_array(shift, "requantize", "shift")
    if mult.size and int(mult.min()) < 0:
        raise ValueError(f"requantize: field 'mult' holds {int(mult.min())}; allowed: >= 0")
    if shift.size and int(shift.min()) < 0:
        raise ValueError(f"requantize: field 'shift' holds {int(shift.min())}; allowed: >= 0")
    low, high = _signed_range(out_bits)
    shape = np.broadcast_shapes(acc.shape, mult.shape, shift.shape)
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=np.int64)
    max_shift = int(shift.max())
    worst = _max_abs(acc) * int(mult.max()) + (1 << max(max_shift - 1, 0))
    if acc.dtype != object and max_shift <= 62 and worst <= _INT64_MAX:
        # Fast path: every intermediate provably fits int64.
        rounding = np.where(shift > 0, np.left_shift(np.int64(1), np.maximum(shift - 1, 0)), 0)
        r = (acc * mult + rounding) >> shift
        return np.clip(r, low, high).astype(np.int64)
    acc, mult, shift = _to_object(acc), _to_object(mult), _to_object(shift)
    rounding = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
    r = (acc * mult + rounding) >> shift
    return np.clip(r, low, high).astype(np.int64)


def accumulator_bound(layer, in_bits):
    """Return the worst-case magnitude of any partial sum of ``layer``'s accumulator.

    The bound is ``max_n (2**(in_bits - 1) * sum_k |W[k, n]| + |b[n]|)``: it covers every subset
    of the products (so every order of accumulation, every tiling of ``K``) with the bias added
    at any point, for any input in the signed ``in_bits`` range. The compiler compares it
    against the accumulator width.

    Parameters
    ----------
    layer : Dense
        Any object with integer ``weight`` ``(K, N)`` and ``bias`` ``(N,)``.
    in_bits : int
        Signed width of the layer's inputs.

    Returns
    -------
    int
        The bound, as an exact Python integer.
    """
    weight = np.asarray(layer.weight)
    bias = np.asarray(layer.bias)
    big = _max_abs(weight) * max(weight.shape[0], 1) > (1 << 62) or _max_abs(bias) > (1 << 62)
    if big:
        weight, bias = _to_object(weight), _to_object(bias)
    column_sums = np.abs(weight).sum(axis=0)
    scale = 1 << (in_bits - 1)
    return max(scale * int(s) + abs(int(b)) for s, b in zip(column_sums, bias, strict=True))


def _accumulate(x, layer, in_bits):
    """Return ``x @ W + b`` exactly: int64 when it provably fits, an object array otherwise."""
    bound = accumulator_bound(layer, in_bits)
    if bound < _FLOAT64_EXACT:
        # BLAS is much faster than NumPy's integer matmul and exact in this range.
        product = x.astype(np.float64) @ layer.weight.astype(np.float64)
        return product.astype(np.int64) + layer.bias
    if bound <= _INT64_MAX:
        return x @ layer.weight + layer.bias
    return _to_object(x) @ _to_object(layer.weight) + _to_object(layer.bias)


class QuantizedNetwork:
    """A chain of integer :class:`Dense` layers, computed bit-exactly as the hardware does.

    Parameters
    ----------
    layers : sequence of Dense
        At least one layer; ``layers[i + 1].in_features == layers[i].out_features``. Only the
        last layer may have ``output="raw"``.
    in_bits, w_bits, acc_bits, mult_bits : int
        Signed activation width (inputs and outputs of requantized layers), signed weight
        width, signed accumulator width (bias and raw outputs) and unsigned multiplier width.
    input_scale : float, optional
        Real value of one input step, for :meth:`quantize_input` and :meth:`predict`.
    output_scale : array_like of float, optional
        Real value of one output step per output channel (``(N_last,)``), for dequantizing the
        outputs; informative only.

    Attributes
    ----------
    layers : list of Dense
    in_bits, w_bits, acc_bits, mult_bits : int
    input_scale : float or None
    output_scale : numpy.ndarray or None

    Raises
    ------
    ValueError
        Naming the layer index, the field and the allowed range, dtype or shape: a weight outside
        signed ``w_bits``, a bias outside signed ``acc_bits``, ``mult`` outside
        ``[0, 2**mult_bits)``, ``shift`` outside ``0 .. acc_bits + mult_bits - 1``, mismatched
        widths of consecutive layers, ``"raw"`` before the last layer, an empty layer list, or a
        width outside the supported range.
    TypeError
        If a layer is not a :class:`Dense`.
    """

    def __init__(self, layers, *, in_bits=8, w_bits=8, acc_bits=32, mult_bits=16,
                 input_scale=None, output_scale=None):
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
        self.layers = list(layers)
        if not self.layers:
            raise ValueError("QuantizedNetwork: field 'layers' is empty; "
                             "allowed: at least one Dense layer")
        self.validate()
        if output_scale is not None:
            output_scale = np.array(output_scale, dtype=np.float64)
            if output_scale.shape != (self.out_features,):
                raise ValueError(f"QuantizedNetwork: output_scale has shape "
                                 f"{output_scale.shape}; allowed: ({self.out_features},)")
        self.output_scale = output_scale

    @property
    def in_features(self):
        """Width ``K`` of the network's input."""
        return self.layers[0].in_features

    @property
    def out_features(self):
        """Width of the network's output."""
        return self.layers[-1].out_features

    def __repr__(self):
        sizes = " -> ".join(str(n) for n in
                            [self.in_features] + [layer.out_features for layer in self.layers])
        return (f"QuantizedNetwork({sizes}, in_bits={self.in_bits}, w_bits={self.w_bits}, "
                f"acc_bits={self.acc_bits}, mult_bits={self.mult_bits})")

    def validate(self):
        """Check every layer against the widths; called by the constructor and :meth:`forward`.

        Layers are mutable objects, so the check is repeated before each computation.

        Raises
        ------
        ValueError, TypeError
            As described for the class.
        """
        weight_range = _signed_range(self.w_bits)
        bias_range = _signed_range(self.acc_bits)
        mult_high = (1 << self.mult_bits) - 1
        shift_high = self.acc_bits + self.mult_bits - 1
        previous = None
        for index, layer in enumerate(self.layers):
            if not isinstance(layer, Dense):
                raise TypeError(f"layer {index}: {type(layer).__name__} is not a Dense layer")
            where = f"layer {index}"
            _check_structure(layer, where)
            _check_range(layer.weight, where, "weight", weight_range,
                         f"signed w_bits={self.w_bits}")
            _check_range(layer.bias, where, "bias", bias_range,
                         f"signed acc_bits={self.acc_bits}")
            _check_range(layer.mult, where, "mult", (0, mult_high),
                         f"unsigned mult_bits={self.mult_bits}")
            _check_range(layer.shift, where, "shift", (0, shift_high),
                         f"acc_bits + mult_bits - 1 = {shift_high} at most")
            if previous is not None and layer.in_features != previous.out_features:
                raise ValueError(
                    f"{where}: field 'weight' has {layer.in_features} inputs but layer "
                    f"{index - 1} has {previous.out_features} outputs; allowed: weight of shape "
                    f"({previous.out_features}, N)")
            if layer.output == "raw" and index != len(self.layers) - 1:
                raise ValueError(f"{where}: field 'output' is 'raw' but the layer is not the "
                                 f"last of {len(self.layers)}; allowed: 'requant'")
            previous = layer

    def _check_input(self, x):
        x = _int_array(x, "input", "x")
        if x.ndim != 2:
            raise ValueError(f"input: field 'x' has shape {x.shape}; "
                             f"allowed: 2-D (M, {self.in_features})")
        if x.shape[1] != self.in_features:
            raise ValueError(f"input: field 'x' has shape {x.shape}; "
                             f"allowed: (M, {self.in_features}), the width of layer 0")
        _check_range(x, "input", "x", _signed_range(self.in_bits),
                     f"signed in_bits={self.in_bits}")
        return x

    def forward_trace(self, x):
        """Run the network and return the output of every layer.

        Parameters
        ----------
        x : array_like of int, shape (M, K)
            Signed ``in_bits`` inputs, one row per sample (``M = 0`` gives empty outputs).

        Returns
        -------
        list of numpy.ndarray of int64
            ``outputs[i]`` is layer ``i``'s result, ``(M, layers[i].out_features)``: saturated
            ``in_bits`` values after the activation, or the accumulator for a ``"raw"`` layer.

        Raises
        ------
        ValueError
            If ``x`` is not 2-D integer of the right width and range, or if an accumulator
            leaves the signed ``acc_bits`` range (naming the layer).
        """
        self.validate()
        x = self._check_input(x)
        acc_low, acc_high = _signed_range(self.acc_bits)
        outputs = []
        for index, layer in enumerate(self.layers):
            acc = _accumulate(x, layer, self.in_bits)
            if acc.size:
                low, high = int(acc.min()), int(acc.max())
                if low < acc_low or high > acc_high:
                    raise ValueError(
                        f"layer {index}: accumulator reaches {low if low < acc_low else high}, "
                        f"outside signed acc_bits={self.acc_bits} ({acc_low}..{acc_high})")
            if layer.output == "raw":
                y = acc.astype(np.int64)
            else:
                y = requantize(acc, layer.mult, layer.shift, self.in_bits)
                if layer.activation == "relu":
                    y = np.maximum(y, 0)
            outputs.append(y)
            x = y
        return outputs

    def forward(self, x):
        """Run the network on integer inputs ``x`` ``(M, K)``; return the last layer's output.

        See :meth:`forward_trace` for the parameters and errors.

        Returns
        -------
        numpy.ndarray of int64, shape (M, N_last)
        """
        return self.forward_trace(x)[-1]

    def quantize_input(self, x):
        """Return ``clamp(round(x / input_scale))`` to signed ``in_bits``, as int64.

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
        low, high = _signed_range(self.in_bits)
        return np.clip(np.rint(x / self.input_scale), low, high).astype(np.int64)

    def predict(self, x):
        """Return the class of each row of float inputs: ``argmax(forward(quantize_input(x)))``.

        Ties go to the lowest index, as with :func:`numpy.argmax`.
        """
        return np.argmax(self.forward(self.quantize_input(x)), axis=1)
