"""The graph of a float :class:`~hwgen.nn.CNN`: its layer kinds, tensor shapes and evaluation.

The float counterpart of :mod:`hwgen.nn.network_checks`: which float layers a CNN takes, how
many tensors each reads (a :class:`~hwgen.nn.FloatAdd` two, every other one), the per-sample
shape of every named tensor (checked as :class:`~hwgen.nn.QuantizedNetwork` checks its own),
and the evaluation of the nodes in order.
"""

from .flatten import Flatten
from .float_add import FloatAdd
from .float_layers import FloatConv2D, FloatDense, forward_cached
from .float_pool import FloatAvgPool2D, FloatGlobalAvgPool2D
from .graph import INPUT, check_layer_type, where
from .maxpool import MaxPool2D

__all__ = ["FLOAT_LAYER_TYPES", "evaluate", "float_arity", "float_tensor_shapes"]

FLOAT_LAYER_TYPES = (FloatConv2D, FloatDense, MaxPool2D, FloatAvgPool2D, FloatGlobalAvgPool2D,
                     Flatten, FloatAdd)


def float_arity(layer):
    """Return how many tensors a float layer reads (2 for a :class:`FloatAdd`), or None if
    ``layer`` is not one."""
    if not isinstance(layer, FLOAT_LAYER_TYPES):
        return None
    return 2 if isinstance(layer, FloatAdd) else 1


def float_tensor_shapes(nodes, input_shape):
    """Check every node's layer against the tensors it reads; return each tensor's per-sample
    shape by name, :data:`~hwgen.nn.graph.INPUT` first.

    Raises
    ------
    TypeError
        If a layer is not a float layer.
    ValueError
        Naming the node, for a missing ``input_shape`` or an input that does not fit the layer.
    """
    shapes = {INPUT: input_shape}
    position = {node.name: index for index, node in enumerate(nodes)}
    for index, node in enumerate(nodes):
        layer, at = node.layer, where(index, node.name)
        check_layer_type(layer, FLOAT_LAYER_TYPES, at)
        if isinstance(layer, MaxPool2D | Flatten):
            layer.check(at)
        for name in node.inputs:
            if shapes[name] is None:
                if not isinstance(layer, FloatDense):
                    raise ValueError(f"CNN: field 'input_shape' is None but {at} is a "
                                     f"{type(layer).__name__}; allowed: (H, W, C), the shape "
                                     "of one NHWC input sample")
                shapes[name] = (layer.weight.shape[0],)
        if isinstance(layer, FloatAdd):
            shapes[node.name] = layer._output_shapes(
                [shapes[n] for n in node.inputs], at, [f"input {n!r}" for n in node.inputs])
        else:
            name = node.inputs[0]
            source = "input_shape" if name == INPUT else where(position[name], name)
            shapes[node.name] = layer._output_shape(shapes[name], at, source)
    return shapes


def evaluate(nodes, x):
    """Return every tensor by name for the float input ``x``: ``"input"``, then each node's
    output (after its activation) in node order."""
    values = {INPUT: x}
    for node in nodes:
        args = [values[name] for name in node.inputs]
        if isinstance(node.layer, FloatAdd):
            values[node.name] = node.layer.forward(*args)
        else:
            values[node.name] = forward_cached(node.layer, args[0])[0]
    return values
