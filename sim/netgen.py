"""Random quantized networks for the regressions and benchmarks.

Weights are uniform, extreme (every weight at the most negative value) or sparse; biases,
multipliers and shifts are drawn so that outputs spread over the whole output range, with
saturation, ties, shift 0 and the largest shift hit now and then. Activations are ReLU,
identity or leaky ReLU (``mult_neg`` a slope of ``mult`` or anywhere in its range), now and
then with bounds: a ReLU6-like ``[0, k]`` or an arbitrary ``[lo, hi]`` (section 3.2); a design
without ``bounds`` gets ReLU and identity only. :func:`random_graph` builds graphs: residual
blocks (identity and projection shortcuts), branches of different depths, an add feeding an
add and a tensor with three consumers, over images or rows.
"""

import numpy as np

from hwgen.nn import (
    INPUT,
    Add,
    AvgPool2D,
    Conv2D,
    Dense,
    Flatten,
    GlobalAvgPool2D,
    MaxPool2D,
    Node,
    QuantizedNetwork,
)

__all__ = ["GRAPH_BLOCKS", "compiled_mlp", "fitting_network", "general_cnn", "pooled_cnn",
           "random_add", "random_cnn", "random_graph", "random_image", "random_input",
           "random_network", "taps_cnn"]


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


def fitting_network(rng, config, widths=(40, 24, 12, 6)):
    """Return ``(net, program)``: the first :func:`random_network` of at most ``widths[i]``
    features a layer that ``hwgen.compile`` fits into ``config``, trying the widths in order.

    Raises
    ------
    AssertionError
        If none fits.
    """
    import hwgen
    from hwgen.compiler import CompileError

    for width in widths:
        net = random_network(rng, config, max_width=width)
        try:
            return net, hwgen.compile(net, config)
        except CompileError:
            continue
    raise AssertionError(f"no random network of at most {widths[0]} features fits {config}")


def compiled_mlp(config, widths, *, seed=0):
    """Return ``(rng, net, program)``: a random MLP of ``widths`` (int8 weights of the
    config's widths, raw logits) compiled for ``config``, and the generator it was drawn from
    (seeded ``seed``; draw the inputs from it). The benchmarks' network.

    Raises
    ------
    hwgen.compiler.CompileError
        If it does not fit ``config`` (a ``ValueError``).
    """
    import hwgen

    rng = np.random.default_rng(seed)
    net = random_network(rng, config, widths=widths, raw=True)
    return rng, net, hwgen.compile(net, config)


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


def taps_cnn(rng, config, *, max_channels=20, raw=None):
    """Return a :func:`random_cnn` whose first convolution takes the taps layout where the
    device walks it (:mod:`hwgen.passes.taps`): 1..``rows - 1`` input channels (1 on a
    one-row array), a dense (not grouped) first convolution."""
    while True:
        side = int(rng.integers(3, 9))
        shape = (side, int(rng.integers(side - 1, side + 2)),
                 int(rng.integers(1, max(2, config.rows))))
        net = random_cnn(rng, config, input_shape=shape, max_channels=max_channels, raw=raw)
        if net.layers[0].groups == 1:
            return net


def pooled_cnn(rng, config, *, max_channels=20, raw=None):
    """Return a random CNN whose convolutions are each followed by a ``p x p``, stride ``p``
    max pool that the compiler fuses into the convolution's pass where the design can
    (:mod:`hwgen.passes.fused_pool`): one or two blocks (:func:`random_cnn`'s convolutions,
    the first now and then of fewer channels than ``rows``: the taps layout), ``p`` from 2 to
    4 whose ``p * p`` divides ``acc_depth`` (2 where none does: then the pool is a pass), then
    a Flatten and a Dense or the pooled images as the output."""
    sides = [p for p in (2, 3, 4) if config.acc_depth % (p * p) == 0] or [2]
    while True:
        side = int(rng.integers(4, 11))
        channels = int(rng.integers(1, max(2, config.rows))) if rng.random() < 0.5 else \
            int(rng.integers(1, max_channels + 1))
        h, w, c = input_shape = (side, int(rng.integers(side - 1, side + 2)), channels)
        layers = []
        for _ in range(int(rng.integers(1, 3))):
            conv = _random_conv(rng, config, (h, w, c), max_channels)
            conv_shape = conv.output_shape((h, w, c))
            fits = [p for p in sides if p <= min(conv_shape[:2])]
            if not fits:
                break
            pool = MaxPool2D(int(rng.choice(fits)))
            layers += [conv, pool]
            h, w, c = pool.output_shape(conv_shape)
        if layers:
            break
    if rng.random() < 0.6 and h * w * c <= config.max_k:
        n = int(rng.integers(1, 11))
        weight, b, mult, shift = _matrix_params(rng, config, h * w * c, n)
        dense = Dense(weight, b, mult, shift, **_activation(rng, config, mult))
        if bool(rng.random() < 0.5) if raw is None else raw:
            dense.output = "raw"
        layers += [Flatten(), dense]
    return QuantizedNetwork(layers, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=config.acc_bits, mult_bits=config.mult_bits,
                            input_shape=input_shape)


