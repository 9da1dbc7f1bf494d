"""Post-training quantization of a float :class:`~hwgen.nn.MLP` or :class:`~hwgen.nn.CNN`.

Symmetric, no zero points, per docs/arithmetic.md: per-channel weight scales,
per-tensor activation scales measured on calibration data, a bias at the accumulator's scale and
a per-channel ``mult / 2**shift`` that maps the accumulator's scale onto the output's. Max
pooling keeps its input's scale (the maximum of values that share a scale) and a flatten is free.

Section 3.2's layers: float clamp bounds become integer ``act_min``/``act_max`` at the output's
scale (``round(6 / s_y)`` for ReLU6), a leaky ReLU's slope a second multiplier ``mult_neg`` with
the same shift (``mult_neg / 2**shift ≈ alpha * s_x * s_w / s_y``), and average pooling its own
``mult / 2**shift ≈ s_x / (s_y * kh * kw)``. BatchNorm was folded by the importer before, so
calibration sees the folded layers.

Graphs: every named tensor gets its own scale, and a residual add's two multipliers bring its
inputs' scales onto its output's (``mult_a / 2**shift ≈ s_a / s_y``, ``mult_b / 2**shift ≈
s_b / s_y``, one shift). The quantized network has the float graph's node names.
"""

import math

import numpy as np

from .add import Add
from .avgpool import AvgPool2D, GlobalAvgPool2D
from .cnn import CNN
from .conv import Conv2D
from .dense import Dense
from .flatten import Flatten
from .float_add import FloatAdd
from .float_layers import FloatConv2D, FloatDense
from .float_pool import FloatAvgPool2D, FloatGlobalAvgPool2D
from .graph import INPUT, Node, chain_name, where
from .maxpool import MaxPool2D
from .mlp import MLP
from .quantized_network import QuantizedNetwork
from .requantization import requant_params

__all__ = ["as_cnn", "quantize"]


def _scale(max_abs, qmax):
    # A tensor that is all zeros on the calibration data gets scale 1: any scale represents it.
    return float(max_abs) / qmax if max_abs > 0 else 1.0


def as_cnn(model, caller="quantize"):
    """Return ``model`` as a :class:`CNN` (an MLP becomes a chain of :class:`FloatDense`);
    ``caller`` names the function in the error for anything else."""
    if isinstance(model, CNN):
        return model
    if isinstance(model, MLP):
        return CNN([FloatDense(w, b, relu=r)
                    for (w, b), r in zip(model.layers, model.relu, strict=True)],
                   output_function=getattr(model, "output_function", None))
    raise TypeError(f"{caller}: model is a {type(model).__name__}; allowed: MLP or CNN")


def _calibration(cnn, calib_x):
    calib_x = np.asarray(calib_x, dtype=np.float64)
    shape = cnn.shapes[0][0]
    if calib_x.ndim != len(shape) + 1 or calib_x.shape[0] < 1 or calib_x.shape[1:] != shape:
        raise ValueError(f"quantize: calib_x has shape {calib_x.shape}; "
                         f"allowed: (M, {', '.join(map(str, shape))}) with M >= 1")
    if not np.all(np.isfinite(calib_x)):
        raise ValueError("quantize: calib_x holds NaN or infinity")
    return calib_x


