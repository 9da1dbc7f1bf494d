"""The output size of a float convolution or pooling window, with the float layers' errors.

docs/arithmetic.md: kernel ``KH x KW``, stride ``(sy, sx)``, zero padding
``(top, bottom, left, right)``; ``OH = (H + top + bottom - KH) // sy + 1``, ``OW`` likewise.
The windows themselves are :func:`~hwgen.nn.patches.im2col`'s, shared with the integer layers.
"""

from .patches import conv_output_size

__all__ = ["check_window"]


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
        sizes.append(conv_output_size(size, k, s, (before, after)))
    return tuple(sizes)
