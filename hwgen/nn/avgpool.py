"""Average pooling in integers: a depthwise convolution of ones, per docs/arithmetic.md.

``AvgPool2D(size, stride)`` is exactly the depthwise :class:`~hwgen.nn.Conv2D` with every
weight 1, bias 0, no padding and the pool's own per-channel ``mult``, ``shift`` and bounds
(``mult / 2**shift ≈ s_x / (s_y * kh * kw)``); :class:`GlobalAvgPool2D` is the window of the
whole input, output ``(M, 1, 1, C)``. Each pool's :meth:`as_conv` returns that convolution,
and its integer forward *is* that convolution's forward (the compiler lowers it the same way).
"""

import numpy as np

from ._ints import int_array, int_pair
from .conv import Conv2D
from .dense import bounds_repr, check_activation_fields, layer_bounds

__all__ = ["AvgPool2D", "GlobalAvgPool2D"]

# No leaky slope: a sum of ints scaled by one positive factor keeps its sign.
POOL_ACTIVATIONS = ("identity", "relu")


class _AveragePool:
    """What the two average pools share: per-channel ``mult``/``shift``, the activation and
    its bounds, the checks and the forward through :meth:`as_conv`."""

    kind = "AvgPool2D"

    def _init_requant(self, mult, shift, activation, act_min, act_max):
        self.mult = int_array(mult, self.kind, "mult", copy=True)
        self.shift = int_array(shift, self.kind, "shift", copy=True)
        self.activation = activation
        self.act_min = act_min
        self.act_max = act_max

    def _check_requant(self, where):
        for field in ("mult", "shift"):
            arr = int_array(getattr(self, field), where, field)
            if arr.ndim != 1 or arr.size < 1:
                raise ValueError(f"{where}: field {field!r} has shape {arr.shape}; allowed: "
                                 "(C,), one value per channel")
            setattr(self, field, arr)
        if self.shift.shape != self.mult.shape:
            raise ValueError(f"{where}: field 'shift' has shape {self.shift.shape}; allowed: "
                             f"{self.mult.shape}, the shape of 'mult'")
        check_activation_fields(self, where, POOL_ACTIVATIONS)

    @property
    def channels(self):
        """``C``, the number of channels (the length of ``mult``)."""
        return self.mult.shape[0]

    def bounds(self, out_bits):
        """Return the resolved activation bounds ``(lo, hi)``, as :meth:`Dense.bounds
        <hwgen.nn.Dense.bounds>` does."""
        return layer_bounds(self, out_bits, self.kind)

    def _conv(self, kernel, stride, channels, where):
        if channels != self.channels:
            raise ValueError(f"{where}: field 'mult' has {self.channels} channels but the input "
                             f"has {channels}; allowed: mult and shift of shape ({channels},)")
        kh, kw = kernel
        return Conv2D(np.ones((kh, kw, 1, channels), dtype=np.int64),
                      np.zeros(channels, dtype=np.int64), self.mult, self.shift, stride=stride,
                      padding=0, groups=channels, activation=self.activation,
                      act_min=self.act_min, act_max=self.act_max)

    def _output_shape(self, shape, where, source):
        if len(shape) != 3:
            raise ValueError(f"{where}: {self.kind} needs a spatial input (H, W, C) but "
                             f"{source} gives {shape}; allowed: a {self.kind} after "
                             "input_shape=(H, W, C), a convolution or a pooling layer")
        if shape[2] != self.channels:
            raise ValueError(f"{where}: field 'mult' has {self.channels} channels but {source} "
                             f"gives {shape}; allowed: mult and shift of shape ({shape[2]},)")
        return self._window_shape(shape, where, source)

    def output_shape(self, input_shape):
        """Return the per-sample output shape ``(OH, OW, C)`` for an input ``(H, W, C)``.

        Raises
        ------
        ValueError
            If the input is not spatial, has another channel count than ``mult``, or the
            window is larger than it.
        """
        return self._output_shape(tuple(input_shape), self.kind, "the input")

    def forward(self, x, in_bits=8, acc_bits=32, *, where=None):
        """Return the pool's output for NHWC ``x`` of signed ``in_bits`` ints: the forward of
        :meth:`as_conv` for ``x``'s shape, ``(M, OH, OW, C)`` of int64."""
        x = np.asarray(x, dtype=np.int64)
        return self._as_conv_for(x.shape[1:]).forward(x, in_bits, acc_bits,
                                                      where=where or self.kind)


