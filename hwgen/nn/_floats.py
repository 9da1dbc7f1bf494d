"""Float parameter checks shared by the float layers (private; errors read like ``_ints``'s)."""

import numpy as np


def float_param(value, where, field, ndim, expected):
    """Return ``value`` as a float64 array of ``ndim`` axes, each ``>= 1`` long."""
    arr = np.array(value, dtype=np.float64)
    if arr.ndim != ndim or min(arr.shape, default=0) < 1:
        raise ValueError(f"{where}: field {field!r} has shape {arr.shape}; allowed: {expected}, "
                         "each >= 1")
    return arr


def float_bias(bias, n, where):
    """Return ``bias`` as an ``(n,)`` float64 array, zeros for ``None``."""
    if bias is None:
        return np.zeros(n)
    arr = np.array(bias, dtype=np.float64)
    if arr.shape != (n,):
        raise ValueError(f"{where}: field 'bias' has shape {arr.shape}; allowed: ({n},), one "
                         "value per output channel of 'weight'")
    return arr
