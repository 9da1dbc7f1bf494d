"""Minibatch gradient descent with momentum, on the host in float: the update of a training on
the devices.

The same rule as :meth:`hwgen.nn.MLP.fit` with ``optimizer="sgd"``
(:func:`hwgen.nn.float_training.minibatch_descent`): ``v = momentum * v + grad``, then
``p -= lr * v``, so that a training on the devices and a float training with the same
hyperparameters differ only in how the gradients were computed.
"""

import math
import numbers

import numpy as np

__all__ = ["SGD"]


class SGD:
    """Update parameter arrays in place by gradient descent with momentum.

    Parameters
    ----------
    params : list of numpy.ndarray
        The float arrays to update, in place.
    lr : float
        Learning rate, > 0.
    momentum : float
        In ``[0, 1)``.

    Raises
    ------
    ValueError
        For a learning rate or momentum out of range.
    """

    def __init__(self, params, *, lr, momentum):
        for name, value, ok, allowed in (("lr", lr, lambda v: v > 0, "a number > 0"),
                                         ("momentum", momentum, lambda v: 0 <= v < 1,
                                          "a number in [0, 1)")):
            if (not isinstance(value, numbers.Real) or isinstance(value, bool)
                    or not math.isfinite(value) or not ok(value)):
                raise ValueError(f"SGD: {name}={value!r}; allowed: {allowed}")
        self.params = list(params)
        self.lr = float(lr)
        self.momentum = float(momentum)
        self.velocity = [np.zeros_like(p) for p in self.params]

    def step(self, grads):
        """Apply one update with ``grads``, one array per parameter, in the same order.

        Raises
        ------
        ValueError
            If the number or a shape of the gradients does not match the parameters.
        """
        grads = list(grads)
        if len(grads) != len(self.params):
            raise ValueError(f"SGD.step: {len(grads)} gradients for {len(self.params)} "
                             "parameters")
        for i, grad in enumerate(grads):
            if grad.shape != self.params[i].shape:
                raise ValueError(f"SGD.step: gradient {i} has shape {grad.shape}; allowed: "
                                 f"{self.params[i].shape}, its parameter's")
            self.velocity[i] = self.momentum * self.velocity[i] + grad
            self.params[i] -= self.lr * self.velocity[i]
