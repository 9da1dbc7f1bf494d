"""A naive scalar model of docs/arithmetic.md's bfloat16 rules, sharing no code with
:mod:`hwgen.nn`: rounding by exact fractions, one float32 scalar operation at a time with
the zero rule after each, sums in the tile order, and a direct convolution loop (no im2col).

Values are ``numpy.float32`` scalars (which hold bf16 values exactly); bit patterns are read
with :mod:`struct` or a one-element array view.
"""

import math
import struct
from fractions import Fraction

import numpy as np

SMALLEST_NORMAL = Fraction(1, 2 ** 126)
BF16_MAX = Fraction(2 ** 8 - 1, 2 ** 7) * 2 ** 127  # (2 - 2**-7) * 2**127
NAN32 = 0x7FC00000


def bits32(value):
    """The fp32 bit pattern of a float32 scalar (NaN payloads kept)."""
    return int(np.array([value], dtype=np.float32).view(np.uint32)[0])


def from_bits32(bits):
    """The float32 scalar of a bit pattern."""
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def from_bits16(bits):
    """The float32 scalar of a bf16 bit pattern."""
    return from_bits32(bits << 16)


def zero_rule(value):
    """+0.0 for zeros and subnormals, the canonical NaN for every NaN, else ``value``."""
    value = np.float32(value)
    if math.isnan(value):
        return from_bits32(NAN32)
    if not math.isinf(value) and abs(Fraction(float(value))) < SMALLEST_NORMAL:
        return np.float32(0.0)
    return value


def bf16_bits_of(value):
    """The bf16 bit pattern of a Python float ``value``: the zero rule on ``value``, then
    round to nearest, ties to even, from the exact value; IEEE overflow to Inf."""
    if math.isnan(value):
        return 0x7FC0
    sign = 0x8000 if math.copysign(1.0, value) < 0 else 0
    if math.isinf(value):
        return sign | 0x7F80
    magnitude = abs(Fraction(value))
    if magnitude < SMALLEST_NORMAL:
        return 0
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    unit = Fraction(2) ** (exponent - 7)  # 8 significant bits
    rounded = round(magnitude / unit) * unit  # Fraction rounds half to even
    if rounded > BF16_MAX:
        return sign | 0x7F80
    return sign | struct.unpack("<I", struct.pack("<f", float(rounded)))[0] >> 16


def bf16(value):
    """``value`` rounded to bf16 (:func:`bf16_bits_of`), as a float32 scalar."""
    return from_bits16(bf16_bits_of(float(value)))


def fp32(value):
    """A Python float rounded to fp32 (NumPy's cast: nearest even), then the zero rule."""
    return zero_rule(np.float32(value))


def tile_sum(products, bias, rows):
    """The accumulator of docs/arithmetic.md: ``acc = bias``; per tile of ``rows`` products
    (the last padded with +0.0), ``s`` from +0.0 then ``acc += s``, zero rule after each."""
    acc = zero_rule(bias)
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, len(products), rows):
            s = np.float32(0.0)
            for r in range(rows):
                k = start + r
                p = products[k] if k < len(products) else np.float32(0.0)
                s = zero_rule(np.float32(s) + np.float32(p))
            acc = zero_rule(acc + s)
    return acc


def product(x, w):
    """``fl32(x * w)`` of two bf16 values held in float32, then the zero rule; +0.0 for a
    weight ``w`` that is negative and below the smallest normal (-0.0 or a negative
    subnormal, as given before the zero rule): no product, whatever ``x``."""
    if (math.isfinite(w) and math.copysign(1.0, w) < 0
            and abs(Fraction(float(w))) < SMALLEST_NORMAL):
        return np.float32(0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        return zero_rule(np.float32(x) * np.float32(w))


def matmul(x, w, b, rows):
    """``x`` (M, K), ``w`` (K, N) of float32 bf16 values and ``b`` (N,): the fp32
    accumulators, one scalar operation at a time."""
    m_count, k_count = len(x), len(w)
    out = np.zeros((m_count, len(b)), dtype=np.float32)
    for m in range(m_count):
        for n in range(len(b)):
            out[m, n] = tile_sum([product(x[m][k], w[k][n]) for k in range(k_count)],
                                 b[n], rows)
    return out


def activation(acc, kind="identity", low=None, high=None):
    """fp32 ReLU (NaN stays) or identity, then ``min(max(acc, low), high)`` (NaN stays)."""
    if math.isnan(acc):
        return acc
    if kind == "relu" and not acc > 0:
        acc = np.float32(0.0)
    if low is not None and acc < low:
        acc = np.float32(low)
    if high is not None and acc > high:
        acc = np.float32(high)
    return acc


def conv(x, weight, bias, rows, *, stride=(1, 1), pads=(0, 0, 0, 0), groups=1):
    """Direct convolution of NHWC ``x`` (float32 bf16 values) with ``weight`` (KH, KW,
    C_in/g, C_out) of bf16 values: each output's products in (ky, kx, c) order, +0.0 outside
    the input, summed in the tile order."""
    m_count, h, w, _ = x.shape
    kh, kw, cg, c_out = weight.shape
    top, bottom, left, right = pads
    oh = (h + top + bottom - kh) // stride[0] + 1
    ow = (w + left + right - kw) // stride[1] + 1
    out = np.zeros((m_count, oh, ow, c_out), dtype=np.float32)
    for m in range(m_count):
        for oy in range(oh):
            for ox in range(ow):
                for n in range(c_out):
                    group = n // (c_out // groups)
                    products = []
                    for ky in range(kh):
                        for kx in range(kw):
                            iy, ix = oy * stride[0] + ky - top, ox * stride[1] + kx - left
                            for c in range(cg):
                                inside = 0 <= iy < h and 0 <= ix < w
                                value = x[m, iy, ix, group * cg + c] if inside else 0.0
                                products.append(product(value, weight[ky, kx, c, n]))
                    out[m, oy, ox, n] = tile_sum(products, bias[n], rows)
    return out


def finish(acc, kind="identity", low=None, high=None):
    """Activate every fp32 value of ``acc`` and round it to bf16 (float32 holding bf16)."""
    flat = [bf16(activation(np.float32(v), kind, low, high)) for v in acc.ravel()]
    return np.array(flat, dtype=np.float32).reshape(acc.shape)


def max_pool(x, size, stride):
    """The window maxima of NHWC ``x``; a window with a NaN gives NaN."""
    m_count, h, w, c_count = x.shape
    oh, ow = (h - size) // stride + 1, (w - size) // stride + 1
    out = np.zeros((m_count, oh, ow, c_count), dtype=np.float32)
    for m in range(m_count):
        for oy in range(oh):
            for ox in range(ow):
                for c in range(c_count):
                    window = [x[m, oy * stride + ky, ox * stride + kx, c]
                              for ky in range(size) for kx in range(size)]
                    nan = any(math.isnan(v) for v in window)
                    out[m, oy, ox, c] = from_bits32(NAN32) if nan else max(window)
    return out


def avg_pool(x, kernel, stride, rows):
    """Average pooling as the depthwise convolution of weights ``bf16(1/(kh*kw))``."""
    kh, kw = kernel
    c_count = x.shape[3]
    weight = np.full((kh, kw, 1, c_count), bf16(Fraction(1, kh * kw)), dtype=np.float32)
    return conv(x, weight, np.zeros(c_count, dtype=np.float32), rows, stride=stride,
                groups=c_count)


def bits(array):
    """The uint32 bit patterns of a float32 array, for comparing bit for bit."""
    return np.asarray(array, dtype=np.float32).view(np.uint32)
