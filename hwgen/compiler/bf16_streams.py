"""bf16 convolutions whose input is written as a taps stream (issue 52).

The contract cuts a patch's ``(ky, kx, c)`` products into tiles of ``rows`` across kernel
positions; the matrix pass pads each position's channels to whole tiles, so a convolution
(``groups=1``) whose channels are not a multiple of ``rows`` sums in another order. The first
convolution of fewer channels than ``rows`` takes the network's input in the taps layout
(:mod:`hwgen.passes.taps`), whose tiles are the contract's; this module gives the others the
same: the pass that writes its input writes it as the taps layout's element stream (the
descriptor's ``dst_run``, ``dst_pitch_*``, ``dst_step_*``,
:func:`hwgen.memmap.descriptor_layout`) and the convolution walks it as the first does.

A matrix pass writes the stream itself where the convolution is the only reader of its
output and has no left or right padding. Otherwise a *relayout* pass is put before the
convolution: a 1x1 matrix pass of the identity (weights 1.0 on the diagonal,
:data:`~.bf16_weights.NO_PRODUCT` off it, bias +0.0: each value ``fl32(+0.0 + x)``, exactly
``x``, NaN and Inf alike) whose left and right padding writes the convolution's as stored
+0.0 elements; the convolution then walks the padded image with only its top and bottom
padding (rows above and below the image, which the walk reads as zero). A relayout also
serves the stream of a max pool, an add or a depthwise pass, which write words, not
elements, and of a tensor that other layers read pixel by pixel (the network's input among
them)."""

import dataclasses

import numpy as np

from ..memmap import BF16_UNBOUNDED, GEOMETRY_LIMITS, PassKind, writes_streams
from ..passes import taps
from .bf16_weights import NO_PRODUCT, Bf16Matrix

__all__ = ["in_taps", "stream_refusal", "streamed"]

#: bf16 1.0: a relayout pass's weights on the diagonal.
_ONE = 0x3F80


def in_taps(p, config):
    """Return matrix pass ``p`` with its input in the taps layout: the kernel flattened in
    ``(ky, kx, c)`` order, ``taps`` its row pitch (as :func:`hwgen.passes.taps.lowered`)."""
    matrix = dataclasses.replace(p.matrix, weight=taps.flat_kernel(p))
    return dataclasses.replace(p, matrix=matrix, taps=taps.pitch(p, config))


def stream_refusal(node, shape, config):
    """Why convolution (or dense layer after a Flatten) ``node`` of ``shape = (kh, kw, c)``
    cannot take its input as a taps stream written by the pass before it, or ``""``."""
    kh, kw, c = shape
    layer = node.layer
    left, right = layer.pads[2:] if hasattr(layer, "pads") else (0, 0)
    why = []
    if not writes_streams(config):
        why.append("a design that walks taps (spatial=True, taps=True)")
    if kh * kw * c > config.max_k:
        why.append(f"a kernel of at most max_k={config.max_k} taps")
    if max(left, right) > GEOMETRY_LIMITS["pad"]:
        why.append(f"left and right padding at most {GEOMETRY_LIMITS['pad']}")
    return ("" if not why else
            "a stream input (the taps layout, whose tiles are the contract's) needs "
            + ", ".join(why))


def _relayout(p, config):
    """Return the relayout pass of convolution ``p``'s input: the identity as a 1x1 matrix
    pass, its left and right padding the convolution's."""
    h, w, c = p.in_shape
    _, _, _, (_, _, left, right), _ = p.kernel
    rows = config.rows
    tiles = -(-c // rows)
    weight = np.full((tiles * rows, c), NO_PRODUCT, dtype=np.int64)
    weight[np.arange(c), np.arange(c)] = _ONE
    matrix = Bf16Matrix(weight, np.zeros(c, dtype=np.int64), "identity", "bf16",
                        *BF16_UNBOUNDED)
    return dataclasses.replace(
        p, kind=PassKind.MATRIX, matrix=matrix, k=c, out_shape=(h, w + left + right, c),
        kernel=(1, 1, (1, 1), (0, 0, left, right), 0), name=f"{p.name}/stream",
        repeat=False, grouped=False, taps=0)


def streamed(passes, sources, config):
    """Return ``passes`` with each matrix pass of a network node in ``sources`` taking its
    input as a taps stream: its producer (a matrix pass, where the convolution has no left or
    right padding) or a relayout pass before it writing the stream (``out_pitch``), the pass
    itself in the taps layout (``taps``, its matrix the kernel flattened). Each of ``sources``
    is a later pass's than the one before it."""
    out = list(passes)
    for source in sources:
        at = next(i for i, p in enumerate(out) if p.source == source)
        p = out[at]
        kh, kw, strides, (top, bottom, left, right), _ = p.kernel
        producer = next((i for i, q in enumerate(out) if q.name == p.inputs[0]), None)
        h, w, c = p.in_shape
        walked = dataclasses.replace(p, in_shape=(h, w + left + right, c),
                                     kernel=(kh, kw, strides, (top, bottom, 0, 0), 0))
        pitch = taps.pitch(walked, config)
        readers = [q for q in out if p.inputs[0] in q.inputs]
        if (producer is not None and out[producer].kind is PassKind.MATRIX
                and not out[producer].out_pitch and left == right == 0 and len(readers) == 1):
            out[producer] = dataclasses.replace(out[producer], out_pitch=pitch)
        else:
            relayout = dataclasses.replace(_relayout(p, config), out_pitch=pitch)
            walked = dataclasses.replace(walked, inputs=(relayout.name,))
            out.insert(at, relayout)
            at += 1
        out[at] = in_taps(walked, config)
    return out
