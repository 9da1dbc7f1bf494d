"""The integer 2-D convolution: a :class:`~hwgen.nn.Dense` layer applied to every patch.

docs/arithmetic.md (contract): the NHWC input is padded with
``(top, bottom, left, right)`` zeros; output pixel ``(oy, ox)``, channel ``n`` of group
``j = n // (C_out / groups)`` is a ``Dense`` layer (same bias, requantization, saturation,
bounds) applied to its patch of group ``j``'s input channels ``j*C_in/groups ...``, flattened
in ``(ky, kx, c)`` order, with ``W_dense[(ky*KW + kx)*C_in/groups + c, n] = weight[ky, kx, c,
n]``.
"""

import numpy as np

from ._ints import as_given, int_array, int_pads, int_pair, int_scalar
from .dense import (
    accumulate,
    bounds_repr,
    check_activation_fields,
    check_channel_fields,
    layer_bounds,
    layer_output,
    set_requant_fields,
)
from .patches import conv_output_size, im2col

__all__ = ["Conv2D"]


class Conv2D:
    """One 2-D convolution of a :class:`~hwgen.nn.QuantizedNetwork`, in integers.

    For NHWC input ``x[m, y, x, c]`` and output channel ``n`` of group ``j``, computes
    ``acc[m, oy, ox, n] = sum_{ky, kx, c} xpad[m, oy*sy + ky, ox*sx + kx, j*C_in/g + c] *
    weight[ky, kx, c, n] + bias[n]`` exactly, then requantizes, saturates and clamps exactly
    as :class:`~hwgen.nn.Dense` does (or returns ``acc`` for ``output="raw"``). The output is
    ``(M, OH, OW, C_out)`` with ``OH = (H + top + bottom - KH) // sy + 1`` and
    ``OW = (W + left + right - KW) // sx + 1``. Depthwise is ``groups = C_in``.

    The constructor checks dtypes, shapes and names; the value ranges depend on the widths and
    are checked by :class:`~hwgen.nn.QuantizedNetwork`, which also checks that the kernel fits
    the (padded) input.

    Parameters
    ----------
    weight : array_like of int, shape (KH, KW, C_in // groups, C_out)
        Signed weights.
    bias, mult, shift : array_like of int, shape (C_out,)
        Per output channel, as for :class:`~hwgen.nn.Dense`.
    stride : int or (int, int)
        ``(sy, sx)``, each ``>= 1``, or one value for both axes.
    padding : int, (int, int) or (int, int, int, int)
        Zeros on every side, ``(ph, pw)`` (top and bottom, left and right), or
        ``(top, bottom, left, right)``, each ``>= 0``.
    groups : int
        ``>= 1``, dividing ``C_out`` (and ``C_in``, which is ``weight.shape[2] * groups``).
    activation : {"relu", "identity", "leaky_relu"}
    output : {"requant", "raw"}
    act_min, act_max : int, optional
    mult_neg : array_like of int, shape (C_out,), optional
        As for :class:`~hwgen.nn.Dense`.

    Attributes
    ----------
    weight, bias, mult, shift : numpy.ndarray of int64
        The parameters, copied.
    mult_neg : numpy.ndarray of int64 or None
    stride, padding : int or tuple of int
        As given (see :attr:`strides`, :attr:`pads` for the normalised forms).
    groups : int
    activation, output : str
    act_min, act_max : int or None

    Raises
    ------
    ValueError
        Naming the field and what is allowed, for a non-integer dtype, a wrong shape, a stride,
        padding or groups out of range or of the wrong form, a ``C_out`` that ``groups`` does
        not divide, or as for :class:`~hwgen.nn.Dense`.
    """

    def __init__(self, weight, bias, mult, shift, *, stride=1, padding=0, groups=1,
                 activation="relu", output="requant", act_min=None, act_max=None,
                 mult_neg=None):
        set_requant_fields(self, "Conv2D", weight=weight, bias=bias, mult=mult, shift=shift,
                           mult_neg=mult_neg, activation=activation, output=output,
                           act_min=act_min, act_max=act_max)
        self.stride = stride
        self.padding = padding
        self.groups = groups
        self.check("Conv2D")

    @property
    def kernel_size(self):
        """``(KH, KW)``."""
        return self.weight.shape[0], self.weight.shape[1]

    @property
    def strides(self):
        """``(sy, sx)``."""
        return int_pair(self.stride, "Conv2D", "stride", 1)

    @property
    def pads(self):
        """``(top, bottom, left, right)``."""
        return int_pads(self.padding, "Conv2D")

    @property
    def in_channels(self):
        """``C_in = weight.shape[2] * groups``."""
        return self.weight.shape[2] * self.groups

    @property
    def out_channels(self):
        """``C_out``, the number of output channels ``N``."""
        return self.weight.shape[3]

    @property
    def patch_size(self):
        """``K = KH*KW*C_in/groups``, the inputs of each output pixel's dot product."""
        kh, kw = self.kernel_size
        return kh * kw * self.weight.shape[2]

    @property
    def matrix(self):
        """The ``(K, C_out)`` weight matrix of the per-pixel ``Dense`` layer (a view); with
        groups, column ``n`` multiplies the patch of ``n``'s group's channels."""
        return self.weight.reshape(self.patch_size, self.out_channels)

    def __repr__(self):
        kh, kw = self.kernel_size
        groups = f", groups={self.groups}" if self.groups != 1 else ""
        return (f"Conv2D({kh}x{kw}, {self.in_channels} -> {self.out_channels}, "
                f"stride={self.stride}, padding={self.padding}{groups}, "
                f"activation={self.activation!r}{bounds_repr(self)}, output={self.output!r})")

    def bounds(self, out_bits):
        """Return the resolved activation bounds ``(lo, hi)``, as :meth:`Dense.bounds
        <hwgen.nn.Dense.bounds>` does."""
        return layer_bounds(self, out_bits, "Conv2D")

    def check(self, where):
        """Check the width-independent properties: dtypes, shapes, geometry and names.

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
                             "allowed: (KH, KW, C_in // groups, C_out), each >= 1")
        int_pair(self.stride, where, "stride", 1, ("sy", "sx"))
        self.stride = as_given(self.stride)
        int_pads(self.padding, where)
        self.padding = as_given(self.padding)
        self.groups = int_scalar(self.groups, where, "groups", 1, ", dividing C_in and C_out")
        c_out = self.weight.shape[3]
        if c_out % self.groups:
            raise ValueError(f"{where}: field 'groups' is {self.groups} but 'weight' has "
                             f"C_out={c_out} {self.weight.shape}; allowed: a divisor of C_out")
        check_channel_fields(self, where)
        check_activation_fields(self, where)

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
                                 where=where, source=source, groups=self.groups)

    def patches(self, x):
        """Return the patches of NHWC ``x`` in ``(ky, kx, c)`` order, ``(M, OH, OW, KH*KW*C)``,
        over all ``C`` input channels.

        For ``groups == 1``, ``patches(x) @ matrix + bias`` is the layer's accumulator; the
        hardware can run the layer as that matrix product. ``x`` is not range-checked here.
        """
        return im2col(x, self.kernel_size, self.stride, self.padding)

    def forward(self, x, in_bits=8, acc_bits=32, *, where="Conv2D"):
        """Return the layer's output for NHWC ``x`` of signed ``in_bits`` ints.

        Per group, the im2col of that group's channels times that group's weight columns
        (section 3.2), then :func:`~hwgen.nn.requantize` with the layer's bounds (or the
        accumulators for ``"raw"``): ``(M, OH, OW, C_out)`` of int64. ``x``'s shape is assumed
        checked (:meth:`output_shape`).

        Raises
        ------
        ValueError
            If an accumulator leaves signed ``acc_bits`` (naming ``where``).
        """
        patches = self.patches(np.asarray(x, dtype=np.int64))
        m, oh, ow, _ = patches.shape
        kh, kw = self.kernel_size
        g, cg = self.groups, self.weight.shape[2]
        rows = patches.reshape(m * oh * ow, kh * kw * cg * g)
        if g > 1:
            # [g, pixels, KH*KW*cg]: each group's channels of every patch, in (ky, kx, c) order.
            rows = rows.reshape(m * oh * ow, kh * kw, g, cg).transpose(2, 0, 1, 3)
            rows = rows.reshape(g, m * oh * ow, kh * kw * cg)
        acc = accumulate(rows, self, in_bits, g)
        acc = acc.reshape(m, oh, ow, self.out_channels)
        return layer_output(where, self, acc, in_bits, acc_bits)


def conv_output_shape(shape, weight_shape, stride, padding, *, where, source, kind="Conv2D",
                      groups=1):
    """Return ``(OH, OW, C_out)`` of a convolution, or raise ``ValueError`` naming ``where``.

    Shared by :class:`Conv2D` and the float :class:`~hwgen.nn.FloatConv2D` (``kind`` names the
    layer type, ``source`` what gives the input, e.g. ``"layer 1"``). ``stride`` and
    ``padding`` take every form :class:`Conv2D` does.
    """
    if len(shape) != 3:
        raise ValueError(f"{where}: {kind} needs a spatial input (H, W, C) but {source} gives "
                         f"{shape}; allowed: a {kind} after input_shape=(H, W, C), a "
                         "convolution or a pooling layer")
    kh, kw, c_group, c_out = weight_shape
    c_in = c_group * groups
    h, w, c = shape
    if c != c_in:
        per_group = f" (C_in // groups = {c_group}, groups={groups})" if groups != 1 else ""
        allowed = (f"weight of shape (KH, KW, {c}, C_out)" if groups == 1 else
                   f"weight of shape (KH, KW, {c // groups}, C_out) with groups={groups}"
                   if c % groups == 0 else f"groups dividing {c}")
        raise ValueError(f"{where}: field 'weight' has C_in={c_in}{per_group} but {source} "
                         f"gives {c} channels {shape}; allowed: {allowed}")
    (sy, sx), (top, bottom, left, right) = (int_pair(stride, where, "stride", 1),
                                            int_pads(padding, where))
    for axis, size, kernel, pads in (("KH", h, kh, (top, bottom)), ("KW", w, kw, (left, right))):
        padded = size + sum(pads)
        if kernel > padded:
            raise ValueError(f"{where}: field 'weight' has {axis}={kernel} but {source} gives "
                             f"{shape}, {padded} wide on that axis with padding={padding}; "
                             f"allowed: {axis} <= {padded}")
    return (conv_output_size(h, kh, sy, (top, bottom)),
            conv_output_size(w, kw, sx, (left, right)), c_out)
