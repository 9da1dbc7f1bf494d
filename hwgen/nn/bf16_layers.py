"""The layers of a :class:`~hwgen.nn.Bf16Network`: bf16 multiplies, fp32 sums, bf16 outputs.

docs/arithmetic.md ("bfloat16"): a dense layer is :func:`~hwgen.nn.bf16.bf16_matmul` in the
tile order of ``rows``; a convolution is that per group on its patches in the ``(ky, kx, c)``
order of :func:`~hwgen.nn.patches.im2col` (the int8 :class:`~hwgen.nn.Conv2D`'s), +0.0 for
the padding; an average pool is the depthwise convolution whose weights are
``bf16(1/(kh*kw))``; an add is ``fl32(a + b)``. Each then applies its activation in fp32 and
rounds to bf16, unless it is a raw output (the fp32 accumulator). Max pooling and flatten
move bf16 values and are the integer network's :class:`~hwgen.nn.MaxPool2D` and
:class:`~hwgen.nn.Flatten`.

Values travel between layers as float32 arrays that hold bf16 values (exactly); the weights
are stored as ``ml_dtypes.bfloat16`` arrays and the biases and bounds as fp32.
"""

import dataclasses

import numpy as np

from .bf16 import activate, as_bf16, bf16_matmul, bfloat16, flush, round_to_bf16
from .patches import im2col

__all__ = ["Bf16Add", "Bf16AvgPool2D", "Bf16Conv2D", "Bf16Dense"]


@dataclasses.dataclass(frozen=True, eq=False)
class _Finish:
    """An activation, fp32 clamp bounds and the rounding to bf16 of a layer's fp32 result."""

    activation: str = "identity"
    act_min: float | None = None
    act_max: float | None = None

    def finish(self, acc):
        """Return ``bf16(bounds(activation(acc)))`` as float32 holding bf16 values."""
        return as_bf16(round_to_bf16(activate(acc, self.activation, self.act_min,
                                              self.act_max)))


@dataclasses.dataclass(frozen=True, eq=False)
class Bf16Dense(_Finish):
    """``y = bf16(f(acc))`` with ``acc`` the tile-ordered fp32 sum of ``x @ weight + bias``,
    or ``acc`` itself when ``raw``.

    Attributes
    ----------
    weight : numpy.ndarray of ml_dtypes.bfloat16, shape (K, N)
    bias : numpy.ndarray of float32, shape (N,)
    activation, act_min, act_max
        ``"identity"`` or ``"relu"``, then fp32 clamp bounds (``None``: unbounded).
    raw : bool
        Return the fp32 accumulator (no activation, no rounding): the scores of a last layer.
    """

    weight: np.ndarray = None
    bias: np.ndarray = None
    raw: bool = False

    def forward(self, x, rows):
        """Return the layer's output for rows ``x`` ``(M, K)`` of float32 bf16 values."""
        acc = bf16_matmul(x, self.weight, self.bias, rows)
        return acc if self.raw else self.finish(acc)


@dataclasses.dataclass(frozen=True, eq=False)
class Bf16Conv2D(_Finish):
    """A 2-D convolution on NHWC bf16 values: per group, a :class:`Bf16Dense` on each output
    pixel's patch of that group's channels, in ``(ky, kx, c)`` order.

    Attributes
    ----------
    weight : numpy.ndarray of ml_dtypes.bfloat16, shape (KH, KW, C_in // groups, C_out)
    bias : numpy.ndarray of float32, shape (C_out,)
    strides : (int, int)
    pads : (int, int, int, int)
        ``(top, bottom, left, right)`` of +0.0.
    groups : int
        Output channel ``n`` belongs to group ``n // (C_out / groups)``.
    activation, act_min, act_max, raw
        As for :class:`Bf16Dense`.
    """

    weight: np.ndarray = None
    bias: np.ndarray = None
    strides: tuple = (1, 1)
    pads: tuple = (0, 0, 0, 0)
    groups: int = 1
    raw: bool = False

    def forward(self, x, rows):
        """Return the layer's output for NHWC ``x`` ``(M, H, W, C_in)`` of float32 bf16
        values: ``(M, OH, OW, C_out)``."""
        kh, kw, cg, c_out = self.weight.shape
        g = self.groups
        patches = im2col(np.asarray(x, dtype=np.float32), (kh, kw), self.strides, self.pads)
        m, oh, ow, _ = patches.shape
        # [g, pixels, KH*KW*cg]: each group's channels of every patch, in (ky, kx, c) order,
        # and the weight as one (KH*KW*cg, C_out/g) matrix per group, as Conv2D computes.
        grouped = patches.reshape(m * oh * ow, kh * kw, g, cg).transpose(2, 0, 1, 3) \
            .reshape(g, m * oh * ow, kh * kw * cg)
        weight = self.weight.reshape(kh * kw, cg, g, c_out // g).transpose(2, 0, 1, 3) \
            .reshape(g, kh * kw * cg, c_out // g)
        acc = bf16_matmul(grouped, weight, self.bias.reshape(g, 1, c_out // g), rows)
        acc = acc.transpose(1, 0, 2).reshape(m, oh, ow, c_out)
        return acc if self.raw else self.finish(acc)


@dataclasses.dataclass(frozen=True, eq=False)
class Bf16AvgPool2D(_Finish):
    """Average pooling as the depthwise :class:`Bf16Conv2D` whose weights are all
    ``bf16(1/(kh*kw))``, bias +0.0, no padding; global pooling (``kernel_size=None``) is the
    window of the whole input, output ``(1, 1, C)``.

    Attributes
    ----------
    kernel_size : (int, int) or None
    strides : (int, int)
    activation, act_min, act_max
        As for :class:`Bf16Dense`.
    """

    kernel_size: tuple | None = None
    strides: tuple = (1, 1)

    def forward(self, x, rows):
        """Return the window averages of NHWC ``x`` of float32 bf16 values."""
        kh, kw = x.shape[1:3] if self.kernel_size is None else self.kernel_size
        c = x.shape[3]
        weight = np.full((kh, kw, 1, c), round_to_bf16(1.0 / (kh * kw)), dtype=bfloat16())
        conv = Bf16Conv2D(activation=self.activation, act_min=self.act_min,
                          act_max=self.act_max, weight=weight,
                          bias=np.zeros(c, dtype=np.float32), strides=self.strides, groups=c)
        return conv.forward(x, rows)


@dataclasses.dataclass(frozen=True, eq=False)
class Bf16Add(_Finish):
    """``y = bf16(f(fl32(a + b)))`` for two tensors of bf16 values of one shape.

    Rounding to bf16 is monotone, so applying the activation before it (as every layer does)
    gives the same bits as rounding first and clamping to the bounds rounded to bf16.
    """

    def forward(self, a, b):
        """Return the sum of float32 arrays ``a`` and ``b`` of bf16 values, activated."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self.finish(flush(np.asarray(a, np.float32) + np.asarray(b, np.float32)))
