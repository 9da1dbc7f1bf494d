"""The integer fully connected layer, its exact accumulation and the accumulator-range bound.

``acc[m, n] = sum_k x[m, k] * W[k, n] + b[n]`` is computed exactly (docs/arithmetic.md):
with ``float64`` BLAS when every partial sum provably stays below ``2**53``, where it is
exact too; with ``int64`` when the sums provably fit it; with Python integers in object arrays
otherwise. The three paths give identical results.
"""

import numpy as np

from ._ints import (
    FLOAT64_EXACT,
    INT64_MAX,
    int_array,
    max_abs,
    optional_int,
    signed_range,
    to_object,
)
from .requantization import check_bounds, requantize

__all__ = ["Dense", "accumulator_bound"]

ACTIVATIONS = ("relu", "identity", "leaky_relu")
OUTPUTS = ("requant", "raw")


class Dense:
    """One fully connected layer of a :class:`~hwgen.nn.QuantizedNetwork`, in integers.

    Computes ``acc = x @ weight + bias`` exactly, then either requantizes ``acc`` per output
    channel (``output="requant"``: multiply by ``mult[n]`` (by ``mult_neg[n]`` where
    ``acc < 0`` for ``"leaky_relu"``), round-shift right by ``shift[n]``, saturate to the
    network's ``in_bits``, clamp to :meth:`bounds`) or returns ``acc`` itself (``output="raw"``,
    for logits; the activation is then not applied). See docs/arithmetic.md for the
    exact arithmetic.

    The constructor checks dtypes, shapes and names; the value ranges depend on the widths and
    are checked by :class:`~hwgen.nn.QuantizedNetwork`, which knows them.

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
    activation : {"relu", "identity", "leaky_relu"}
        Applied after saturation of a ``"requant"`` layer: the default bounds (``relu``:
        ``act_min = 0``) and, for ``"leaky_relu"``, the multiplier ``mult_neg``.
    output : {"requant", "raw"}
        ``"raw"`` returns the accumulator; only the last layer of a network may do so.
    act_min, act_max : int, optional
        The activation bounds (section 3.2), inside the saturation range; see :meth:`bounds`.
    mult_neg : array_like of int, shape (N,), optional
        Unsigned multiplier of negative accumulators; required iff ``activation`` is
        ``"leaky_relu"``.

    Attributes
    ----------
    weight, bias, mult, shift : numpy.ndarray of int64
        The parameters, copied.
    mult_neg : numpy.ndarray of int64 or None
    activation, output : str
    act_min, act_max : int or None
        As given.

    Raises
    ------
    ValueError
        Naming the field and what is allowed, for a non-integer dtype, a wrong shape, an
        unknown ``activation`` or ``output``, a ``mult_neg`` missing for or given without
        ``"leaky_relu"``, or a bound that is not an integer.
    """

    def __init__(self, weight, bias, mult, shift, *, activation="relu", output="requant",
                 act_min=None, act_max=None, mult_neg=None):
        set_requant_fields(self, "Dense", weight=weight, bias=bias, mult=mult, shift=shift,
                           mult_neg=mult_neg, activation=activation, output=output,
                           act_min=act_min, act_max=act_max)
        self.check("Dense")

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
                f"activation={self.activation!r}{bounds_repr(self)}, output={self.output!r})")

    def bounds(self, out_bits):
        """Return the resolved activation bounds ``(lo, hi)`` for signed ``out_bits`` outputs.

        ``act_min`` defaults to 0 for ``"relu"``, else ``-2**(out_bits-1)``; ``act_max`` to
        ``2**(out_bits-1) - 1``. Not applied to a ``"raw"`` output.

        Raises
        ------
        ValueError
            If a bound lies outside the saturation range, ``act_min > act_max``, or
            ``act_min < 0`` for ``"relu"``.
        """
        return layer_bounds(self, out_bits, "Dense")

    def forward(self, x, in_bits=8, acc_bits=32, *, where="Dense"):
        """Return the layer's output for rows ``x`` ``(M, K)`` of signed ``in_bits`` ints.

        The requantized and clamped values (int64), or the accumulators for ``"raw"``.

        Raises
        ------
        ValueError
            If an accumulator leaves signed ``acc_bits`` (naming ``where``).
        """
        acc = accumulate(np.asarray(x, dtype=np.int64), self, in_bits)
        return layer_output(where, self, acc, in_bits, acc_bits)

    def check(self, where):
        """Check the width-independent properties: dtypes, shapes and names.

        Parameters
        ----------
        where : str
            Prefix of the error messages, e.g. ``"layer 2"``.

        Raises
        ------
        ValueError
            As described for the class.
        """
        for field in ("weight", "bias", "mult", "shift"):
            setattr(self, field, int_array(getattr(self, field), where, field))
        if self.weight.ndim != 2 or self.weight.shape[0] < 1 or self.weight.shape[1] < 1:
            raise ValueError(f"{where}: field 'weight' has shape {self.weight.shape}; "
                             "allowed: (K, N) with K >= 1 and N >= 1")
        check_channel_fields(self, where)
        check_activation_fields(self, where)

    def output_shape(self, input_shape):
        """Return the per-sample output shape ``(N,)`` for an input of shape ``(K,)``.

        Raises
        ------
        ValueError
            If ``input_shape`` is not ``(K,)``: a spatial input needs a
            :class:`~hwgen.nn.Flatten` first.
        """
        return self._output_shape(tuple(input_shape), "Dense", "the input")

    def _output_shape(self, shape, where, source):
        return dense_output_shape(shape, self.weight.shape, where, source)