def quantize(mlp, calib_x, *, in_bits=8, w_bits=8, acc_bits=32, mult_bits=16, output="raw"):
    """Quantize a float model to integers, per docs/arithmetic.md.

    - weights: ``W_q[..., n] = round(W[..., n] / s_w[n])`` with
      ``s_w[n] = max|W[..., n]| / (2**(w_bits-1) - 1)`` per output channel ``n`` (a zero
      channel gets ``s_w = 1``); a convolution's channel is its ``(KH, KW, C_in)`` kernel;
    - activations: one symmetric scale per tensor, ``s = max|a| / (2**(in_bits-1) - 1)`` over
      ``calib_x`` for the input and for every dense or convolution output (after its ReLU);
      max pooling and flatten keep their input's scale;
    - bias: ``b_q = round(b / (s_x * s_w[n]))``;
    - requantization: ``mult[n] / 2**shift[n] ≈ s_x * s_w[n] / s_y`` with ``mult`` as large as
      ``mult_bits`` allows (see :func:`requant_params`);
    - a leaky ReLU (slope ``alpha``): ``mult_neg[n] = round(alpha * s_x * s_w[n] / s_y *
      2**shift[n])`` with the same shift, chosen for the larger of ``mult`` and ``mult_neg``;
    - clamp bounds (ReLU6, Hardtanh, Clip): ``act_min = round(lo / s_y)``,
      ``act_max = round(hi / s_y)``, limited to the signed ``in_bits`` range;
    - average pooling (``kh x kw`` window, the image for global pooling): ``mult[c] /
      2**shift[c] ≈ s_x / (s_y * kh * kw)``, its output calibrated like any other;
    - an add of tensors ``a``, ``b`` (a :class:`~hwgen.nn.FloatAdd`): its output calibrated
      like any other, ``mult_a[c] = round(s_a / s_y * 2**shift[c])`` and ``mult_b[c] =
      round(s_b / s_y * 2**shift[c])`` with one shift per channel, chosen for the larger of
      the two so that its multiplier is as large as ``mult_bits`` allows; its ReLU and clamp
      bounds become the :class:`~hwgen.nn.Add`'s, as for the other layers.

    With ``output="raw"`` the last layer returns its accumulators for argmax, and its weights
    use one scale for all channels (``s_w[n] = max|W| / (2**(w_bits-1) - 1)``), because raw
    accumulators are only comparable across channels when they share a scale; its ``mult`` and
    ``shift`` still map to the calibrated logit scale, should the layer be switched to requant.

    Rounding is NumPy's ``rint`` (half to even).

    Parameters
    ----------
    mlp : MLP or CNN
        The float model, a chain or a graph of nodes; layers without a ReLU get
        ``activation="identity"``.
    calib_x : array_like of float, shape (M, K) or (M, H, W, C)
        Calibration inputs (``M >= 1``), typically a sample of the training data; NHWC for a
        :class:`CNN` with a spatial input.
    in_bits, w_bits, acc_bits, mult_bits : int
        Widths, as for :class:`QuantizedNetwork`.
    output : {"raw", "requant"}
        What the last layer returns; ``"raw"`` needs a dense or convolution layer last.

    Returns
    -------
    QuantizedNetwork
        With :class:`Dense`, :class:`Conv2D`, :class:`MaxPool2D`, :class:`AvgPool2D`,
        :class:`GlobalAvgPool2D`, :class:`Flatten` and :class:`~hwgen.nn.Add` layers in the
        model's order (a chain for a chain, nodes of the same names and inputs for a graph
        given as nodes), the model's
        ``output_function``, the model's ``input_shape`` (``None`` for an :class:`MLP`),
        ``input_scale`` set (so :meth:`QuantizedNetwork.predict` takes float inputs),
        ``output_scale`` the real value of one output step per element of the output's last
        axis, and the scale of every tensor in :attr:`QuantizedNetwork.tensors` (a raw
        output's is ``s_x * s_w``, one for all channels).

    Raises
    ------
    ValueError
        For bad calibration data, ``output="raw"`` on a model that ends in a pooling or
        flatten layer, or a bias that does not fit signed ``acc_bits`` (naming the layer).
    TypeError
        If the model is neither an :class:`MLP` nor a :class:`CNN`.
    """
    if output not in ("raw", "requant"):
        raise ValueError(f"quantize: output={output!r}; allowed: 'raw', 'requant'")
    cnn = as_cnn(mlp)
    calib_x = _calibration(cnn, calib_x)
    nodes = cnn.nodes
    count = len(nodes)
    if output == "raw" and not isinstance(nodes[-1].layer, FloatDense | FloatConv2D):
        raise ValueError(f"quantize: output='raw' but {where(count - 1, nodes[-1].name)} is a "
                         f"{type(nodes[-1].layer).__name__}; allowed: output='requant', or a "
                         "FloatDense or FloatConv2D last")
    widths = {"in_bits": in_bits, "w_bits": w_bits, "acc_bits": acc_bits,
              "mult_bits": mult_bits}
    calibration = cnn.forward_tensors(calib_x)
    shapes = cnn.tensor_shapes
    # One scale per tensor, and the real value of one step of each of its channels (the
    # output_scale of the last).
    scales = {INPUT: _scale(np.max(np.abs(calib_x)), (1 << (in_bits - 1)) - 1)}
    channel_scales = {INPUT: np.full(shapes[INPUT][-1], scales[INPUT])}
    quantized = []
    for index, node in enumerate(nodes):
        layer, scale, channel_scale = _quantize_node(
            node, where(index, node.name), raw=output == "raw" and index == count - 1,
            shapes=shapes, scales=(scales, channel_scales),
            calibrated=np.max(np.abs(calibration[node.name])), widths=widths)
        quantized.append(Node(node.name, layer, node.inputs))
        scales[node.name], channel_scales[node.name] = scale, channel_scale
    chain = cnn.is_chain and all(node.name == chain_name(i) for i, node in enumerate(nodes))
    return QuantizedNetwork([node.layer for node in quantized] if chain else quantized,
                            **widths, input_scale=scales[INPUT],
                            output_scale=channel_scales[nodes[-1].name],
                            input_shape=cnn.input_shape, scales=scales,
                            output_function=cnn.output_function)


