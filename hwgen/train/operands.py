"""Float operands of the training's matrix products as integers of the configuration's widths.

Symmetric and per tensor (as docs/arithmetic.md, without zero points): a float
tensor ``a`` becomes ``q = rint(a / s)`` with ``s = max|a| / (2**(bits-1) - 1)``, so that
``a ≈ q * s`` and ``|q| <= 2**(bits-1) - 1``. One scale for the whole tensor keeps integer
products of its parts summable: the sum over shards of ``x_dᵀ · q_d`` is exactly ``xᵀ · q``.
"""

import numbers

import numpy as np

__all__ = ["qmax", "quantize_tensor"]


def qmax(bits):
    """Return ``2**(bits - 1) - 1``, the largest magnitude a symmetric signed value takes."""
    if not isinstance(bits, numbers.Integral) or isinstance(bits, bool) or not 2 <= bits <= 64:
        raise ValueError(f"bits={bits!r}; allowed: an integer in 2..64")
    return (1 << (int(bits) - 1)) - 1


def quantize_tensor(a, bits):
    """Return ``(q, scale)``: ``a`` as signed ``bits``-bit integers with one scale.

    Parameters
    ----------
    a : array_like of float
        Any shape; finite values.
    bits : int
        Signed width, 2..64.

    Returns
    -------
    q : numpy.ndarray of int64
        ``rint(a / scale)`` (half to even, as :func:`hwgen.nn.quantize` rounds), within
        ``±(2**(bits-1) - 1)``.
    scale : float
        ``max|a| / (2**(bits-1) - 1)``, or 1.0 when ``a`` is all zeros (any scale represents
        it).

    Raises
    ------
    ValueError
        If ``a`` holds a NaN or an infinity, or ``bits`` is out of range.
    """
    top = qmax(bits)
    a = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError("quantize_tensor: the tensor holds NaN or infinity (a diverged "
                         "training? try a smaller learning rate); allowed: finite values")
    peak = float(np.max(np.abs(a))) if a.size else 0.0
    scale = peak / top if peak > 0 else 1.0
    q = np.clip(np.rint(a / scale), -top, top).astype(np.int64)
    return q, scale
