"""Random quantized networks for the regressions and benchmarks.

Weights are uniform, extreme (every weight at the most negative value) or sparse; biases,
multipliers and shifts are drawn so that outputs spread over the whole output range, with
saturation, ties, shift 0 and the largest shift hit now and then. Activations are ReLU,
identity or leaky ReLU (``mult_neg`` a slope of ``mult`` or anywhere in its range), now and
then with bounds: a ReLU6-like ``[0, k]`` or an arbitrary ``[lo, hi]`` (section 3.2); a design
without ``bounds`` gets ReLU and identity only.
"""

import numpy as np

from hwgen.nn import (
    AvgPool2D,
    Conv2D,
    Dense,
    Flatten,
    GlobalAvgPool2D,
    MaxPool2D,
    QuantizedNetwork,
)

__all__ = ["general_cnn", "random_cnn", "random_image", "random_input", "random_network"]


def random_network(rng, config, *, layers=None, max_width=200, raw=None, widths=None):
    """Return a random :class:`QuantizedNetwork` that compiles for ``config``.

    Parameters
    ----------
    rng : numpy.random.Generator
    config : AcceleratorConfig
    layers : int, optional
        Number of layers (1..4 when not given).
    max_width : int
        Largest layer width.
    raw : bool, optional
        Whether the last layer returns raw accumulators (random when not given).
    widths : list of int, optional
        Input width and every layer's output width, instead of random ones.
    """
    if widths is None:
        n_layers = int(rng.integers(1, 5)) if layers is None else layers
        widths = [int(rng.integers(1, max_width + 1)) for _ in range(n_layers + 1)]
        widths = [min(w, config.max_k) for w in widths]
    n_layers = len(widths) - 1
    last_raw = bool(rng.random() < 0.5) if raw is None else raw
    out = []
    for i in range(n_layers):
        last = i == n_layers - 1
        w, b, mult, shift = _matrix_params(rng, config, widths[i], widths[i + 1])
        out.append(Dense(w, b, mult, shift, **_activation(rng, config, mult),
                         output="raw" if (last and last_raw) else "requant"))
    return QuantizedNetwork(out, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=config.acc_bits, mult_bits=config.mult_bits)


def _activation(rng, config, mult):
    """Return a random layer's ``activation`` and, as drawn, its ``mult_neg`` (for each
    channel of ``mult``), ``act_min`` and ``act_max``.

    ``rng`` gives one draw, ReLU or identity, as before the bounds existed; the rest comes
    from a generator spawned from it, which leaves ``rng``'s stream as it was: the networks'
    shapes and weights (which the tests' coverage of chunks, tiles and pooling rests on) are
    those of before.
    """
    base = str(rng.choice(["relu", "identity"]))
    if not config.bounds:
        return {"activation": base}
    lo, hi = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    rng = rng.spawn(1)[0]
    activation = "leaky_relu" if rng.random() < 0.35 else base
    kw = {"activation": activation}
    if activation == "leaky_relu":
        if rng.random() < 0.5:   # a slope alpha of mult, as a quantized LeakyReLU has
            alpha = rng.choice([0.01, 0.1, 0.2, 0.5, 1.0])
            kw["mult_neg"] = np.round(mult * alpha).astype(np.int64)
        else:
            kw["mult_neg"] = rng.integers(0, 1 << config.mult_bits, size=len(mult))
    style = rng.random()
    if style < 0.2:              # ReLU6-like: [0, k]
        kw["act_min"], kw["act_max"] = 0, int(rng.integers(0, hi + 1))
    elif style < 0.35:           # anywhere, a single value now and then
        a, b = sorted(int(v) for v in rng.integers(lo if activation != "relu" else 0, hi + 1, 2))
        kw["act_min"], kw["act_max"] = (a, a) if rng.random() < 0.1 else (a, b)
    return kw


