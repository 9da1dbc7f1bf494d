"""The naive models that the tests of :mod:`hwgen.nn` compare against.

Python integers, one element at a time, rounding by exact fractions: written from
docs/arithmetic.md, sharing no code with :mod:`hwgen.nn`. The ``naive`` fixture
hands them to the tests.
"""

import math
from fractions import Fraction
from types import SimpleNamespace

import pytest


def requant(acc, mult, shift, out_bits):
    """Round ``acc * mult / 2**shift`` half towards +infinity, then saturate."""
    p = acc * mult
    r = p if shift == 0 else math.floor(Fraction(p, 2 ** shift) + Fraction(1, 2))
    return min(max(r, -(2 ** (out_bits - 1))), 2 ** (out_bits - 1) - 1)


def finish(acc, layer, n, in_bits):
    """Requantize and activate one accumulator of channel ``n``, or return it raw."""
    if layer["output"] == "raw":
        return acc
    y = requant(acc, layer["mult"][n], layer["shift"][n], in_bits)
    return max(y, 0) if layer["activation"] == "relu" else y


def dense(rows, layer, in_bits):
    """``rows`` ``[m][k]`` through a dense layer given as a dict of nested lists."""
    w, b = layer["weight"], layer["bias"]
    out = []
    for row in rows:
        out_row = []
        for n in range(len(w[0])):
            acc = b[n]
            for k in range(len(w)):
                acc += row[k] * w[k][n]
            out_row.append(finish(acc, layer, n, in_bits))
        out.append(out_row)
    return out


def conv(x, layer, in_bits):
    """NHWC ``x`` ``[m][y][x][c]`` through a convolution, zero padding by bounds checks."""
    w, b, s, p = layer["weight"], layer["bias"], layer["stride"], layer["padding"]
    h, wd = len(x[0]), len(x[0][0])
    kh, kw, c_in, c_out = len(w), len(w[0]), len(w[0][0]), len(w[0][0][0])
    oh, ow = (h + 2 * p - kh) // s + 1, (wd + 2 * p - kw) // s + 1
    out = []
    for m in range(len(x)):
        image = []
        for oy in range(oh):
            line = []
            for ox in range(ow):
                pixel = []
                for n in range(c_out):
                    acc = b[n]
                    for ky in range(kh):
                        for kx in range(kw):
                            for c in range(c_in):
                                iy, ix = oy * s + ky - p, ox * s + kx - p
                                if 0 <= iy < h and 0 <= ix < wd:
                                    acc += x[m][iy][ix][c] * w[ky][kx][c][n]
                    pixel.append(finish(acc, layer, n, in_bits))
                line.append(pixel)
            image.append(line)
        out.append(image)
    return out


def maxpool(x, size, stride):
    """NHWC ``x`` through max pooling, no padding, floor."""
    h, w, c_count = len(x[0]), len(x[0][0]), len(x[0][0][0])
    oh, ow = (h - size) // stride + 1, (w - size) // stride + 1
    return [[[[max(x[m][oy * stride + ky][ox * stride + kx][c]
                   for ky in range(size) for kx in range(size))
               for c in range(c_count)] for ox in range(ow)] for oy in range(oh)]
            for m in range(len(x))]


def flatten(x):
    """NHWC ``x`` to rows, feature ``(y*W + x)*C + c``."""
    out = []
    for image in x:
        h, w, c_count = len(image), len(image[0]), len(image[0][0])
        row = [0] * (h * w * c_count)
        for y in range(h):
            for xx in range(w):
                for c in range(c_count):
                    row[(y * w + xx) * c_count + c] = image[y][xx][c]
        out.append(row)
    return out


def network(x, layers, in_bits):
    """Every layer's output for a chain of layer dicts (``kind``: dense, conv, pool, flatten)."""
    outputs = []
    for layer in layers:
        kind = layer["kind"]
        if kind == "dense":
            x = dense(x, layer, in_bits)
        elif kind == "conv":
            x = conv(x, layer, in_bits)
        elif kind == "pool":
            x = maxpool(x, layer["size"], layer["stride"])
        else:
            x = flatten(x)
        outputs.append(x)
    return outputs


@pytest.fixture(scope="session")
def naive():
    """The naive models: ``requant``, ``dense``, ``conv``, ``maxpool``, ``flatten``, ``network``."""
    return SimpleNamespace(requant=requant, dense=dense, conv=conv, maxpool=maxpool,
                           flatten=flatten, network=network)
