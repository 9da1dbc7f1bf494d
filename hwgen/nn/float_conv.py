"""The float 2-D convolution of a :class:`~hwgen.nn.CNN`, with its gradient.

docs/arithmetic.md's convolution in floats: kernel ``KH x KW``, stride ``(sy, sx)``, zero
padding ``(top, bottom, left, right)`` and ``groups g``; output channel ``n`` belongs to group
``j = n // (C_out / g)`` and sees that group's input channels ``j * C_in / g ...``. A group is a
dense layer on its patches, so the forward pass is one batched matrix product over the groups
and the backward pass its transpose.
"""

import numpy as np

from ._floats import float_bias, float_param
from ._ints import int_pads, int_pair, int_scalar
from .float_activation import Activated
from .float_geometry import check_window
from .patches import col2im, im2col

__all__ = ["FloatConv2D"]


class FloatConv2D(Activated):
    """A float 2-D convolution on NHWC input, followed by an activation (a ReLU by default).

    ``y[m, oy, ox, n] = f(sum_{ky, kx, c} xpad[m, oy*sy + ky, ox*sx + kx, j*C_in/g + c] *
    weight[ky, kx, c, n] + bias[n])`` with ``j = n // (C_out / g)``, ``xpad`` the input with
    the zero padding, and ``f`` the activation of :class:`~hwgen.nn.float_activation.Activated`.

    Parameters
    ----------
    weight : array_like of float, shape (KH, KW, C_in // groups, C_out)
    bias : array_like of float, shape (C_out,), optional
        Zeros by default.
    stride : int or (int, int)
        ``s`` or ``(sy, sx)``, each ``>= 1``.
    padding : int or (int, int) or (int, int, int, int)
        ``p``, ``(ph, pw)`` or ``(top, bottom, left, right)``, each ``>= 0``.
    groups : int
        ``>= 1``, dividing ``C_out`` (``C_in = weight.shape[2] * groups``).
    relu : bool, optional
        The older spelling: ``activation="relu"`` (the default) or ``"identity"``.
    activation : {"identity", "relu", "leaky_relu"}, optional
    alpha : float
        Leaky ReLU's negative slope.
    act_min, act_max : float, optional
        Clamp bounds after the activation (ReLU6 is ``relu`` with ``act_max=6``).

    Attributes
    ----------
    weight, bias : numpy.ndarray of float64
        The parameters, copied; training updates them in place.
    stride, padding, groups
        As given.
    strides : (int, int)
    pads : (int, int, int, int)
    activation, alpha, act_min, act_max, relu
        See :class:`~hwgen.nn.float_activation.Activated`.

    Raises
    ------
    ValueError
        If a shape, a geometry field or an activation field is not allowed (naming it).
    """

    def __init__(self, weight, bias=None, *, stride=1, padding=0, groups=1, relu=None,
                 activation=None, alpha=0.01, act_min=None, act_max=None):
        self.weight = float_param(weight, "FloatConv2D", "weight", 4,
                                  "(KH, KW, C_in, C_out), C_in per group")
        self.bias = float_bias(bias, self.weight.shape[3], "FloatConv2D")
        self.stride, self.padding = stride, padding
        self.strides = int_pair(stride, "FloatConv2D", "stride", 1)
        self.pads = int_pads(padding, "FloatConv2D")
        self.groups = int_scalar(groups, "FloatConv2D", "groups", 1)
        if self.weight.shape[3] % self.groups:
            raise ValueError(f"FloatConv2D: groups={groups} does not divide C_out="
                             f"{self.weight.shape[3]}; allowed: a divisor of C_out")
        self._set_activation("FloatConv2D", relu, activation, alpha, (act_min, act_max))

    @classmethod
    def random(cls, kernel_size, in_channels, out_channels, *, stride=1, padding=0, groups=1,
               relu=True, rng=None):
        """Return a layer with He-normal weights (``std = sqrt(2 / (KH*KW*C_in/groups))``),
        zero bias.

        ``kernel_size`` is ``KH = KW`` or ``(KH, KW)``; ``rng`` a
        :class:`numpy.random.Generator` or a seed.
        """
        kh, kw = (kernel_size, kernel_size) if np.ndim(kernel_size) == 0 else kernel_size
        rng = np.random.default_rng(rng)
        fan_in = kh * kw * in_channels // groups
        weight = rng.normal(0.0, np.sqrt(2.0 / fan_in),
                            size=(kh, kw, in_channels // groups, out_channels))
        return cls(weight, stride=stride, padding=padding, groups=groups, relu=relu)

    @property
    def params(self):
        """``[weight, bias]``, the arrays training updates."""
        return [self.weight, self.bias]

    @property
    def kernel_size(self):
        """``(KH, KW)``."""
        return self.weight.shape[0], self.weight.shape[1]

    @property
    def in_channels(self):
        """``C_in = weight.shape[2] * groups``."""
        return self.weight.shape[2] * self.groups

    def __repr__(self):
        kh, kw, _, c_out = self.weight.shape
        return (f"FloatConv2D({kh}x{kw}, {self.in_channels} -> {c_out}, stride={self.stride}, "
                f"padding={self.padding}, "
                + (f"groups={self.groups}, " if self.groups != 1 else "")
                + f"{self._activation_repr()})")

    def _output_shape(self, shape, where, source):
        if len(shape) == 3 and shape[2] != self.in_channels:
            raise ValueError(f"{where}: field 'weight' has C_in={self.in_channels} but {source} "
                             f"gives {shape[2]} channels {shape}; allowed: C_in = "
                             f"weight.shape[2] * groups (groups={self.groups}) = {shape[2]}")
        oh, ow = check_window(shape, self.kernel_size, self.strides, self.pads, where=where,
                              source=source, kind="FloatConv2D", field="weight")
        return oh, ow, self.weight.shape[3]

    def forward(self, x):
        """Return the convolution of NHWC ``x`` ``(M, H, W, C_in)``, then the activation."""
        return self.forward_cached(x)[0]

    def _grouped(self):
        """The weight as ``(g, KH*KW*C_in/g, C_out/g)``, one matrix per group."""
        kh, kw, cg, c_out = self.weight.shape
        g = self.groups
        return self.weight.reshape(kh * kw, cg, g, c_out // g).transpose(2, 0, 1, 3) \
            .reshape(g, kh * kw * cg, c_out // g)

    def forward_cached(self, x):
        """Return ``(y, cache)``: the output and what :meth:`backward` needs."""
        c_out = self.weight.shape[3]
        patches = im2col(x, self.kernel_size, self.strides, self.pads)
        m, oh, ow, k = patches.shape
        rows = patches.reshape(m * oh * ow, k)
        a = (self._group_rows(rows) @ self._grouped()).transpose(1, 0, 2).reshape(-1, c_out)
        y = self.activate(a + self.bias)
        # The cache: the input's shape, the patch rows and the output rows (after f).
        return y.reshape(m, oh, ow, c_out), (x.shape, rows, y)

    def _group_rows(self, rows):
        """Patch rows ``(n, KH*KW*C_in)`` as ``(g, n, KH*KW*C_in/g)``, one matrix per group."""
        kh, kw, cg, _ = self.weight.shape
        return rows.reshape(-1, kh * kw, self.groups, cg).transpose(2, 0, 1, 3) \
            .reshape(self.groups, -1, kh * kw * cg)

    def backward(self, cache, grad, need_input=True):
        """Return ``(grad_x, [grad_weight, grad_bias])`` for the output gradient ``grad``."""
        shape, rows, y = cache
        kh, kw, cg, c_out = self.weight.shape
        g = self.groups
        delta = grad.reshape(y.shape) * self.derivative(y)
        per_group = delta.reshape(-1, g, c_out // g).transpose(1, 0, 2)
        grad_w = (self._group_rows(rows).transpose(0, 2, 1) @ per_group) \
            .reshape(g, kh * kw, cg, c_out // g)
        grads = [grad_w.transpose(1, 2, 0, 3).reshape(self.weight.shape), delta.sum(axis=0)]
        if not need_input:
            return None, grads
        m, oh, ow = grad.shape[:3]
        grad_rows = (per_group @ self._grouped().transpose(0, 2, 1)) \
            .reshape(g, m, oh, ow, kh * kw, cg).transpose(1, 2, 3, 4, 0, 5) \
            .reshape(m, oh, ow, kh * kw * g * cg)
        return col2im(grad_rows, shape, self.kernel_size, self.strides, self.pads), grads
