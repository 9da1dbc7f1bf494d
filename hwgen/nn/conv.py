"""The integer 2-D convolution: a :class:`~hwgen.nn.Dense` layer applied to every patch.

Section 3.1 of the architecture brief (contract): the NHWC input is padded with ``padding``
zeros on each side of both spatial axes; output pixel ``(oy, ox)`` is a ``Dense`` layer (same
bias, requantization, saturation and activation) applied to its patch flattened in
``(ky, kx, c)`` order, with ``W_dense[(ky*KW + kx)*C_in + c, n] = weight[ky, kx, c, n]``.
"""

from ._ints import int_array, int_scalar
from .dense import check_channel_fields
from .patches import conv_output_size, im2col

__all__ = ["Conv2D"]


class Conv2D:
    """One 2-D convolution of a :class:`~hwgen.nn.QuantizedNetwork`, in integers.

    For NHWC input ``x[m, y, x, c]``, computes
    ``acc[m, oy, ox, n] = sum_{ky, kx, c} xpad[m, oy*stride + ky, ox*stride + kx, c] *
    weight[ky, kx, c, n] + bias[n]`` exactly, then requantizes, saturates and applies the
    activation exactly as :class:`~hwgen.nn.Dense` does (or returns ``acc`` for
    ``output="raw"``). The output is ``(M, OH, OW, C_out)`` with
    ``OH = (H + 2*padding - KH) // stride + 1`` (the same for ``OW``).

    The constructor checks dtypes, shapes and names; the value ranges depend on the widths and
    are checked by :class:`~hwgen.nn.QuantizedNetwork`, which also checks that the kernel fits
    the (padded) input.

    Parameters
    ----------
    weight : array_like of int, shape (KH, KW, C_in, C_out)
        Signed weights.
    bias, mult, shift : array_like of int, shape (C_out,)
        Per output channel, as for :class:`~hwgen.nn.Dense`.
    stride : int
        Step between output pixels, ``>= 1``, the same on both axes.
    padding : int
        Zeros added on each side of both spatial axes, ``>= 0``.
    activation : {"relu", "identity"}
    output : {"requant", "raw"}
        As for :class:`~hwgen.nn.Dense`.

    Attributes
    ----------
    weight, bias, mult, shift : numpy.ndarray of int64
        The parameters, copied.
    stride, padding : int
    activation, output : str

    Raises
    ------
    ValueError
        Naming the field and what is allowed, for a non-integer dtype, a wrong shape, a stride
        or padding that is not one integer in range, or an unknown ``activation`` or
        ``output``.
    """

    def __init__(self, weight, bias, mult, shift, *, stride=1, padding=0, activation="relu",
                 output="requant"):
        self.weight = int_array(weight, "Conv2D", "weight", copy=True)
        self.bias = int_array(bias, "Conv2D", "bias", copy=True)
        self.mult = int_array(mult, "Conv2D", "mult", copy=True)
        self.shift = int_array(shift, "Conv2D", "shift", copy=True)
        self.stride = stride
        self.padding = padding
        self.activation = activation
        self.output = output
        self.check("Conv2D")

    @property
    def kernel_size(self):
        """``(KH, KW)``."""
        return self.weight.shape[0], self.weight.shape[1]

    @property
    def in_channels(self):
        """``C_in``."""
        return self.weight.shape[2]

    @property
    def out_channels(self):
        """``C_out``, the number of output channels ``N``."""
        return self.weight.shape[3]

    @property
    def patch_size(self):
        """``K = KH*KW*C_in``, the inputs of each output pixel's dot product."""
        kh, kw = self.kernel_size
        return kh * kw * self.in_channels

    @property
    def matrix(self):
        """The ``(K, C_out)`` weight matrix of the per-pixel ``Dense`` layer (a view)."""
        return self.weight.reshape(self.patch_size, self.out_channels)

    def __repr__(self):
        kh, kw = self.kernel_size
        return (f"Conv2D({kh}x{kw}, {self.in_channels} -> {self.out_channels}, "
                f"stride={self.stride}, padding={self.padding}, "
                f"activation={self.activation!r}, output={self.output!r})")

    def check(self, where):
        """Check the width-independent properties: dtypes, shapes, stride, padding and names.

        Parameters
        ----------
        where : str
            Prefix of the error messages, e.g. ``"layer 2"``.

        Raises
        ------
        ValueError
            As described for the class.
        """
        for field in ("weight", "bias", "mult", "shift"):
            setattr(self, field, int_array(getattr(self, field), where, field))
        if self.weight.ndim != 4 or min(self.weight.shape) < 1:
            raise ValueError(f"{where}: field 'weight' has shape {self.weight.shape}; "
                             "allowed: (KH, KW, C_in, C_out), each >= 1")
        self.stride = int_scalar(self.stride, where, "stride", 1)
        self.padding = int_scalar(self.padding, where, "padding", 0)
        check_channel_fields(self, where)

    def output_shape(self, input_shape):
        """Return the per-sample output shape ``(OH, OW, C_out)`` for an input ``(H, W, C_in)``.

        Raises
        ------
        ValueError
            If the input is not spatial, has another channel count than ``C_in``, or the
            kernel does not fit the padded input.
        """
        return self._output_shape(tuple(input_shape), "Conv2D", "the input")

    def _output_shape(self, shape, where, source):
        return conv_output_shape(shape, self.weight.shape, self.stride, self.padding,
                                 where=where, source=source)

    def patches(self, x):
        """Return the patches of NHWC ``x`` in ``(ky, kx, c)`` order, ``(M, OH, OW, K)``.

        ``patches(x) @ matrix + bias`` is the layer's accumulator; the hardware can run the
        layer as that matrix product. ``x`` is not range-checked here.
        """
        return im2col(x, self.kernel_size, self.stride, self.padding)


def conv_output_shape(shape, weight_shape, stride, padding, *, where, source, kind="Conv2D"):
    """Return ``(OH, OW, C_out)`` of a convolution, or raise ``ValueError`` naming ``where``.

    Shared by :class:`Conv2D` and the float :class:`~hwgen.nn.FloatConv2D` (``kind`` names the
    layer type, ``source`` what gives the input, e.g. ``"layer 1"``).
    """
    if len(shape) != 3:
        raise ValueError(f"{where}: {kind} needs a spatial input (H, W, C) but {source} gives "
                         f"{shape}; allowed: a {kind} after input_shape=(H, W, C), a "
                         "convolution or a MaxPool2D")
    kh, kw, c_in, c_out = weight_shape
    h, w, c = shape
    if c != c_in:
        raise ValueError(f"{where}: field 'weight' has C_in={c_in} but {source} gives {c} "
                         f"channels {shape}; allowed: weight of shape (KH, KW, {c}, C_out)")
    for axis, size, kernel in (("KH", h, kh), ("KW", w, kw)):
        padded = size + 2 * padding
        if kernel > padded:
            raise ValueError(f"{where}: field 'weight' has {axis}={kernel} but {source} gives "
                             f"{shape}, {padded} wide on that axis with padding={padding}; "
                             f"allowed: {axis} <= {padded}")
    return (conv_output_size(h, kh, stride, padding), conv_output_size(w, kw, stride, padding),
            c_out)
