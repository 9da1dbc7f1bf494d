"""Each kind of float layer in a training on the devices: its integer layer for the forward
pass, and its backward pass with the matrix products on the devices.

:func:`kind_of` dispatches on the layer's type (:data:`KINDS`):

- :class:`~hwgen.nn.FloatDense`: quantized as :func:`hwgen.nn.quantize` does it (weights per
  output channel, or per tensor for a raw last layer; bias at the accumulator's scale;
  ``mult / 2**shift`` from the activation scales). Backward: the ReLU mask from the read-out,
  then ``dW = Xᵀ · dY`` and ``dX = dY · Wᵀ`` on the devices, operands quantized per tensor;
- :class:`~hwgen.nn.FloatConv2D`: the same on the patch matrices (im2col of the read-out
  input on the host, :func:`hwgen.nn.patches.im2col`): ``dW = patchesᵀ · dY``,
  ``dpatches = dY · W_matᵀ`` folded back with :func:`~hwgen.nn.patches.col2im` (additions);
- :class:`~hwgen.nn.MaxPool2D`, :class:`~hwgen.nn.Flatten`: no numbers, no products; the
  gradient is routed to each window's maximum or reshaped, on the host.

A :class:`Step` carries what the backward pass of a layer needs from the forward pass: the
integer input and output read from the device and their scales.
"""

import dataclasses

import numpy as np

from ..nn import (
    Conv2D,
    Dense,
    Flatten,
    FloatConv2D,
    FloatDense,
    MaxPool2D,
    QuantizedNetwork,
    requant_params,
)
from ..nn.float_layers import backward as float_backward
from ..nn.patches import col2im, im2col
from .operands import qmax, quantize_tensor

__all__ = ["KINDS", "Step", "kind_of", "quantize_model"]


@dataclasses.dataclass
class Step:
    """What one layer's backward pass needs of the forward pass.

    Attributes
    ----------
    x, y : numpy.ndarray of int64
        The layer's input and output as the device computed them (read out).
    x_scale : float
        Real value of one step of ``x``.
    widths : AcceleratorConfig
        The configuration (``in_bits``, ``w_bits``, ``acc_bits``, ``mult_bits``).
    """

    x: np.ndarray
    y: np.ndarray
    x_scale: float
    widths: object


def _weight_scales(matrix, raw, w_bits):
    top = qmax(w_bits)
    if raw:  # raw accumulators compare across channels only with one scale (as quantize)
        peak = float(np.max(np.abs(matrix)))
        return np.full(matrix.shape[1], peak / top if peak > 0 else 1.0)
    peaks = np.max(np.abs(matrix), axis=0)
    return np.where(peaks > 0, peaks / top, 1.0)


def _integer_params(layer, s_x, s_y, raw, widths):
    """Return ``(w_q, b_q, mult, shift, s_w)`` of a dense or convolution layer."""
    matrix = layer.weight.reshape(-1, layer.weight.shape[-1])
    s_w = _weight_scales(matrix, raw, widths.w_bits)
    w_q = np.rint(layer.weight / s_w).astype(np.int64)
    b_q = np.rint(layer.bias / (s_x * s_w))
    # Keep the compiler's worst-case accumulator proof true: a bias the weights leave no room
    # for (a tiny weight scale) is clipped, not refused, so that the training goes on.
    room = (1 << (widths.acc_bits - 1)) - 1 \
        - (1 << (widths.in_bits - 1)) * np.abs(w_q.reshape(matrix.shape)).sum(axis=0)
    b_q = np.clip(b_q, -room, room).astype(np.int64)
    mult, shift = requant_params(s_x * s_w / s_y, widths.mult_bits,
                                 widths.acc_bits + widths.mult_bits - 1)
    return w_q, b_q, mult, shift, s_w


def _mask(delta, layer, y):
    # The ReLU passes the gradient where its output (as the device computed it) is positive.
    return delta * (y > 0) if layer.relu else delta


class DenseKind:
    """A :class:`~hwgen.nn.FloatDense` trained on the devices."""

    params = True

    @staticmethod
    def quantize(layer, s_x, s_y, raw, widths):
        """Return ``(Dense, s_w)``: the integer layer of ``layer`` for input scale ``s_x``,
        output scale ``s_y``, raw or requantized."""
        w_q, b_q, mult, shift, s_w = _integer_params(layer, s_x, s_y, raw, widths)
        kwargs = {"activation": "relu" if layer.relu and not raw else "identity",
                  "output": "raw" if raw else "requant"}
        return Dense(w_q, b_q, mult, shift, **kwargs), s_w

    @staticmethod
    def macs_per_sample(layer, in_shape, out_shape):
        """Multiply-accumulates of one sample's forward pass."""
        k, n = layer.weight.shape
        return k * n

    @staticmethod
    def backward(layer, step, delta, products, need_input):
        """Return ``(delta_x, [dW, db])`` for the gradient ``delta`` of the layer's output.

        ``dW = x_scale * s_dy * (xᵀ · dy_q)`` and ``dX = s_dy * s_w * (dy_q · w_qᵀ)``, the
        products on the devices; the bias gradient is a column sum on the host.
        """
        widths = step.widths
        delta = _mask(delta, layer, step.y)
        dy_w, s_dy_w = quantize_tensor(delta, widths.w_bits)
        grad_w = step.x_scale * s_dy_w * products.transposed(step.x, dy_w).astype(np.float64)
        grads = [grad_w, delta.sum(axis=0)]
        if not need_input:
            return None, grads
        dy_x, s_dy_x = quantize_tensor(delta, widths.in_bits)
        w_q, s_w = quantize_tensor(layer.weight, widths.w_bits)
        return s_dy_x * s_w * products.rows(dy_x, w_q.T).astype(np.float64), grads


