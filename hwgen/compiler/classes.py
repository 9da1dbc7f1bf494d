"""Class output: the indices of a program's best scores instead of the scores.

A program's output mode (:attr:`Program.output_mode <hwgen.compiler.Program>`) is
``"scores"`` (the network's output, as :meth:`hwgen.nn.QuantizedNetwork.forward` gives it),
``"argmax"`` (per sample, the index of its largest score) or ``("top_k", k)`` (per sample, the
indices of its ``k`` largest scores, in descending order). Ties go to the lowest index, so the
classes are NumPy's ``np.argmax(s, axis=1)`` and ``np.argsort(-s, axis=1,
kind="stable")[:, :k]`` of the raw scores ``s``. A device of protocol version 6 computes them
(CLASSES, :mod:`hwgen.protocol`); :func:`classes_of` is the same on the host, for older devices
and as the tests' reference.

A ``dtype="bf16"`` design's scores are floats (fp32, or bf16 for a hidden output), ordered as
floats, not as the integers of their bit patterns: :func:`score_keys` maps each pattern to an
integer of the same order (the device compares those), a NaN above +Inf (docs/arithmetic.md,
"bfloat16").
"""

import numbers

import numpy as np

from ..nn.bf16 import is_bfloat16

__all__ = ["OUTPUT_MODES", "class_count", "classes_of", "output_mode", "output_mode_to_json",
           "score_keys"]

#: The names of the output modes (``"top_k"`` takes a ``k``).
OUTPUT_MODES = ("scores", "argmax", "top_k")


def _allowed():
    return "'scores', 'argmax', or ('top_k', k) with k an integer >= 1"


def output_mode(mode, where, *, k=None, spec=None):
    """Return ``mode`` as a program's output mode: ``"scores"``, ``"argmax"`` or
    ``("top_k", k)``.

    Parameters
    ----------
    mode : str or tuple
        ``"scores"``, ``"argmax"``, ``"top_k"`` (with ``k``) or ``("top_k", k)``; a list
        ``["top_k", k]`` (JSON's) too.
    where : str
        Starts every message (e.g. ``"compile"``).
    k : int, optional
        The count of ``mode="top_k"``; only with it.
    spec : MatrixSpec, optional
        The output the classes are of: a mode other than ``"scores"`` needs one row per sample
        (``pixels == 1``) and ``k`` at most its ``features``.

    Raises
    ------
    ValueError
        Naming ``where``, the value and what is allowed: an unknown mode, ``k`` missing, out of
        ``1 .. n`` or given with another mode, or classes of an output with several rows per
        sample (an image).
    """
    if isinstance(mode, list | tuple) and len(mode) == 2 and mode[0] == "top_k" and k is None:
        mode, k = mode
    if not isinstance(mode, str) or mode not in OUTPUT_MODES:
        raise ValueError(f"{where}: output={mode!r}; allowed: {_allowed()}")
    if mode != "top_k":
        if k is not None:
            raise ValueError(f"{where}: k={k!r} is for output='top_k', not output={mode!r}")
        result = mode
    else:
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"{where}: output='top_k' with k={k!r}; allowed: k an integer "
                             ">= 1 (and at most the scores per sample)")
        result = ("top_k", int(k))
    if spec is not None and result != "scores":
        _check_classes_of(result, spec, where)
    return result


def _check_classes_of(mode, spec, where):
    if spec.pixels != 1:
        raise ValueError(
            f"{where}: output={mode!r} picks classes of one row of scores per sample, but the "
            f"network's output has {spec.pixels} rows (pixels) per sample, shape "
            f"{spec.sample_shape}; allowed: output='scores' for it, or a network that ends "
            "in a Dense (or a Flatten)")
    n = spec.features
    if class_count(mode) > n:
        raise ValueError(f"{where}: output=('top_k', {class_count(mode)}) asks for more "
                         f"classes than the {n} scores per sample; allowed: k in 1..{n}")


def class_count(mode):
    """Return the indices per sample of ``mode`` (1 for argmax, ``k`` for top_k; 0 for
    scores)."""
    if mode == "scores":
        return 0
    return 1 if mode == "argmax" else mode[1]


def score_keys(scores, float_bits=None):
    """Return ``scores`` as int64 keys whose integer order is the order in which the device
    ranks them.

    Integers are their own keys. IEEE floats (an array of ``float32`` or
    ``ml_dtypes.bfloat16``, or signed ``float_bits``-bit lanes of their bit patterns) are
    sign-magnitude: a negative pattern's other bits are inverted, ``s ^ (2**(bits-1) - 1)``,
    which orders the finite values and the infinities as floats, and puts the canonical NaN
    (``0x7FC00000``, ``0x7FC0``: a bf16 design's only NaN) above +Inf. The device's CLASSES
    compares these keys (:mod:`sim.wire_streams`, :mod:`hwgen.link.classes`).

    Parameters
    ----------
    scores : array_like
    float_bits : {None, 16, 32}
        ``scores`` are signed lanes of bf16 (16) or fp32 (32) bit patterns.
    """
    arr = np.asarray(scores)
    if arr.dtype == np.float32 or is_bfloat16(arr.dtype):
        float_bits = arr.dtype.itemsize * 8
        arr = arr.view(np.int32 if float_bits == 32 else np.int16)
    if float_bits is None:
        return arr
    lanes = arr.astype(np.int64)
    return lanes ^ ((lanes >> (float_bits - 1)) & ((1 << (float_bits - 1)) - 1))


def classes_of(scores, mode, *, float_bits=None):
    """Return the classes of ``scores`` (``[M, n]``, or ``[M, 1, 1, n]`` and the like: one
    row per sample) for ``mode``: int64 ``(M,)`` for ``"argmax"``, ``(M, k)`` for
    ``("top_k", k)``; ``scores`` as they are for ``"scores"``. Floats (or lanes of their
    patterns, ``float_bits``) rank by :func:`score_keys`."""
    if mode == "scores":
        return scores
    flat = score_keys(scores, float_bits).reshape(len(scores), -1)
    order = np.argsort(-flat, axis=1, kind="stable")[:, :class_count(mode)].astype(np.int64)
    return order[:, 0] if mode == "argmax" else order


def output_mode_to_json(mode):
    """Return ``mode`` as JSON stores it: the name, or ``["top_k", k]``."""
    return mode if isinstance(mode, str) else list(mode)
