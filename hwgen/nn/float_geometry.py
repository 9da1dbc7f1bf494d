"""The geometry of a float convolution or pooling window: per-axis strides, four-sided padding.

Section 3.2 of the architecture brief: kernel ``KH x KW``, stride ``(sy, sx)``, zero padding
``(top, bottom, left, right)``; ``OH = (H + top + bottom - KH) // sy + 1``, ``OW`` likewise.
:func:`windows` gives every output pixel's window of the padded input and :func:`unwindow` sums
window values back onto the input (its transpose, for gradients).
"""

import numbers

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["check_window", "output_size", "pair", "quad", "unwindow", "windows"]


def _int(value, low):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_) \
        and value >= low


def pair(value, where, field, low):
    """Return an int or an ``(a, b)`` pair of ints ``>= low`` as a tuple of two ints."""
    values = (value, value) if np.ndim(value) == 0 else tuple(value)
    if len(values) != 2 or not all(_int(v, low) for v in values):
        raise ValueError(f"{where}: field {field!r} is {value!r}; allowed: an integer >= {low} "
                         "or a pair of them (per axis)")
    return int(values[0]), int(values[1])


def quad(value, where):
    """Return a padding (int, ``(ph, pw)`` or ``(top, bottom, left, right)``) as four ints."""
    values = (value,) if np.ndim(value) == 0 else tuple(value)
    if len(values) not in (1, 2, 4) or not all(_int(v, 0) for v in values):
        raise ValueError(f"{where}: field 'padding' is {value!r}; allowed: an integer >= 0, "
                         "(ph, pw) or (top, bottom, left, right)")
    if len(values) == 1:
        return (int(values[0]),) * 4
    if len(values) == 2:
        return int(values[0]), int(values[0]), int(values[1]), int(values[1])
    return tuple(int(v) for v in values)


def output_size(size, kernel, stride, before, after):
    """Return ``(size + before + after - kernel) // stride + 1``."""
    return (size + before + after - kernel) // stride + 1


def windows(x, kernel, strides, pads):
    """Return the windows of NHWC ``x``: ``(M, OH, OW, KH, KW, C)``, zero padding included."""
    kh, kw = kernel
    sy, sx = strides
    top, bottom, left, right = pads
    if any(pads):
        x = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    h, w = x.shape[1:3]
    oh, ow = output_size(h, kh, sy, 0, 0), output_size(w, kw, sx, 0, 0)
    view = sliding_window_view(x, (kh, kw), axis=(1, 2))  # (M, h', w', C, KH, KW)
    view = view[:, :(oh - 1) * sy + 1:sy, :(ow - 1) * sx + 1:sx]
    return view.transpose(0, 1, 2, 4, 5, 3)


def unwindow(grid, input_shape, strides, pads):
    """Return the transpose of :func:`windows`: ``grid`` ``(M, OH, OW, KH, KW, C)`` summed back
    onto an input of ``input_shape`` ``(M, H, W, C)``; values on the padding are dropped."""
    m, h, w, c = input_shape
    _, oh, ow, kh, kw, _ = grid.shape
    sy, sx = strides
    top, bottom, left, right = pads
    out = np.zeros((m, h + top + bottom, w + left + right, c), dtype=grid.dtype)
    for ky in range(kh):
        for kx in range(kw):
            out[:, ky:ky + (oh - 1) * sy + 1:sy, kx:kx + (ow - 1) * sx + 1:sx, :] += \
                grid[:, :, :, ky, kx, :]
    return out[:, top:top + h, left:left + w, :]


def check_window(shape, kernel, strides, pads, *, where, source, kind, field):
    """Return ``(OH, OW)`` of a window on a spatial ``shape``, or raise ``ValueError``."""
    if len(shape) != 3:
        raise ValueError(f"{where}: {kind} needs a spatial input (H, W, C) but {source} gives "
                         f"{shape}; allowed: a {kind} after input_shape=(H, W, C) or a "
                         "spatial layer")
    sizes = []
    for axis, size, k, s, (before, after) in (("KH", shape[0], kernel[0], strides[0],
                                                pads[:2]),
                                               ("KW", shape[1], kernel[1], strides[1],
                                                pads[2:])):
        padded = size + before + after
        if k > padded:
            raise ValueError(f"{where}: field {field!r} has {axis}={k} but {source} gives "
                             f"{shape}, {padded} wide on that axis with padding {pads}; "
                             f"allowed: {axis} <= {padded}")
        sizes.append(output_size(size, k, s, before, after))
    return tuple(sizes)
