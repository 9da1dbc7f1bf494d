"""Data-parallel minibatch SGD whose matrix products run on the devices: :class:`Trainer`.

One step on a minibatch::

    host: float parameters ──quantize (current scales)──> program with read-out
    devices: forward pass, shard d of the rows on device d, every layer's output read out
    host: dequantized logits ─> softmax cross-entropy ─> dY of the last layer
    for each layer, last to first:
        host: ReLU mask from the read-out, dY quantized per tensor
        devices: dW = Xᵀ·dY (each device its shard; the host sums the integers, exactly)
                 dX = dY·Wᵀ (rows split over the devices)
    host: SGD update of the float parameters; activation scales follow the read-out

Every number that crosses from one device to the host is an exact integer, and the host does
the same float operations on the same integers whatever the number of devices, so a training
on N devices gives bit-identical weights after every step to one device with the same batches.
"""

import numbers

import numpy as np

from ..compiler import compile_network
from ..nn import CNN
from ..nn.float_training import softmax_cross_entropy
from .layers import Step, quantize_model
from .loop import StepResult, TrainingLoop, as_input, float_layers, positive_int
from .products import Products
from .scales import ActivationScales

__all__ = ["StepResult", "Trainer", "float_layers"]


class Trainer(TrainingLoop):
    """Train a float model with its matrix products on int8 (or wider integer) devices, data
    parallel (the loop: :class:`~hwgen.train.loop.TrainingLoop`).

    Parameters
    ----------
    model : MLP or CNN
        Trained in place. Its last layer must be a dense (or convolution) layer without a
        ReLU: its raw accumulators are the logits.
    config : AcceleratorConfig
        The devices' configuration (``dtype="int8"``); its widths quantize the forward pass
        and every operand.
    devices : sequence of device, or a pool
        See :class:`~hwgen.train.devices.DeviceGroup`.
    lr, momentum : float
        Of the SGD update (:class:`~hwgen.train.sgd.SGD`).
    calibration_rows : int
        Training samples of the float forward pass that calibrates the activation scales
        once, on the host.
    scale_rate : float
        How fast the activation scales follow the read-out
        (:class:`~hwgen.train.scales.ActivationScales`).

    Attributes
    ----------
    model, config, layers, group, scales, history
        ``history`` holds the :class:`EpochReport` of every epoch of :meth:`fit`.
    host_macs : int
        Multiply-accumulates of the training done on the host (the calibration).

    Raises
    ------
    TypeError, ValueError
        For a model of another type or with a layer that cannot be trained on the devices, a
        last layer with a ReLU or without parameters, a bf16 configuration
        (:class:`~hwgen.train.Bf16Trainer`), bad hyperparameters, or the devices' errors (see
        :class:`DeviceGroup`).
    """

    dtype = "int8"

    def __init__(self, model, config, devices, *, lr=0.05, momentum=0.9, calibration_rows=256,
                 scale_rate=0.1):
        super().__init__(model, config, devices, lr=lr, momentum=momentum)
        self.products = Products(self.group)
        self.calibration_rows = positive_int("calibration_rows", calibration_rows)
        if isinstance(scale_rate, bool) or not isinstance(scale_rate, numbers.Real) \
                or not 0 < scale_rate <= 1:
            raise ValueError(f"scale_rate={scale_rate!r}; allowed: a number in (0, 1]")
        self.scale_rate = scale_rate
        self.scales = None

    # -- the quantized network -------------------------------------------------------------------

    def calibrate(self, x):
        """Measure the activation scales on the first :attr:`calibration_rows` samples of
        ``x`` with a float forward pass on the host (counted in :attr:`host_macs`)."""
        x = self.check_x(x, "calibrate")[:self.calibration_rows]
        if not len(x):
            raise ValueError("calibrate: x has no samples; allowed: at least one")
        self.scales = ActivationScales.calibrate(self.layers, x, self.config.in_bits,
                                                 rate=self.scale_rate)
        shapes = CNN(self.layers, input_shape=self.input_shape).shapes
        self.host_macs += len(x) * sum(
            kind.macs_per_sample(layer, *shape)
            for layer, kind, shape in zip(self.layers, self.kinds, shapes, strict=True))

    def network(self):
        """Return the :class:`~hwgen.nn.QuantizedNetwork` of the current weights and scales.

        Raises
        ------
        RuntimeError
            Before the scales are calibrated (:meth:`calibrate`, or :meth:`fit`).
        """
        if self.scales is None:
            raise RuntimeError("network: the activation scales are not calibrated yet; call "
                               "calibrate(x) or fit(...) first")
        return quantize_model(self.layers, self.scales, self.config, self.input_shape)

    # -- one step --------------------------------------------------------------------------------

    def _forward(self, network, x_int):
        """Return every layer's output of the network on ``x_int``, run on the devices."""
        program = compile_network(network, self.config, readout=True)
        parts = [p for p in self.run(program, as_input(program, x_int), "all")
                 if p is not None]
        if len(program.layer_outputs) != len(network.layers):
            raise RuntimeError(f"the program reads out {len(program.layer_outputs)} outputs for "
                               f"{len(network.layers)} layers; the training needs one per "
                               "layer")
        trace = []
        for index, (_, shape) in enumerate(network.shapes):
            rows = np.concatenate([p[index] for p in parts], axis=0)
            trace.append(rows.reshape(len(x_int), *shape))
        return trace

    def step(self, x, y):
        """Train on one minibatch; return its :class:`StepResult`.

        Parameters
        ----------
        x : array_like of float, shape (M, *sample_shape)
        y : array_like of int, shape (M,)

        Raises
        ------
        ValueError
            For inputs or labels of the wrong shape or range.
        RuntimeError
            Before the scales are calibrated.
        """
        x, y = self.check_batch(x, y)
        classes = self.classes
        network = self.network()
        x_int = network.quantize_input(x)
        trace = self._forward(network, x_int)
        logits = trace[-1] * network.output_scale
        loss, delta = softmax_cross_entropy(logits, np.eye(classes)[y])
        grads = []
        for index in range(len(self.layers) - 1, -1, -1):
            step = Step(x=trace[index - 1] if index else x_int, y=trace[index],
                        x_scale=self.scales.input_of(index), widths=self.config)
            delta, layer_grads = self.kinds[index].backward(
                self.layers[index], step, delta, self.products, need_input=index > 0)
            grads = layer_grads + grads
        self.optimizer.step(grads)
        last = len(self.layers) - 1
        for index in range(last):
            self.scales.observe(index, trace[index])
        self.scales.observe(last, trace[last], scale=float(network.output_scale[0]))
        correct = int(np.sum(np.argmax(logits, axis=1) == y))
        return StepResult(loss=loss, correct=correct, rows=len(x))

    # -- the loop's hooks ------------------------------------------------------------------------

    def prepare(self, x):
        """Calibrate the scales on ``x`` unless they are (:meth:`fit` calls this first)."""
        if self.scales is None:
            self.calibrate(x)

    def inference(self, x):
        """Return the program of the current quantized network (without read-out) and ``x``
        quantized as its inputs."""
        network = self.network()
        program = compile_network(network, self.config)
        return program, as_input(program, network.quantize_input(x))
