"""The bit-exact integer model of a quantized network: the oracle of every hardware test.

Everything here follows docs/arithmetic.md (the arithmetic contract) to the bit:

- ``acc[m, n] = sum_k x[m, k] * W[k, n] + b[n]``, exact, for a :class:`Dense` layer and for
  every output pixel's patch (of its group's channels) of a :class:`Conv2D`;
- ``p = acc * mult[n]`` (``acc * mult_neg[n]`` where ``acc < 0`` for ``leaky_relu``);
  ``r = (p + (1 << (shift[n] - 1))) >> shift[n]`` when ``shift[n] > 0``, else ``r = p``
  (``>>`` is the arithmetic shift, so ties round towards +infinity);
- ``y = clamp(r, -2**(in_bits - 1), 2**(in_bits - 1) - 1)``, then clamped to the layer's
  ``bounds(in_bits)`` (``relu``: ``act_min = 0``);
- an output layer may return ``acc`` itself (``output="raw"``);
- :class:`Add` reads two tensors of one shape: ``p = a * mult_a[c] + b * mult_b[c]``
  (exact), then the same rounding shift, saturation and bounds;
- :class:`AvgPool2D` and :class:`GlobalAvgPool2D` are depthwise convolutions of ones
  (``as_conv``); :class:`MaxPool2D` takes the maximum of each window's ints;
  :class:`Flatten` reorders nothing (NHWC memory, feature ``(y*W + x)*C + c``).
"""

import math

import numpy as np

from ._ints import sample_shape, signed_range
from .graph import INPUT, Node, Tensor, as_nodes, check_structure, relink, where
from .network_checks import (
    REQUANTIZING,
    arity,
    check_input,
    check_widths,
    checked_scales,
    tensor_shapes,
)
from .output_function import check_output_function, scores_to_probabilities

