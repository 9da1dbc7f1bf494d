"""What the compiler proves before it lays a network out: widths, reductions and ranges.

Each check raises a :class:`CompileError` that names the layer, what does not fit, the need and
the limit. The accumulator proof (docs/arithmetic.md) is from the layer's own
weights and bias, channel by channel: no partial sum, in any order, of any inputs in their
range can leave ``acc_bits``. The reduction's length is limited only by the descriptor's
fields that count it (:func:`~hwgen.memmap.reduction_limits`).
"""

import math

import numpy as np

from ..memmap import reduction_limits
from .errors import CompileError

__all__ = ["check_accumulator", "check_channel_params", "check_padded_reduction",
           "check_reduction", "check_widths", "partial_sum_ranges", "two_complement_bits"]


def check_widths(network, config):
    """Check the network's operand widths (equal) and result widths (no wider) against
    ``config``."""
    for name in ("in_bits", "w_bits"):
        have, want = getattr(network, name), getattr(config, name)
        if have != want:
            raise CompileError(f"network {name}={have} does not match the accelerator; "
                               f"allowed: {name}={want}", resource=name, need=have, limit=want)
    for name in ("acc_bits", "mult_bits"):
        have, limit = getattr(network, name), getattr(config, name)
        if have > limit:
            raise CompileError(f"network {name}={have} is wider than the accelerator's; "
                               f"allowed: {name} <= {limit}", resource=name, need=have,
                               limit=limit)


def _field(name, held, what, config):
    """Return ``"the descriptor's <name> field (<b> bits, sized by max_k=<max_k>) holds
    <held> <what>"``."""
    return (f"the descriptor's {name} field ({held.bit_length()} bits, sized by "
            f"max_k={config.max_k}) holds {held} {what}")


def check_reduction(index, k, config):
    """Check that a reduction over rows of ``k`` inputs fits the descriptor's fields:
    ``ceil(k / rows)`` tiles in ``k_tiles`` and a row's ``ceil(k / act_lanes)`` ACT words in
    ``src_stride`` (:func:`~hwgen.memmap.reduction_limits`)."""
    rows, lanes = config.rows, config.act_lanes
    tiles, words = reduction_limits(config)
    limit = min(tiles * rows, words * lanes)
    if k <= limit:
        return
    if math.ceil(k / rows) > tiles:
        why = (f"its {math.ceil(k / rows)} reduction tiles of rows={rows} exceed what "
               + _field("k_tiles", tiles, "tiles", config))
    elif words == config.act_depth:
        raise CompileError(
            f"a row of K={k} inputs takes {math.ceil(k / lanes)} ACT words of "
            f"act_lanes={lanes}; limit act_depth={config.act_depth}", layer=index,
            resource="act_depth", need=math.ceil(k / lanes), limit=config.act_depth)
    else:
        why = (f"a row of its inputs takes {math.ceil(k / lanes)} ACT words of "
               f"act_lanes={lanes}, more than " + _field("src_stride", words, "words", config))
    raise CompileError(f"K={k} inputs exceed the largest reduction of the accelerator: {why}; "
                       f"allowed: K <= {limit}, or a design with max_k >= {k}", layer=index,
                       resource="max_k", need=k, limit=limit)


def check_padded_reduction(index, kernel, channels, config, *, window="kernel"):
    """Check that a spatial layer's reduction fits the descriptor's ``k_tiles`` once padded:
    each of its ``kernel`` ``(KH, KW)`` positions' ``channels`` fill whole tiles of ``rows``,
    so it takes ``KH * KW * ceil(channels / rows)`` tiles, and ``k_tiles`` holds the first of
    :func:`~hwgen.memmap.reduction_limits`.

    ``window`` names what ``kernel`` is to the user (a Dense after a Flatten reduces over the
    whole image).
    """
    kh, kw = kernel
    rows = config.rows
    groups = math.ceil(channels / rows)
    padded = kh * kw * groups * rows
    tiles = reduction_limits(config)[0]
    limit = tiles * rows
    if padded <= limit:
        return
    # The channels that fit this window: none when even one tile a position is too many.
    fewer = tiles // (kh * kw) * rows
    hints = [f"at most {fewer} channels"] if fewer else []
    hints += [f"a smaller {window}", f"a configuration with max_k >= {padded}"]
    raise CompileError(
        f"the padded reduction KH*KW*ceil(C_in/rows)*rows = {kh}*{kw}*{groups}*{rows} = "
        f"{padded} exceeds what the device's counters hold: the {channels} channels at each "
        f"of the {kh}x{kw} positions of the {window} fill whole tiles of rows={rows} "
        f"(K={kh * kw * channels} unpadded), {kh * kw * groups} tiles, and "
        f"{_field('k_tiles', tiles, 'tiles', config)}; allowed: a padded reduction <= "
        f"{limit}, e.g. {', '.join(hints[:-1])} or {hints[-1]}", layer=index,
        resource="max_k", need=padded, limit=limit)


