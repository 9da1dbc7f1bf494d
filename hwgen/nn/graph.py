"""The structure of a network: named nodes over named tensors, in topological order.

A network's data are *tensors*, each named: the network input is :data:`INPUT` (``"input"``)
and every other tensor is the output of the :class:`Node` of the same name. A node names its
layer and the tensors the layer reads. A plain list of layers is the chain
:func:`as_nodes` turns it into: node ``i`` is named ``"layer<i>"`` and reads node ``i - 1``'s
output (node 0 reads the input), so that chains and graphs share one representation.

:func:`check_structure` proves what does not depend on the layers' parameters: unique names,
inputs that name a tensor computed earlier (which also rules out cycles), the number of inputs
each kind of layer takes, and no output that nothing uses. The layers' shapes and values are
checked by the network that holds them (:class:`~hwgen.nn.QuantizedNetwork`, or the float
:class:`~hwgen.nn.CNN`), since layers are mutable.
"""

import dataclasses

__all__ = ["INPUT", "Node", "Tensor", "as_nodes", "chain_name", "check_layer_type",
           "check_structure", "relink", "where"]

#: The name of the network's input tensor.
INPUT = "input"


def chain_name(index):
    """Return the name of node ``index`` of a network given as a plain list of layers."""
    return f"layer{index}"


def where(index, name):
    """Return how errors name node ``index`` called ``name``: ``"layer 2"`` for a chain's
    default name, ``"layer 2 ('fc1')"`` otherwise."""
    return f"layer {index}" if name == chain_name(index) else f"layer {index} ({name!r})"


def check_layer_type(layer, types, at):
    """Raise the TypeError of a node ``at`` whose ``layer`` is none of ``types``, naming them."""
    if not isinstance(layer, types):
        *others, last = (kind.__name__ for kind in types)
        raise TypeError(f"{at}: {type(layer).__name__} is not a {', '.join(others)} or {last} "
                        "layer")


