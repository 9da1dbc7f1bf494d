"""Requantization: the per-channel ``mult / 2**shift`` step of docs/arithmetic.md.

:func:`requantize` applies it to accumulators bit-exactly (with section 3.2's activation
bounds and leaky ReLU's second multiplier); :func:`requant_params` chooses
``mult`` and ``shift`` for a real ratio when a float model is quantized.
"""

import math
import numbers

import numpy as np

from ._ints import (
    INT64_MAX,
    check_object_ints,
    int_array,
    max_abs,
    optional_int,
    signed_range,
    to_object,
)

__all__ = ["check_bounds", "requant_params", "requantize"]


def requantize(acc, mult, shift, out_bits, *, mult_neg=None, act_min=None, act_max=None):
    """Requantize, saturate and clamp accumulators, per docs/arithmetic.md.

    Computes ``p = acc * mult`` (``p = acc * mult_neg`` where ``acc < 0`` if ``mult_neg`` is
    given: leaky ReLU's sign-selected multiplier), ``r = (p + (1 << (shift - 1))) >> shift``
    where ``shift > 0`` (``r = p`` where ``shift == 0``) with ``>>`` the arithmetic shift
    (floor), saturates ``r`` to signed ``out_bits`` and clamps it to ``[act_min, act_max]``.
    With the defaults nothing is clamped beyond the saturation and no activation is applied.

    Parameters
    ----------
    acc : array_like of int
        Accumulators (bias included), typically ``(M, N)`` or ``(M, H, W, N)``; any integer
        dtype or Python integers.
    mult, shift : array_like of int
        Non-negative multipliers and shifts, broadcast against ``acc`` (typically ``(N,)``, one
        per output channel).
    out_bits : int
        Signed width of the result, at least 1.
    mult_neg : array_like of int, optional
        Non-negative multipliers of the negative accumulators, broadcast like ``mult``.
    act_min, act_max : int, optional
        Activation bounds inside the saturation range, ``act_min <= act_max``; the range's
        ends by default.

    Returns
    -------
    numpy.ndarray of int64
        The saturated values, with the broadcast shape of the operands.

    Raises
    ------
    ValueError
        If an operand is not integer, ``mult``, ``mult_neg`` or ``shift`` is negative,
        ``out_bits`` is not a positive integer (``<= 64``), or a bound lies outside the
        saturation range or above the other.
    """
    if not isinstance(out_bits, numbers.Integral) or not 1 <= out_bits <= 64:
        raise ValueError(f"requantize: out_bits={out_bits!r}; allowed: an integer in 1..64")
    acc = np.asarray(acc)
    if acc.dtype == object:
        # Object arrays may hold integers wider than int64, which the exact path handles.
        check_object_ints(acc, "requantize", "acc")
    else:
        acc = int_array(acc, "requantize", "acc")
    mult = _unsigned(mult, "mult")
    shift = _unsigned(shift, "shift")
    mult_neg = mult if mult_neg is None else _unsigned(mult_neg, "mult_neg")
    low, high = check_bounds(act_min, act_max, out_bits, "requantize")
    shape = np.broadcast_shapes(acc.shape, mult.shape, mult_neg.shape, shift.shape)
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=np.int64)
    max_shift = int(shift.max())
    worst = max_abs(acc) * max(int(mult.max()), int(mult_neg.max())) \
        + (1 << max(max_shift - 1, 0))
    if acc.dtype != object and max_shift <= 62 and worst <= INT64_MAX:
        # Fast path: every intermediate provably fits int64.
        rounding = np.where(shift > 0, np.left_shift(np.int64(1), np.maximum(shift - 1, 0)), 0)
        p = acc * mult if mult_neg is mult else np.where(acc >= 0, acc * mult, acc * mult_neg)
        return np.clip((p + rounding) >> shift, low, high).astype(np.int64)
    acc, shift = to_object(acc), to_object(shift)
    p = acc * to_object(mult) if mult_neg is mult else \
        np.where(acc >= 0, acc * to_object(mult), acc * to_object(mult_neg))
    rounding = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0)), 0)
    return np.clip((p + rounding) >> shift, low, high).astype(np.int64)


def _unsigned(value, field):
    arr = int_array(value, "requantize", field)
    if arr.size and int(arr.min()) < 0:
        raise ValueError(f"requantize: field {field!r} holds {int(arr.min())}; allowed: >= 0")
    return arr


def check_bounds(act_min, act_max, out_bits, where):
    """Return ``(act_min, act_max)`` with the saturation range's ends for ``None``, checked.

    Raises
    ------
    ValueError
        Naming ``where`` and the field: a bound that is not an integer, lies outside signed
        ``out_bits``, or ``act_min > act_max``.
    """
    low, high = signed_range(out_bits)
    lo = low if act_min is None else optional_int(act_min, where, "act_min")
    hi = high if act_max is None else optional_int(act_max, where, "act_max")
    for field, value in (("act_min", lo), ("act_max", hi)):
        if not low <= value <= high:
            raise ValueError(f"{where}: field {field!r} is {value}; allowed: {low}..{high}, "
                             f"inside the saturation range of signed {out_bits} bits")
    if lo > hi:
        raise ValueError(f"{where}: field 'act_min' is {lo} but 'act_max' is {hi}; "
                         "allowed: act_min <= act_max")
    return lo, hi


def requant_params(ratio, mult_bits, max_shift):
    """Return ``(mult, shift)`` with ``mult / 2**shift`` closest to ``ratio`` for large ``mult``.

    ``mult`` is as large as ``mult_bits`` allows (``2**(mult_bits-1) <= mult < 2**mult_bits``)
    unless ``shift`` would then exceed ``max_shift`` (``shift = max_shift`` and a smaller
    ``mult``) or fall below 0 (``shift = 0`` and ``mult`` saturates at ``2**mult_bits - 1``).

    Parameters
    ----------
    ratio : array_like of float
        Non-negative, finite real multipliers, one per output channel.
    mult_bits : int
        Unsigned width of ``mult``.
    max_shift : int
        Largest allowed ``shift``, ``acc_bits + mult_bits - 1`` in the contract.

    Returns
    -------
    mult, shift : numpy.ndarray of int64
        With the shape of ``ratio``.

    Raises
    ------
    ValueError
        If a ratio is negative, NaN or infinite.
    """
    ratio = np.asarray(ratio, dtype=np.float64)
    if not np.all(np.isfinite(ratio)) or np.any(ratio < 0):
        raise ValueError(f"requant_params: ratios must be finite and >= 0, got {ratio}")
    mults, shifts = [], []
    for r in ratio.flat:
        if r == 0:
            mults.append(0)
            shifts.append(0)
            continue
        frac, exp = math.frexp(r)  # r = frac * 2**exp with 0.5 <= frac < 1
        shift = mult_bits - exp
        mult = round(math.ldexp(frac, mult_bits))
        if mult == 1 << mult_bits:  # frac rounded up to 1.0: one bit fewer
            mult >>= 1
            shift -= 1
        if shift > max_shift:
            shift = max_shift
            mult = round(math.ldexp(r, shift))
        elif shift < 0:
            shift = 0
            mult = min(round(r), (1 << mult_bits) - 1)
        mults.append(mult)
        shifts.append(shift)
    shape = ratio.shape
    return (np.array(mults, dtype=np.int64).reshape(shape),
            np.array(shifts, dtype=np.int64).reshape(shape))