class AvgPool2D(_AveragePool):
    """Average pooling over ``kh x kw`` windows, no padding, output size rounded down.

    ``y[m, oy, ox, c]`` is channel ``c``'s window sum ``sum_{ky, kx} x[m, oy*sy + ky,
    ox*sx + kx, c]`` requantized with ``mult[c]``, ``shift[c]``, saturated and clamped to the
    bounds: exactly :meth:`as_conv`'s depthwise convolution of ones (section 3.2).
    ``OH = (H - kh) // sy + 1``, ``OW = (W - kw) // sx + 1``.

    Parameters
    ----------
    size : int or (int, int)
        ``(kh, kw)``, each ``>= 1``, or one value for both.
    stride : int or (int, int), optional
        ``(sy, sx)``, each ``>= 1``; ``size`` by default (windows that do not overlap).
    mult, shift : array_like of int, shape (C,)
        Per channel: unsigned multiplier and right shift, as for :class:`~hwgen.nn.Dense`
        (``mult / 2**shift ≈ s_x / (s_y * kh * kw)``).
    activation : {"identity", "relu"}
    act_min, act_max : int, optional
        As for :class:`~hwgen.nn.Dense`.

    Attributes
    ----------
    size, stride : int or tuple of int
        As given (``stride`` is ``size`` when not given); see :attr:`kernel_size`,
        :attr:`strides`.
    mult, shift : numpy.ndarray of int64
    activation : str
    act_min, act_max : int or None

    Raises
    ------
    ValueError
        Naming the field and what is allowed: a size or stride not an integer ``>= 1`` or a
        pair of them, ``mult`` or ``shift`` not integer of one shape ``(C,)``, an unknown
        activation or a bound that is not an integer.
    """

    kind = "AvgPool2D"

    def __init__(self, size, stride=None, *, mult, shift, activation="identity", act_min=None,
                 act_max=None):
        self.size = size
        self.stride = size if stride is None else stride
        self._init_requant(mult, shift, activation, act_min, act_max)
        self.check(self.kind)

    @property
    def kernel_size(self):
        """``(kh, kw)``."""
        return int_pair(self.size, self.kind, "size", 1)

    @property
    def strides(self):
        """``(sy, sx)``."""
        return int_pair(self.stride, self.kind, "stride", 1)

    def __repr__(self):
        return (f"AvgPool2D(size={self.size}, stride={self.stride}, channels={self.channels}, "
                f"activation={self.activation!r}{bounds_repr(self)})")

    def check(self, where):
        """Check the width-independent properties; ``where`` prefixes the error messages.

        Raises
        ------
        ValueError
            As described for the class.
        """
        for field, names in (("size", ("kh", "kw")), ("stride", ("sy", "sx"))):
            value = getattr(self, field)
            int_pair(value, where, field, 1, names)
            setattr(self, field, int(value) if np.ndim(value) == 0 else
                    tuple(int(v) for v in value))
        self._check_requant(where)

    def _window_shape(self, shape, where, source):
        (kh, kw), (sy, sx) = self.kernel_size, self.strides
        h, w, c = shape
        if kh > h or kw > w:
            raise ValueError(f"{where}: field 'size' is {self.size} but {source} gives "
                             f"{shape}; allowed: kh <= {h} and kw <= {w} (no padding)")
        return ((h - kh) // sy + 1, (w - kw) // sx + 1, c)

    def as_conv(self, channels):
        """Return the exactly equivalent depthwise :class:`~hwgen.nn.Conv2D`: weight ones
        ``[kh, kw, 1, channels]``, bias 0, ``groups=channels``, no padding, this pool's stride,
        ``mult``, ``shift``, activation and bounds.

        Raises
        ------
        ValueError
            If ``channels`` is not the length of ``mult``.
        """
        return self._conv(self.kernel_size, self.stride, channels, self.kind)

    def _as_conv_for(self, shape):
        return self.as_conv(shape[-1])


class GlobalAvgPool2D(_AveragePool):
    """Global average pooling: the window is the whole ``H x W`` input, output ``(M, 1, 1, C)``.

    Exactly :meth:`as_conv`'s depthwise convolution of ones (section 3.2). Parameters,
    attributes and errors as for :class:`AvgPool2D`, without ``size`` and ``stride``.
    """

    kind = "GlobalAvgPool2D"

    def __init__(self, *, mult, shift, activation="identity", act_min=None, act_max=None):
        self._init_requant(mult, shift, activation, act_min, act_max)
        self.check(self.kind)

    def __repr__(self):
        return (f"GlobalAvgPool2D(channels={self.channels}, "
                f"activation={self.activation!r}{bounds_repr(self)})")

    def check(self, where):
        """Check the width-independent properties; ``where`` prefixes the error messages.

        Raises
        ------
        ValueError
            As described for :class:`AvgPool2D`.
        """
        self._check_requant(where)

    def _window_shape(self, shape, where, source):
        return (1, 1, shape[2])

    def as_conv(self, input_shape):
        """Return the exactly equivalent depthwise :class:`~hwgen.nn.Conv2D` for an input
        ``(H, W, C)``: weight ones ``[H, W, 1, C]``, bias 0, ``groups=C``, stride 1, no padding,
        this pool's ``mult``, ``shift``, activation and bounds.

        Raises
        ------
        ValueError
            If ``input_shape`` is not ``(H, W, C)`` with ``C`` the length of ``mult``.
        """
        shape = tuple(input_shape)
        self._output_shape(shape, self.kind, "input_shape")
        return self._conv(shape[:2], 1, shape[2], self.kind)

    def _as_conv_for(self, shape):
        return self.as_conv(shape)
