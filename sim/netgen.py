"""Random quantized networks for the regressions and benchmarks.

Weights are uniform, extreme (every weight at the most negative value) or sparse; biases,
multipliers and shifts are drawn so that outputs spread over the whole output range, with
saturation, ties, shift 0 and the largest shift hit now and then. Activations are ReLU,
identity or leaky ReLU (``mult_neg`` a slope of ``mult`` or anywhere in its range), now and
then with bounds: a ReLU6-like ``[0, k]`` or an arbitrary ``[lo, hi]`` (section 3.2); a design
without ``bounds`` gets ReLU and identity only.
"""

import numpy as np

from hwgen.nn import Conv2D, Dense, Flatten, MaxPool2D, QuantizedNetwork

__all__ = ["random_cnn", "random_image", "random_input", "random_network"]


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

    One to three blocks of a convolution (kernel 1..5, as large as the padded input at most,
    stride 1..2, padding 0..2, 1..``max_channels`` channels), each followed or not by a max
    pooling (window 2..3, stride 1..3), then a Flatten and a Dense (``dense``, random when not
    given) or the last block's images as the output; its last layer raw or requantized
    (``raw``). The reduction of every layer stays within ``config.max_k``.
    """
    if input_shape is None:
        side = int(rng.integers(3, 9))
        input_shape = (side, int(rng.integers(side - 1, side + 2)),
                       int(rng.integers(1, max_channels + 1)))
    h, w, c = input_shape
    layers = []
    n_blocks = int(rng.integers(1, 4)) if blocks is None else blocks
    for _ in range(n_blocks):
        pad = int(rng.integers(0, 3))
        k = int(rng.integers(1, min(5, h + 2 * pad, w + 2 * pad) + 1))
        while k * k * c > config.max_k and k > 1:
            k -= 1
        stride = int(rng.integers(1, 3))
        n = int(rng.integers(1, max_channels + 1))
        weight, b, mult, shift = _matrix_params(rng, config, k * k * c, n)
        layers.append(Conv2D(weight.reshape(k, k, c, n), b, mult, shift, stride=stride,
                             padding=pad, **_activation(rng, config, mult)))
        h, w, c = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1, n
        if min(h, w) >= 2 and rng.random() < 0.6:
            size = int(rng.integers(2, min(3, h, w) + 1))
            pool_stride = int(rng.integers(1, 4))
            layers.append(MaxPool2D(size, pool_stride))
            h, w = (h - size) // pool_stride + 1, (w - size) // pool_stride + 1
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


def random_image(rng, config, m, shape):
    """Return an ``[m, *shape]`` integer input that hits both ends of the range."""
    return random_input(rng, config, m, int(np.prod(shape))).reshape(m, *shape)


def random_input(rng, config, m, k):
    """Return an ``[m, k]`` integer input that hits both ends of the range."""
    lo, hi = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    x = rng.integers(lo, hi + 1, size=(m, k), dtype=np.int64)
    x.flat[rng.integers(0, x.size, size=max(1, x.size // 10))] = lo
    return x
