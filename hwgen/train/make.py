"""The trainer of a configuration's arithmetic: :func:`make_trainer`."""

from .bf16_trainer import Bf16Trainer
from .trainer import Trainer

__all__ = ["TRAINERS", "make_trainer"]

#: ``{dtype: trainer class}``.
TRAINERS = {"int8": Trainer, "bf16": Bf16Trainer}


def make_trainer(model, config, devices, **options):
    """Return the trainer of ``config.dtype``: :class:`~hwgen.train.Trainer` (int8, quantized
    products) or :class:`~hwgen.train.Bf16Trainer` (bf16 products, fp32 master weights).

    ``options`` go to its constructor (``lr``, ``momentum``; ``calibration_rows`` and
    ``scale_rate`` for int8 only).

    Raises
    ------
    TypeError, ValueError
        As the trainer's constructor, and a ``config`` that is not an
        :class:`~hwgen.AcceleratorConfig`.
    """
    dtype = getattr(config, "dtype", None)
    if dtype not in TRAINERS:
        raise TypeError(f"config is a {type(config).__name__}; allowed: hwgen.AcceleratorConfig "
                        f"(dtype {', '.join(map(repr, TRAINERS))})")
    return TRAINERS[dtype](model, config, devices, **options)
