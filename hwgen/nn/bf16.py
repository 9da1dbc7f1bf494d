"""The bfloat16 arithmetic of docs/arithmetic.md ("bfloat16"), bit-exact, in NumPy.

bf16 multiplies and fp32 (IEEE binary32) accumulation, with three rules the reference applies
itself on top of NumPy's float32 arithmetic (binary32, round to nearest even):

- the zero rule (:func:`flush`): every value, product and sum below ``2**-126`` in magnitude
  (zero or subnormal, in fp32 and bf16 alike) becomes +0.0, all bits 0;
- every NaN is the quiet NaN ``0x7FC00000`` (fp32) / ``0x7FC0`` (bf16);
- the order of the sums (:func:`bf16_matmul`): tiles of ``rows`` consecutive products, each
  summed from +0.0, then added to the accumulator that starts at the bias;
- a weight of sign 1 and exponent 0 (-0.0 or a negative subnormal, which the zero rule leaves
  no weight) is no product (:func:`no_product`): its product is +0.0 whatever the activation,
  Inf and NaN included. The compiler writes it where the device's tiles hold no product of
  the layer (a grouped convolution's other groups, the padding).

bf16 arrays at the API are NumPy arrays of ``ml_dtypes.bfloat16``; float32 arrays whose
values are all bf16 are accepted too (:func:`as_bf16`). Inside, bf16 values travel as float32
arrays, which hold them exactly.
"""

import numbers
import sys

import numpy as np

__all__ = ["BF16_NAN", "FP32_NAN", "SMALLEST_NORMAL", "activate", "as_bf16", "bf16_array",
           "bf16_bits", "bf16_matmul", "bfloat16", "first_index", "flush", "is_bfloat16",
           "no_product", "round_to_bf16", "round_to_fp32"]

#: The canonical quiet NaNs: every NaN of the datapath has these bits.
FP32_NAN = 0x7FC00000
BF16_NAN = 0x7FC0
#: The smallest normal magnitude of fp32 and bf16 (they share the 8-bit exponent).
SMALLEST_NORMAL = 2.0 ** -126


def bfloat16():
    """Return the dtype ``ml_dtypes.bfloat16``, importing ml_dtypes on first use: its import
    takes about a second (0.7.0), which int8 work never needs to pay."""
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


def is_bfloat16(dtype):
    """Return whether ``dtype`` is ``ml_dtypes.bfloat16``, without importing ml_dtypes (an
    array of that dtype means it is loaded)."""
    loaded = sys.modules.get("ml_dtypes")
    return loaded is not None and np.dtype(dtype) == loaded.bfloat16


_EXPONENT32 = np.uint32(0x7F800000)
_FRACTION32 = np.uint32(0x007FFFFF)


def _bits32(a):
    """The uint32 bit patterns of ``a`` as float32 (a view where ``a`` is C-ordered float32)."""
    return np.asarray(a, dtype=np.float32, order="C").view(np.uint32)


def first_index(bad):
    """Return the index (a tuple of ints) of the first true element of a boolean array."""
    flat = int(np.flatnonzero(bad)[0])
    return tuple(int(i) for i in np.unravel_index(flat, bad.shape))


def _flush_bits(bits):
    """The zero rule and canonical NaN on fp32 bit patterns (uint32), as a new array."""
    exponent = bits & _EXPONENT32
    nan = (exponent == _EXPONENT32) & ((bits & _FRACTION32) != 0)
    return np.where(exponent == 0, np.uint32(0), np.where(nan, np.uint32(FP32_NAN), bits))


def flush(a):
    """Return fp32 ``a`` with the zero rule applied and every NaN canonical.

    Zeros of either sign and subnormals become +0.0 (all bits 0); every NaN becomes
    ``0x7FC00000``; everything else is unchanged.

    Parameters
    ----------
    a : array_like of float32

    Returns
    -------
    numpy.ndarray of float32
    """
    bits = _bits32(a)
    return _flush_bits(bits).view(np.float32)


def _bf16_of_fp32_bits(bits):
    """Round fp32 bit patterns (uint32, zero rule already applied) to bf16 bit patterns
    (uint16): round to nearest, ties to even, on the 16 bits dropped; NaN canonical.

    Adding ``0x7FFF`` plus the kept part's lowest bit carries into the kept part exactly when
    the dropped part is above half, or half with an odd kept part; a carry out of the
    fraction steps the exponent, which is how the largest finite values round to Inf.
    """
    nan = ((bits & _EXPONENT32) == _EXPONENT32) & ((bits & _FRACTION32) != 0)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16
    # A normal fp32 value cannot round to a bf16 subnormal (the exponents are shared and
    # rounding never lowers a magnitude), so no zero rule is needed after this.
    return np.where(nan, np.uint32(BF16_NAN), rounded).astype(np.uint16)


