"""The integer fully connected layer, its exact accumulation and the accumulator-range bound.

``acc[m, n] = sum_k x[m, k] * W[k, n] + b[n]`` is computed exactly (section 3 of the architecture
brief): with ``float64`` BLAS when every partial sum provably stays below ``2**53``, where it is
exact too; with ``int64`` when the sums provably fit it; with Python integers in object arrays
otherwise. The three paths give identical results.
"""

import numpy as np

from ._ints import FLOAT64_EXACT, INT64_MAX, int_array, max_abs, to_object

__all__ = ["Dense", "accumulator_bound"]

ACTIVATIONS = ("relu", "identity")
OUTPUTS = ("requant", "raw")


class Dense:
    """One fully connected layer of a :class:`~hwgen.nn.QuantizedNetwork`, in integers.

    Computes ``acc = x @ weight + bias`` exactly, then either requantizes ``acc`` per output
    channel (``output="requant"``: multiply by ``mult[n]``, round-shift right by ``shift[n]``,
    saturate to the network's ``in_bits``, apply ``activation``) or returns ``acc`` itself
    (``output="raw"``, for logits; ``activation`` is then not applied). See section 3 of the
    architecture brief for the exact arithmetic.

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
        self.weight = int_array(weight, "Dense", "weight", copy=True)
        self.bias = int_array(bias, "Dense", "bias", copy=True)
        self.mult = int_array(mult, "Dense", "mult", copy=True)
        self.shift = int_array(shift, "Dense", "shift", copy=True)
        self.activation = activation
        self.output = output
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
                f"activation={self.activation!r}, output={self.output!r})")

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
    if layer.activation not in ACTIVATIONS:
        raise ValueError(f"{where}: field 'activation' is {layer.activation!r}; allowed: "
                         + ", ".join(repr(a) for a in ACTIVATIONS))
    if layer.output not in OUTPUTS:
        raise ValueError(f"{where}: field 'output' is {layer.output!r}; allowed: "
                         + ", ".join(repr(o) for o in OUTPUTS))


def _weight_matrix(layer):
    # A Dense weight is (K, N) already; a Conv2D weight (KH, KW, C_in, C_out) flattens to its
    # (KH*KW*C_in, C_out) patch matrix in (ky, kx, c) order, which is a plain C-order reshape.
    weight = np.asarray(layer.weight)
    return weight.reshape(-1, weight.shape[-1])


def accumulator_bound(layer, in_bits):
    """Return the worst-case magnitude of any partial sum of ``layer``'s accumulator.

    The bound is ``max_n (2**(in_bits - 1) * sum_k |W[k, n]| + |b[n]|)``: it covers every subset
    of the products (so every order of accumulation, every tiling of ``K``) with the bias added
    at any point, for any input in the signed ``in_bits`` range. The compiler compares it
    against the accumulator width.

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


def accumulate(x, layer, in_bits):
    """Return ``x @ W + b`` exactly for ``x`` ``(rows, K)`` and ``layer``'s ``(K, N)`` matrix.

    int64 when the sums provably fit it, an object array of Python integers otherwise.
    """
    weight = _weight_matrix(layer)
    bound = accumulator_bound(layer, in_bits)
    if bound < FLOAT64_EXACT:
        # BLAS is much faster than NumPy's integer matmul and exact in this range.
        product = x.astype(np.float64) @ weight.astype(np.float64)
        return product.astype(np.int64) + layer.bias
    if bound <= INT64_MAX:
        return x @ weight + layer.bias
    return to_object(x) @ to_object(weight) + to_object(layer.bias)
