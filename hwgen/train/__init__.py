"""Training on the accelerators: data-parallel minibatch SGD whose matrix products run on the
devices.

The host keeps the float parameters; every step, the devices run the forward pass of the
quantized network with every layer's output read out, the host computes the loss and the
gradient of the logits, the devices compute the backward matrix products of their shard of
the batch (``dW = Xᵀ·dY`` and ``dX = dY·Wᵀ`` as raw-output programs), and the host sums the
integer gradients exactly and updates the parameters. On ``dtype="bf16"`` devices
(:class:`Bf16Trainer`) the host keeps fp32 master weights, the devices run every product in
bf16 with fp32 sums, as TPUs train. See ``docs/training.md``.

.. code-block:: python

    from hwgen.train import Trainer

    trainer = Trainer(mlp, config, [acc0, acc1], lr=0.05, momentum=0.9)   # host.Accelerators
    for report in trainer.fit(x, y, epochs=10, batch_size=64, x_test=xt, y_test=yt):
        print(report.line())

    trainer = make_trainer(mlp, bf16_config, devices)   # Bf16Trainer for dtype="bf16"

The package takes devices from the caller (anything with ``load``, ``infer`` and
``counters``, as ``host.Accelerator`` has them); it never opens one. Its modules, one concept
each:

- :mod:`~hwgen.train.loop`: :class:`~hwgen.train.loop.TrainingLoop`, the loop every trainer
  shares (minibatches, evaluation, reports);
- :mod:`~hwgen.train.trainer`: :class:`Trainer`, the int8 step;
- :mod:`~hwgen.train.bf16_trainer`: :class:`Bf16Trainer`, the bf16 step (fp32 master
  weights, bf16 products summed in fp32 on the devices, as TPUs train);
- :mod:`~hwgen.train.make`: :func:`make_trainer`, the trainer of a configuration's dtype;
- :mod:`~hwgen.train.layers`: each kind of layer's integer forward layer and backward pass;
- :mod:`~hwgen.train.products`: exact integer matrix products on the devices;
- :mod:`~hwgen.train.bf16_products`: bf16 products on the devices, in the contract's order
  of sums whatever the number of devices;
- :mod:`~hwgen.train.devices`: the devices, their shards of a batch and their work counted;
- :mod:`~hwgen.train.operands`: float operands quantized per tensor;
- :mod:`~hwgen.train.scales`: the activation scales, calibrated once and kept up to date;
- :mod:`~hwgen.train.sgd`: the update;
- :mod:`~hwgen.train.report`: :class:`EpochReport`;
- :mod:`~hwgen.train.checkpoint`: the trained network and its program in one file.
"""

from .bf16_products import Bf16Products
from .bf16_trainer import Bf16Trainer
from .checkpoint import TrainedModel, load_trained, save_trained
from .devices import DeviceGroup, DeviceUsage
from .layers import KINDS, kind_of
from .loop import TrainingLoop
from .make import make_trainer
from .operands import quantize_tensor
from .products import Products, product_network
from .report import EpochReport
from .scales import ActivationScales
from .sgd import SGD
from .trainer import StepResult, Trainer, float_layers

__all__ = ["KINDS", "SGD", "ActivationScales", "Bf16Products", "Bf16Trainer", "DeviceGroup",
           "DeviceUsage", "EpochReport", "Products", "StepResult", "TrainedModel", "Trainer",
           "TrainingLoop", "float_layers", "kind_of", "load_trained", "make_trainer",
           "product_network", "quantize_tensor", "save_trained"]
