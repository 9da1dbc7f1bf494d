"""A vectorised NumPy model of the bf16 products for the training's tests: ml_dtypes for the
rounding to bf16, plain float32 arithmetic for the sums, in the contract's order (tiles of
``rows`` consecutive k, each summed from 0, added to the accumulator that starts at the bias).
Shares no code with hwgen. Only for values whose products and sums stay normal (no zero rule
needed) and finite."""

import ml_dtypes
import numpy as np


def bf16(x):
    """``x`` rounded to bf16 (nearest even), as float32."""
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def tiled_matmul(a, b, bias, rows):
    """``a @ b + bias`` in float32, summed in tiles of ``rows`` consecutive k."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    acc = np.broadcast_to(np.asarray(bias, np.float32), (a.shape[0], b.shape[1])).copy()
    for start in range(0, a.shape[1], rows):
        s = np.zeros_like(acc)
        for k in range(start, min(start + rows, a.shape[1])):
            s = s + np.outer(a[:, k], b[k, :])
        acc = acc + s
    return acc
