"""A trained model in one ``.npz`` file: the program of its quantized network, ready for a
device, and the float model and activation scales it came from.

The file is a program file (:meth:`hwgen.compiler.Program.save`): :meth:`Program.load
<hwgen.compiler.Program.load>`, ``host.Accelerator.load`` and ``hwgen infer`` take it as it
is. Next to the program's entries it holds ``trained_meta`` (UTF-8 JSON: the model's kind and
layers, its input shape, the activation scales, the configuration and the epochs' reports) and
the float parameters ``trained_weight<i>``, ``trained_bias<i>`` of layer ``i``. A bf16
training (``config.dtype == "bf16"``) saves its fp32 master weights and the program of their
:func:`~hwgen.nn.to_bf16` network; it has no scales (``null``).
"""

import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np

from ..compiler import Program, compile_network
from ..config import AcceleratorConfig
from ..nn import CNN, MLP, Flatten, FloatConv2D, FloatDense, MaxPool2D, to_bf16
from .layers import quantize_model
from .scales import ActivationScales

__all__ = ["TRAINED_FORMAT", "TrainedModel", "load_trained", "save_trained"]

#: The ``format`` entry of ``trained_meta``, and its version.
TRAINED_FORMAT = ("hwgen-trained", 1)


@dataclasses.dataclass(frozen=True)
class TrainedModel:
    """What :func:`load_trained` returns.

    Attributes
    ----------
    model : MLP or CNN
        The float model.
    network : QuantizedNetwork or Bf16Network
        Its quantized network at the saved scales (what the devices ran), or for a bf16
        configuration its :func:`~hwgen.nn.to_bf16` network.
    program : Program
        That network compiled for :attr:`config`, as saved.
    scales : ActivationScales or None
        None for bf16.
    config : AcceleratorConfig
    history : list of dict
        The saved epochs' reports (:meth:`EpochReport.to_dict`).
    """

    model: object
    network: object
    program: Program
    scales: ActivationScales | None
    config: AcceleratorConfig
    history: list


def _describe(layer):
    if isinstance(layer, FloatDense):
        return {"kind": "dense", "relu": layer.relu}
    if isinstance(layer, FloatConv2D):
        return {"kind": "conv", "relu": layer.relu, "stride": layer.stride,
                "padding": layer.padding}
    if isinstance(layer, MaxPool2D):
        return {"kind": "maxpool", "size": layer.size, "stride": layer.stride}
    return {"kind": "flatten"}


def save_trained(path, trainer):
    """Write ``trainer``'s model, scales and program to one ``.npz`` file at ``path``.

    Parameters
    ----------
    path : str or path-like
        Written under exactly that name.
    trainer : Trainer
        Calibrated (after :meth:`~hwgen.train.Trainer.fit` or
        :meth:`~hwgen.train.Trainer.calibrate`).

    Returns
    -------
    Program
        The saved program (the trainer's network, :meth:`~hwgen.train.Trainer.network`,
        compiled for its configuration without read-out: the largest batch).

    Raises
    ------
    RuntimeError
        If the trainer's scales are not calibrated.
    OSError
        If the file cannot be written.
    """
    program = compile_network(trainer.network(), trainer.config)
    with tempfile.TemporaryDirectory() as folder:
        staged = Path(folder) / "program.npz"
        program.save(staged)
        with np.load(staged) as npz:
            arrays = {name: npz[name] for name in npz.files}
    meta = {"format": TRAINED_FORMAT[0], "version": TRAINED_FORMAT[1],
            "model": "mlp" if isinstance(trainer.model, MLP) else "cnn",
            "layers": [_describe(layer) for layer in trainer.layers],
            "input_shape": None if trainer.input_shape is None else list(trainer.input_shape),
            "scales": None if getattr(trainer, "scales", None) is None
            else trainer.scales.to_dict(), "config": trainer.config.to_dict(),
            "history": [report.to_dict() for report in trainer.history]}
    arrays["trained_meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    for index, layer in enumerate(trainer.layers):
        if hasattr(layer, "weight"):
            arrays[f"trained_weight{index}"] = layer.weight
            arrays[f"trained_bias{index}"] = layer.bias
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)
    return program


def _layer(d, arrays, index):
    kind = d["kind"]
    if kind == "maxpool":
        return MaxPool2D(d["size"], d["stride"])
    if kind == "flatten":
        return Flatten()
    weight, bias = arrays[f"trained_weight{index}"], arrays[f"trained_bias{index}"]
    if kind == "dense":
        return FloatDense(weight, bias, relu=d["relu"])
    if kind == "conv":
        return FloatConv2D(weight, bias, stride=d["stride"], padding=d["padding"],
                           relu=d["relu"])
    raise ValueError(f"layer {index} is of kind {kind!r}; allowed: dense, conv, maxpool, "
                     "flatten")


def load_trained(path):
    """Read a file written by :func:`save_trained`; return a :class:`TrainedModel`.

    Raises
    ------
    ValueError
        Naming the file, if it is not a program file or holds no trained model (a program
        saved by :meth:`Program.save` alone), or is damaged.
    OSError
        If it cannot be opened.
    """
    program = Program.load(path)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    if "trained_meta" not in arrays:
        raise ValueError(f"{path}: a program without its trained model (no 'trained_meta'); "
                         "allowed: a file written by hwgen train --out or save_trained")
    try:
        meta = json.loads(arrays["trained_meta"].tobytes().decode())
        if (meta.get("format"), meta.get("version")) != TRAINED_FORMAT:
            raise ValueError(f"format {meta.get('format')!r} version {meta.get('version')!r}; "
                             f"allowed: {TRAINED_FORMAT[0]!r} version {TRAINED_FORMAT[1]}")
        layers = [_layer(d, arrays, i) for i, d in enumerate(meta["layers"])]
        shape = None if meta["input_shape"] is None else tuple(meta["input_shape"])
        if meta["model"] == "mlp":
            model = MLP.from_layers([(layer.weight, layer.bias) for layer in layers],
                                    relu=[layer.relu for layer in layers])
        else:
            model = CNN(layers, input_shape=shape)
        config = AcceleratorConfig.from_dict(meta["config"])
        if config.dtype == "bf16":
            scales, network = None, to_bf16(model, rows=config.rows)
        else:
            scales = ActivationScales.from_dict(meta["scales"])
            network = quantize_model(layers, scales, config, shape)
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: the trained model is damaged ({exc})") from None
    return TrainedModel(model=model, network=network, program=program, scales=scales,
                        config=config, history=list(meta["history"]))