def _fp32_round_to_odd(x):
    """Return float64 ``x`` as fp32 bit patterns rounded to odd: truncated towards zero, with
    the lowest bit set when that dropped anything.

    Rounding to odd keeps enough of ``x`` for a second rounding to nearest even at 8 bits
    (fp32 has 24, more than 8 + 2) to give the same result as rounding ``x`` directly, which
    is what :func:`round_to_bf16` promises for float64 inputs.
    """
    with np.errstate(over="ignore"):
        nearest = x.astype(np.float32)
    bits = nearest.view(np.uint32)
    # Step the magnitude back by one unit where rounding went away from zero (Inf from an
    # overflow steps back to the largest finite value).
    bits = bits - (np.abs(nearest.astype(np.float64)) > np.abs(x)).astype(np.uint32)
    inexact = bits.view(np.float32).astype(np.float64) != x
    return np.where(np.isnan(x), np.uint32(FP32_NAN), bits | inexact.astype(np.uint32))


def round_to_bf16(x):
    """Return ``x`` rounded to bf16: the zero rule on ``x``, then round to nearest even.

    Every ``|x| < 2**-126`` (zeros, fp32 subnormals, and so every value that would otherwise
    round into the bf16 subnormal range) becomes +0.0; a value beyond the largest finite bf16
    by half a unit or more becomes Inf of its sign (IEEE overflow); every NaN becomes
    ``0x7FC0``. float32 inputs are rounded by bit arithmetic; float64 (or int) inputs are
    rounded once from their own value (through fp32 rounded to odd, which is exact for this).

    Parameters
    ----------
    x : array_like of float32, float64, int or ml_dtypes.bfloat16

    Returns
    -------
    numpy.ndarray of ml_dtypes.bfloat16
    """
    x = np.asarray(x)
    if is_bfloat16(x.dtype):
        return bf16_array(as_bf16(x))
    if x.dtype == np.float32:
        bits = _flush_bits(_bits32(x))
    else:
        x = np.asarray(x, dtype=np.float64)
        x = np.where(np.abs(x) < SMALLEST_NORMAL, 0.0, x)
        bits = _fp32_round_to_odd(x)
    return _bf16_of_fp32_bits(bits).view(bfloat16())


def round_to_fp32(x):
    """Return float ``x`` rounded to fp32 (nearest even, IEEE overflow to Inf), then
    :func:`flush`: how biases and bounds enter the datapath."""
    with np.errstate(over="ignore"):
        return flush(np.asarray(x, dtype=np.float64).astype(np.float32))


def bf16_bits(x):
    """Return the uint16 bit patterns of bf16 values held in float32 (the top 16 bits)."""
    return (_bits32(x) >> 16).astype(np.uint16)


def bf16_array(x):
    """Return float32 ``x`` holding bf16 values as an array of ``ml_dtypes.bfloat16``."""
    return bf16_bits(x).view(bfloat16())


def as_bf16(x, where="bf16", field="x"):
    """Return bf16 values as a float32 array (exact), with the zero rule and canonical NaN.

    Parameters
    ----------
    x : numpy.ndarray of ml_dtypes.bfloat16 or float32
        A float32 array must hold bf16 values only (its low 16 bits all 0).
    where, field : str
        Name the array in the errors.

    Raises
    ------
    ValueError
        If ``x`` has another dtype, or a float32 value that is not a bf16 value (naming the
        first index).
    """
    x = np.asarray(x)
    if is_bfloat16(x.dtype):
        bits = np.asarray(x, order="C").view(np.uint16).astype(np.uint32) << 16
    elif x.dtype == np.float32:
        bits = _bits32(x)
        inexact = (bits & np.uint32(0xFFFF)) != 0
        if inexact.any():
            index = first_index(inexact)
            raise ValueError(f"{where}: field {field!r} holds {float(x[index])!r} at index "
                             f"{index}, not a bf16 value; allowed: ml_dtypes.bfloat16 values, "
                             "or float32 values whose low 16 bits are 0 (see round_to_bf16)")
    else:
        raise ValueError(f"{where}: field {field!r} has dtype {x.dtype}; allowed: "
                         "ml_dtypes.bfloat16, or float32 holding bf16 values")
    return _flush_bits(bits).view(np.float32)


