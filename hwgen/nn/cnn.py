"""A float network of convolution, pooling, flatten, dense and add layers on NHWC input, in
NumPy.

The float counterpart of :class:`~hwgen.nn.QuantizedNetwork`: the same chains and graphs of
named tensors (:class:`~hwgen.nn.Node`) and the same shape rules; a chain is trained by
minibatch gradient descent with softmax cross-entropy, and either is quantized by
:func:`~hwgen.nn.quantize`. Deterministic: the weights come from the layers (see
:meth:`FloatConv2D.random <hwgen.nn.FloatConv2D.random>`) and the minibatch order from
:meth:`CNN.fit`'s seed.
"""

import numpy as np

from ._ints import sample_shape
from .float_graph import evaluate, float_arity, float_tensor_shapes
from .float_layers import backward, forward_cached
from .float_training import check_labels, check_optimizer, minibatch_descent, softmax_cross_entropy
from .graph import INPUT, Node, as_nodes, check_structure, relink
from .output_function import apply_output_function, check_output_function

__all__ = ["CNN"]


class CNN:
    """A chain or a graph of float layers: :class:`FloatConv2D`, :class:`MaxPool2D`,
    :class:`FloatAvgPool2D`, :class:`FloatGlobalAvgPool2D`, :class:`Flatten`,
    :class:`FloatDense` and :class:`~hwgen.nn.FloatAdd` (two inputs), the convolutions, dense
    layers, average pools and adds each followed by their activation (see
    :mod:`hwgen.nn.float_activation`).

    A plain list of layers is a chain, each layer reading the previous one's output. A list of
    :class:`~hwgen.nn.Node` is a graph, each node naming the tensors it reads (``"input"`` or
    an earlier node's name) as in :class:`~hwgen.nn.QuantizedNetwork`; the last node's output
    is the network's. A graph runs (:meth:`forward`, :meth:`forward_tensors`) and quantizes
    but does not train (:meth:`fit` refuses it).

    Inputs are NHWC ``(M, H, W, C)`` when the first layer is spatial, rows ``(M, K)`` when it
    is a :class:`FloatDense`. The last layer's output is the logits ``(M, N)`` (a network
    whose output is spatial can run but not be trained or predict).

    Parameters
    ----------
    layers : sequence of float layers (see above), or sequence of Node
        At least one layer; each layer's input is the previous layer's output, or the tensors
        its node names (checked as in :class:`~hwgen.nn.QuantizedNetwork`).
    input_shape : tuple of int, optional
        Shape of one sample, ``(H, W, C)`` or ``(K,)``; required unless the first layer is a
        :class:`FloatDense`.
    output_function : {None, "softmax", "log_softmax", "sigmoid"}
        What turns the logits into probabilities on the host (recorded by the importers from
        a final ``Softmax``, ``LogSoftmax`` or ``Sigmoid``; :meth:`forward` returns the
        logits either way, see :meth:`probabilities`).

    Attributes
    ----------
    layers : list
        The nodes' layers, in node order.
    nodes : tuple of Node
        Node ``i`` is named ``"layer<i>"`` in a chain.
    input_shape : tuple of int or None
    output_function : str or None
    history : list of float
        Mean training loss of every epoch run by :meth:`fit`.

    Raises
    ------
    ValueError
        Naming the layer index, the field and what is allowed, for a layer whose input does not
        fit it (a dense layer after a spatial one without a :class:`Flatten`, a channel count
        that differs from ``C_in``, a kernel or window larger than the (padded) input, an
        add of two shapes), a missing or malformed ``input_shape``, an empty layer list, or a
        graph that is not well formed (as for :class:`~hwgen.nn.QuantizedNetwork`).
    TypeError
        If a layer is not one of the layer types, or nodes and layers are mixed.
    """

    def __init__(self, layers, *, input_shape=None, output_function=None):
        given = list(layers)
        self._chain = not (given and isinstance(given[0], Node))
        self._nodes = as_nodes(given, "CNN")
        self.layers = [node.layer for node in self._nodes]
        self.input_shape = sample_shape(input_shape, "CNN")
        self.output_function = check_output_function(output_function, "CNN")
        self.history = []
        self._check()  # errors show at construction, not at the first forward

    @property
    def nodes(self):
        """The nodes, in topological order, built from :attr:`layers` as it is now."""
        self._nodes = relink(self._nodes, self.layers, self._chain, "CNN")
        return self._nodes

    @property
    def is_chain(self):
        """Whether the network is a chain: each node reads the one before (node 0 the input)."""
        return all(node.inputs == ((self.nodes[i - 1].name,) if i else (INPUT,))
                   for i, node in enumerate(self.nodes))

    @property
    def shapes(self):
        """``[(input_shape, output_shape)]`` of every layer, per sample (no batch axis); the
        input shape is that of the node's first input."""
        shapes = self._check()
        return [(shapes[node.inputs[0]], shapes[node.name]) for node in self.nodes]

    @property
    def tensor_shapes(self):
        """Every tensor's per-sample shape by name, ``"input"`` first then in node order."""
        return self._check()

    def _check(self):
        nodes = self.nodes
        check_structure(nodes, float_arity, "CNN")
        return float_tensor_shapes(nodes, self.input_shape)

    @property
    def output_shape(self):
        """Shape of one output sample, ``(N,)`` for logits."""
        return self.shapes[-1][1]

    @property
    def out_features(self):
        """Length of the output's last axis (the number of classes)."""
        return self.output_shape[-1]

    @property
    def params(self):
        """Every layer's ``[weight, bias]`` in layer order: the arrays training updates."""
        return [p for layer in self.layers if hasattr(layer, "params") for p in layer.params]

    def __repr__(self):
        if self.is_chain:
            body = ", ".join(repr(layer) for layer in self.layers)
        else:
            body = ", ".join(f"{node.name}={node.layer!r} <- {', '.join(node.inputs)}"
                             for node in self.nodes)
        return f"CNN([{body}], input_shape={self.shapes[0][0]})"

    def _check_x(self, x, where):
        x = np.asarray(x, dtype=np.float64)
        shape = self.shapes[0][0]
        if x.ndim != len(shape) + 1 or x.shape[1:] != shape:
            raise ValueError(f"{where}: x has shape {x.shape}; allowed: "
                             f"(M, {', '.join(map(str, shape))})")
        return x

    def forward_tensors(self, x):
        """Return every tensor by name for float inputs ``x``: ``"input"`` (``x`` as float64),
        then each node's output (after its activation) in node order.

        Parameters
        ----------
        x : array_like of float, shape (M, H, W, C) or (M, K)

        Returns
        -------
        dict of str to numpy.ndarray of float64
            Of shapes ``(M, *tensor_shapes[name])``.
        """
        return evaluate(self.nodes, self._check_x(x, "CNN.forward"))

    def forward_trace(self, x):
        """Return every layer's output (after its activation) for float inputs ``x``, in node
        order: ``outputs[i]`` of shape ``(M, *shapes[i][1])`` (see :meth:`forward_tensors`).
        """
        values = self.forward_tensors(x)
        return [values[node.name] for node in self.nodes]

    def forward(self, x):
        """Return the last node's output (the logits) for float inputs ``x``."""
        return self.forward_tensors(x)[self.nodes[-1].name]

    def probabilities(self, x):
        """Return :attr:`output_function` applied to the logits of ``x`` (the logits when it
        is ``None``); see :func:`hwgen.nn.output_function.apply_output_function`."""
        return apply_output_function(self.output_function, self.forward(x))

    def predict(self, x):
        """Return the class (argmax of the logits) of each sample of ``x``.

        Raises
        ------
        ValueError
            If the network's output is spatial (it has no classes) or ``x`` has the wrong shape.
        """
        if len(self.output_shape) != 1:
            raise ValueError(f"CNN.predict: the output has shape {self.output_shape}; "
                             "allowed: flat logits (N,)")
        return np.argmax(self.forward(x), axis=1)

    def accuracy(self, x, y):
        """Return the fraction of samples of ``x`` whose predicted class equals ``y``."""
        return float(np.mean(self.predict(x) == np.asarray(y)))

    def fit(self, x, y, *, epochs=30, batch_size=32, lr=3e-3, optimizer="adam", momentum=0.9,
            weight_decay=0.0, seed=0):
        """Train with softmax cross-entropy by minibatch gradient descent; return ``self``.

        Parameters
        ----------
        x : array_like of float, shape (M, H, W, C) or (M, K)
        y : array_like of int, shape (M,)
            Class labels in ``0 .. N - 1``.
        epochs : int
            Passes over the data.
        batch_size : int
        lr : float
            Learning rate.
        optimizer : {"adam", "sgd"}
            Adam (``beta1 = 0.9, beta2 = 0.999``) or SGD with ``momentum``.
        momentum : float
            Momentum of ``"sgd"``.
        weight_decay : float
            L2 penalty added to the weights' gradient (not the biases').
        seed : int
            Seed of the minibatch shuffling.

        Returns
        -------
        CNN
            ``self``, trained in place; :attr:`history` gets one mean loss per epoch.

        Raises
        ------
        ValueError
            For a graph (only chains train here), inputs of the wrong shape, bad labels, an
            unknown optimizer, or a network whose output is not flat logits ``(N,)``.
        """
        if not self.is_chain:
            raise ValueError("CNN.fit: the network is a graph of nodes (a node reads other than "
                             "the node before it); allowed: a chain of layers. Train a graph "
                             "elsewhere (e.g. in PyTorch) and import it")
        x = self._check_x(x, "CNN.fit")
        if len(self.output_shape) != 1:
            raise ValueError(f"CNN.fit: the output has shape {self.output_shape}; allowed: "
                             "flat logits (N,), e.g. a Flatten and a FloatDense at the end")
        y = check_labels(y, x.shape[0], self.out_features, "CNN.fit")
        check_optimizer(optimizer, batch_size, "CNN.fit")
        self.history.extend(minibatch_descent(
            self.params, lambda xb, hb: self._gradients(xb, hb, weight_decay), x,
            np.eye(self.out_features)[y], epochs=epochs, batch_size=batch_size, lr=lr,
            optimizer=optimizer, momentum=momentum, rng=np.random.default_rng(seed)))
        return self

    def _gradients(self, x, onehot, weight_decay=0.0):
        """Return the mean cross-entropy loss and the gradients in the order of :attr:`params`."""
        caches = []
        a = x
        for layer in self.layers:
            a, cache = forward_cached(layer, a)
            caches.append(cache)
        loss, grad = softmax_cross_entropy(a, onehot)
        grads = []
        for index in range(len(self.layers) - 1, -1, -1):
            layer = self.layers[index]
            grad, layer_grads = backward(layer, caches[index], grad, need_input=index > 0)
            if layer_grads:
                weight_grad, bias_grad = layer_grads
                grads += [bias_grad, weight_grad + weight_decay * layer.weight]
        grads.reverse()
        return loss, grads