class ConvKind:
    """A :class:`~hwgen.nn.FloatConv2D` trained on the devices, as a dense layer on patches."""

    params = True

    @staticmethod
    def quantize(layer, s_x, s_y, raw, widths):
        """Return ``(Conv2D, s_w)``, as :meth:`DenseKind.quantize`."""
        w_q, b_q, mult, shift, s_w = _integer_params(layer, s_x, s_y, raw, widths)
        kwargs = {"activation": "relu" if layer.relu and not raw else "identity",
                  "output": "raw" if raw else "requant"}
        return Conv2D(w_q, b_q, mult, shift, stride=layer.stride, padding=layer.padding,
                      **kwargs), s_w

    @staticmethod
    def macs_per_sample(layer, in_shape, out_shape):
        """Multiply-accumulates of one sample's forward pass: pixels x patch x channels."""
        kh, kw, c_in, c_out = layer.weight.shape
        return out_shape[0] * out_shape[1] * kh * kw * c_in * c_out

    @staticmethod
    def backward(layer, step, delta, products, need_input):
        """Return ``(delta_x, [dW, db])``: :meth:`DenseKind.backward` on the patch rows."""
        widths = step.widths
        delta = _mask(delta, layer, step.y)
        patches = im2col(step.x, layer.kernel_size, layer.stride, layer.padding)
        rows = patches.reshape(-1, patches.shape[-1])
        d_rows = delta.reshape(-1, delta.shape[-1])
        dy_w, s_dy_w = quantize_tensor(d_rows, widths.w_bits)
        grad_w = step.x_scale * s_dy_w * products.transposed(rows, dy_w).astype(np.float64)
        grads = [grad_w.reshape(layer.weight.shape), d_rows.sum(axis=0)]
        if not need_input:
            return None, grads
        dy_x, s_dy_x = quantize_tensor(d_rows, widths.in_bits)
        w_q, s_w = quantize_tensor(layer.weight.reshape(rows.shape[1], -1), widths.w_bits)
        d_patches = s_dy_x * s_w * products.rows(dy_x, w_q.T).astype(np.float64)
        return col2im(d_patches.reshape(patches.shape), step.x.shape, layer.kernel_size,
                      layer.stride, layer.padding), grads


class PoolKind:
    """A :class:`~hwgen.nn.MaxPool2D`: the same layer in integers; the gradient goes to each
    window's maximum (the first on ties), on the host."""

    params = False

    @staticmethod
    def quantize(layer, s_x, s_y, raw, widths):
        return MaxPool2D(layer.size, layer.stride), None

    @staticmethod
    def macs_per_sample(layer, in_shape, out_shape):
        return 0

    @staticmethod
    def backward(layer, step, delta, products, need_input):
        # The maxima of the integers are those of the floats they stand for.
        return float_backward(layer, step.x, delta, need_input)[0], []


class FlattenKind:
    """A :class:`~hwgen.nn.Flatten`: a reshape both ways."""

    params = False

    @staticmethod
    def quantize(layer, s_x, s_y, raw, widths):
        return Flatten(), None

    @staticmethod
    def macs_per_sample(layer, in_shape, out_shape):
        return 0

    @staticmethod
    def backward(layer, step, delta, products, need_input):
        return (delta.reshape(step.x.shape) if need_input else None), []


#: ``{float layer type: kind}``; a layer of another type cannot be trained on the devices.
KINDS = {FloatDense: DenseKind, FloatConv2D: ConvKind, MaxPool2D: PoolKind, Flatten: FlattenKind}


def _check_plain(layer, index):
    """Refuse issue 31's float fields, which the training on the devices does not run yet."""
    if not isinstance(layer, FloatDense | FloatConv2D):
        return
    fields = {"activation": layer.activation in ("relu", "identity"),
              "act_min/act_max": not layer.bounded,
              "groups": getattr(layer, "groups", 1) == 1,
              "stride/padding": isinstance(layer, FloatDense)
              or (isinstance(layer.stride, int) and isinstance(layer.padding, int))}
    bad = [field for field, ok in fields.items() if not ok]
    if bad:
        raise TypeError(f"layer {index} ({layer!r}) sets {', '.join(bad)}; allowed in a training "
                        "on the devices: a ReLU or none, no bounds, groups=1, one int stride "
                        "and padding")


def kind_of(layer, index):
    """Return the kind of ``layer`` (layer ``index`` of the model).

    Raises
    ------
    TypeError
        If its type has no kind, naming the allowed ones.
    """
    for kind_type, kind in KINDS.items():
        if isinstance(layer, kind_type):
            _check_plain(layer, index)
            return kind
    allowed = ", ".join(t.__name__ for t in KINDS)
    raise TypeError(f"layer {index} is a {type(layer).__name__}; allowed in a training on the "
                    f"devices: {allowed}")


def quantize_model(layers, scales, config, input_shape):
    """Return the :class:`~hwgen.nn.QuantizedNetwork` of float ``layers`` at ``scales``.

    Each layer is quantized by its kind (the last one raw, its logits' scale one per class in
    ``output_scale``), with the widths of ``config``.

    Parameters
    ----------
    layers : sequence of float layers
    scales : ActivationScales
    config : AcceleratorConfig
    input_shape : tuple of int or None
        One sample's shape (None for rows whose width the first dense layer gives).
    """
    quantized, s_w = [], None
    last = len(layers) - 1
    for index, layer in enumerate(layers):
        integer, s_w = kind_of(layer, index).quantize(
            layer, scales.input_of(index), scales.outputs[index], index == last, config)
        quantized.append(integer)
    return QuantizedNetwork(quantized, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=config.acc_bits, mult_bits=config.mult_bits,
                            input_scale=scales.input, output_scale=scales.input_of(last) * s_w,
                            input_shape=input_shape)
