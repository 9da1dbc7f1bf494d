"""The activation of a float layer: ReLU, leaky ReLU or none, then optional float clamp bounds.

The float counterpart of the integer layers' ``activation``, ``mult_neg`` and
``act_min``/``act_max`` (docs/arithmetic.md): ``f(a)`` is ``a``, ``max(a, 0)``
or ``a if a >= 0 else alpha * a``, then clipped to ``[act_min, act_max]`` where a bound is set.
ReLU6 is ``relu`` with ``act_max=6``, Hardtanh and Clip are ``identity`` with both bounds.

:class:`Activated` gives a layer these fields, applies them and their derivative, and composes a
later activation into them (:meth:`Activated.then`), which is how an importer folds ``ReLU``,
``LeakyReLU``, ``ReLU6``, ``Hardtanh`` and ``Clip`` into the layer before them.
"""

import math
import numbers

import numpy as np

__all__ = ["ACTIVATIONS", "Activated"]

ACTIVATIONS = ("identity", "relu", "leaky_relu")


def _bound(value, where, field):
    if value is None:
        return None
    if not isinstance(value, numbers.Real) or isinstance(value, bool) \
            or not math.isfinite(value):
        raise ValueError(f"{where}: field {field!r} is {value!r}; allowed: a finite float or None")
    return float(value)


def _leaky(value, alpha):
    return value if value >= 0 else alpha * value


class Activated:
    """The activation fields of a float layer, and their forward, derivative and composition.

    Attributes
    ----------
    activation : {"identity", "relu", "leaky_relu"}
    alpha : float
        Leaky ReLU's slope for negative inputs, ``>= 0`` (used by ``"leaky_relu"`` only).
    act_min, act_max : float or None
        Clamp bounds applied after the activation; ``None`` is unbounded.
    relu : bool
        ``activation == "relu"``; setting it selects ``"relu"`` or ``"identity"``.
    """

    _allowed = ACTIVATIONS

    def _set_activation(self, where, relu, activation, alpha, bounds):
        """Check and store the fields; ``relu`` is the older spelling of ``activation``,
        ``bounds`` is ``(act_min, act_max)``."""
        if activation is None:
            activation = "relu" if relu is None or relu else "identity"
        elif relu is not None and bool(relu) != (activation == "relu"):
            raise ValueError(f"{where}: relu={relu!r} contradicts activation={activation!r}; "
                             "allowed: give one of them")
        if activation not in self._allowed:
            raise ValueError(f"{where}: field 'activation' is {activation!r}; allowed: "
                             + ", ".join(repr(a) for a in self._allowed))
        act_min, act_max = bounds
        alpha = _bound(alpha, where, "alpha")
        if alpha is None or alpha < 0:
            raise ValueError(f"{where}: field 'alpha' is {alpha!r}; allowed: a float >= 0")
        self.activation, self.alpha = activation, alpha
        self.act_min = _bound(act_min, where, "act_min")
        self.act_max = _bound(act_max, where, "act_max")
        if None not in (self.act_min, self.act_max) and self.act_min > self.act_max:
            raise ValueError(f"{where}: act_min={self.act_min} > act_max={self.act_max}; "
                             "allowed: act_min <= act_max")

    @property
    def relu(self):
        """Whether the activation is a plain ReLU."""
        return self.activation == "relu"

    @relu.setter
    def relu(self, value):
        self.activation = "relu" if value else "identity"

    @property
    def bounded(self):
        """Whether a clamp bound is set."""
        return self.act_min is not None or self.act_max is not None

    def _activation_repr(self):
        if self.activation != "leaky_relu" and not self.bounded:
            return f"relu={self.relu}"
        text = f"activation={self.activation!r}"
        if self.activation == "leaky_relu":
            text += f", alpha={self.alpha}"
        if self.bounded:
            text += f", act_min={self.act_min}, act_max={self.act_max}"
        return text

    def activate(self, a):
        """Return ``f(a)``: the activation, then the clamp bounds."""
        if self.activation == "relu":
            a = np.maximum(a, 0.0)
        elif self.activation == "leaky_relu":
            a = np.where(a >= 0, a, self.alpha * a)
        if self.bounded:
            a = np.clip(a, self.act_min, self.act_max)
        return a

    def derivative(self, y):
        """Return ``f'(a)`` from the output ``y = f(a)`` alone (0 where a bound clipped, and
        where a ReLU's output is 0): every activation here keeps the sign of ``a``."""
        if self.activation == "relu":
            d = (y > 0).astype(np.float64)
        elif self.activation == "leaky_relu":
            d = np.where(y > 0, 1.0, self.alpha)
        else:
            d = np.ones_like(y)
        if self.act_min is not None:
            d = d * (y > self.act_min)
        if self.act_max is not None:
            d = d * (y < self.act_max)
        return d

    def then(self, kind, *, alpha=None, low=None, high=None):
        """Compose ``g`` after this layer's ``f`` so that the layer computes ``g(f(a))``.

        ``kind`` is ``"relu"``, ``"leaky_relu"`` (slope ``alpha >= 0``) or ``"clamp"``
        (``[low, high]``, either ``None`` for unbounded). Every activation here is monotone
        non-decreasing, so ``g(clip(v, lo, hi)) = clip(g(v), g(lo), g(hi))`` and the result is
        again one activation and one pair of bounds.

        Returns
        -------
        str or None
            Why the composition cannot be expressed, or ``None`` when done.
        """
        if kind == "clamp":
            lo = low if self.act_min is None else max(self.act_min, -math.inf if low is None
                                                      else low)
            hi = high if self.act_max is None else min(self.act_max, math.inf if high is None
                                                       else high)
            if lo is not None and hi is not None and lo > hi:
                return (f"clamps to [{low}, {high}] after [{self.act_min}, {self.act_max}]: the "
                        "output would be constant")
            self.act_min, self.act_max = lo, hi
        elif kind == "leaky_relu" and alpha < 0:
            return f"negative_slope={alpha}; supported: >= 0"
        elif kind == "leaky_relu" and alpha != 0:
            if self.activation == "leaky_relu":
                self.alpha *= alpha
            elif self.activation == "identity":
                if "leaky_relu" not in self._allowed:
                    return ("a leaky ReLU after average pooling cannot be mapped (a pool has "
                            "no negative multiplier); supported: after a dense or "
                            "convolution layer")
                self.activation, self.alpha = "leaky_relu", alpha
            # After a ReLU the values are >= 0, where a leaky ReLU changes nothing.
            self.act_min, self.act_max = (None if b is None else _leaky(b, alpha)
                                          for b in (self.act_min, self.act_max))
        else:  # relu, or a leaky ReLU of slope 0
            self.activation = "relu"  # relu(leaky(a)) == relu(relu(a)) == relu(a)
            self.act_min, self.act_max = (None if b is None else max(b, 0.0)
                                          for b in (self.act_min, self.act_max))
        if self.activation == "relu" and self.act_min is not None and self.act_min <= 0:
            self.act_min = None  # the ReLU already bounds below at 0
        return None