def _quantize_node(node, at, *, raw, shapes, scales, calibrated, widths):
    """Return a float node's integer layer, its output's scale and the real value of one step
    of each of its output's channels.

    ``at`` names the node in errors; ``scales`` is ``(scales, channel_scales)`` of the tensors
    before it; ``calibrated`` is the largest magnitude of its output on the calibration data.
    """
    scales, channel_scales = scales
    layer, source = node.layer, node.inputs[0]
    in_bits, mult_bits, acc_bits = widths["in_bits"], widths["mult_bits"], widths["acc_bits"]
    s_y = _scale(calibrated, (1 << (in_bits - 1)) - 1)
    in_shape = shapes[source]
    if isinstance(layer, FloatAdd):
        add = _quantize_add(layer, [scales[name] for name in node.inputs], s_y, in_shape[-1],
                            in_bits=in_bits, mult_bits=mult_bits, acc_bits=acc_bits)
        return add, s_y, np.full(in_shape[-1], s_y)
    if isinstance(layer, FloatAvgPool2D | FloatGlobalAvgPool2D):
        pool = _quantize_pool(layer, (scales[source], s_y), in_shape, in_bits,
                              (mult_bits, acc_bits))
        return pool, s_y, np.full(in_shape[2], s_y)
    if isinstance(layer, MaxPool2D | Flatten):
        if isinstance(layer, MaxPool2D):
            return (MaxPool2D(layer.size, layer.stride), scales[source],
                    channel_scales[source])
        pixels = math.prod(in_shape[:2])
        return Flatten(), scales[source], np.tile(channel_scales[source], pixels)
    w_max = (1 << (widths["w_bits"] - 1)) - 1
    quantized, s_w = _quantize_layer(layer, at, (scales[source], s_y), raw, w_max=w_max,
                                     acc_bits=acc_bits, mult_bits=mult_bits, in_bits=in_bits)
    # Raw accumulators are at the input's scale times the weights' (one for all channels).
    scale = float(scales[source] * s_w[0]) if raw else s_y
    return quantized, scale, np.full(layer.bias.shape, scale)


def _quantize_add(layer, input_scales, s_y, channels, *, in_bits, mult_bits, acc_bits):
    """Return the integer :class:`Add` of a float one: ``mult_a / 2**shift ≈ s_a / s_y``,
    ``mult_b / 2**shift ≈ s_b / s_y``, the one shift chosen for the larger ratio (so that
    its multiplier is as large as ``mult_bits`` allows), the bounds at the output's scale."""
    ratios = [np.full(channels, s / s_y) for s in input_scales]
    mults, shift = _shared_shift(ratios, mult_bits, acc_bits + mult_bits - 1)
    return Add(mult_a=mults[0], mult_b=mults[1], shift=shift, activation=layer.activation,
               **_bounds(layer, s_y, in_bits))


