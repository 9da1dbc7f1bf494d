"""What the compiler proves before it lays a network out: widths, reductions and ranges.

Each check raises a :class:`CompileError` that names the layer, what does not fit, the need and
the limit. The accumulator proof is worst case (docs/arithmetic.md): no partial
sum of any input in the signed ``in_bits`` range can leave ``acc_bits``.
"""

import math

import numpy as np

from ..nn import accumulator_bound
from .errors import CompileError

__all__ = ["check_accumulator", "check_channel_params", "check_padded_reduction",
           "check_reduction", "check_widths"]


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


def check_reduction(index, k, config):
    """Check that a reduction over ``k`` inputs fits ``config.max_k``."""
    if k > config.max_k:
        raise CompileError(f"K={k} inputs exceed the largest reduction of the accelerator; "
                           f"limit max_k={config.max_k}", layer=index, resource="max_k",
                           need=k, limit=config.max_k)


def check_padded_reduction(index, kernel, channels, config, *, window="kernel"):
    """Check that a spatial layer's reduction fits ``config.max_k`` once padded: each of its
    ``kernel`` ``(KH, KW)`` positions' ``channels`` fill whole tiles of ``rows``, so it takes
    ``KH * KW * ceil(channels / rows)`` tiles, and at most ``ceil(max_k / rows)`` fit.

    ``window`` names what ``kernel`` is to the user (a Dense after a Flatten reduces over the
    whole image).
    """
    kh, kw = kernel
    rows = config.rows
    groups = math.ceil(channels / rows)
    padded = kh * kw * groups * rows
    limit = math.ceil(config.max_k / rows) * rows
    if padded <= limit:
        return
    allowed = f"{limit}" if limit == config.max_k else \
        f"{limit} (max_k={config.max_k} in whole tiles of rows={rows})"
    # The channels that fit this window, padded and not: none when even one tile is too many.
    fewer = min(limit // (kh * kw * rows) * rows, config.max_k // (kh * kw))
    hints = [f"at most {fewer} channels"] if fewer else []
    hints += [f"a smaller {window}", f"a configuration with max_k >= {padded}"]
    raise CompileError(
        f"the padded reduction KH*KW*ceil(C_in/rows)*rows = {kh}*{kw}*{groups}*{rows} = "
        f"{padded} exceeds max_k={config.max_k}: the {channels} channels at each of the "
        f"{kh}x{kw} positions of the {window} fill whole tiles of rows={rows} "
        f"(K={kh * kw * channels} unpadded); allowed: a padded reduction <= {allowed}, e.g. "
        f"{', '.join(hints[:-1])} or {hints[-1]}", layer=index, resource="max_k", need=padded,
        limit=limit)


def check_accumulator(index, layer, k, config):
    """Prove that no partial sum of ``layer`` (``k`` inputs per output) leaves ``acc_bits``."""
    bound = accumulator_bound(layer, config.in_bits)
    limit = (1 << (config.acc_bits - 1)) - 1
    if bound > limit:
        raise CompileError(
            f"cannot prove that no accumulator can leave acc_bits={config.acc_bits}: the "
            f"worst-case partial sum (2**(in_bits-1) * sum_k |W[k, n]| + |b[n]|, K={k}) needs "
            f"magnitude {bound}; limit 2**{config.acc_bits - 1} - 1 = {limit} (smaller weights "
            "or bias, or a design with wider acc_bits)",
            layer=index, resource="acc_bits", need=bound, limit=limit)


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
