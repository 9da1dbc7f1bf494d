"""The integer residual add of two tensors, per docs/arithmetic.md.

``Add`` reads two tensors ``a`` and ``b`` of one shape (signed ``in_bits``, the last axis the
channel) and computes, per channel ``c``, ``p = a * mult_a[c] + b * mult_b[c]`` exactly, then
the rounding shift of every requantizing layer (``r = (p + (1 << (shift[c] - 1))) >>
shift[c]`` when ``shift[c] > 0``), saturation to signed ``in_bits`` and the activation bounds.
``mult_a / 2**shift ≈ s_a / s_y`` and ``mult_b / 2**shift ≈ s_b / s_y`` bring the two inputs'
scales onto the output's, so the one shift serves both.
"""

import numpy as np

from ._ints import INT64_MAX, int_array, max_abs, to_object
from .dense import bounds_repr, check_activation_fields, layer_bounds
from .requantization import requantize

__all__ = ["Add"]

# No leaky slope: the contract gives an Add no negative multiplier.
ADD_ACTIVATIONS = ("identity", "relu")
# The per-channel fields, in the order of the constructor.
CHANNEL_FIELDS = ("mult_a", "mult_b", "shift")


class Add:
    """The sum of two tensors of one shape, each scaled per channel, requantized and clamped.

    ``y[..., c] = clamp(round(p / 2**shift[c]))`` with ``p = a[..., c] * mult_a[c] +
    b[..., c] * mult_b[c]`` (exact; the rounding is half towards +infinity, ``>>`` being the
    arithmetic shift), saturated to the network's signed ``in_bits``, then clamped to
    :meth:`bounds`. Inputs are NHWC images ``(M, H, W, C)`` or rows ``(M, C)``: the channel is
    the last axis. A node of an Add names its two inputs, ``a`` first (see
    :class:`~hwgen.nn.Node`).

    The constructor checks dtypes, shapes and names; the value ranges depend on the widths and
    are checked by :class:`~hwgen.nn.QuantizedNetwork`, which knows them (``mult_a`` and
    ``mult_b`` in ``[0, 2**mult_bits)``, ``shift`` in ``0 .. acc_bits + mult_bits - 1``).

    Parameters
    ----------
    mult_a, mult_b : int or array_like of int, shape (C,)
        Unsigned multipliers of the first and the second input, per channel; a single integer
        is every channel's.
    shift : int or array_like of int, shape (C,)
        Right shift per channel (one for both inputs), or a single integer for all.
    activation : {"identity", "relu"}
        The default bounds (``relu``: ``act_min = 0``).
    act_min, act_max : int, optional
        Activation bounds inside the saturation range, see :meth:`bounds`.

    Attributes
    ----------
    mult_a, mult_b, shift : numpy.ndarray of int64
        As given (copied): shape ``()`` for a single integer, else ``(C,)``; see
        :meth:`per_channel` for the arrays of a channel count.
    activation : str
    act_min, act_max : int or None
        As given.

    Raises
    ------
    ValueError
        Naming the field and what is allowed: a non-integer dtype, a field that is neither a
        single integer nor one value per channel ``(C,)`` with ``C >= 1``, per-channel fields
        of different lengths, an unknown ``activation`` or a bound that is not an integer.
    """

    def __init__(self, *, mult_a, mult_b, shift, activation="identity", act_min=None,
                 act_max=None):
        self.mult_a = int_array(mult_a, "Add", "mult_a", copy=True)
        self.mult_b = int_array(mult_b, "Add", "mult_b", copy=True)
        self.shift = int_array(shift, "Add", "shift", copy=True)
        self.activation = activation
        self.act_min = act_min
        self.act_max = act_max
        self.check("Add")

    @property
    def channels(self):
        """``C`` of the per-channel fields, or ``None`` when all three are single integers."""
        lengths = {getattr(self, f).shape[0] for f in CHANNEL_FIELDS
                   if getattr(self, f).ndim == 1}
        return lengths.pop() if lengths else None

    def __repr__(self):
        return (f"Add(channels={self.channels}, activation={self.activation!r}"
                f"{bounds_repr(self)})")

    def check(self, where):
        """Check the width-independent properties; ``where`` prefixes the error messages.

        Raises
        ------
        ValueError
            As described for the class.
        """
        for field in CHANNEL_FIELDS:
            arr = int_array(getattr(self, field), where, field)
            if arr.ndim > 1 or (arr.ndim == 1 and arr.size < 1):
                raise ValueError(f"{where}: field {field!r} has shape {arr.shape}; allowed: "
                                 "a single integer, or (C,) with C >= 1, one value per channel")
            setattr(self, field, arr)
        lengths = {f: getattr(self, f).shape for f in CHANNEL_FIELDS
                   if getattr(self, f).ndim == 1}
        if len(set(lengths.values())) > 1:
            (first, shape), *others = lengths.items()
            field, other = next((f, s) for f, s in others if s != shape)
            raise ValueError(f"{where}: field {field!r} has shape {other}; allowed: {shape}, "
                             f"the shape of {first!r} (one value per channel), or a single "
                             "integer")
        check_activation_fields(self, where, ADD_ACTIVATIONS)

    def bounds(self, out_bits):
        """Return the resolved activation bounds ``(lo, hi)``, as :meth:`Dense.bounds
        <hwgen.nn.Dense.bounds>` does."""
        return layer_bounds(self, out_bits, "Add")

    def per_channel(self, channels):
        """Return ``(mult_a, mult_b, shift)`` as int64 arrays of shape ``(channels,)``.

        Raises
        ------
        ValueError
            If a per-channel field has another length than ``channels``.
        """
        self._check_channels(channels, "Add", "the input")
        return tuple(np.broadcast_to(getattr(self, f), (channels,)).copy()
                     for f in CHANNEL_FIELDS)

    def _check_channels(self, channels, where, source):
        if self.channels not in (None, channels):
            field = next(f for f in CHANNEL_FIELDS if getattr(self, f).ndim == 1)
            raise ValueError(f"{where}: field {field!r} has {self.channels} channels but "
                             f"{source} has {channels}; allowed: ({channels},), or a single "
                             "integer")

    def output_shape(self, a_shape, b_shape):
        """Return the per-sample output shape: that of both inputs, ``(H, W, C)`` or ``(C,)``.

        Raises
        ------
        ValueError
            If the shapes differ or their channel count is not that of the per-channel fields.
        """
        return self._output_shapes((tuple(a_shape), tuple(b_shape)), "Add",
                                   ("input a", "input b"))

    def _output_shapes(self, shapes, where, sources):
        """Check both input shapes; ``sources`` names the tensors that give them."""
        (a, b), (source_a, source_b) = shapes, sources
        if a != b:
            raise ValueError(f"{where}: an Add needs two inputs of one shape but {source_a} "
                             f"gives {a} and {source_b} gives {b}; allowed: equal shapes")
        self._check_channels(a[-1], where, f"{source_a} {a}")
        return a

    def forward(self, a, b, in_bits=8, acc_bits=32, *, where="Add"):
        """Return ``clamp(requantize(a * mult_a + b * mult_b))`` for two inputs of one shape.

        ``a`` and ``b`` are signed ``in_bits`` ints ``(M, ..., C)``; the result is int64 of
        the same shape. ``acc_bits`` is accepted for the network's uniform call (the sum is
        exact at any width).

        Raises
        ------
        ValueError
            If ``a`` is not at least 2-D, the shapes differ, the channels do not match the
            fields, or a bound is outside signed ``in_bits`` (naming ``where``).
        """
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        if a.ndim < 2:
            raise ValueError(f"{where}: input a has shape {a.shape}; allowed: (M, C) rows or "
                             "(M, H, W, C) images, the channel last")
        self._output_shapes((a.shape, b.shape), where, ("input a", "input b"))
        mult_a, mult_b, shift = self.per_channel(a.shape[-1])
        worst = max_abs(a) * max_abs(mult_a) + max_abs(b) * max_abs(mult_b)
        if worst > INT64_MAX:  # exact in Python integers
            a, b, mult_a, mult_b = (to_object(v) for v in (a, b, mult_a, mult_b))
        act_min, act_max = layer_bounds(self, in_bits, where)
        return requantize(a * mult_a + b * mult_b, np.ones_like(shift), shift, in_bits,
                          act_min=act_min, act_max=act_max)