__all__ = ["QuantizedNetwork"]
class QuantizedNetwork:
    """A graph of integer layers over named tensors, computed bit-exactly as the hardware does.

    Layers are :class:`Dense`, :class:`Conv2D`, :class:`MaxPool2D`, :class:`Flatten`,
    :class:`AvgPool2D`, :class:`GlobalAvgPool2D` and :class:`Add` (two inputs).
    Between spatial layers the data are NHWC, ``(M, H, W, C)``; a :class:`Flatten` turns them
    into rows ``(M, H*W*C)`` for the :class:`Dense` layers that follow. A network that ends in
    a spatial layer returns ``(M, H', W', C')``.

    The network is a list of :class:`~hwgen.nn.Node` in topological order, each naming its
    layer and the tensors it reads (``"input"`` or an earlier node's name); the last node's
    output is the network's output. A plain list of layers is the chain in which each layer
    reads the previous one's output (node ``i`` is named ``"layer<i>"``, see
    :mod:`hwgen.nn.graph`).

    Parameters
    ----------
    layers : sequence of layers (see above), or sequence of Node
        At least one layer; each layer's input is the previous layer's output, or the tensors
        its node names (checked, see :attr:`shapes`). Only the last node may have
        ``output="raw"``.
    in_bits, w_bits, acc_bits, mult_bits : int
        Signed activation width (inputs and outputs of requantized layers), signed weight
        width, signed accumulator width (bias and raw outputs) and unsigned multiplier width.
    input_scale : float, optional
        Real value of one input step, for :meth:`quantize_input` and :meth:`predict`; the same
        as ``scales["input"]``.
    output_scale : array_like of float, optional
        Real value of one output step per element of the output's last axis (``(N_last,)``:
        classes, or channels of a spatial output), for dequantizing the outputs; informative
        only.
    input_shape : tuple of int, optional
        Shape of one input sample: ``(H, W, C)`` (NHWC inputs ``(M, H, W, C)``) or ``(K,)``.
        Required unless the first layer is a :class:`Dense`, whose ``K`` it then defaults to.
    scales : mapping of str to float, optional
        Real value of one step of each named tensor, where known (informative; see
        :attr:`tensors`).
    output_function : {None, "softmax", "log_softmax", "sigmoid"}
        The imported model's final Softmax, LogSoftmax or Sigmoid, applied on the host by
        :meth:`probabilities`; never part of the integer network.

    Attributes
    ----------
    layers : list
        The nodes' layers, in node order; the network follows changes to it (see
        :attr:`nodes`).
    nodes : tuple of Node
    tensors : dict of str to Tensor
    output : str
    in_bits, w_bits, acc_bits, mult_bits : int
    input_scale : float or None
    output_scale : numpy.ndarray or None
    input_shape : tuple of int or None
        As given; ``shapes[0][0]`` is the shape in effect.

    Raises
    ------
    ValueError
        Naming the layer index, the field and the allowed range, dtype or shape: a weight outside
        signed ``w_bits``, a bias outside signed ``acc_bits``, ``mult`` or ``mult_neg`` outside
        ``[0, 2**mult_bits)``, ``shift`` outside ``0 .. acc_bits + mult_bits - 1``, bounds
        outside signed ``in_bits`` or reversed, ``groups`` not dividing ``C_in``, a layer
        whose input does not fit it (a :class:`Dense` after a spatial layer without a
        :class:`Flatten`, a channel count that differs from ``C_in``, a kernel or window larger
        than the (padded) input, a missing ``input_shape``), ``"raw"`` before the last layer,
        an empty layer list, or a width outside the supported range; for nodes, a duplicate
        name, an input that is not a tensor computed before the node, a wrong number of
        inputs for the layer's kind (an :class:`Add` takes two, of one shape), a node that
        nothing reads before the last, or a scale of an unknown tensor.
    TypeError
        If a layer is not one of the layer types, or nodes and layers are mixed.
    """

    def __init__(self, layers, *, in_bits=8, w_bits=8, acc_bits=32, mult_bits=16,
                 input_scale=None, output_scale=None, input_shape=None, scales=None,
                 output_function=None):
        widths = check_widths({"in_bits": in_bits, "w_bits": w_bits, "acc_bits": acc_bits,
                               "mult_bits": mult_bits})
        self.in_bits, self.w_bits = widths["in_bits"], widths["w_bits"]
        self.acc_bits, self.mult_bits = widths["acc_bits"], widths["mult_bits"]
        if input_scale is not None:
            input_scale = float(input_scale)
            if not (math.isfinite(input_scale) and input_scale > 0):
                raise ValueError(f"QuantizedNetwork: input_scale={input_scale!r}; "
                                 "allowed: a finite float > 0, or None")
        self.input_scale = input_scale
        self.input_shape = sample_shape(input_shape, "QuantizedNetwork")
        given = list(layers)
        self._chain = not (given and isinstance(given[0], Node))
        self._nodes = as_nodes(given)
        self._consumers = None
        self.layers = [node.layer for node in self._nodes]
        self._scales = checked_scales(scales, input_scale,
                                       [INPUT, *(node.name for node in self.nodes)])
        self.input_scale = self._scales.get(INPUT)
        self.validate()
        if output_scale is not None:
            output_scale = np.array(output_scale, dtype=np.float64)
            if output_scale.shape != (self.out_features,):
                raise ValueError(f"QuantizedNetwork: output_scale has shape "
                                 f"{output_scale.shape}; allowed: ({self.out_features},)")
        self.output_scale = output_scale
        self.output_function = check_output_function(output_function, "QuantizedNetwork")

    @property
    def nodes(self):
        """The nodes, in topological order (a tuple of :class:`~hwgen.nn.Node`).

        Built from :attr:`layers` as it is now: for a network given as a plain list, the chain
        of its layers; for one given as nodes, node ``i`` with ``layers[i]`` as its layer.
        """
        nodes = relink(self._nodes, self.layers, self._chain)
        if nodes is not self._nodes or self._consumers is None:
            self._nodes, self._consumers = nodes, check_structure(nodes, arity)
        return nodes

    @property
    def shapes(self):
        """``[(input_shape, output_shape)]`` of every layer, per sample (no batch axis).

        Spatial shapes are ``(H, W, C)``, flat ones ``(K,)``; the input shape is that of the
        node's first input (in a chain ``shapes[i][1] == shapes[i + 1][0]``). Computed from
        the layers as they are now (see :meth:`validate`).
        """
        shapes = self._check()
        return [(shapes[node.inputs[0]], shapes[node.name]) for node in self.nodes]

    @property
    def tensors(self):
        """Every tensor by name, ``"input"`` first then in node order: a dict of
        :class:`~hwgen.nn.graph.Tensor` (shape, scale where known, consumers)."""
        shapes = self._check()  # also brings the nodes and their consumers up to date
        return {name: Tensor(name, shape, self._scales.get(name), self._consumers[name])
                for name, shape in shapes.items()}

    @property
    def output(self):
        """The name of the node whose output is the network's output (the last node)."""
        return self.nodes[-1].name

    @property
    def output_shape(self):
        """Shape of one output sample: ``(N,)`` or ``(H', W', C')``."""
        return self.shapes[-1][1]

    @property
    def in_features(self):
        """Number of input values per sample: ``K``, or ``H*W*C`` for a spatial input."""
        if self.input_shape is None:
            return self.layers[0].in_features
        return math.prod(self.input_shape)

    @property
    def out_features(self):
        """Length of the output's last axis: ``N`` (classes) or ``C'`` for a spatial output."""
        return self.output_shape[-1]

    def __repr__(self):
        shapes = [self.shapes[0][0]] + [out for _, out in self.shapes]
        sizes = " -> ".join(str(s[0]) if len(s) == 1 else str(s) for s in shapes)
        return (f"QuantizedNetwork({sizes}, in_bits={self.in_bits}, w_bits={self.w_bits}, "
                f"acc_bits={self.acc_bits}, mult_bits={self.mult_bits})")

    def validate(self):
        """Check every layer against the widths and its input; called before each computation.

        Layers are mutable objects, so the check is repeated by :meth:`forward` and
        :attr:`shapes`.

        Raises
        ------
        ValueError, TypeError
            As described for the class.
        """
        self._check()

    def _check(self):
        """Check every node; return each tensor's per-sample shape by name, input first."""
        return tensor_shapes(self.nodes, self.input_shape,
                              (self.in_bits, self.w_bits, self.acc_bits, self.mult_bits))

    def forward_tensors(self, x):
        """Run the network and return every tensor by name.

        Parameters
        ----------
        x : array_like of int, shape (M, K) or (M, H, W, C)
            Signed ``in_bits`` inputs, one sample per index of the first axis (``M = 0`` gives
            empty outputs); NHWC for a spatial ``input_shape``.

        Returns
        -------
        dict of str to numpy.ndarray of int64
            ``"input"`` (``x`` as int64), then each node's result by its name, ``(M,
            *tensors[name].shape)``: saturated ``in_bits`` values after the activation, the
            accumulator for a ``"raw"`` layer, the window maxima of a :class:`MaxPool2D`, the
            rows of a :class:`Flatten`.

        Raises
        ------
        ValueError
            If ``x`` does not have the input shape or holds values outside signed ``in_bits``,
            if the network is inconsistent (see the class), or if an accumulator leaves the
            signed ``acc_bits`` range (naming the layer).
        """
        shapes = self._check()
        values = {INPUT: check_input(x, shapes[INPUT], self.in_bits)}
        for index, node in enumerate(self.nodes):
            layer, args = node.layer, [values[name] for name in node.inputs]
            if isinstance(layer, REQUANTIZING):
                values[node.name] = layer.forward(*args, self.in_bits, self.acc_bits,
                                                  where=where(index, node.name))
            else:
                values[node.name] = layer.forward(*args).astype(np.int64)
        return values

    def forward_trace(self, x):
        """Run the network and return the output of every layer, in node order.

        ``outputs[i]`` is ``forward_tensors(x)[nodes[i].name]``, ``(M, *shapes[i][1])``; see
        :meth:`forward_tensors` for the parameters, values and errors.

        Returns
        -------
        list of numpy.ndarray of int64
        """
        values = self.forward_tensors(x)
        return [values[node.name] for node in self.nodes]

    def forward(self, x):
        """Run the network on integer inputs ``x``; return the last layer's output.

        See :meth:`forward_trace` for the parameters and errors.

        Returns
        -------
        numpy.ndarray of int64, shape (M, N_last) or (M, H', W', C')
        """
        return self.forward_tensors(x)[self.output]

    def quantize_input(self, x):
        """Return ``clamp(round(x / input_scale))`` to signed ``in_bits``, as int64.

        Elementwise, so ``x`` may have any shape (rows ``(M, K)`` or NHWC ``(M, H, W, C)``).
        Rounding is NumPy's ``rint`` (half to even).

        Raises
        ------
        ValueError
            If the network has no ``input_scale`` or ``x`` holds a NaN or infinity.
        """
        if self.input_scale is None:
            raise ValueError("quantize_input: the network has no input_scale; "
                             "pass input_scale= to QuantizedNetwork")
        x = np.asarray(x, dtype=np.float64)
        if not np.all(np.isfinite(x)):
            raise ValueError("quantize_input: field 'x' holds NaN or infinity; "
                             "allowed: finite values")
        low, high = signed_range(self.in_bits)
        return np.clip(np.rint(x / self.input_scale), low, high).astype(np.int64)

    def probabilities(self, scores):
        """Return :attr:`output_function` of the real scores, in float64 ``(M, N)``.

        ``scores`` is :meth:`forward`'s output or the device's
        (:meth:`host.Accelerator.infer`), dequantized here with :attr:`output_scale` when set;
        the function (none: the dequantized scores) runs on the host (section 3.2).
        """
        return scores_to_probabilities(self.output_function, scores, self.output_scale)

    def predict(self, x):
        """Return the class of each float input: ``argmax(forward(quantize_input(x)), axis=1)``.

        Ties go to the lowest index, as with :func:`numpy.argmax`.

        Raises
        ------
        ValueError
            If the network's output is spatial (it has no classes), or as for
            :meth:`quantize_input` and :meth:`forward`.
        """
        if len(self.output_shape) != 1:
            raise ValueError(f"predict: the network's output has shape {self.output_shape}; "
                             "allowed: a flat output (N,) of class scores")
        return np.argmax(self.forward(self.quantize_input(x)), axis=1)
