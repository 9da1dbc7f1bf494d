"""The pass kinds of the device: one module per :class:`~hwgen.memmap.PassKind`, found here.

Each module holds a :class:`~hwgen.passes.base.Pass`: the kind's lowering and layout (for
:mod:`hwgen.compiler`), its cycle model (for :mod:`hwgen.cycles`) and its step of the program
interpreter (for :mod:`sim.interpreter`):

- :mod:`~hwgen.passes.depthwise`: a depthwise convolution or an average pool, each column a
  channel and the rows its taps (on a device with the depthwise unit, where it can);
- :mod:`~hwgen.passes.matrix`: ``x @ W``, then bias and requantization (Dense, Conv2D);
- :mod:`~hwgen.passes.maxpool`: the lane-wise maximum of each window (MaxPool2D);
- :mod:`~hwgen.passes.add`: two tensors' sum, each scaled per channel, requantized (Add).

:func:`registry` is the one place a kind is registered; the compiler, the cycle model, the
interpreter, the sweep and the test benches find a kind with :func:`lookup` (by its
:class:`PassKind` or a descriptor's ``kind`` value) or :func:`for_layer` (by network layer),
and never test for one.
"""

import functools

from ..memmap import PassKind
from .base import Pass

__all__ = ["Pass", "for_layer", "layer_types", "lookup", "registry"]


@functools.cache
def registry():
    """Return ``{PassKind: Pass}``: every pass kind's module, in the order network layers are
    matched (:func:`for_layer`).

    The kinds' modules lower with the compiler, which asks this registry: they are imported
    on the first call, whichever package is imported first.
    """
    from .add import AddPass
    from .depthwise import DepthwisePass
    from .matrix import MatrixPass
    from .maxpool import MaxPoolPass

    return {PassKind.MATRIX: MatrixPass(), PassKind.MAXPOOL: MaxPoolPass(),
            PassKind.ADD: AddPass(), PassKind.DEPTHWISE: DepthwisePass()}


def lookup(kind):
    """Return the :class:`Pass` of ``kind``: a :class:`PassKind`, or the value of a
    descriptor's ``kind`` field.

    Raises
    ------
    ValueError
        If no pass kind has that value or none is registered for it, naming the allowed ones.
    """
    found = registry()
    try:
        return found[PassKind(kind)]
    except (ValueError, KeyError):
        allowed = ", ".join(f"{k.name} ({k.value})" for k in found)
        raise ValueError(f"pass kind {kind!r} has no registered module; allowed: "
                         f"{allowed}") from None


def for_layer(layer, in_shape=None, config=None):
    """Return the :class:`Pass` that lowers the network layer ``layer``, or None.

    A kind that takes only some layers of its types (:meth:`Pass.accepts`: the depthwise
    unit's, where a device has it) is asked first, for ``config`` and the layer's per-sample
    ``in_shape``; then the first kind in the registry that lowers its type and takes every
    such layer. Without ``config`` the latter alone.
    """
    found = registry().values()
    picky = [k for k in found if type(k).accepts is not Pass.accepts]
    if config is not None:
        for kind in picky:
            if isinstance(layer, kind.layers) and kind.accepts(layer, in_shape, config):
                return kind
    return next((k for k in found if k not in picky and isinstance(layer, k.layers)), None)


def layer_types():
    """Return the :mod:`hwgen.nn` layer types that some pass kind lowers, in registry order,
    each once."""
    return tuple(dict.fromkeys(t for p in registry().values() for t in p.layers))
