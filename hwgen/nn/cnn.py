"""A float network of convolution, pooling, flatten and dense layers on NHWC input, in NumPy.

The float counterpart of :class:`~hwgen.nn.QuantizedNetwork`: the same layer chain and shape
rules, trained by minibatch gradient descent with softmax cross-entropy, then quantized by
:func:`~hwgen.nn.quantize`. Deterministic: the weights come from the layers (see
:meth:`FloatConv2D.random <hwgen.nn.FloatConv2D.random>`) and the minibatch order from
:meth:`CNN.fit`'s seed.
"""

import numpy as np

from ._ints import sample_shape
from .flatten import Flatten
from .float_layers import FloatConv2D, FloatDense, backward, forward_cached
from .float_pool import FloatAvgPool2D, FloatGlobalAvgPool2D
from .float_training import check_labels, check_optimizer, minibatch_descent, softmax_cross_entropy
from .maxpool import MaxPool2D
from .output_function import apply_output_function, check_output_function

__all__ = ["CNN"]

LAYER_TYPES = (FloatConv2D, FloatDense, MaxPool2D, FloatAvgPool2D, FloatGlobalAvgPool2D, Flatten)


class CNN:
    """A chain of float layers: :class:`FloatConv2D`, :class:`MaxPool2D`,
    :class:`FloatAvgPool2D`, :class:`FloatGlobalAvgPool2D`, :class:`Flatten` and
    :class:`FloatDense`, the convolutions, dense layers and average pools each followed by
    their activation (see :mod:`hwgen.nn.float_activation`).

    Inputs are NHWC ``(M, H, W, C)`` when the first layer is spatial, rows ``(M, K)`` when it
    is a :class:`FloatDense`. The last layer's output is the logits ``(M, N)`` (a network
    whose output is spatial can run but not be trained or predict).

    Parameters
    ----------
    layers : sequence of FloatConv2D, FloatDense, MaxPool2D, FloatAvgPool2D,
            FloatGlobalAvgPool2D or Flatten
        At least one layer; each layer's input is the previous layer's output (checked as in
        :class:`~hwgen.nn.QuantizedNetwork`).
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
    input_shape : tuple of int or None
    output_function : str or None
    history : list of float
        Mean training loss of every epoch run by :meth:`fit`.

    Raises
    ------
    ValueError
        Naming the layer index, the field and what is allowed, for a layer whose input does not
        fit it (a dense layer after a spatial one without a :class:`Flatten`, a channel count
        that differs from ``C_in``, a kernel or window larger than the (padded) input), a
        missing or malformed ``input_shape`` or an empty layer list.
    TypeError
        If a layer is not one of the layer types.
    """

    def __init__(self, layers, *, input_shape=None, output_function=None):
        self.layers = list(layers)
        if not self.layers:
            raise ValueError("CNN: field 'layers' is empty; allowed: at least one layer")
        self.input_shape = sample_shape(input_shape, "CNN")
        self.output_function = check_output_function(output_function, "CNN")
        self.history = []
        self._check()  # errors show at construction, not at the first forward

    @property
    def shapes(self):
        """``[(input_shape, output_shape)]`` of every layer, per sample (no batch axis)."""
        return self._check()

    def _check(self):
        shape, source = self.input_shape, "input_shape"
        shapes = []
        for index, layer in enumerate(self.layers):
            if not isinstance(layer, LAYER_TYPES):
                raise TypeError(f"layer {index}: {type(layer).__name__} is not a FloatConv2D, "
                                "FloatDense, MaxPool2D, FloatAvgPool2D, FloatGlobalAvgPool2D "
                                "or Flatten layer")
            where = f"layer {index}"
            if isinstance(layer, MaxPool2D | Flatten):
                layer.check(where)
            if shape is None:
                if not isinstance(layer, FloatDense):
                    raise ValueError(f"CNN: field 'input_shape' is None but layer 0 is a "
                                     f"{type(layer).__name__}; allowed: (H, W, C), the shape of "
                                     "one NHWC input sample")
                shape = (layer.weight.shape[0],)
            out = layer._output_shape(shape, where, source)
            shapes.append((shape, out))
            shape, source = out, f"layer {index}"
        return shapes

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
        body = ", ".join(repr(layer) for layer in self.layers)
        return f"CNN([{body}], input_shape={self.shapes[0][0]})"

    def _check_x(self, x, where):
        x = np.asarray(x, dtype=np.float64)
        shape = self.shapes[0][0]
        if x.ndim != len(shape) + 1 or x.shape[1:] != shape:
            raise ValueError(f"{where}: x has shape {x.shape}; allowed: "
                             f"(M, {', '.join(map(str, shape))})")
        return x

    def forward_trace(self, x):
        """Return every layer's output (after its ReLU, if any) for float inputs ``x``.

        Parameters
        ----------
        x : array_like of float, shape (M, H, W, C) or (M, K)

        Returns
        -------
        list of numpy.ndarray of float64
            ``outputs[i]`` of shape ``(M, *shapes[i][1])``.
        """
        a = self._check_x(x, "CNN.forward")
        outputs = []
        for layer in self.layers:
            a = forward_cached(layer, a)[0]
            outputs.append(a)
        return outputs

    def forward(self, x):
        """Return the last layer's output (the logits) for float inputs ``x``."""
        return self.forward_trace(x)[-1]

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
            For inputs of the wrong shape, bad labels, an unknown optimizer, or a network whose
            output is not flat logits ``(N,)``.
        """
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

