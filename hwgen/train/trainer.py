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

import dataclasses
import numbers
import time

import numpy as np

from ..compiler import compile_network
from ..config import AcceleratorConfig
from ..nn import CNN, MLP, FloatDense
from ..nn.float_training import check_labels, softmax_cross_entropy
from .devices import DeviceGroup
from .layers import Step, kind_of, quantize_model
from .products import Products
from .report import EpochReport
from .scales import ActivationScales
from .sgd import SGD

__all__ = ["StepResult", "Trainer", "float_layers"]


@dataclasses.dataclass(frozen=True)
class StepResult:
    """One minibatch: its mean loss, the samples classified right, its size."""

    loss: float
    correct: int
    rows: int


def float_layers(model):
    """Return ``(layers, input_shape)`` of a float :class:`~hwgen.nn.MLP` or
    :class:`~hwgen.nn.CNN`.

    An MLP's layers become :class:`~hwgen.nn.FloatDense` s that hold the MLP's own arrays, so
    that training them trains the MLP in place; its ``input_shape`` is ``None``.

    Raises
    ------
    TypeError
        If ``model`` is neither.
    """
    if isinstance(model, CNN):
        return list(model.layers), model.input_shape
    if isinstance(model, MLP):
        layers = []
        for (weight, bias), relu in zip(model.layers, model.relu, strict=True):
            layer = FloatDense(weight, bias, relu=relu)
            layer.weight, layer.bias = weight, bias  # the MLP's arrays, updated in place
            layers.append(layer)
        return layers, None
    raise TypeError(f"model is a {type(model).__name__}; allowed: hwgen.nn.MLP or "
                    "hwgen.nn.CNN")


def _as_input(program, x):
    """Return the samples ``x`` in the shape the program's input takes: rows of features, or
    the sample shape its input matrix names (a compiler that lays out images)."""
    shape = getattr(program.input, "sample_shape", None) or (program.input.features,)
    return x.reshape(len(x), *shape)


def _positive_int(name, value):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}={value!r}; allowed: an integer >= 1")
    return int(value)


