"""The patch layout of a convolution (im2col) and its transpose, per section 3.1 of the brief.

A convolution is a :class:`~hwgen.nn.Dense` layer applied to every output pixel's patch:
``patch[m, oy, ox, (ky*KW + kx)*C + c] = xpad[m, oy*s + ky, ox*s + kx, c]``, where ``xpad`` is
the NHWC input with ``padding`` zeros on each side of both spatial axes. The float model uses
:func:`col2im` to send the patches' gradients back to the input.
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["col2im", "conv_output_size", "im2col"]


def conv_output_size(size, kernel, stride, padding):
    """Return ``(size + 2*padding - kernel) // stride + 1``, the output length along one axis."""
    return (size + 2 * padding - kernel) // stride + 1


def im2col(x, kernel, stride=1, padding=0):
    """Return the patches of NHWC ``x`` in ``(ky, kx, c)`` order.

    Parameters
    ----------
    x : numpy.ndarray, shape (M, H, W, C)
        Any dtype (int64, float64, object).
    kernel : (int, int)
        ``(KH, KW)``, each at most the padded input's size.
    stride, padding : int
        The same on both axes; the padding is zeros.

    Returns
    -------
    numpy.ndarray, shape (M, OH, OW, KH*KW*C)
        A new array of ``x``'s dtype, ``OH = (H + 2*padding - KH) // stride + 1`` (the same for
        ``OW``).
    """
    kh, kw = kernel
    m, h, w, c = x.shape
    if padding:
        xpad = np.zeros((m, h + 2 * padding, w + 2 * padding, c), dtype=x.dtype)
        xpad[:, padding:padding + h, padding:padding + w, :] = x
    else:
        xpad = x
    oh = conv_output_size(h, kh, stride, padding)
    ow = conv_output_size(w, kw, stride, padding)
    # windows[m, oy, ox, c, ky, kx], a view; the slice keeps the strided positions only.
    windows = sliding_window_view(xpad, (kh, kw), axis=(1, 2))
    windows = windows[:, :(oh - 1) * stride + 1:stride, :(ow - 1) * stride + 1:stride]
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
    stride, padding : int

    Returns
    -------
    numpy.ndarray, shape (M, H, W, C)
    """
    kh, kw = kernel
    m, h, w, c = input_shape
    _, oh, ow, _ = patches.shape
    grid = patches.reshape(m, oh, ow, kh, kw, c)
    out = np.zeros((m, h + 2 * padding, w + 2 * padding, c), dtype=patches.dtype)
    # One strided slice per kernel offset: KH*KW vectorised additions, overlaps summed.
    for ky in range(kh):
        for kx in range(kw):
            out[:, ky:ky + (oh - 1) * stride + 1:stride,
                kx:kx + (ow - 1) * stride + 1:stride, :] += grid[:, :, :, ky, kx, :]
    return out[:, padding:padding + h, padding:padding + w, :]