def _matrix_params(rng, config, k, n):
    """Return ``(weight [k, n], bias, mult, shift)`` of a random matrix layer."""
    lo_w, hi_w = -(1 << (config.w_bits - 1)), (1 << (config.w_bits - 1)) - 1
    lo_x = 1 << (config.in_bits - 1)
    max_shift = config.acc_bits + config.mult_bits - 1
    style = rng.choice(["uniform", "extreme", "sparse"], p=[0.6, 0.2, 0.2])
    if style == "extreme":
        w = np.full((k, n), lo_w, np.int64)
    else:
        w = rng.integers(lo_w, hi_w + 1, size=(k, n), dtype=np.int64)
        if style == "sparse":
            w[rng.random((k, n)) < 0.8] = 0
    headroom = (1 << (config.acc_bits - 1)) - 1 - lo_x * int(np.abs(w).sum(axis=0).max())
    acc_typical = max(1.0, float(np.abs(w).mean()) * lo_x * np.sqrt(k))
    # Mostly biases of an accumulator's size: a bias far larger saturates every output
    # and leaves the requantization's low bits unchecked; sometimes a huge one.
    b_scale = acc_typical if rng.random() < 0.8 else 1 << (config.acc_bits - 4)
    b_max = max(0, min(headroom, int(b_scale)))
    b = rng.integers(-b_max, b_max + 1, size=n, dtype=np.int64)
    mult = rng.integers(1, 1 << config.mult_bits, size=n, dtype=np.int64)
    # Scale a typical accumulator into the output range, then jitter.
    typical = acc_typical * mult.mean()
    centre = int(np.log2(typical / (1 << (config.in_bits - 2))))
    shift = np.clip(centre + rng.integers(-3, 4, size=n), 0, max_shift).astype(np.int64)
    shift[rng.random(n) < 0.05] = 0
    shift[rng.random(n) < 0.05] = max_shift
    return w, b, mult, shift


def random_cnn(rng, config, *, input_shape=None, blocks=None, max_channels=20, raw=None,
               dense=None):
    """Return a random convolutional :class:`QuantizedNetwork` (NHWC) for ``config``.

    One to three blocks of a convolution (kernels 1..5 per axis, rectangular, as large as the
    padded input at most; strides 1..2 per axis; each padding side 0..2; 1..``max_channels``
    channels; a third of them grouped, from two groups to depthwise, now and then with two
    outputs per group), each followed or not by a max or an average pooling (window 2..3 per
    axis, strides 1..3), now and then a global average pooling, then a Flatten and a Dense
    (``dense``, random when not given) or the last block's images as the output; its last
    layer raw or requantized (``raw``). The reduction of every layer stays within
    ``config.max_k``.
    """
    if input_shape is None:
        side = int(rng.integers(3, 9))
        input_shape = (side, int(rng.integers(side - 1, side + 2)),
                       int(rng.integers(1, max_channels + 1)))
    h, w, c = input_shape
    layers = []
    n_blocks = int(rng.integers(1, 4)) if blocks is None else blocks
    for _ in range(n_blocks):
        layer = _random_conv(rng, config, (h, w, c), max_channels)
        layers.append(layer)
        h, w, c = layer.output_shape((h, w, c))
        if min(h, w) >= 2 and rng.random() < 0.6:
            layer = _random_pool(rng, config, (h, w, c))
            layers.append(layer)
            h, w, c = layer.output_shape((h, w, c))
    if rng.random() < 0.25:
        layers.append(GlobalAvgPool2D(**_pool_params(rng, config, h * w, c)))
        h = w = 1
    last_raw = bool(rng.random() < 0.5) if raw is None else raw
    with_dense = (rng.random() < 0.6) if dense is None else dense
    if with_dense and h * w * c <= config.max_k:
        n = int(rng.integers(1, 21))
        weight, b, mult, shift = _matrix_params(rng, config, h * w * c, n)
        layers += [Flatten(), Dense(weight, b, mult, shift, **_activation(rng, config, mult))]
    last = next(i for i in reversed(range(len(layers)))
                if isinstance(layers[i], Dense | Conv2D))
    if last_raw and last == len(layers) - 1:
        layers[last].output = "raw"
    return QuantizedNetwork(layers, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=config.acc_bits, mult_bits=config.mult_bits,
                            input_shape=input_shape)


