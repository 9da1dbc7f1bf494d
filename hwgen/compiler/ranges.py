"""What values each tensor of a network can hold: the input ranges of the accumulator proof.

Every stored tensor is signed ``in_bits``, but most are narrower: a requantizing layer clamps
its outputs to its activation bounds (docs/arithmetic.md: ``[0, act_max]``
after a ReLU), and a max pool or a Flatten passes its input's values on unchanged. The
accumulator proof (:func:`~hwgen.compiler.proofs.check_accumulator`) starts from the range of
the tensor a pass reads, so a layer after a ReLU is proved with inputs in ``[0, act_max]``
rather than the whole signed range. Exact by construction: each range holds every value the
reference (:meth:`hwgen.nn.QuantizedNetwork.forward`) and the device can produce.
"""

from ..nn import INPUT, Flatten, MaxPool2D

__all__ = ["value_ranges"]


def value_ranges(network, in_bits):
    """Return ``{tensor name: (lo, hi)}`` of every tensor of ``network``: its input and each
    node's output.

    The input: the signed ``in_bits`` range. A :class:`~hwgen.nn.Flatten` or
    :class:`~hwgen.nn.MaxPool2D`: its input's range (its values are some of its input's).
    A layer that requantizes (a ``bounds`` method, output not ``"raw"``): its bounds. Any
    other layer (a raw output, whose values no pass reads): the signed ``in_bits`` range.
    """
    whole = (-(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1)
    ranges = {INPUT: whole}
    for node in network.nodes:
        layer = node.layer
        if isinstance(layer, Flatten | MaxPool2D):
            ranges[node.name] = ranges[node.inputs[0]]
        elif hasattr(layer, "bounds") and getattr(layer, "output", "requant") != "raw":
            ranges[node.name] = tuple(layer.bounds(in_bits))
        else:
            ranges[node.name] = whole
    return ranges
