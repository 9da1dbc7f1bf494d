"""The function a model applies to its logits on the host: softmax, log-softmax or sigmoid.

Per docs/arithmetic.md, a final ``Softmax``, ``LogSoftmax`` or ``Sigmoid`` is not part of the
integer network. The importers record it as ``output_function``; the device returns
the raw scores, and :func:`apply_output_function` turns real-valued logits into probabilities in
float, on the host, when asked (the argmax is the same either way).
"""

import numpy as np

__all__ = ["OUTPUT_FUNCTIONS", "apply_output_function", "check_output_function",
           "scores_to_probabilities"]

OUTPUT_FUNCTIONS = ("softmax", "log_softmax", "sigmoid")


def check_output_function(value, where):
    """Return ``value`` if it is ``None`` or one of :data:`OUTPUT_FUNCTIONS`, else raise."""
    if value is not None and value not in OUTPUT_FUNCTIONS:
        raise ValueError(f"{where}: field 'output_function' is {value!r}; allowed: None, "
                         + ", ".join(repr(f) for f in OUTPUT_FUNCTIONS))
    return value


def apply_output_function(function, logits):
    """Return ``function`` applied to real-valued ``logits`` along the last axis, in float64.

    Parameters
    ----------
    function : {None, "softmax", "log_softmax", "sigmoid"}
        ``None`` returns the logits as float64.
    logits : array_like of float, shape (M, N)

    Returns
    -------
    numpy.ndarray of float64, shape (M, N)
    """
    logits = np.asarray(logits, dtype=np.float64)
    check_output_function(function, "apply_output_function")
    if function == "sigmoid":
        # exp of a negative number only, so neither branch overflows.
        e = np.exp(-np.abs(logits))
        return np.where(logits >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    if function is None:
        return logits
    shifted = logits - logits.max(axis=-1, keepdims=True)  # avoids overflow in exp
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return log_probs if function == "log_softmax" else np.exp(log_probs)


def scores_to_probabilities(function, scores, scale):
    """Return ``function`` of the integer ``scores`` dequantized by ``scale`` (per element of
    the last axis; ``None``: the scores as they are), in float64."""
    scores = np.asarray(scores, dtype=np.float64)
    if scale is not None:
        scores = scores * np.asarray(scale, dtype=np.float64)
    return apply_output_function(function, scores)
