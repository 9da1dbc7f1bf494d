"""The loop every trainer on the devices shares: :class:`TrainingLoop`.

A trainer of one arithmetic (:class:`~hwgen.train.Trainer` for int8,
:class:`~hwgen.train.Bf16Trainer` for bf16) supplies :meth:`TrainingLoop.step` (one
minibatch, its products on the devices) and :meth:`TrainingLoop.inference` (the program and
inputs of the test inference); the loop gives both the same devices, update, minibatches
(those of :meth:`hwgen.nn.MLP.fit` with the same seed), evaluation and epoch reports.
"""

import dataclasses
import numbers
import time

import numpy as np

from ..config import AcceleratorConfig
from ..nn import CNN, MLP, FloatDense
from ..nn.float_training import check_labels
from .devices import DeviceGroup
from .layers import kind_of
from .report import EpochReport
from .sgd import SGD

__all__ = ["StepResult", "TrainingLoop", "as_input", "float_layers", "positive_int"]


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


def as_input(program, x):
    """Return the samples ``x`` in the shape the program's input takes: rows of features, or
    the sample shape its input matrix names (a compiler that lays out images)."""
    shape = getattr(program.input, "sample_shape", None) or (program.input.features,)
    return x.reshape(len(x), *shape)


def positive_int(name, value):
    """Return ``value`` as an int, or raise the ValueError naming ``name`` if it is not >= 1."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}={value!r}; allowed: an integer >= 1")
    return int(value)


class TrainingLoop:
    """Minibatch SGD over open devices: what the trainers of every arithmetic share.

    Parameters
    ----------
    model : MLP or CNN
        Trained in place (see :meth:`take_model`). Its last layer must be a dense (or
        convolution) layer without a ReLU: its raw accumulators are the logits.
    config : AcceleratorConfig
        The devices' configuration; its ``dtype`` must be the trainer's :attr:`dtype`.
    devices : sequence of device, or a pool
        See :class:`~hwgen.train.devices.DeviceGroup`.
    lr, momentum : float
        Of the SGD update (:class:`~hwgen.train.sgd.SGD`).

    Attributes
    ----------
    model, config, layers, kinds, group, optimizer, history
        ``history`` holds the :class:`EpochReport` of every epoch of :meth:`fit`.
    host_macs : int
        Multiply-accumulates of the training done on the host.

    Raises
    ------
    TypeError, ValueError
        For a model of another type or with a layer that cannot be trained on the devices, a
        last layer with a ReLU or without parameters, a configuration of another dtype, bad
        hyperparameters, or the devices' errors (see :class:`DeviceGroup`).
    """

    #: The arithmetic of the devices this trainer drives.
    dtype = None

    def __init__(self, model, config, devices, *, lr=0.05, momentum=0.9):
        if not isinstance(config, AcceleratorConfig):
            raise TypeError(f"config is a {type(config).__name__}; allowed: "
                            "hwgen.AcceleratorConfig")
        if config.dtype != self.dtype:
            raise ValueError(f"config has dtype={config.dtype!r} and {type(self).__name__} "
                             f"trains on dtype={self.dtype!r} devices; allowed: "
                             "hwgen.train.make_trainer(model, config, devices), which picks "
                             "the trainer of the config's dtype")
        self.model = model
        self.layers, self.input_shape = self.take_model(model)
        self.kinds = [kind_of(layer, i) for i, layer in enumerate(self.layers)]
        last = self.layers[-1]
        if not self.kinds[-1].params or last.relu:
            raise ValueError(f"the model's last layer is {last!r}; allowed: a dense or "
                             "convolution layer without a ReLU, whose raw accumulators are "
                             "the logits")
        self.config = config
        self.group = DeviceGroup(devices, config)
        self.optimizer = SGD([p for layer, kind in zip(self.layers, self.kinds, strict=True)
                              if kind.params for p in layer.params], lr=lr, momentum=momentum)
        self.host_macs = 0
        self._host_reported = 0  # host MACs already in an epoch's report
        self.history = []

    # -- what a trainer supplies -----------------------------------------------------------------

    def take_model(self, model):
        """Return ``(layers, input_shape)`` of the model to train (:func:`float_layers`)."""
        return float_layers(model)

    def prepare(self, x):
        """Get ready to train on ``x`` (checked) before the first epoch of :meth:`fit`."""

    def step(self, x, y):
        """Train on one minibatch; return its :class:`StepResult`."""
        raise NotImplementedError

    def inference(self, x):
        """Return ``(program, inputs)``: the program of the current weights and ``x``
        (checked floats) as its inputs, for :meth:`evaluate`."""
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------------

    @property
    def sample_shape(self):
        """Shape of one input sample."""
        return self.input_shape or (self.layers[0].weight.shape[0],)

    @property
    def classes(self):
        """Outputs of the last layer: the classes."""
        return self.layers[-1].weight.shape[-1]

    def check_x(self, x, what):
        """Return samples ``x`` as float64, refusing another sample shape, NaN or infinity."""
        x = np.asarray(x, dtype=np.float64)
        shape = self.sample_shape
        if x.ndim != len(shape) + 1 or x.shape[1:] != tuple(shape):
            raise ValueError(f"{what}: x has shape {x.shape}; allowed: "
                             f"(M, {', '.join(map(str, shape))})")
        if not np.all(np.isfinite(x)):
            raise ValueError(f"{what}: x holds NaN or infinity; allowed: finite values")
        return x

    def check_batch(self, x, y):
        """Return the minibatch ``(x, y)`` of :meth:`step`, checked and not empty."""
        x = self.check_x(x, "step")
        y = check_labels(y, len(x), self.classes, "step")
        if not len(x):
            raise ValueError("step: the minibatch is empty; allowed: at least one sample")
        return x, y

    def run(self, program, x_rows, outputs="last"):
        """Run ``program`` on the rows ``x_rows``, shard ``d`` on device ``d``; return the
        per-device results in device order (None for an empty shard)."""
        shards = self.group.shards(len(x_rows))

        def work(index, device):
            lo, hi = shards[index]
            if hi == lo:
                return None
            return self.group.run(device, program, x_rows[lo:hi], outputs=outputs)

        return self.group.each(work)

    def evaluate(self, x, y):
        """Return the accuracy of the current weights on ``x``, ``y`` as the devices run them
        (rows split over the devices)."""
        x = self.check_x(x, "evaluate")
        y = check_labels(y, len(x), self.classes, "evaluate")
        if not len(x):
            return 0.0
        program, inputs = self.inference(x)
        logits = np.concatenate([p for p in self.run(program, inputs) if p is not None])
        return float(np.mean(np.argmax(np.asarray(logits, dtype=np.float64), axis=1) == y))

    def fit(self, x, y, *, epochs=10, batch_size=32, seed=0, x_test=None, y_test=None,
            on_step=None, on_epoch=None):
        """Train for ``epochs`` passes over ``x``, ``y``; return the epochs' reports.

        The minibatches are those of :meth:`hwgen.nn.MLP.fit` with the same ``seed`` and
        ``batch_size`` (one permutation per epoch from ``numpy.random.default_rng(seed)``).

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
        x = self.check_x(x, "fit")
        if not len(x):
            raise ValueError("fit: x has no samples; allowed: at least one")
        y = check_labels(y, len(x), self.classes, "fit")
        epochs = positive_int("epochs", epochs)
        batch_size = positive_int("batch_size", batch_size)
        if (x_test is None) != (y_test is None):
            raise ValueError("fit: give both x_test and y_test, or neither")
        self.prepare(x)
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
