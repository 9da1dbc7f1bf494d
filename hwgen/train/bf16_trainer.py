"""Training on bf16 devices as TPUs train: :class:`Bf16Trainer`.

fp32 master weights on the host; every matrix product on the devices, bf16 operands summed
in fp32 (docs/arithmetic.md, "bfloat16"); the loss, the softmax, the bias gradient and the
update in fp32 on the host. One step on a minibatch::

    host: W, b (fp32) ──round W to bf16, b to fp32──> one program per layer
    devices: h = bf16(relu(x·W + b)) for a hidden layer (the device's own output stage),
             fp32 scores x·W + b for the last; rows split over the devices
    host: softmax cross-entropy in fp32 ─> dY of the last layer
    for each layer, last to first:
        host: ReLU mask (h > 0), dY rounded to bf16
        devices: dW = Xᵀ·dY, the batch in tiles of `rows`, one program per tile; the host
                 adds the tiles' fp32 sums in batch order
                 dX = dY·Wᵀ (bf16 W, rows split)
    host: db = Σ dY (fp32); SGD with momentum in fp32

A hidden layer's output leaves the device as bf16 after its bias and ReLU (TPU-like: XLA
fuses them into the matrix product's output and keeps activations in bf16), and the scores
as fp32 (as mixed precision keeps the logits and the softmax in fp32). Every product's bits
are those of one device computing the whole batch, whatever the number of devices
(:class:`~hwgen.train.bf16_products.Bf16Products`), and the host's arithmetic is on whole
batches, so N devices give the weights of one, bit for bit.
"""

import numpy as np

from ..compiler import compile_network
from ..nn import MLP, to_bf16
from ..nn.bf16 import as_bf16, round_to_bf16
from ..nn.float_training import softmax_cross_entropy
from .bf16_products import Bf16Products
from .loop import StepResult, TrainingLoop, float_layers

__all__ = ["Bf16Trainer"]


def _bf16_weights(weight, index):
    """Return fp32 master ``weight`` rounded to bf16 (float32 holding them), refusing what
    rounds to Inf or NaN (a diverged training)."""
    rounded = as_bf16(round_to_bf16(weight))
    if not np.all(np.isfinite(rounded)):
        raise ValueError(f"layer {index}: the weights hold NaN or values beyond bf16 (a "
                         "diverged training? try a smaller learning rate); allowed: finite "
                         "values")
    return rounded


class Bf16Trainer(TrainingLoop):
    """Train a float MLP on ``dtype="bf16"`` devices, data parallel, with fp32 master weights.

    Parameters
    ----------
    model : MLP
        Trained in place: its weights and biases become float32 arrays (the master weights).
        Dense layers only so far (convolutions are left for later); the last without a ReLU.
    config : AcceleratorConfig
        The devices' configuration, ``dtype="bf16"``; its ``rows`` set the order of the sums.
    devices : sequence of device, or a pool
        See :class:`~hwgen.train.devices.DeviceGroup`.
    lr, momentum : float
        Of the SGD update, computed in fp32.

    Attributes
    ----------
    model, config, layers, group, products, history
        As for :class:`~hwgen.train.Trainer`; :attr:`host_macs` stays 0 (nothing to
        calibrate).

    Raises
    ------
    TypeError, ValueError
        For a model that is not an MLP, a last layer with a ReLU, an int8 configuration, a
        layer whose reduction one program cannot hold, bad hyperparameters, or the devices'
        errors.
    """

    dtype = "bf16"

    def __init__(self, model, config, devices, *, lr=0.05, momentum=0.9):
        super().__init__(model, config, devices, lr=lr, momentum=momentum)
        self.products = Bf16Products(self.group)
        for index, layer in enumerate(self.layers):
            k, n = layer.weight.shape
            # The forward pass sums over K, dX = dY·Wᵀ over N (not for the first layer).
            for size, width in ((k, n), (n, k) if index else (0, 0)):
                if size > self.products.max_reduction(width):
                    raise ValueError(f"layer {index} ({k}x{n}) needs a reduction of {size} "
                                     f"in one program; {config.name} holds "
                                     f"{self.products.max_reduction(width)}: allowed: "
                                     "smaller layers or a larger design")

    def take_model(self, model):
        """Return the MLP's layers after making its parameters float32 (in place)."""
        if not isinstance(model, MLP):
            raise TypeError(f"model is a {type(model).__name__}; allowed on bf16 devices: "
                            "hwgen.nn.MLP (convolutions are not trained in bf16 yet)")
        model.layers[:] = [(np.asarray(w, dtype=np.float32), np.asarray(b, dtype=np.float32))
                           for w, b in model.layers]
        return float_layers(model)

    def network(self):
        """Return the :class:`~hwgen.nn.Bf16Network` of the current weights
        (:func:`~hwgen.nn.to_bf16` with the design's rows)."""
        return to_bf16(self.model, rows=self.config.rows)

    def inference(self, x):
        """Return the program of :meth:`network` and ``x`` rounded to bf16."""
        network = self.network()
        return compile_network(network, self.config), network.quantize_input(x)

    def forward(self, x):
        """Return ``(inputs, weights, scores)`` of bf16 inputs ``x`` on the devices.

        ``inputs[i]`` is layer ``i``'s input (float32 holding bf16: ``x``, then each hidden
        layer's output as the device rounded it), ``weights[i]`` its bf16 weights, ``scores``
        the last layer's fp32 accumulators.
        """
        inputs, weights = [as_bf16(x)], []
        last = len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            weights.append(_bf16_weights(layer.weight, index))
            out = self.products.rows(inputs[-1], weights[-1], bias=layer.bias,
                                     relu=layer.relu, raw=index == last)
            inputs.append(out)
        return inputs[:-1], weights, inputs[-1]

    def step(self, x, y):
        """Train on one minibatch; return its :class:`StepResult`.

        Parameters
        ----------
        x : array_like of float, shape (M, K)
            Rounded to bf16 (:func:`~hwgen.nn.bf16.round_to_bf16`).
        y : array_like of int, shape (M,)

        Raises
        ------
        ValueError
            For inputs or labels of the wrong shape or range, or weights that diverged.
        """
        x, y = self.check_batch(x, y)
        inputs, weights, scores = self.forward(round_to_bf16(x))
        classes = self.classes
        loss, delta = softmax_cross_entropy(scores, np.eye(classes, dtype=np.float32)[y])
        grads = []
        for index in range(len(self.layers) - 1, -1, -1):
            if self.layers[index].relu:   # a hidden layer: its output as the device gave it
                delta = delta * (inputs[index + 1] > 0)
            dy = round_to_bf16(delta)
            grads = [self.products.transposed(inputs[index], dy), delta.sum(axis=0), *grads]
            if index:
                delta = self.products.rows(dy, weights[index].T)
        self.optimizer.step(grads)
        correct = int(np.sum(np.argmax(scores, axis=1) == y))
        return StepResult(loss=loss, correct=correct, rows=len(x))
