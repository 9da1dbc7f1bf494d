"""Integer checks and helpers shared by the integer layers and the network.

Private: every public class re-raises through these so that all errors read alike
(``<where>: field '<field>' ...; allowed: ...``).
"""

import numbers

import numpy as np

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
# Every integer of magnitude up to 2**53 is exact in float64, so a float64 matrix product whose
# partial sums all stay within it is exact whatever order BLAS sums in.
FLOAT64_EXACT = 1 << 53


def signed_range(bits):
    """Return ``(low, high)`` of a signed ``bits``-wide integer."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def int_array(value, where, field, copy=False):
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
        check_object_ints(arr, where, field)
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{where}: field {field!r} has dtype {arr.dtype}; "
                         "allowed: an integer dtype")
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < INT64_MIN or high > INT64_MAX:
            raise ValueError(f"{where}: field {field!r} holds {low if low < INT64_MIN else high}, "
                             f"which does not fit int64; allowed: {INT64_MIN}..{INT64_MAX}")
    if copy:
        return np.array(arr, dtype=np.int64)
    return np.asarray(arr, dtype=np.int64)


def check_object_ints(arr, where, field):
    """Raise ``ValueError`` if the object array ``arr`` holds anything but integers."""
    bad = [v for v in arr.flat
           if not isinstance(v, numbers.Integral) or isinstance(v, bool | np.bool_)]
    if bad:
        raise ValueError(f"{where}: field {field!r} holds {type(bad[0]).__name__} "
                         f"{bad[0]!r}; allowed: an integer dtype")


def check_range(arr, where, field, bounds, what):
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


def int_scalar(value, where, field, low, note=", the same on both axes"):
    """Return ``value`` as a Python int ``>= low``, or raise ``ValueError`` naming the field.

    Booleans, floats and sequences (per-axis tuples) are refused; ``note`` ends the message's
    allowed values (by default, that the parameter is the same on both axes).
    """
    if not isinstance(value, numbers.Integral) or isinstance(value, bool | np.bool_) \
            or value < low:
        raise ValueError(f"{where}: field {field!r} is {value!r}; allowed: an integer >= "
                         f"{low}{note}")
    return int(value)


def sample_shape(value, where):
    """Return an ``input_shape`` as a tuple ``(H, W, C)`` or ``(K,)`` of ints, or ``None``.

    Raises
    ------
    ValueError
        Naming ``where``, for anything but ``None`` or one or three positive integers.
    """
    if value is None:
        return None
    shape = tuple(value) if np.ndim(value) == 1 else ()
    if len(shape) not in (1, 3) or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_) and v >= 1
            for v in shape):
        raise ValueError(f"{where}: field 'input_shape' is {value!r}; allowed: (H, W, C) or "
                         "(K,), positive integers, the shape of one sample (NHWC)")
    return tuple(int(v) for v in shape)


def to_object(arr):
    """Return ``arr`` as an object array of Python ints, whose arithmetic never wraps."""
    return np.asarray(arr).astype(object)


def max_abs(arr):
    """Return ``max |arr|`` as a Python int (0 for an empty array), without int64 overflow."""
    if arr.size == 0:
        return 0
    return max(-int(arr.min()), int(arr.max()), 0)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def int_pair(value, where, field, low, names=("height", "width")):
    """Return ``value`` (one integer, or one per spatial axis) as a tuple of two ints ``>= low``.

    Raises
    ------
    ValueError
        Naming ``where`` and ``field``, for anything but an integer or a pair of integers
        ``>= low`` (booleans and floats refused).
    """
    items = (value, value) if _is_int(value) else value
    try:
        items = tuple(items)
    except TypeError:
        items = ()
    if len(items) != 2 or not all(_is_int(v) and v >= low for v in items):
        raise ValueError(f"{where}: field {field!r} is {value!r}; allowed: an integer >= {low}, "
                         f"or a pair of them ({names[0]}, {names[1]})")
    return int(items[0]), int(items[1])


def int_pads(value, where, field="padding"):
    """Return a padding as ``(top, bottom, left, right)``, ints ``>= 0``.

    ``value`` is one integer (every side), ``(ph, pw)`` (top and bottom ``ph``, left and right
    ``pw``) or ``(top, bottom, left, right)``.

    Raises
    ------
    ValueError
        Naming ``where`` and ``field``, for any other form, a negative or a non-integer side.
    """
    items = (value,) if _is_int(value) else value
    try:
        items = tuple(items)
    except TypeError:
        items = ()
    if len(items) not in (1, 2, 4) or not all(_is_int(v) and v >= 0 for v in items):
        raise ValueError(f"{where}: field {field!r} is {value!r}; allowed: an integer >= 0, "
                         "(ph, pw) or (top, bottom, left, right), integers >= 0")
    items = tuple(int(v) for v in items)
    if len(items) == 1:
        return items * 4
    if len(items) == 2:
        return items[0], items[0], items[1], items[1]
    return items


def as_given(value):
    """Return a validated spatial argument as given: a Python int, or a tuple of Python ints."""
    return int(value) if _is_int(value) else tuple(int(v) for v in value)


def optional_int(value, where, field):
    """Return ``value`` as a Python int, or ``None``; raise ``ValueError`` naming the field."""
    if value is None:
        return None
    if not _is_int(value):
        raise ValueError(f"{where}: field {field!r} is {value!r}; allowed: an integer or None")
    return int(value)