def general_cnn(rng, config, *, raw=None):
    """Return a small :class:`QuantizedNetwork` over ``(6, 5, 4)`` images with every kind of
    spatial layer the device runs, random weights: a grouped convolution (two groups, a 3x2
    kernel, strides (1, 2), padding (1, 0, 2, 1)), a depthwise one with two outputs per
    channel (2x3, strides (2, 1), padding (0, 1, 1, 0)), a depthwise one with one (3x3,
    padding 1: its tiles diagonal, stored a word each where a tile's window is ``rows``
    channels at most), a 2x1 average pooling, a global average pooling, then a Flatten and a
    Dense (raw or requantized, ``raw``)."""
    layers = []
    for (kh, kw, c, groups, n), stride, pads in (((3, 2, 4, 2, 4), (1, 2), (1, 0, 2, 1)),
                                                 ((2, 3, 4, 4, 8), (2, 1), (0, 1, 1, 0)),
                                                 ((3, 3, 8, 8, 8), (1, 1), (1, 1, 1, 1))):
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


#: The blocks of :func:`random_graph`: a residual block with an identity shortcut (two layers
#: and the block's input added), one with a projection shortcut (two layers, the first of
#: stride 2 over images, and a 1x1 layer of stride 2 on the shortcut), two branches of
#: different depths (0 to 3 layers each) added, an add feeding an add (two layers of the
#: block's input added, then the input added to that: the input has three consumers) and a
#: tensor with three consumers (a layer whose output two layers read, added to both).
GRAPH_BLOCKS = ("identity", "projection", "branches", "add_of_adds", "three_consumers")


def random_add(rng, config, channels):
    """Return a random :class:`~hwgen.nn.Add` of ``channels`` channels: multipliers anywhere
    in ``mult_bits`` (now and then 0 or the largest, or one for every channel), a shift per
    channel that brings the sum of two ``in_bits`` values back into the range (jittered: 0,
    the largest and saturation now and then), ReLU or identity, now and then bounds."""
    top = (1 << config.mult_bits) - 1
    max_shift = config.acc_bits + config.mult_bits - 1
    mult_a, mult_b = (rng.integers(0, top + 1, size=channels, dtype=np.int64)
                      for _ in range(2))
    for mult in (mult_a, mult_b):
        mult[rng.random(channels) < 0.05] = 0
        mult[rng.random(channels) < 0.05] = top
    # p is about (|a| + |b|) * mult: one in_bits value's worth of it, shifted down.
    centre = np.log2(np.maximum(mult_a, mult_b) + 1).astype(np.int64) + 1
    shift = np.clip(centre + rng.integers(-2, 3, size=channels), 0, max_shift)
    shift[rng.random(channels) < 0.05] = 0
    shift[rng.random(channels) < 0.05] = max_shift
    fields = {"mult_a": mult_a, "mult_b": mult_b, "shift": shift.astype(np.int64)}
    if rng.random() < 0.15:   # one value for all channels (broadcast)
        fields = {name: int(values[0]) for name, values in fields.items()}
    kw = {"activation": str(rng.choice(["relu", "identity"]))}
    lo, hi = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    if config.bounds and rng.random() < 0.3:
        a, b = sorted(int(v) for v in rng.integers(lo if kw["activation"] == "identity"
                                                   else 0, hi + 1, 2))
        kw["act_min"], kw["act_max"] = a, b
    return Add(**fields, **kw)


