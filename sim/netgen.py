"""Random quantized networks for the regressions and benchmarks.

Weights are uniform, extreme (every weight at the most negative value) or sparse; biases,
multipliers and shifts are drawn so that outputs spread over the whole output range, with
saturation, ties, shift 0 and the largest shift hit now and then.
"""

import numpy as np

from hwgen.nn import Dense, QuantizedNetwork

__all__ = ["random_network"]


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
    lo_w, hi_w = -(1 << (config.w_bits - 1)), (1 << (config.w_bits - 1)) - 1
    lo_x = 1 << (config.in_bits - 1)
    last_raw = bool(rng.random() < 0.5) if raw is None else raw
    max_shift = config.acc_bits + config.mult_bits - 1
    out = []
    for i in range(n_layers):
        k, n = widths[i], widths[i + 1]
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
        last = i == n_layers - 1
        out.append(Dense(w, b, mult, shift,
                         activation=str(rng.choice(["relu", "identity"])),
                         output="raw" if (last and last_raw) else "requant"))
    return QuantizedNetwork(out, in_bits=config.in_bits, w_bits=config.w_bits,
                            acc_bits=config.acc_bits, mult_bits=config.mult_bits)


def random_input(rng, config, m, k):
    """Return an ``[m, k]`` integer input that hits both ends of the range."""
    lo, hi = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    x = rng.integers(lo, hi + 1, size=(m, k), dtype=np.int64)
    x.flat[rng.integers(0, x.size, size=max(1, x.size // 10))] = lo
    return x
