"""The graph an importer builds: named tensors, what each one still owes, and who reads it.

An importer walks a source graph (a traced PyTorch module, an ONNX graph) in topological order.
Every source tensor gets a :class:`TensorState`: the tensor of ours it stands for (the network
input, or the node that computes it), its shape in our layout, and what is still pending on it
(a flatten whose order the next dense layer converts, a zero padding the next convolution takes,
a final Softmax). Ops that only alias or fold (Dropout, a BatchNorm or an activation folded into
the layer before) map a source tensor onto an existing tensor of ours.

Folding changes what the folded-into layer computes, so it is allowed only when nothing else
reads that layer's output: :attr:`TensorState.private` says whether every source tensor from
the fold target's output to this one has a single reader (``uses``). A chain (``nn.Sequential``,
a chain of ONNX nodes) is the graph in which every tensor has one reader, and builds the same
model as before graphs: an :class:`~hwgen.nn.MLP` or a chain :class:`~hwgen.nn.CNN`.
"""

import copy
import dataclasses

from .cnn import CNN
from .flatten import Flatten
from .float_add import FloatAdd
from .float_layers import FloatConv2D, FloatDense
from .graph import INPUT, Node
from .maxpool import MaxPool2D
from .mlp import MLP

__all__ = ["TensorState", "Tensors"]


@dataclasses.dataclass
class TensorState:
    """What an importer knows about one source tensor.

    Attributes
    ----------
    node : str
        Our tensor it stands for: :data:`~hwgen.nn.graph.INPUT` or a node's name.
    shape : tuple of int or None
        Per sample, in our layout; ``None`` while unknown (rows before the first dense layer
        of a model imported without a shape, or after an offender).
    origin : str
        How messages name the tensor.
    pending : tuple or None
        A Flatten in the source's ``(c, h, w)`` order that the next dense layer converts:
        ``(name, kind, (H, W, C))``.
    bare : bool
        The tensor is a dense or convolution layer's output with nothing applied after it (a
        BatchNorm can still fold into it).
    padding, final : tuple or None
        A zero padding ``(name, kind, pads)`` that only a convolution may read, a final
        function ``(name, kind, function)`` that nothing may read.
    target : str or None
        The node an activation on this tensor folds into (through max pooling and flatten,
        with which activations commute), if any.
    private : bool
        Nothing but the path to here reads the tensors from ``target``'s output on, so that
        folding into it changes no other reader's value.
    known : bool
        False after an offender, whose effect is unknown: later checks are skipped rather than
        guessed, so that no offender is reported that is not one.
    """

    node: str
    shape: tuple | None
    origin: str = "the input"
    pending: tuple | None = None
    bare: bool = False
    padding: tuple | None = None
    final: tuple | None = None
    target: str | None = None
    private: bool = True
    known: bool = True