def general_cnn(rng, config, *, raw=None):
    """Return a small :class:`QuantizedNetwork` over ``(6, 5, 4)`` images with every kind of
    spatial layer the device runs, random weights: a grouped convolution (two groups, a 3x2
    kernel, strides (1, 2), padding (1, 0, 2, 1)), a depthwise one with two outputs per
    channel (2x3, strides (2, 1), padding (0, 1, 1, 0)), a 2x1 average pooling, a global
    average pooling, then a Flatten and a Dense (raw or requantized, ``raw``)."""
    layers = []
    for (kh, kw, c, groups, n), stride, pads in (((3, 2, 4, 2, 4), (1, 2), (1, 0, 2, 1)),
                                                 ((2, 3, 4, 4, 8), (2, 1), (0, 1, 1, 0))):
        weight, b, mult, shift = _matrix_params(rng, config, kh * kw * (c // groups), n)
        layers.append(Conv2D(weight.reshape(kh, kw, c // groups, n), b, mult, shift,
                             stride=stride, padding=pads, groups=groups,
                             **_activation(rng, config, mult)))
    layers += [AvgPool2D((2, 1), 1, **_pool_params(rng, config, 2, 8)),
               GlobalAvgPool2D(**_pool_params(rng, config, 2 * 3, 8)), Flatten()]
    n = int(rng.integers(1, 7))
    weight, b, mult, shift = _matrix_params(rng, config, 8, n)
    last_raw = bool(rng.random() < 0.5) if raw is None else raw
    layers.append(Dense(weight, b, mult, shift, **_activation(rng, config, mult),
                        output="raw" if last_raw else "requant"))
    return QuantizedNetwork(layers, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=config.acc_bits, mult_bits=config.mult_bits,
                            input_shape=(6, 5, 4))


def _random_conv(rng, config, shape, max_channels):
    """Return a random :class:`Conv2D` over ``shape`` (see :func:`random_cnn`)."""
    h, w, c = shape
    top, bottom, left, right = (int(v) for v in rng.integers(0, 3, 4))
    kh = int(rng.integers(1, min(5, h + top + bottom) + 1))
    kw = int(rng.integers(1, min(5, w + left + right) + 1))
    # Each kernel position's channels fill whole tiles of rows: keep that within max_k.
    per_position = -(-c // config.rows) * config.rows
    while kh * kw * per_position > config.max_k and max(kh, kw) > 1:
        kh, kw = max(1, kh - 1), max(1, kw - 1)
    sy, sx = (int(v) for v in rng.integers(1, 3, 2))
    groups, n = 1, int(rng.integers(1, max_channels + 1))
    if c > 1 and rng.random() < 0.35:
        divisors = [g for g in range(2, c + 1) if c % g == 0]
        groups = c if rng.random() < 0.5 else int(rng.choice(divisors))
        n = groups * int(rng.choice([1, 1, 2]))
    weight, b, mult, shift = _matrix_params(rng, config, kh * kw * (c // groups), n)
    # Keep each output channel's weights as drawn (its own group's inputs).
    return Conv2D(weight.reshape(kh, kw, c // groups, n), b, mult, shift, stride=(sy, sx),
                  padding=(top, bottom, left, right), groups=groups,
                  **_activation(rng, config, mult))


def _random_pool(rng, config, shape):
    """Return a random max or average pooling over ``shape`` (windows 2..3 per axis, strides
    1..3)."""
    h, w, c = shape
    size = (int(rng.integers(2, min(3, h) + 1)), int(rng.integers(2, min(3, w) + 1)))
    stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    if rng.random() < 0.5:
        return MaxPool2D(min(size), stride[0])
    return AvgPool2D(size, stride, **_pool_params(rng, config, size[0] * size[1], c))


def _pool_params(rng, config, window, channels):
    """Return an average pooling's ``mult``, ``shift`` and activation: per channel about
    ``1 / window`` (jittered: saturation now and then), its requantization rounding."""
    max_shift = config.acc_bits + config.mult_bits - 1
    mult = rng.integers(1, 1 << config.mult_bits, size=channels, dtype=np.int64)
    centre = np.log2(mult * window).round().astype(np.int64)
    shift = np.clip(centre + rng.integers(-1, 2, size=channels), 0, max_shift)
    return {"mult": mult, "shift": shift.astype(np.int64),
            "activation": str(rng.choice(["relu", "identity"]))}


def random_image(rng, config, m, shape):
    """Return an ``[m, *shape]`` integer input that hits both ends of the range."""
    return random_input(rng, config, m, int(np.prod(shape))).reshape(m, *shape)


def random_input(rng, config, m, k):
    """Return an ``[m, k]`` integer input that hits both ends of the range."""
    lo, hi = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    x = rng.integers(lo, hi + 1, size=(m, k), dtype=np.int64)
    x.flat[rng.integers(0, x.size, size=max(1, x.size // 10))] = lo
    return x
