"""The patch layout of a convolution (im2col) and its transpose, per sections 3.1 and 3.2.

A convolution is a :class:`~hwgen.nn.Dense` layer applied to every output pixel's patch:
``patch[m, oy, ox, (ky*KW + kx)*C + c] = xpad[m, oy*sy + ky, ox*sx + kx, c]``, where ``xpad``
is the NHWC input with ``(top, bottom, left, right)`` zeros added around the spatial axes.
Strides are one int or ``(sy, sx)``; a padding is one int (every side), ``(ph, pw)`` or
``(top, bottom, left, right)``. The float model uses :func:`col2im` to send the patches'
gradients back to the input.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ._ints import int_pads, int_pair

__all__ = ["col2im", "conv_output_size", "im2col"]


def conv_output_size(size, kernel, stride, padding):
    """Return ``(size + before + after - kernel) // stride + 1``, the output length on one axis.

    ``padding`` is one int (``before = after = padding``) or a pair ``(before, after)``.
    """
    before, after = (padding, padding) if np.ndim(padding) == 0 else padding
    return (size + before + after - kernel) // stride + 1


def _geometry(x_shape, kernel, stride, padding):
    """Return ``(sy, sx), (top, bottom, left, right), (oh, ow)`` of a convolution."""
    sy, sx = int_pair(stride, "im2col", "stride", 1)
    pads = int_pads(padding, "im2col")
    oh = conv_output_size(x_shape[1], kernel[0], sy, pads[:2])
    ow = conv_output_size(x_shape[2], kernel[1], sx, pads[2:])
    return (sy, sx), pads, (oh, ow)


def im2col(x, kernel, stride=1, padding=0):
    """Return the patches of NHWC ``x`` in ``(ky, kx, c)`` order.

    Parameters
    ----------
    x : numpy.ndarray, shape (M, H, W, C)
        Any dtype (int64, float64, object).
    kernel : (int, int)
        ``(KH, KW)``, each at most the padded input's size on its axis.
    stride : int or (int, int)
        ``(sy, sx)``, or one value for both axes.
    padding : int, (int, int) or (int, int, int, int)
        Zeros on every side, ``(ph, pw)``, or ``(top, bottom, left, right)``.

    Returns
    -------
    numpy.ndarray, shape (M, OH, OW, KH*KW*C)
        A new array of ``x``'s dtype, ``OH = (H + top + bottom - KH) // sy + 1``,
        ``OW = (W + left + right - KW) // sx + 1``.
    """
    kh, kw = kernel
    m, h, w, c = x.shape
    (sy, sx), (top, bottom, left, right), (oh, ow) = _geometry(x.shape, kernel, stride, padding)
    if top or bottom or left or right:
        xpad = np.zeros((m, h + top + bottom, w + left + right, c), dtype=x.dtype)
        xpad[:, top:top + h, left:left + w, :] = x
    else:
        xpad = x
    # windows[m, oy, ox, c, ky, kx], a view; the slice keeps the strided positions only.
    windows = sliding_window_view(xpad, (kh, kw), axis=(1, 2))
    windows = windows[:, :(oh - 1) * sy + 1:sy, :(ow - 1) * sx + 1:sx]
    return windows.transpose(0, 1, 2, 4, 5, 3).reshape(m, oh, ow, kh * kw * c)


def col2im(patches, input_shape, kernel, stride=1, padding=0):
    """Return the transpose of :func:`im2col`: each patch entry summed back onto its input pixel.

    Entries that fall on the zero padding are dropped. This is the gradient of the loss with
    respect to the input when ``patches`` holds its gradient with respect to the patches.

    Parameters
    ----------
    patches : numpy.ndarray, shape (M, OH, OW, KH*KW*C)
    input_shape : (int, int, int, int)
        ``(M, H, W, C)`` of the input that :func:`im2col` was given.
    kernel : (int, int)
    stride, padding
        As for :func:`im2col`.

    Returns
    -------
    numpy.ndarray, shape (M, H, W, C)
    """
    kh, kw = kernel
    m, h, w, c = input_shape
    _, oh, ow, _ = patches.shape
    (sy, sx), (top, bottom, left, right), _ = _geometry(input_shape, kernel, stride, padding)
    grid = patches.reshape(m, oh, ow, kh, kw, c)
    out = np.zeros((m, h + top + bottom, w + left + right, c), dtype=patches.dtype)
    # One strided slice per kernel offset: KH*KW vectorised additions, overlaps summed.
    for ky in range(kh):
        for kx in range(kw):
            out[:, ky:ky + (oh - 1) * sy + 1:sy,
                kx:kx + (ow - 1) * sx + 1:sx, :] += grid[:, :, :, ky, kx, :]
    return out[:, top:top + h, left:left + w, :]
