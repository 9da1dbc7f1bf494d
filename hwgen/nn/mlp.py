"""A small float multilayer perceptron in NumPy: the model that is trained, imported and quantized.

Training is deterministic under a seed: the initial weights come from the constructor's seed and
the minibatch order from :meth:`MLP.fit`'s, and nothing else draws random numbers.
"""

import itertools
import numbers

import numpy as np

from .float_training import check_labels, check_optimizer, minibatch_descent, softmax_cross_entropy
from .output_function import apply_output_function

__all__ = ["MLP"]


def _float_matrix(x, where, width):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != width:
        raise ValueError(f"{where}: x has shape {x.shape}; allowed: (M, {width})")
    return x


class MLP:
    """A chain of dense float layers, each optionally followed by a ReLU.

    ``forward`` computes ``a = a @ W + b`` for every layer, then ``max(a, 0)`` where the layer's
    ``relu`` flag is set; the last layer's output is the logits.

    Parameters
    ----------
    sizes : sequence of int
        Widths ``[K, H1, ..., N]`` (at least two): ``MLP([64, 32, 10])`` has two layers.
    seed : int
        Seed of the He-normal weight initialisation (biases start at zero).
    relu : sequence of bool, optional
        One flag per layer; by default a ReLU follows every layer except the last.

    Attributes
    ----------
    layers : list of (numpy.ndarray, numpy.ndarray)
        ``(W, b)`` per layer, float64, ``W`` of shape ``(K, N)`` and ``b`` of shape ``(N,)``.
    relu : list of bool
        Whether a ReLU follows each layer.
    history : list of float
        Mean training loss of every epoch run by :meth:`fit`.
    output_function : {None, "softmax", "log_softmax", "sigmoid"}
        What turns the logits into probabilities on the host; ``None`` unless an importer
        recorded a final ``Softmax``, ``LogSoftmax`` or ``Sigmoid`` (see
        :mod:`hwgen.nn.output_function`). :meth:`forward` returns the logits either way.
    """

    def __init__(self, sizes, seed=0, relu=None):
        sizes = list(sizes)
        if len(sizes) < 2 or not all(isinstance(s, numbers.Integral) and s >= 1 for s in sizes):
            raise ValueError(f"MLP: sizes={sizes!r}; allowed: at least two positive integers")
        self.seed = seed
        rng = np.random.default_rng(seed)
        layers = []
        for k, n in itertools.pairwise(sizes):
            # He initialisation keeps the activations' variance steady through ReLU layers.
            layers.append((rng.normal(0.0, np.sqrt(2.0 / k), size=(k, n)), np.zeros(n)))
        self._set_layers(layers, relu)

    @classmethod
    def from_layers(cls, layers, relu=None):
        """Build an MLP from given ``(W [K, N], b [N])`` pairs (copied as float64).

        Parameters
        ----------
        layers : sequence of (array_like, array_like)
        relu : sequence of bool, optional
            As for the constructor.

        Raises
        ------
        ValueError
            If the list is empty, a shape is wrong or consecutive widths do not match.
        """
        model = cls.__new__(cls)
        model.seed = None
        model._set_layers(layers, relu)
        return model

    def _set_layers(self, layers, relu):
        checked = []
        for index, (w, b) in enumerate(layers):
            weight = np.array(w, dtype=np.float64)
            bias = np.array(b, dtype=np.float64)
            if weight.ndim != 2 or bias.shape != (weight.shape[1],):
                raise ValueError(f"layer {index}: W has shape {weight.shape} and b {bias.shape}; "
                                 "allowed: W (K, N) and b (N,)")
            if checked and checked[-1][0].shape[1] != weight.shape[0]:
                raise ValueError(f"layer {index}: W has {weight.shape[0]} inputs but layer "
                                 f"{index - 1} has {checked[-1][0].shape[1]} outputs")
            checked.append((weight, bias))
        if not checked:
            raise ValueError("MLP: no layers; allowed: at least one (W, b) pair")
        if relu is None:
            relu = [True] * (len(checked) - 1) + [False]
        relu = [bool(r) for r in relu]
        if len(relu) != len(checked):
            raise ValueError(f"MLP: {len(relu)} relu flags for {len(checked)} layers")
        self.layers = checked
        self.relu = relu
        self.history = []
        self.output_function = None  # set by the importers from a final Softmax/Sigmoid

    @property
    def sizes(self):
        """Widths ``[K, H1, ..., N]``."""
        return [self.layers[0][0].shape[0]] + [w.shape[1] for w, _ in self.layers]

    @property
    def in_features(self):
        """Width of the input."""
        return self.sizes[0]

    @property
    def out_features(self):
        """Width of the output (number of classes)."""
        return self.sizes[-1]

    def __repr__(self):
        return f"MLP({self.sizes}, relu={self.relu})"

    def forward_trace(self, x):
        """Return every layer's output (after its ReLU, if any) for float inputs ``x (M, K)``."""
        a = _float_matrix(x, "MLP.forward", self.in_features)
        outputs = []
        for (weight, bias), relu in zip(self.layers, self.relu, strict=True):
            a = a @ weight + bias
            if relu:
                a = np.maximum(a, 0.0)
            outputs.append(a)
        return outputs

    def forward(self, x):
        """Return the float logits ``(M, N)`` for inputs ``x (M, K)``."""
        return self.forward_trace(x)[-1]

    def probabilities(self, x):
        """Return :attr:`output_function` applied to the logits of ``x`` (the logits when it
        is ``None``); see :func:`hwgen.nn.output_function.apply_output_function`."""
        return apply_output_function(self.output_function, self.forward(x))

    def predict(self, x):
        """Return the class (argmax of the logits) of each row of ``x``."""
        return np.argmax(self.forward(x), axis=1)

    def accuracy(self, x, y):
        """Return the fraction of rows of ``x`` whose predicted class equals ``y``."""
        return float(np.mean(self.predict(x) == np.asarray(y)))

    def fit(self, x, y, *, epochs=30, batch_size=32, lr=3e-3, optimizer="adam", momentum=0.9,
            weight_decay=0.0, seed=None):
        """Train with softmax cross-entropy by minibatch gradient descent; return ``self``.

        Parameters
        ----------
        x : array_like of float, shape (M, K)
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
        seed : int, optional
            Seed of the minibatch shuffling; by default the constructor's seed.

        Returns
        -------
        MLP
            ``self``, trained in place; :attr:`history` gets one mean loss per epoch.
        """
        x = _float_matrix(x, "MLP.fit", self.in_features)
        y = check_labels(y, x.shape[0], self.out_features, "MLP.fit")
        check_optimizer(optimizer, batch_size, "MLP.fit")
        rng = np.random.default_rng(self.seed if seed is None else seed)
        # The arrays stored in self.layers, updated in place.
        params = [p for layer in self.layers for p in layer]
        self.history.extend(minibatch_descent(
            params, lambda xb, hb: self._gradients(xb, hb, weight_decay), x,
            np.eye(self.out_features)[y], epochs=epochs, batch_size=batch_size, lr=lr,
            optimizer=optimizer, momentum=momentum, rng=rng))
        return self

    def _gradients(self, x, onehot, weight_decay):
        """Return the mean cross-entropy loss and the gradients in the order of ``params``."""
        activations = [x, *self.forward_trace(x)]
        loss, delta = softmax_cross_entropy(activations[-1], onehot)
        grads = []
        for index in range(len(self.layers) - 1, -1, -1):
            weight, _ = self.layers[index]
            if self.relu[index]:
                # The ReLU passes the gradient where its output is positive.
                delta = delta * (activations[index + 1] > 0)
            grads.append(delta.sum(axis=0))
            grads.append(activations[index].T @ delta + weight_decay * weight)
            delta = delta @ weight.T
        grads.reverse()
        return loss, grads
