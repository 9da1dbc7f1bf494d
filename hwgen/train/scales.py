"""The activation scales of a training on the devices: calibrated once, then kept up to date
from what the devices read out.

The forward pass runs as a quantized network whose requantization needs, for every layer
output, the real value of one integer step (``s = max|a| / (2**(in_bits-1) - 1)`` as
:func:`hwgen.nn.quantize` measures it on calibration data). Measuring it on every batch would
take a float forward pass on the host, as many multiply-accumulates as the devices do; instead:

- :meth:`ActivationScales.calibrate` measures every scale once, with a float forward pass on a
  small sample (the only matrix products of the training on the host, and counted so);
- :meth:`ActivationScales.observe` follows the weights as they change: after each step, each
  scale moves a fraction ``rate`` of the way to the largest value the devices produced
  (dequantized). A layer that saturated (its largest integer at the limit) reached further
  than its scale shows, so its target is ``growth`` times that value.

Pooling and flattening keep their input's scale. Deterministic: the same read-outs give the
same scales, whatever number of devices produced them.
"""

import numpy as np

from .operands import qmax

__all__ = ["ActivationScales"]


class ActivationScales:
    """The input scale and one output scale per layer of a model.

    Parameters
    ----------
    input_scale : float
    outputs : sequence of float
        One per layer: the scale of its output (for a raw last layer, of its logits).
    carries : sequence of bool
        Per layer, whether its output keeps its input's scale (pooling, flatten).
    in_bits : int
    rate : float
        Fraction of the way to the observed scale that one step moves, in ``(0, 1]``.
    growth : float
        Factor applied to the observed scale of a layer that saturated, ``>= 1``.

    Attributes
    ----------
    input : float
    outputs : list of float
    """

    def __init__(self, input_scale, outputs, carries, in_bits, *, rate=0.1, growth=2.0):
        if not 0 < rate <= 1:
            raise ValueError(f"ActivationScales: rate={rate!r}; allowed: 0 < rate <= 1")
        if not growth >= 1:
            raise ValueError(f"ActivationScales: growth={growth!r}; allowed: >= 1")
        self.input = float(input_scale)
        self.outputs = [float(s) for s in outputs]
        self.carries = [bool(c) for c in carries]
        self.in_bits = in_bits
        self.rate = rate
        self.growth = growth

    @classmethod
    def calibrate(cls, layers, x, in_bits, **options):
        """Measure every scale on the float inputs ``x`` with a float forward pass.

        Parameters
        ----------
        layers : sequence of float layers
            As :class:`hwgen.nn.CNN` holds them (their ``forward``).
        x : numpy.ndarray of float
            Calibration samples, at least one.
        in_bits : int
        **options
            ``rate`` and ``growth``, as for the class.

        Returns
        -------
        ActivationScales
        """
        top = qmax(in_bits)

        def scale(a):
            peak = float(np.max(np.abs(a)))
            return peak / top if peak > 0 else 1.0

        outputs, carries = [], []
        a = x
        current = scale(x)
        input_scale = current
        for layer in layers:
            a = layer.forward(a)
            carry = not hasattr(layer, "weight")
            if not carry:
                current = scale(a)
            outputs.append(current)
            carries.append(carry)
        return cls(input_scale, outputs, carries, in_bits, **options)

    def input_of(self, index):
        """Return the scale of layer ``index``'s input."""
        return self.input if index == 0 else self.outputs[index - 1]

    def observe(self, index, y, scale=None):
        """Move layer ``index``'s scale towards what its output ``y`` shows.

        Parameters
        ----------
        index : int
        y : numpy.ndarray
            The layer's integer output as read out (saturated ``in_bits`` values), or, with
            ``scale`` given, values whose step is ``scale`` (raw accumulators).
        scale : float, optional
            Real value of one step of ``y``, for a raw output; by default the layer's own
            scale, and saturation at ``in_bits`` is looked for.
        """
        if self.carries[index] or y.size == 0:
            return
        peak = float(np.max(np.abs(y)))
        if peak == 0:  # a silent layer shows nothing about its range
            return
        top = qmax(self.in_bits)
        if scale is None:
            target = self.outputs[index] * peak / top
            if peak >= top:
                target *= self.growth
        else:
            target = scale * peak / top
        self.outputs[index] += self.rate * (target - self.outputs[index])
        for later in range(index + 1, len(self.outputs)):  # pooling keeps the scale
            if not self.carries[later]:
                break
            self.outputs[later] = self.outputs[index]

    def to_dict(self):
        """Return the scales as plain JSON values."""
        return {"input": self.input, "outputs": self.outputs, "carries": self.carries,
                "in_bits": self.in_bits, "rate": self.rate, "growth": self.growth}

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`."""
        return cls(d["input"], d["outputs"], d["carries"], d["in_bits"], rate=d["rate"],
                   growth=d["growth"])