@dataclasses.dataclass(frozen=True)
class Node:
    """One layer of a network and the tensors it reads.

    Parameters
    ----------
    name : str
        The node's name, which is also the name of its output tensor; not :data:`INPUT`.
    layer : Dense, Conv2D, MaxPool2D, Flatten, AvgPool2D, GlobalAvgPool2D or Add
        What the node computes (the layer object is shared, not copied); in a float
        :class:`~hwgen.nn.CNN`, a float layer.
    inputs : str or sequence of str
        The names of the tensors the layer reads, in the order it takes them: :data:`INPUT`
        or the name of an earlier node. One name may be given as a plain string.

    Raises
    ------
    TypeError
        If ``name`` or an input is not a non-empty string.
    """

    name: str
    layer: object
    inputs: tuple

    def __post_init__(self):
        inputs = (self.inputs,) if isinstance(self.inputs, str) else tuple(self.inputs)
        object.__setattr__(self, "inputs", inputs)
        for what, value in (("name", self.name), *(("inputs", i) for i in inputs)):
            if not isinstance(value, str) or not value:
                raise TypeError(f"Node: field {what!r} holds {value!r}; allowed: a non-empty "
                                "string (a tensor name)")


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One tensor of a network, as :attr:`~hwgen.nn.QuantizedNetwork.tensors` describes it.

    Attributes
    ----------
    name : str
        :data:`INPUT`, or the name of the node that computes it.
    shape : tuple of int
        Per sample: ``(H, W, C)`` or ``(K,)``.
    scale : float or None
        The real value of one integer step, where the quantizer knows it.
    consumers : tuple of str
        The nodes that read it, in order; empty for the network's output.
    """

    name: str
    shape: tuple
    scale: float | None
    consumers: tuple


def as_nodes(items, owner="QuantizedNetwork"):
    """Return ``items`` as a tuple of :class:`Node`: nodes as they are, or a plain list of
    layers as the chain of nodes ``"layer0"``, ``"layer1"``, ... each reading the one before;
    ``owner`` names the network in the errors.

    Raises
    ------
    TypeError
        If ``items`` mixes nodes and layers.
    """
    items = list(items)
    nodes = [isinstance(item, Node) for item in items]
    if all(nodes):
        return tuple(items)
    if any(nodes):
        first = nodes.index(not nodes[0])
        raise TypeError(f"{owner}: item {first} is a {type(items[first]).__name__} "
                        f"but item 0 is a {type(items[0]).__name__}; allowed: all layers (a "
                        "chain) or all Node")
    return tuple(Node(chain_name(i), layer, INPUT if i == 0 else chain_name(i - 1))
                 for i, layer in enumerate(items))


def check_structure(nodes, arity, owner="QuantizedNetwork"):
    """Check the graph of ``nodes`` and return each tensor's consumers.

    Parameters
    ----------
    nodes : tuple of Node
        In topological order: each node reads only :data:`INPUT` and earlier nodes.
    arity : callable
        ``arity(layer)``: the number of inputs the layer's kind takes, or None for an object
        that is not a layer (its type is refused later, with the layer types allowed).
    owner : str
        The network's kind, which errors about a node's name start with.

    Returns
    -------
    dict
        Tensor name -> tuple of the names of the nodes that read it, in node order.

    Raises
    ------
    ValueError
        Naming the node and what is allowed: a duplicate or reserved name, an input that is
        no tensor, one computed by the node itself or later (a cycle or a forward reference),
        a number of inputs the layer does not take, or a node whose output nothing reads
        that is not the last (the network's output).
    """
    position = {}
    for index, node in enumerate(nodes):
        if node.name == INPUT or node.name in position:
            what = ("the name of the network input" if node.name == INPUT
                    else f"also the name of {where(position[node.name], node.name)}")
            raise ValueError(f"{owner}: node {index} is named {node.name!r}, {what}; "
                             f"allowed: a unique name other than {INPUT!r}")
        position[node.name] = index
    consumers = {INPUT: []} | {node.name: [] for node in nodes}
    for index, node in enumerate(nodes):
        at = where(index, node.name)
        earlier = [INPUT, *(n.name for n in nodes[:index])]
        for name in node.inputs:
            if name not in consumers:
                raise ValueError(f"{at}: input {name!r} is not a tensor of the network; "
                                 f"allowed: one of {earlier}")
            if name != INPUT and position[name] >= index:
                raise ValueError(f"{at}: input {name!r} is computed by "
                                 f"{where(position[name], name)}, not before it (a cycle or "
                                 f"a forward reference); allowed: one of {earlier}, nodes "
                                 "listed in topological order")
            consumers[name].append(node.name)
        count = arity(node.layer)
        if count is not None and len(node.inputs) != count:
            raise ValueError(f"{at}: a {type(node.layer).__name__} takes {count} input(s) but "
                             f"the node names {len(node.inputs)} {list(node.inputs)}; allowed: "
                             f"{count}")
    for index, node in enumerate(nodes[:-1]):
        if not consumers[node.name]:
            raise ValueError(f"{where(index, node.name)}: nothing reads its output and it is "
                             f"not the last node (the network's output, {nodes[-1].name!r}); "
                             "allowed: a node that a later node reads")
    return {name: tuple(dict.fromkeys(names)) for name, names in consumers.items()}


def relink(nodes, layers, chain, owner="QuantizedNetwork"):
    """Return ``nodes`` with ``layers`` (a network's list, which its user may have changed) as
    their layers: ``nodes`` itself if nothing changed, the chain of ``layers`` if ``chain``,
    else each node with the layer at its index; ``owner`` names the network in the errors.

    Raises
    ------
    ValueError
        If ``layers`` is empty, or the layers of a network built from nodes are not one per
        node.
    """
    if not layers:
        raise ValueError(f"{owner}: field 'layers' is empty; "
                         "allowed: at least one layer")
    if len(nodes) == len(layers) and all(
            node.layer is layer for node, layer in zip(nodes, layers, strict=True)):
        return nodes
    if chain:
        nodes = as_nodes(layers, owner)
    elif len(nodes) != len(layers):
        raise ValueError(f"{owner}: field 'layers' has {len(layers)} layers but the "
                         f"network has {len(nodes)} nodes; allowed: layers replaced in place, "
                         "or a new network of nodes")
    else:
        nodes = tuple(dataclasses.replace(node, layer=layer)
                      for node, layer in zip(nodes, layers, strict=True))
    return nodes
