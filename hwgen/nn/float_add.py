"""The float residual add of a :class:`~hwgen.nn.CNN` graph: ``f(a + b)``.

The float counterpart of :class:`~hwgen.nn.Add` (docs/arithmetic.md, "Residual add"): two
tensors of one shape added element-wise, then an activation (none or a ReLU) and optional clamp
bounds. A ReLU, ReLU6 or clamp after the add folds into it (:meth:`FloatAdd.then`), as into the
other layers; :func:`~hwgen.nn.quantize` turns it into an :class:`~hwgen.nn.Add` whose
multipliers bring both inputs' scales onto the output's.
"""

import numpy as np

from .float_activation import Activated

__all__ = ["FloatAdd"]


class FloatAdd(Activated):
    """``y = f(a + b)`` for two float tensors ``a``, ``b`` of one shape.

    Parameters
    ----------
    activation : {"identity", "relu"}
    act_min, act_max : float, optional
        Clamp bounds after the activation.

    Attributes
    ----------
    activation, act_min, act_max
        See :class:`~hwgen.nn.float_activation.Activated`.

    Raises
    ------
    ValueError
        Naming the field, for an unknown activation or a bad bound.
    """

    _allowed = ("identity", "relu")

    def __init__(self, *, activation="identity", act_min=None, act_max=None):
        self._set_activation("FloatAdd", None, activation, 0.0, (act_min, act_max))

    def __repr__(self):
        return f"FloatAdd({self._activation_repr()})"

    def then(self, kind, *, alpha=None, low=None, high=None):
        """Compose a ReLU, a leaky ReLU of slope 0 or a clamp after the add, as
        :meth:`Activated.then <hwgen.nn.float_activation.Activated.then>` does; a leaky ReLU
        of another slope is refused (an :class:`~hwgen.nn.Add` has no negative multiplier).

        Returns
        -------
        str or None
            Why the composition cannot be expressed, or ``None`` when done.
        """
        if kind == "leaky_relu" and alpha is not None and alpha > 0 and not self.relu:
            return ("a leaky ReLU after an add cannot be mapped (an Add has no negative "
                    "multiplier); supported: ReLU, ReLU6 or a clamp after an add")
        return super().then(kind, alpha=alpha, low=low, high=high)

    def _output_shapes(self, shapes, where, sources):
        """Return the output shape for input shapes ``(a, b)``, given by ``sources``."""
        (a, b), (source_a, source_b) = shapes, sources
        if a != b:
            raise ValueError(f"{where}: a FloatAdd needs two inputs of one shape but "
                             f"{source_a} gives {a} and {source_b} gives {b}; allowed: equal "
                             "shapes")
        return a

    def output_shape(self, a_shape, b_shape):
        """Return the per-sample output shape, that of both inputs.

        Raises
        ------
        ValueError
            If the shapes differ.
        """
        return self._output_shapes((tuple(a_shape), tuple(b_shape)), "FloatAdd",
                                   ("input a", "input b"))

    def forward(self, a, b):
        """Return ``f(a + b)`` for float arrays of one shape."""
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        self._output_shapes((a.shape, b.shape), "FloatAdd", ("input a", "input b"))
        return self.activate(a + b)