class Trainer:
    """Train a float model with its matrix products on devices, data parallel.

    Parameters
    ----------
    model : MLP or CNN
        Trained in place. Its last layer must be a dense (or convolution) layer without a
        ReLU: its raw accumulators are the logits.
    config : AcceleratorConfig
        The devices' configuration; its widths quantize the forward pass and every operand.
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
        last layer with a ReLU or without parameters, bad hyperparameters, or the devices'
        errors (see :class:`DeviceGroup`).
    """

    def __init__(self, model, config, devices, *, lr=0.05, momentum=0.9, calibration_rows=256,
                 scale_rate=0.1):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config is a {type(config).__name__}; allowed: "
                            "hwgen.AcceleratorConfig")
        self.model = model
        self.layers, self.input_shape = float_layers(model)
        self.kinds = [kind_of(layer, i) for i, layer in enumerate(self.layers)]
        last = self.layers[-1]
        if not self.kinds[-1].params or last.relu:
            raise ValueError(f"the model's last layer is {last!r}; allowed: a dense or "
                             "convolution layer without a ReLU, whose raw accumulators are "
                             "the logits")
        self.config = config
        self.group = DeviceGroup(devices, config)
        self.products = Products(self.group)
        self.optimizer = SGD([p for layer, kind in zip(self.layers, self.kinds, strict=True)
                              if kind.params for p in layer.params], lr=lr, momentum=momentum)
        self.calibration_rows = _positive_int("calibration_rows", calibration_rows)
        if isinstance(scale_rate, bool) or not isinstance(scale_rate, numbers.Real) \
                or not 0 < scale_rate <= 1:
            raise ValueError(f"scale_rate={scale_rate!r}; allowed: a number in (0, 1]")
        self.scale_rate = scale_rate
        self.scales = None
        self.host_macs = 0
        self._host_reported = 0  # host MACs already in an epoch's report
        self.history = []

    # -- the quantized network -------------------------------------------------------------------

    @property
    def sample_shape(self):
        """Shape of one input sample."""
        return self.input_shape or (self.layers[0].weight.shape[0],)

    def _check_x(self, x, what):
        x = np.asarray(x, dtype=np.float64)
        shape = self.sample_shape
        if x.ndim != len(shape) + 1 or x.shape[1:] != tuple(shape):
            raise ValueError(f"{what}: x has shape {x.shape}; allowed: "
                             f"(M, {', '.join(map(str, shape))})")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{what}: x holds NaN or infinity; allowed: finite values")
        return x

    def calibrate(self, x):
        """Measure the activation scales on the first :attr:`calibration_rows` samples of
        ``x`` with a float forward pass on the host (counted in :attr:`host_macs`)."""
        x = self._check_x(x, "calibrate")[:self.calibration_rows]
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

    def _run(self, program, x_rows, outputs):
        """Run ``program`` on the rows ``x_rows``, shard ``d`` on device ``d``; return the
        per-device results in device order (None for an empty shard)."""
        shards = self.group.shards(len(x_rows))

        def work(index, device):
            lo, hi = shards[index]
            if hi == lo:
                return None
            return self.group.run(device, program, x_rows[lo:hi], outputs=outputs)

        return self.group.each(work)

    def _forward(self, network, x_int):
        """Return every layer's output of the network on ``x_int``, run on the devices."""
        program = compile_network(network, self.config, readout=True)
        parts = [p for p in self._run(program, _as_input(program, x_int), "all")
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
        x = self._check_x(x, "step")
        classes = self.layers[-1].weight.shape[-1]
        y = check_labels(y, len(x), classes, "step")
        if not len(x):
            raise ValueError("step: the minibatch is empty; allowed: at least one sample")
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

    # -- epochs ----------------------------------------------------------------------------------

    def evaluate(self, x, y):
        """Return the accuracy of the current quantized network on ``x``, ``y``, run on the
        devices (rows split over them)."""
        x = self._check_x(x, "evaluate")
        network = self.network()
        y = check_labels(y, len(x), network.out_features, "evaluate")
        if not len(x):
            return 0.0
        program = compile_network(network, self.config)
        x_int = _as_input(program, network.quantize_input(x))
        logits = np.concatenate([p for p in self._run(program, x_int, "last") if p is not None])
        return float(np.mean(np.argmax(logits, axis=1) == y))

    def fit(self, x, y, *, epochs=10, batch_size=32, seed=0, x_test=None, y_test=None,
            on_step=None, on_epoch=None):
        """Train for ``epochs`` passes over ``x``, ``y``; return the epochs' reports.

        The minibatches are those of :meth:`hwgen.nn.MLP.fit` with the same ``seed`` and
        ``batch_size`` (one permutation per epoch from ``numpy.random.default_rng(seed)``).
        The scales are calibrated on ``x`` first if they are not yet.

        Parameters
        ----------
        x : array_like of float, shape (M, *sample_shape)
        y : array_like of int, shape (M,)
        epochs, batch_size : int
            At least 1.
        seed : int
        x_test, y_test : array_like, optional
            Test data, evaluated on the devices after each epoch.
        on_step : callable, optional
            ``on_step(result)`` after each :class:`StepResult`.
        on_epoch : callable, optional
            ``on_epoch(report)`` after each :class:`EpochReport`.

        Returns
        -------
        list of EpochReport
            Also appended to :attr:`history`.
        """
        x = self._check_x(x, "fit")
        if not len(x):
            raise ValueError("fit: x has no samples; allowed: at least one")
        y = check_labels(y, len(x), self.layers[-1].weight.shape[-1], "fit")
        epochs = _positive_int("epochs", epochs)
        batch_size = _positive_int("batch_size", batch_size)
        if (x_test is None) != (y_test is None):
            raise ValueError("fit: give both x_test and y_test, or neither")
        if self.scales is None:
            self.calibrate(x)
        rng = np.random.default_rng(seed)
        reports = []
        for _ in range(epochs):
            order = rng.permutation(len(x))
            report = self._epoch((x, y), [order[i:i + batch_size]
                                          for i in range(0, len(x), batch_size)],
                                 (x_test, y_test), on_step)
            reports.append(report)
            self.history.append(report)
            if on_epoch is not None:
                on_epoch(report)
        return reports

    def _epoch(self, train, batches, test, on_step):
        """Train on the minibatches ``batches`` (index arrays) of ``train = (x, y)``, then
        evaluate on ``test = (x_test, y_test)`` (unless None); return the report."""
        (x, y), (x_test, y_test) = train, test
        start = time.perf_counter()
        before = self.group.usage.copy()
        losses, correct, steps = 0.0, 0, 0
        for batch in batches:
            result = self.step(x[batch], y[batch])
            losses += result.loss * result.rows
            correct += result.correct
            steps += 1
            if on_step is not None:
                on_step(result)
        trained = self.group.usage.minus(before)
        test = None if x_test is None else self.evaluate(x_test, y_test)
        evaluated = self.group.usage.minus(before).minus(trained)
        host, self._host_reported = self.host_macs - self._host_reported, self.host_macs
        return EpochReport(
            epoch=len(self.history) + 1, steps=steps, loss=losses / len(x),
            train_accuracy=correct / len(x), test_accuracy=test,
            device_macs=trained.useful_macs, host_macs=host,
            issued_macs=trained.issued_macs, cycles=trained.cycles,
            wire_bytes=trained.wire_bytes, eval_macs=evaluated.useful_macs,
            seconds=time.perf_counter() - start)