class Tensors:
    """The tensors and nodes of a graph being imported; the base of
    :class:`~hwgen.nn.import_chain.Chain`, whose layer ops act on :attr:`state`, the tensor
    being read. A graph walker calls :meth:`read` before an op and :meth:`write` after it; a
    chain calls neither, so each op reads the previous op's output.

    Parameters
    ----------
    source : str
        ``"PyTorch"`` or ``"ONNX"``, for the error message.
    input_shape : tuple of int or None
    uses : dict, optional
        Source tensor name -> how many times the graph reads it (the graph's output counts
        once); a tensor not in it is read once.
    """

    def __init__(self, source, input_shape, uses=None):
        self.source = source
        self.input_shape = input_shape
        self.state = TensorState(INPUT, input_shape)
        self.states = {}
        self.uses = dict(uses or {})
        self.nodes = []
        self.layers = {}  # node name -> layer
        self.offenders = []
        self.output_function = None

    def alias(self, tensor, state=None):
        """Let source tensor ``tensor`` stand for ``state`` (default: the network input)."""
        self.states[tensor] = state or TensorState(INPUT, self.input_shape)

    def read(self, tensor):
        """Make source tensor ``tensor`` the one the next op reads; return its state."""
        state = copy.copy(self.states[tensor])
        state.private = state.private and self.uses.get(tensor, 1) <= 1
        self.state = state
        return state

    def write(self, tensor):
        """Record the running state as source tensor ``tensor``, the op's output."""
        self.states[tensor] = self.state

    def offender(self, name, kind, reason):
        """Record an unsupported layer; the running tensor becomes unknown."""
        self.follows(name, kind)
        self.offenders.append((name, kind, reason))
        self.unknown(target=self.state.target)

    def follows(self, name, kind):
        """Note a layer that computes on the running tensor: a final function on it, or a zero
        padding that is not a convolution's, is then misplaced."""
        state = self.state
        for pending, place in (("padding", "right before a convolution"),
                               ("final", "as the model's last layer")):
            if getattr(state, pending) is not None:
                held_name, held_kind, _ = getattr(state, pending)
                setattr(state, pending, None)
                self.offenders.append((held_name, held_kind, f"supported only {place}, but "
                                                             f"{name} ({kind}) follows it"))
        state.bare = False

    def unknown(self, shape=None, target=None):
        """Make the running tensor unknown (after an offender); an activation on it still
        folds into ``target``, so that its own faults are listed too."""
        self.state = dataclasses.replace(self.state, shape=shape, pending=None, bare=False,
                                         target=target, private=True, known=False)

    def layer(self, node):
        """Return the layer of node ``node``."""
        return self.layers[node]

    def _unique(self, name):
        name = name or "node"
        unique, count = name, 1
        while unique in self.layers or unique == INPUT:
            count += 1
            unique = f"{name}_{count}"
        return unique

    def _node(self, name, layer, inputs):
        """Append a node computing ``layer`` of our tensors ``inputs``; return its name."""
        unique = self._unique(name)
        self.nodes.append(Node(unique, layer, tuple(inputs)))
        self.layers[unique] = layer
        return unique

    def _advance(self, layer, shape, name):
        """Append ``layer`` reading the running tensor; its output becomes the running one.

        An activation later folds into ``layer`` when it can (:meth:`Activated.then
        <hwgen.nn.float_activation.Activated.then>`), or through max pooling and flatten into
        what they read.
        """
        state = self.state
        node = self._node(name, layer, (state.node,))
        if isinstance(layer, MaxPool2D | Flatten):
            target, private = state.target, state.private
        else:
            target, private = (node if hasattr(layer, "then") else None), True
        self.state = TensorState(node, shape, origin=f"{name!r}", pending=state.pending,
                                 target=target, private=private, known=state.known)

    def add(self, name, kind, a, b):
        """Add source tensors ``a`` and ``b`` element-wise (a ``FloatAdd``); the output is the
        running tensor, to :meth:`write`."""
        states = []
        for tensor in (a, b):
            self.read(tensor)
            self.follows(name, kind)
            states.append(self.state)
        first, second = states
        reason = _add_reason(first, second)
        if not (first.known and second.known):
            self.unknown(first.shape if first.known else second.shape)
        elif reason:
            self.offenders.append((name, kind, reason))
            self.unknown(first.shape)
        else:
            node = self._node(name, FloatAdd(), (first.node, second.node))
            self.state = TensorState(node, first.shape, origin=f"{name!r}",
                                     pending=first.pending, target=node)

    def live_nodes(self, output):
        """Return the nodes the network's output ``output`` (our tensor) depends on, in order."""
        needed = {output}
        for node in reversed(self.nodes):
            if node.name in needed:
                needed.update(node.inputs)
        return [node for node in self.nodes if node.name in needed]

    def model(self, nodes):
        """Return the network of ``nodes``: an :class:`MLP` for a chain of dense layers on rows
        with ReLUs or none, a chain :class:`CNN` for any other chain, else a graph CNN."""
        layers = [node.layer for node in nodes]
        chain = all(node.inputs == ((nodes[i - 1].name,) if i else (INPUT,))
                    for i, node in enumerate(nodes))
        if chain and all(isinstance(layer, FloatDense) and not layer.bounded
                         and layer.activation != "leaky_relu" for layer in layers):
            model = MLP.from_layers([(layer.weight, layer.bias) for layer in layers],
                                    [layer.relu for layer in layers])
            model.output_function = self.output_function
            return model
        return CNN(layers if chain else nodes, input_shape=self.input_shape,
                   output_function=self.output_function)


def _add_reason(first, second):
    """Why two tensors cannot be added, or ``None``."""
    if first.shape != second.shape:
        return (f"adds {first.shape} ({first.origin}) and {second.shape} ({second.origin}); "
                "supported: two tensors of one shape")
    orders = [None if s.pending is None else s.pending[2] for s in (first, second)]
    if orders[0] != orders[1]:
        flat = first.origin if orders[0] else second.origin
        return (f"adds a tensor flattened in (c, h, w) order ({flat}) to one that is not; "
                "supported: both flattened alike, or an add before the flatten")
    return None


def is_dense(layer):
    """Whether a BatchNorm or a bias folds into ``layer``."""
    return isinstance(layer, FloatDense | FloatConv2D)