class _Graph:
    """The nodes of a random graph as they are drawn, each tensor's per-sample shape."""

    def __init__(self, rng, config, input_shape, max_channels):
        self.rng, self.config, self.max_channels = rng, config, max_channels
        self.nodes, self.shapes = [], {INPUT: tuple(input_shape)}

    def _node(self, layer, inputs, shape):
        name = f"n{len(self.nodes)}_{type(layer).__name__.lower()}"
        self.nodes.append(Node(name, layer, inputs))
        self.shapes[name] = tuple(shape)
        return name

    def layer(self, x, n, *, stride=1, kernel=3):
        """A convolution of ``x`` (``kernel`` square, padded to keep the side at stride 1)
        to ``n`` channels, or a Dense to ``n`` features when ``x`` is rows."""
        shape, config = self.shapes[x], self.config
        if len(shape) == 1:
            w, b, mult, shift = _matrix_params(self.rng, config, shape[0], n)
            return self._node(Dense(w, b, mult, shift, **_activation(self.rng, config, mult)),
                              x, (n,))
        c = shape[-1]
        # Each kernel position's channels fill whole tiles of rows: keep that within max_k.
        while kernel > 1 and kernel * kernel * -(-c // config.rows) * config.rows > \
                config.max_k:
            kernel -= 2
        w, b, mult, shift = _matrix_params(self.rng, config, kernel * kernel * c, n)
        pad = kernel // 2
        conv = Conv2D(w.reshape(kernel, kernel, c, n), b, mult, shift, stride=stride,
                      padding=pad, **_activation(self.rng, config, mult))
        return self._node(conv, x, conv.output_shape(shape))

    def add(self, a, b):
        """An Add of ``a`` and ``b`` (in a random order)."""
        if self.rng.random() < 0.5:
            a, b = b, a
        return self._node(random_add(self.rng, self.config, self.shapes[a][-1]), (a, b),
                          self.shapes[a])

    def width(self, x):
        """A random channel (feature) count for a projection: up to ``max_channels``."""
        return int(self.rng.integers(1, self.max_channels + 1))

    def block(self, kind, x):
        """Return the output tensor of a block of ``kind`` (:data:`GRAPH_BLOCKS`) on ``x``."""
        c = self.shapes[x][-1]
        if kind == "identity":
            return self.add(self.layer(self.layer(x, c), c), x)
        if kind == "projection":
            n, stride = self.width(x), 2 if len(self.shapes[x]) == 3 else 1
            main = self.layer(self.layer(x, n, stride=stride), n)
            return self.add(main, self.layer(x, n, stride=stride, kernel=1))
        if kind == "branches":
            short, long = sorted(self.rng.choice(4, size=2, replace=False).tolist())
            n = c if short == 0 else self.width(x)
            ends = []
            for depth in (short, long):
                y = x
                for _ in range(depth):
                    y = self.layer(y, n)
                ends.append(y)
            return self.add(*ends)
        if kind == "add_of_adds":
            return self.add(self.add(self.layer(x, c), self.layer(x, c)), x)
        if kind == "three_consumers":
            t = self.layer(x, self.width(x))
            n = self.shapes[t][-1]
            return self.add(self.add(self.layer(t, n), t), self.layer(t, n))
        raise ValueError(f"block kind {kind!r}; allowed: {', '.join(GRAPH_BLOCKS)}")


def random_graph(rng, config, *, images=True, input_shape=None, blocks=None, kinds=None,
                 max_channels=8, head=None, raw=None):
    """Return a random :class:`QuantizedNetwork` graph of residual blocks for ``config``.

    Parameters
    ----------
    rng : numpy.random.Generator
    config : AcceleratorConfig
    images : bool
        Images (NHWC, convolutions of 3x3 and 1x1 kernels) or rows (Dense layers).
    input_shape : tuple, optional
        Per sample; random (sides 3..8, 1..``max_channels`` channels, or 1..``4 *
        max_channels`` features) when not given.
    blocks : int, optional
        How many blocks (1..3 when not given), each of a kind drawn from ``kinds``.
    kinds : sequence of str, optional
        The blocks to draw from (:data:`GRAPH_BLOCKS`, all by default); given as many as
        ``blocks``, they are taken in order.
    max_channels : int
        The most channels (features) of a layer.
    head : bool, optional
        End with a layer after the last block (over images: a global average pooling now
        and then, a Flatten and a Dense; over rows: a Dense), whose output is raw or
        requantized (``raw``); without it the last block's Add is the output. Random when
        not given.
    raw : bool, optional
        Whether the head's layer returns raw accumulators (random when not given).
    """
    kinds = list(GRAPH_BLOCKS if kinds is None else kinds)
    n_blocks = int(rng.integers(1, 4)) if blocks is None else blocks
    if input_shape is None:
        side = int(rng.integers(3, 9))
        input_shape = ((side, int(rng.integers(side - 1, side + 2)),
                        int(rng.integers(1, max_channels + 1))) if images
                       else (int(rng.integers(1, 4 * max_channels + 1)),))
    graph = _Graph(rng, config, input_shape, max_channels)
    x = INPUT
    for i in range(n_blocks):
        kind = kinds[i] if len(kinds) == n_blocks else str(rng.choice(kinds))
        x = graph.block(kind, x)
    if (rng.random() < 0.5) if head is None else head:
        shape = graph.shapes[x]
        if len(shape) == 3:
            if rng.random() < 0.3:
                pool = GlobalAvgPool2D(**_pool_params(rng, config, shape[0] * shape[1],
                                                      shape[2]))
                x, shape = graph._node(pool, x, (1, 1, shape[2])), (1, 1, shape[2])
            x = graph._node(Flatten(), x, (int(np.prod(shape)),))
        k = graph.shapes[x][0]
        if k <= config.max_k:
            x = graph.layer(x, int(rng.integers(1, 11)))
            if (rng.random() < 0.5) if raw is None else raw:
                graph.nodes[-1].layer.output = "raw"
    return QuantizedNetwork(graph.nodes, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=config.acc_bits, mult_bits=config.mult_bits,
                            input_shape=input_shape)