def _shared_shift(ratios, mult_bits, max_shift):
    """Return ``([mult, ...], shift)``: one shift per channel for several real multipliers,
    chosen by :func:`requant_params` for the largest, and each ``mult = round(ratio *
    2**shift)`` limited to ``2**mult_bits - 1``."""
    _, shift = requant_params(np.maximum.reduce(ratios), mult_bits, max_shift)
    top = (1 << mult_bits) - 1
    return [np.minimum(np.rint(np.ldexp(r, shift)), top).astype(np.int64) for r in ratios], shift


def _bounds(layer, s_y, in_bits):
    """The integer ``act_min``/``act_max`` keywords of a float layer's clamp bounds."""
    low, high = -(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1
    return {field: int(np.clip(np.rint(value / s_y), low, high))
            for field, value in (("act_min", layer.act_min), ("act_max", layer.act_max))
            if value is not None}


def _quantize_pool(layer, scales, shape, in_bits, widths):
    """Return the integer average pool of a float one on an input ``shape`` ``(H, W, C)``:
    ``mult / 2**shift ≈ s_x / (s_y * kh * kw)`` per channel, the bounds at the output's scale;
    ``widths`` is ``(mult_bits, acc_bits)``."""
    s_x, s_y = scales
    mult_bits, acc_bits = widths
    window = math.prod(shape[:2] if isinstance(layer, FloatGlobalAvgPool2D)
                       else layer.kernel_size)
    mult, shift = requant_params(np.full(shape[2], s_x / (s_y * window)), mult_bits,
                                 acc_bits + mult_bits - 1)
    kwargs = {"mult": mult, "shift": shift, "activation": layer.activation,
              **_bounds(layer, s_y, in_bits)}
    if isinstance(layer, FloatGlobalAvgPool2D):
        return GlobalAvgPool2D(**kwargs)
    return AvgPool2D(layer.size, layer.stride, **kwargs)


def _quantize_layer(layer, where, scales, raw, *, w_max, acc_bits, mult_bits, in_bits):
    """Return the integer Dense or Conv2D of a float layer and its weight scales ``s_w``.

    ``scales`` is ``(s_x, s_y)``, the input's and the output's activation scales.
    """
    s_x, s_y = scales
    weight, bias = layer.weight, layer.bias
    if raw:
        s_w = np.full(weight.shape[-1], _scale(np.max(np.abs(weight)), w_max))
    else:
        per_channel = np.max(np.abs(weight.reshape(-1, weight.shape[-1])), axis=0)
        s_w = np.array([_scale(m, w_max) for m in per_channel])
    w_q = np.rint(weight / s_w).astype(np.int64)
    b_q = np.rint(bias / (s_x * s_w))
    if np.any(np.abs(b_q) >= 1 << (acc_bits - 1)):
        raise ValueError(f"{where}: quantized bias {b_q[np.argmax(np.abs(b_q))]:.0f} "
                         f"does not fit signed acc_bits={acc_bits}")
    ratio = s_x * s_w / s_y
    leaky = layer.activation == "leaky_relu" and not raw
    if leaky:
        # One shift for both multipliers, as large as the larger of them allows.
        (mult, mult_neg), shift = _shared_shift([ratio, ratio * layer.alpha], mult_bits,
                                                acc_bits + mult_bits - 1)
    else:
        mult, shift = requant_params(ratio, mult_bits, acc_bits + mult_bits - 1)
    kwargs = {"activation": "identity" if raw else layer.activation,
              "output": "raw" if raw else "requant"}
    if leaky:
        kwargs["mult_neg"] = mult_neg
    if not raw:
        kwargs.update(_bounds(layer, s_y, in_bits))
    if isinstance(layer, FloatConv2D):
        geometry = {"stride": layer.stride, "padding": layer.padding}
        geometry["groups"] = layer.groups
        return Conv2D(w_q, b_q.astype(np.int64), mult, shift, **geometry, **kwargs), s_w
    return Dense(w_q, b_q.astype(np.int64), mult, shift, **kwargs), s_w