def dense_output_shape(shape, weight_shape, where, source, kind="Dense"):
    """Return ``(N,)`` of a dense layer, or raise ``ValueError`` naming ``where``.

    Shared by :class:`Dense` and the float :class:`~hwgen.nn.FloatDense` (``kind`` names the
    layer type, ``source`` what gives the input, e.g. ``"layer 1"``).
    """
    k, n = weight_shape
    if len(shape) != 1:
        raise ValueError(f"{where}: {kind} needs a flat input (K,) but {source} gives {shape}; "
                         f"allowed: a Flatten before the {kind}")
    if shape[0] != k:
        gives = f"has {shape[0]} outputs" if source.startswith("layer") else f"gives {shape}"
        raise ValueError(f"{where}: field 'weight' has {k} inputs but {source} {gives}; "
                         f"allowed: weight of shape ({shape[0]}, N)")
    return (n,)


def set_requant_fields(layer, where, *, weight, bias, mult, shift, mult_neg, activation, output,
                       act_min, act_max):
    """Set a requantizing layer's fields (:class:`Dense`, :class:`~hwgen.nn.Conv2D`): its
    integer arrays as copies (``mult_neg`` may be ``None``), the rest as given, for its
    ``check`` to validate."""
    for name, value in (("weight", weight), ("bias", bias), ("mult", mult), ("shift", shift)):
        setattr(layer, name, int_array(value, where, name, copy=True))
    layer.mult_neg = None if mult_neg is None else int_array(mult_neg, where, "mult_neg",
                                                              copy=True)
    layer.activation = activation
    layer.output = output
    layer.act_min = act_min
    layer.act_max = act_max


def check_channel_fields(layer, where):
    """Check ``bias``, ``mult``, ``shift`` (one per output channel), ``activation``, ``output``.

    The output channels are the last axis of ``layer.weight``; shared by :class:`Dense` and
    :class:`~hwgen.nn.Conv2D`.
    """
    n = layer.weight.shape[-1]
    for field in ("bias", "mult", "shift"):
        shape = getattr(layer, field).shape
        if shape != (n,):
            raise ValueError(f"{where}: field {field!r} has shape {shape}; "
                             f"allowed: ({n},), one value per output channel of 'weight'")
    if layer.output not in OUTPUTS:
        raise ValueError(f"{where}: field 'output' is {layer.output!r}; allowed: "
                         + ", ".join(repr(o) for o in OUTPUTS))


def check_activation_fields(layer, where, activations=ACTIVATIONS):
    """Check ``activation``, ``act_min``, ``act_max`` and ``mult_neg`` (if ``layer`` has it:
    one per output channel, given iff ``activation == "leaky_relu"``).

    Shared by the requantizing layers; the output channels are the last axis of
    ``layer.mult``.
    """
    if layer.activation not in activations:
        raise ValueError(f"{where}: field 'activation' is {layer.activation!r}; allowed: "
                         + ", ".join(repr(a) for a in activations))
    layer.act_min = optional_int(layer.act_min, where, "act_min")
    layer.act_max = optional_int(layer.act_max, where, "act_max")
    if not hasattr(layer, "mult_neg"):
        return
    leaky = layer.activation == "leaky_relu"
    if layer.mult_neg is None:
        if leaky:
            raise ValueError(f"{where}: field 'mult_neg' is None but 'activation' is "
                             "'leaky_relu'; allowed: one unsigned multiplier per output channel")
        return
    if not leaky:
        raise ValueError(f"{where}: field 'mult_neg' is given but 'activation' is "
                         f"{layer.activation!r}; allowed: mult_neg=None, or "
                         "activation='leaky_relu'")
    layer.mult_neg = int_array(layer.mult_neg, where, "mult_neg")
    n = layer.mult.shape[-1:]
    if layer.mult_neg.shape != n:
        raise ValueError(f"{where}: field 'mult_neg' has shape {layer.mult_neg.shape}; "
                         f"allowed: {n}, one value per output channel")


def layer_bounds(layer, out_bits, where):
    """Return ``layer``'s resolved ``(act_min, act_max)`` for signed ``out_bits`` (section 3.2),
    or raise ``ValueError`` naming ``where`` and the field."""
    act_min = layer.act_min
    if layer.activation == "relu":
        if act_min is not None and act_min < 0:
            raise ValueError(f"{where}: field 'act_min' is {act_min} but 'activation' is "
                             "'relu'; allowed: act_min >= 0 (a negative floor is "
                             "activation='identity')")
        act_min = 0 if act_min is None else act_min
    return check_bounds(act_min, layer.act_max, out_bits, where)


