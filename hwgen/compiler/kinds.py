"""The kinds of :mod:`hwgen.nn` layer the compiler takes, each lowered to a matrix layer.

The array runs one operation: a matrix layer, ``x[M, K] @ W[K, N]`` then bias, requantization
and activation per channel (or the raw accumulators), which is what a :class:`~hwgen.nn.Dense`
holds. Every kind of layer has a lowering in :data:`LOWERINGS` that proves what the hardware
needs of it and returns the :class:`~hwgen.nn.Dense` it runs as; a kind without one is refused
with a :class:`CompileError` naming it. A new kind (a convolution over patches, say) is one more
entry, plus what its descriptor needs.
"""

from ..nn import Dense
from .errors import CompileError
from .proofs import check_accumulator, check_channel_params, check_reduction

__all__ = ["LOWERINGS", "lower"]


def _lower_dense(index, layer, config):
    k = layer.weight.shape[0]
    check_reduction(index, k, config)
    check_accumulator(index, layer, k, config)
    check_channel_params(index, layer, config)
    return layer


#: ``{layer type: lowering(index, layer, config) -> Dense}``, in the order errors list them.
LOWERINGS = {Dense: _lower_dense}


def lower(index, layer, config):
    """Return the matrix layer (a :class:`~hwgen.nn.Dense`) that layer ``index`` runs as.

    Raises
    ------
    CompileError
        If the kind of ``layer`` has no lowering, or the layer does not fit ``config`` (its
        reduction, its worst-case accumulator or a channel's parameters).
    """
    for kind, lowering in LOWERINGS.items():
        if isinstance(layer, kind):
            return lowering(index, layer, config)
    allowed = ", ".join(kind.__name__ for kind in LOWERINGS)
    raise CompileError(f"{type(layer).__name__} layers cannot be compiled yet; allowed: "
                       f"{allowed}", layer=index, resource="layer")
