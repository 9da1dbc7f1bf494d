"""What every model of the zoo is: its definition, its shapes, its published size and its data.

A :class:`ZooModel` is registered by name in :data:`hwgen.models.MODELS`. Its ``build`` makes the
PyTorch module (PyTorch is imported then, not before), with seeded random weights and BatchNorm
statistics gathered by :func:`settle_batchnorm`: the zoo downloads nothing, so its weights are
not trained, but every BatchNorm holds statistics of the data its layers see, as a trained
model's do, so that folding and calibration meet realistic ranges.
"""

import dataclasses

import numpy as np

__all__ = ["ZooModel", "count_macs", "count_params", "settle_batchnorm"]


@dataclasses.dataclass(frozen=True)
class ZooModel:
    """One model of the zoo.

    Attributes
    ----------
    name : str
        The registry key (``hwgen.models.get(name)``).
    title : str
        What it is and where it is published.
    input_shape : tuple of int
        One input in hwgen's layout: ``(H, W, C)`` for an image (NHWC), ``(F,)`` for a row.
    params : int
        Trainable parameters of the PyTorch module (weights, biases and BatchNorm's scale and
        shift; BatchNorm's running statistics are not parameters).
    macs : int
        Multiply-accumulates of one inference in its convolutions and linear layers (pooling
        and BatchNorm not counted), as the publications count them.
    build_fn : callable
        ``build_fn(torch)`` returns the module with PyTorch's default initialization.
    calib_scale : float
        Standard deviation of the calibration data (its mean is 0, clipped to +-4 sigma).
    graph : bool
        ``True`` when the module's ``forward`` is a graph with branches (residual blocks)
        rather than an ``nn.Sequential`` chain; ``hwgen.nn.from_torch`` imports both.
    """

    name: str
    title: str
    input_shape: tuple
    params: int
    macs: int
    build_fn: object
    calib_scale: float = 1.0
    graph: bool = False

    @property
    def torch_input_shape(self):
        """One input in PyTorch's layout: ``(C, H, W)`` for an image (NCHW), ``(F,)`` for a
        row."""
        if len(self.input_shape) == 3:
            h, w, c = self.input_shape
            return (c, h, w)
        return tuple(self.input_shape)

    def calibration(self, n=64, seed=0, *, layout="nhwc"):
        """Return ``n`` seeded float32 inputs of the model's shape: normal noise of
        ``calib_scale``, clipped to four standard deviations.

        Parameters
        ----------
        n : int
            Number of inputs, at least 1.
        seed : int
        layout : str
            ``"nhwc"`` (hwgen's, the default) or ``"nchw"`` (PyTorch's); a row model's inputs
            are ``(n, F)`` either way.

        Raises
        ------
        ValueError
            If ``n < 1`` or ``layout`` is not one of the two.
        """
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"calibration: n={n!r}; allowed: an integer >= 1")
        if layout not in ("nhwc", "nchw"):
            raise ValueError(f"calibration: layout={layout!r}; allowed: 'nhwc' or 'nchw'")
        rng = np.random.default_rng(seed)
        x = rng.normal(0.0, self.calib_scale, size=(n, *self.input_shape))
        x = np.clip(x, -4 * self.calib_scale, 4 * self.calib_scale).astype(np.float32)
        if layout == "nchw" and x.ndim == 4:
            x = x.transpose(0, 3, 1, 2)
        return np.ascontiguousarray(x)

    def model(self, seed=0, *, settle_batches=4):
        """Return the PyTorch module in eval mode: seeded default initialization, random
        BatchNorm scales and shifts, and BatchNorm statistics of ``settle_batches`` batches of
        :meth:`calibration` data (:func:`settle_batchnorm`).

        Raises
        ------
        ImportError
            If PyTorch is not installed.
        """
        from ..nn.import_chain import require

        torch = require("torch", "torch")
        torch.manual_seed(seed)
        module = self.build_fn(torch)
        batches = [self.calibration(32, seed + 1 + i, layout="nchw")
                   for i in range(settle_batches)]
        settle_batchnorm(torch, module, batches, seed)
        return module.eval()


def settle_batchnorm(torch, module, batches, seed=0):
    """Give every BatchNorm of ``module`` a random scale (0.5..1.5) and shift (-0.1..0.1),
    then its running statistics: the cumulative mean and variance over ``batches`` (float
    arrays, PyTorch's layout) in train mode. Weights are left as they are."""
    nn = torch.nn
    norms = [m for m in module.modules() if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d)]
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for bn in norms:
            bn.weight.copy_(0.5 + torch.rand(bn.num_features, generator=gen))
            bn.bias.copy_(0.2 * torch.rand(bn.num_features, generator=gen) - 0.1)
            bn.reset_running_stats()
            bn.momentum = None  # a cumulative average over the batches
        module.train()
        for x in batches:
            module(torch.from_numpy(np.asarray(x, dtype=np.float32)))
        for bn in norms:
            bn.momentum = 0.1
    module.eval()


def count_params(module):
    """Return the trainable parameters of a PyTorch ``module``."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def count_macs(torch, module, torch_input_shape):
    """Return the multiply-accumulates of one inference through ``module``'s ``Conv2d`` and
    ``Linear`` layers, counted from the shapes a forward pass meets: a convolution's output
    elements times ``C_in / groups * KH * KW``, a linear layer's ``in * out``."""
    nn = torch.nn
    total = []

    def hook(layer, _inputs, output):
        if isinstance(layer, nn.Conv2d):
            kh, kw = layer.kernel_size
            total.append(output.numel() * layer.in_channels // layer.groups * kh * kw)
        else:
            total.append(layer.in_features * layer.out_features)

    handles = [m.register_forward_hook(hook) for m in module.modules()
               if isinstance(m, nn.Conv2d | nn.Linear)]
    try:
        with torch.no_grad():
            module.eval()(torch.zeros(1, *torch_input_shape))
    finally:
        for h in handles:
            h.remove()
    return int(sum(total))
