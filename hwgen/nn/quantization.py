"""Post-training quantization of a float :class:`~hwgen.nn.MLP` to a :class:`QuantizedNetwork`.

Symmetric, no zero points, per section 3 of the architecture brief: per-channel weight scales,
per-tensor activation scales measured on calibration data, a bias at the accumulator's scale and
a per-channel ``mult / 2**shift`` that maps the accumulator's scale onto the output's.
"""

import math

import numpy as np

from .reference import Dense, QuantizedNetwork

__all__ = ["quantize", "requant_params"]


def requant_params(ratio, mult_bits, max_shift):
    """Return ``(mult, shift)`` with ``mult / 2**shift`` closest to ``ratio`` for large ``mult``.

    ``mult`` is as large as ``mult_bits`` allows (``2**(mult_bits-1) <= mult < 2**mult_bits``)
    unless ``shift`` would then exceed ``max_shift`` (``shift = max_shift`` and a smaller
    ``mult``) or fall below 0 (``shift = 0`` and ``mult`` saturates at ``2**mult_bits - 1``).

    Parameters
    ----------
    ratio : array_like of float
        Non-negative, finite real multipliers, one per output channel.
    mult_bits : int
        Unsigned width of ``mult``.
    max_shift : int
        Largest allowed ``shift``, ``acc_bits + mult_bits - 1`` in the contract.

    Returns
    -------
    mult, shift : numpy.ndarray of int64
    """
    ratio = np.asarray(ratio, dtype=np.float64)
    if not np.all(np.isfinite(ratio)) or np.any(ratio < 0):
        raise ValueError(f"requant_params: ratios must be finite and >= 0, got {ratio}")
    mults, shifts = [], []
    for r in ratio.flat:
        if r == 0:
            mults.append(0)
            shifts.append(0)
            continue
        frac, exp = math.frexp(r)  # r = frac * 2**exp with 0.5 <= frac < 1
        shift = mult_bits - exp
        mult = round(math.ldexp(frac, mult_bits))
        if mult == 1 << mult_bits:  # frac rounded up to 1.0: one bit fewer
            mult >>= 1
            shift -= 1
        if shift > max_shift:
            shift = max_shift
            mult = round(math.ldexp(r, shift))
        elif shift < 0:
            shift = 0
            mult = min(round(r), (1 << mult_bits) - 1)
        mults.append(mult)
        shifts.append(shift)
    shape = ratio.shape
    return (np.array(mults, dtype=np.int64).reshape(shape),
            np.array(shifts, dtype=np.int64).reshape(shape))


def _scale(max_abs, qmax):
    # A tensor that is all zeros on the calibration data gets scale 1: any scale represents it.
    return float(max_abs) / qmax if max_abs > 0 else 1.0


def quantize(mlp, calib_x, *, in_bits=8, w_bits=8, acc_bits=32, mult_bits=16, output="raw"):
    """Quantize a float MLP to integers, per section 3 of the architecture brief.

    - weights: ``W_q[:, n] = round(W[:, n] / s_w[n])`` with
      ``s_w[n] = max|W[:, n]| / (2**(w_bits-1) - 1)`` (a zero column gets ``s_w = 1``);
    - activations: one symmetric scale per tensor, ``s = max|a| / (2**(in_bits-1) - 1)`` over
      ``calib_x`` for the input and for every layer's output (after its ReLU);
    - bias: ``b_q = round(b / (s_x * s_w[n]))``;
    - requantization: ``mult[n] / 2**shift[n] ≈ s_x * s_w[n] / s_y`` with ``mult`` as large as
      ``mult_bits`` allows (see :func:`requant_params`).

    With ``output="raw"`` the last layer returns its accumulators for argmax, and its weights
    use one scale for all channels (``s_w[n] = max|W| / (2**(w_bits-1) - 1)``), because raw
    accumulators are only comparable across channels when they share a scale; its ``mult`` and
    ``shift`` still map to the calibrated logit scale, should the layer be switched to requant.

    Rounding is NumPy's ``rint`` (half to even).

    Parameters
    ----------
    mlp : MLP
        The float model; layers without a ReLU get ``activation="identity"``.
    calib_x : array_like of float, shape (M, K)
        Calibration inputs (``M >= 1``), typically a sample of the training data.
    in_bits, w_bits, acc_bits, mult_bits : int
        Widths, as for :class:`QuantizedNetwork`.
    output : {"raw", "requant"}
        What the last layer returns.

    Returns
    -------
    QuantizedNetwork
        With ``input_scale`` set (so :meth:`QuantizedNetwork.predict` takes float inputs) and
        ``output_scale`` the real value of one output step per channel.

    Raises
    ------
    ValueError
        For bad calibration data, or a bias that does not fit signed ``acc_bits`` (naming the
        layer).
    """
    if output not in ("raw", "requant"):
        raise ValueError(f"quantize: output={output!r}; allowed: 'raw', 'requant'")
    calib_x = np.asarray(calib_x, dtype=np.float64)
    if calib_x.ndim != 2 or calib_x.shape[0] < 1 or calib_x.shape[1] != mlp.in_features:
        raise ValueError(f"quantize: calib_x has shape {calib_x.shape}; "
                         f"allowed: (M, {mlp.in_features}) with M >= 1")
    if not np.all(np.isfinite(calib_x)):
        raise ValueError("quantize: calib_x holds NaN or infinity")
    a_max = (1 << (in_bits - 1)) - 1
    w_max = (1 << (w_bits - 1)) - 1
    acc_limit = 1 << (acc_bits - 1)
    outputs = mlp.forward_trace(calib_x)
    input_scale = _scale(np.max(np.abs(calib_x)), a_max)
    s_x = input_scale
    layers = []
    count = len(mlp.layers)
    for index, ((weight, bias), relu) in enumerate(zip(mlp.layers, mlp.relu, strict=True)):
        raw = output == "raw" and index == count - 1
        if raw:
            s_w = np.full(weight.shape[1], _scale(np.max(np.abs(weight)), w_max))
        else:
            s_w = np.array([_scale(m, w_max) for m in np.max(np.abs(weight), axis=0)])
        w_q = np.rint(weight / s_w).astype(np.int64)
        b_q = np.rint(bias / (s_x * s_w))
        if np.any(np.abs(b_q) >= acc_limit):
            raise ValueError(f"layer {index}: quantized bias {b_q[np.argmax(np.abs(b_q))]:.0f} "
                             f"does not fit signed acc_bits={acc_bits}")
        s_y = _scale(np.max(np.abs(outputs[index])), a_max)
        mult, shift = requant_params(s_x * s_w / s_y, mult_bits, acc_bits + mult_bits - 1)
        layers.append(Dense(w_q, b_q.astype(np.int64), mult, shift,
                            activation="relu" if relu and not raw else "identity",
                            output="raw" if raw else "requant"))
        output_scale = s_x * s_w if raw else np.full(weight.shape[1], s_y)
        s_x = s_y
    return QuantizedNetwork(layers, in_bits=in_bits, w_bits=w_bits, acc_bits=acc_bits,
                            mult_bits=mult_bits, input_scale=input_scale,
                            output_scale=output_scale)
