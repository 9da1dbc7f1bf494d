"""Training on the accelerators: data-parallel minibatch SGD whose matrix products run on the
devices.

The host keeps the float parameters; every step, the devices run the forward pass of the
quantized network with every layer's output read out, the host computes the loss and the
gradient of the logits, the devices compute the backward matrix products of their shard of
the batch (``dW = Xᵀ·dY`` and ``dX = dY·Wᵀ`` as raw-output programs), and the host sums the
integer gradients exactly and updates the parameters. See ``docs/training.md``.

.. code-block:: python

    from hwgen.train import Trainer

    trainer = Trainer(mlp, config, [acc0, acc1], lr=0.05, momentum=0.9)   # host.Accelerators
    for report in trainer.fit(x, y, epochs=10, batch_size=64, x_test=xt, y_test=yt):
        print(report.line())

The package takes devices from the caller (anything with ``load``, ``infer`` and
``counters``, as ``host.Accelerator`` has them); it never opens one. Its modules, one concept
each:

- :mod:`~hwgen.train.trainer`: :class:`Trainer`, the loop;
- :mod:`~hwgen.train.layers`: each kind of layer's integer forward layer and backward pass;
- :mod:`~hwgen.train.products`: exact integer matrix products on the devices;
- :mod:`~hwgen.train.devices`: the devices, their shards of a batch and their work counted;
- :mod:`~hwgen.train.operands`: float operands quantized per tensor;
- :mod:`~hwgen.train.scales`: the activation scales, calibrated once and kept up to date;
- :mod:`~hwgen.train.sgd`: the update;
- :mod:`~hwgen.train.report`: :class:`EpochReport`;
- :mod:`~hwgen.train.checkpoint`: the trained network and its program in one file.
"""

from .checkpoint import TrainedModel, load_trained, save_trained
from .devices import DeviceGroup, DeviceUsage
from .layers import KINDS, kind_of
from .operands import quantize_tensor
from .products import Products, product_network
from .report import EpochReport
from .scales import ActivationScales
from .sgd import SGD
from .trainer import StepResult, Trainer, float_layers

__all__ = ["KINDS", "SGD", "ActivationScales", "DeviceGroup", "DeviceUsage", "EpochReport",
           "Products", "StepResult", "TrainedModel", "Trainer", "float_layers", "kind_of",
           "load_trained", "product_network", "quantize_tensor", "save_trained"]