def bounds_repr(layer):
    """Return ``", act_min=.., act_max=.."`` for the bounds given, for ``__repr__``."""
    return "".join(f", {f}={getattr(layer, f)}" for f in ("act_min", "act_max")
                   if getattr(layer, f) is not None)


def layer_output(where, layer, acc, in_bits, acc_bits):
    """Return a requantizing layer's output from its accumulators ``acc`` (channels last).

    ``acc`` itself (int64) for ``output="raw"``; else requantized with ``mult``, ``shift`` and
    ``mult_neg`` (if any), saturated to ``in_bits`` and clamped to the layer's bounds.

    Raises
    ------
    ValueError
        If an accumulator leaves signed ``acc_bits``, naming ``where``.
    """
    acc_low, acc_high = signed_range(acc_bits)
    if acc.size:
        low, high = int(acc.min()), int(acc.max())
        if low < acc_low or high > acc_high:
            raise ValueError(
                f"{where}: accumulator reaches {low if low < acc_low else high}, "
                f"outside signed acc_bits={acc_bits} ({acc_low}..{acc_high})")
    if getattr(layer, "output", "requant") == "raw":
        return acc.astype(np.int64)
    act_min, act_max = layer_bounds(layer, in_bits, where)
    return requantize(acc, layer.mult, layer.shift, in_bits,
                      mult_neg=getattr(layer, "mult_neg", None), act_min=act_min,
                      act_max=act_max)


def _weight_matrix(layer):
    # A Dense weight is (K, N) already; a Conv2D weight (KH, KW, C_in, C_out) flattens to its
    # (KH*KW*C_in, C_out) patch matrix in (ky, kx, c) order, which is a plain C-order reshape.
    weight = np.asarray(layer.weight)
    return weight.reshape(-1, weight.shape[-1])


def accumulator_bound(layer, in_bits):
    """Return the worst-case magnitude of any partial sum of ``layer``'s accumulator.

    The bound is ``max_n (2**(in_bits - 1) * sum_k |W[k, n]| + |b[n]|)``: it covers every subset
    of the products (so every order of accumulation, every tiling of ``K``) with the bias added
    at any point, for any input in the signed ``in_bits`` range. The compiler's proof against
    the accumulator width, channel by channel and from each layer's input range
    (:func:`hwgen.compiler.proofs.partial_sum_ranges`), lies within it.

    Parameters
    ----------
    layer : Dense or Conv2D
        Any object with an integer ``weight`` whose last axis is the output channel (``(K, N)``
        for a :class:`Dense`; ``(KH, KW, C_in, C_out)`` for a :class:`~hwgen.nn.Conv2D`, where
        ``K = KH*KW*C_in``) and ``bias`` ``(N,)``.
    in_bits : int
        Signed width of the layer's inputs.

    Returns
    -------
    int
        The bound, as an exact Python integer.

    Raises
    ------
    TypeError
        If ``layer`` has no weight (a :class:`~hwgen.nn.MaxPool2D` or
        :class:`~hwgen.nn.Flatten` accumulates nothing).
    """
    if not hasattr(layer, "weight") or not hasattr(layer, "bias"):
        raise TypeError(f"accumulator_bound: a {type(layer).__name__} has no accumulator; "
                        "allowed: Dense, Conv2D")
    weight = _weight_matrix(layer)
    bias = np.asarray(layer.bias)
    big = max_abs(weight) * max(weight.shape[0], 1) > (1 << 62) or max_abs(bias) > (1 << 62)
    if big:
        weight, bias = to_object(weight), to_object(bias)
    column_sums = np.abs(weight).sum(axis=0)
    scale = 1 << (in_bits - 1)
    return max(scale * int(s) + abs(int(b)) for s, b in zip(column_sums, bias, strict=True))


def accumulate(x, layer, in_bits, groups=1):
    """Return ``x @ W + b`` exactly for ``x`` ``(rows, K)`` and ``layer``'s ``(K, N)`` matrix.

    With ``groups > 1``, ``x`` is ``(groups, rows, K)`` (each group's patches) and output
    channel ``n`` of group ``j = n // (N / groups)`` sums ``x[j] @ W[:, n]``; the result is
    ``(rows, N)`` either way. float64 BLAS where provably exact, int64 when the sums provably
    fit it, an object array of Python integers otherwise.
    """
    weight = _weight_matrix(layer)
    k, n = weight.shape
    if groups > 1:
        # [groups, K, N / groups]: group j's columns, multiplied by group j's rows of x.
        weight = weight.reshape(k, groups, n // groups).transpose(1, 0, 2)
    bound = accumulator_bound(layer, in_bits)
    if bound < FLOAT64_EXACT:
        # BLAS is much faster than NumPy's integer matmul and exact in this range.
        product = (x.astype(np.float64) @ weight.astype(np.float64)).astype(np.int64)
    elif bound <= INT64_MAX:
        product = x @ weight
    else:
        product = to_object(x) @ to_object(weight)
    if groups > 1:
        product = product.transpose(1, 0, 2).reshape(product.shape[1], n)
    bias = to_object(layer.bias) if product.dtype == object else layer.bias
    return product + bias