def partial_sum_ranges(weight, bias, x_range):
    """Return ``(low, high)``: for each output channel ``n``, the least and the greatest value
    that any partial sum of its accumulator can take, as exact Python integers.

    A partial sum is the sum of any subset of the products ``W[k, n] * x[k]``, with or
    without the bias ``b[n]``: every order of accumulation and every tiling of the reduction
    passes only through such sums. Each ``x[k]`` lies in ``x_range`` ``(lo, hi)`` or is 0 (a
    zero of padding), so a product lies between ``W[k, n] * lo'`` and ``W[k, n] * hi'``
    (``lo' = min(lo, 0)``, ``hi' = max(hi, 0)``), and the extremes add up: ``high[n] = hi' *
    P[n] - lo' * Q[n] + max(b[n], 0)``, ``low[n] = lo' * P[n] - hi' * Q[n] + min(b[n], 0)``,
    where ``P[n]`` sums the positive weights of channel ``n`` and ``Q[n]`` the magnitudes of
    its negative ones. Both are reached (every input at the extreme its weight's sign
    picks), so no narrower range holds for every input.

    Parameters
    ----------
    weight : array of int
        The weights, the output channel on the last axis (``(K, N)`` of a Dense,
        ``(KH, KW, C_in / groups, N)`` of a Conv2D); zero rows (padding) add nothing.
    bias : array of int
        ``(N,)``.
    x_range : tuple of int
        ``(lo, hi)``, the inputs' range.
    """
    weight = np.asarray(weight)
    weight = weight.reshape(-1, weight.shape[-1])
    if weight.size and weight.dtype != object and \
            max(-int(weight.min()), int(weight.max())) * weight.shape[0] >= 1 << 62:
        weight = weight.astype(object)   # sums that int64 might not hold
    positive = np.where(weight > 0, weight, 0).sum(axis=0)
    negative = np.where(weight < 0, -weight, 0).sum(axis=0)
    lo, hi = min(int(x_range[0]), 0), max(int(x_range[1]), 0)
    low, high = [], []
    for pos, neg, b in zip(positive.tolist(), negative.tolist(), np.asarray(bias).tolist(),
                           strict=True):
        low.append(lo * pos - hi * neg + min(b, 0))
        high.append(hi * pos - lo * neg + max(b, 0))
    return low, high


def check_accumulator(index, layer, k, config, x_range=None):
    """Prove that no partial sum of ``layer``'s accumulator (``k`` inputs per output) leaves
    the signed ``acc_bits`` range, channel by channel, from its weights and bias
    (:func:`partial_sum_ranges`), for inputs in ``x_range`` (the signed ``in_bits`` range
    when ``None``).

    ``layer`` is anything with an integer ``weight`` whose last axis is the output channel
    and a ``bias``. The refusal names the first channel that can leave, its extreme partial
    sum and the limit.
    """
    x_range = _signed_range(config.in_bits) if x_range is None else x_range
    low, high = partial_sum_ranges(layer.weight, layer.bias, x_range)
    acc_low, acc_high = _signed_range(config.acc_bits)
    bad = [n for n, (lo, hi) in enumerate(zip(low, high, strict=True))
           if lo < acc_low or hi > acc_high]
    if not bad:
        return
    n = bad[0]
    value, limit = (high[n], acc_high) if high[n] > acc_high else (low[n], acc_low)
    weights = np.asarray(layer.weight).reshape(-1, len(low))[:, n]
    others = f" (and {len(bad) - 1} more of the {len(low)} channels)" if len(bad) > 1 else ""
    need = max(two_complement_bits(lo, hi) for lo, hi in zip(low, high, strict=True))
    raise CompileError(
        f"cannot prove that no accumulator can leave acc_bits={config.acc_bits}: output "
        f"channel {n}{others} has a partial sum of {value} (K={k} inputs in "
        f"[{x_range[0]}, {x_range[1]}], sum_k |W[k, {n}]| = {int(np.abs(weights).sum())}, "
        f"bias {int(np.asarray(layer.bias)[n])}); limit {acc_low}..{acc_high} (signed "
        f"acc_bits); allowed: smaller weights or bias in that channel, or a design with "
        f"acc_bits >= {need}", layer=index, resource="acc_bits", need=abs(value),
        limit=abs(limit))


def _signed_range(bits):
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def two_complement_bits(low, high):
    """Return the narrowest two's complement width that holds every integer from ``low`` to
    ``high`` (``low <= 0 <= high``)."""
    return max(high.bit_length(), (-low - 1).bit_length()) + 1


def check_channel_params(index, layer, config):
    """Check each channel's ``shift``, ``mult``, ``bias`` and (of a leaky layer) ``mult_neg``
    against the accelerator's widths."""
    limit = (1 << (config.acc_bits - 1)) - 1
    shift_high = config.acc_bits + config.mult_bits - 1
    checks = (("shift", layer.shift, 0, shift_high, "acc_bits + mult_bits - 1"),
              ("mult", layer.mult, 0, (1 << config.mult_bits) - 1, "unsigned mult_bits"),
              ("bias", layer.bias, -(1 << (config.acc_bits - 1)), limit, "signed acc_bits"))
    if layer.mult_neg is not None:
        checks += (("mult_neg", layer.mult_neg, 0, (1 << config.mult_bits) - 1,
                    "unsigned mult_bits"),)
    for field, values, low, high, what in checks:
        bad = np.flatnonzero((values < low) | (values > high))
        if bad.size:
            channel = int(bad[0])
            raise CompileError(f"{field}[{channel}]={int(values[channel])} does not fit the "
                               f"accelerator; allowed: {low}..{high} ({what})", layer=index,
                               resource=field, need=int(values[channel]), limit=high)