def no_product(w):
    """Return whether each bf16 weight of ``w`` marks no product: sign 1 and exponent 0
    (-0.0 or a negative subnormal), a pattern the zero rule leaves no value, so no layer's
    weight. Its product is +0.0 whatever the activation (an Inf or NaN too), as the device's
    multiplier gives it (:class:`~hwgen.device.bf16_multiplier.BF16Multiplier`).

    Parameters
    ----------
    w : numpy.ndarray of ml_dtypes.bfloat16 or float32
        The weights as given, before the zero rule (:func:`as_bf16`).

    Returns
    -------
    numpy.ndarray of bool
    """
    w = np.asarray(w)
    if is_bfloat16(w.dtype):
        bits = np.ascontiguousarray(w).view(np.uint16).astype(np.uint32) << 16
    else:
        bits = _bits32(w)
    return (bits & np.uint32(0xFF800000)) == np.uint32(0x80000000)


def bf16_matmul(x, w, b, rows):
    """Return the fp32 accumulators ``acc = b + sum_k fl32(x[..., m, k] * w[..., k, n])`` in
    the order of the sums of docs/arithmetic.md.

    ``K`` is cut into tiles of ``rows`` consecutive ``k`` (the last padded with +0.0
    products); ``acc = b``; for each tile in order: ``s = +0.0``, ``s = fl32(s + p)`` for its
    products in ``k`` order, then ``acc = fl32(acc + s)``. Every product and sum is
    binary32, round to nearest even, then :func:`flush`; the product of a weight that is
    :func:`no_product` is +0.0 (no layer's weight is). Vectorised over the leading axes,
    ``m`` and ``n``; the loops run over the tiles and the products of a tile.

    The zero rule applied after NumPy's IEEE result equals the zero rule on the exact result:
    a bf16 x bf16 product has 16 significant bits, so one below ``2**-126`` is either exact in
    fp32's subnormals or so small (below ``2**-134``) that no rounding carries it up to
    ``2**-126``; and a sum of two fp32 values whose exact result is below ``2**-126`` is
    exact (both are multiples of ``2**-149``, as are all subnormals).

    Parameters
    ----------
    x : numpy.ndarray of bf16, shape (..., M, K)
        See :func:`as_bf16` for what is accepted; Inf and NaN are computed with.
    w : numpy.ndarray of bf16, shape (..., K, N)
    b : array_like of float32, broadcastable to (..., M, N)
        The bias (the zero rule applied to it first).
    rows : int
        ``R >= 1``, the array's rows: the length of a tile.

    Returns
    -------
    numpy.ndarray of float32, shape (..., M, N)
    """
    x, weights = as_bf16(x, "bf16_matmul", "x"), as_bf16(w, "bf16_matmul", "w")
    # (Read on the weights as given: the zero rule makes -0.0 +0.0.)
    none, w = no_product(w), weights
    if x.shape[-1] != w.shape[-2]:
        raise ValueError(f"bf16_matmul: x has shape {x.shape} and w {w.shape}; allowed: "
                         "x (..., M, K) and w (..., K, N)")
    if isinstance(rows, bool) or not isinstance(rows, numbers.Integral) or rows < 1:
        raise ValueError(f"bf16_matmul: rows={rows!r}; allowed: an int >= 1")
    # Where no weight is no_product (every layer's), the loop need not look.
    none = none if none.any() else None
    k_total = x.shape[-1]
    shape = np.broadcast_shapes((*x.shape[:-1], 1), (*w.shape[:-2], 1, w.shape[-1]))
    acc = np.broadcast_to(flush(b), shape).copy()
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, k_total, rows):
            s = np.zeros(shape, dtype=np.float32)
            # The padding's +0.0 products are left out: s + (+0.0) is s for every s here
            # (s is never -0.0), so they change no bit.
            for k in range(start, min(start + rows, k_total)):
                p = flush(x[..., :, k, None] * w[..., None, k, :])
                if none is not None:
                    p = np.where(none[..., None, k, :], np.float32(0), p)
                s = flush(s + p)
            acc = flush(acc + s)
    return acc


def activate(acc, activation="identity", act_min=None, act_max=None):
    """Return an fp32 activation of ``acc``, then its clamp bounds, NaN staying NaN.

    ``"relu"``: ``acc`` where ``acc > 0``, else +0.0; ``"identity"``: ``acc``; then
    ``min(max(acc, act_min), act_max)`` for the bounds that are set (fp32 values, see
    :func:`round_to_fp32`). A NaN stays the canonical NaN through all of them.
    """
    if activation == "relu":
        acc = np.where((acc > 0) | np.isnan(acc), acc, np.float32(0.0))
    elif activation != "identity":
        raise ValueError(f"activate: activation={activation!r}; allowed: 'identity', 'relu'")
    # np.maximum and np.minimum return the NaN where either operand is one.
    if act_min is not None:
        acc = np.maximum(acc, np.float32(act_min))
    if act_max is not None:
        acc = np.minimum(acc, np.float32(act_max))
    return np.asarray(acc, dtype=np.float32)
