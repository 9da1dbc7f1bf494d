"""The bit-exact bfloat16 reference network, and :func:`to_bf16` that makes one from a float
model.

A design with ``dtype="bf16"`` multiplies bf16 and accumulates in fp32 (docs/arithmetic.md,
"bfloat16"): no quantization, no multipliers or shifts, no calibration. :func:`to_bf16`
rounds a float :class:`~hwgen.nn.MLP` or :class:`~hwgen.nn.CNN` (chain or graph, as the
importers give them, BatchNorm already folded) to bf16 weights and fp32 biases, and
:class:`Bf16Network` computes it as the hardware will, to the bit.
"""

import numbers

import numpy as np

from .bf16 import as_bf16, bf16_array, first_index, round_to_bf16, round_to_fp32
from .bf16_layers import Bf16Add, Bf16AvgPool2D, Bf16Conv2D, Bf16Dense
from .flatten import Flatten
from .float_add import FloatAdd
from .float_layers import FloatConv2D, FloatDense
from .float_pool import FloatAvgPool2D, FloatGlobalAvgPool2D
from .graph import INPUT, Node, where
from .import_chain import UnsupportedModelError
from .maxpool import MaxPool2D
from .quantization import as_cnn

__all__ = ["Bf16Network", "to_bf16"]

_SUPPORTED = (FloatDense, FloatConv2D, MaxPool2D, FloatAvgPool2D, FloatGlobalAvgPool2D,
              Flatten, FloatAdd)


class Bf16Network:
    """A chain or graph of bf16 layers computed bit-exactly as a ``dtype="bf16"`` design does.

    Made by :func:`to_bf16`. Tensors between layers hold bf16 values (NHWC between spatial
    layers); a raw last layer returns its fp32 accumulators (the scores).

    Parameters
    ----------
    nodes : sequence of Node
        In topological order, each with a layer of :mod:`hwgen.nn.bf16_layers`, a
        :class:`~hwgen.nn.MaxPool2D` or a :class:`~hwgen.nn.Flatten`.
    rows : int
        ``R``, the array's rows, which sets the order of the sums (a compiler refuses a
        design of other rows).
    tensor_shapes : dict of str to tuple of int
        Every tensor's per-sample shape by name, :data:`~hwgen.nn.graph.INPUT` first.
    output_function : str or None
        What turns the scores into probabilities on the host (informative).

    Attributes
    ----------
    nodes : tuple of Node
    layers : list
    rows : int
    dtype : str
        ``"bf16"``.
    input_shape, output_shape : tuple of int
    raw : bool
        Whether the last layer returns fp32 scores.
    output_function : str or None
    """

    dtype = "bf16"

    def __init__(self, nodes, *, rows, tensor_shapes, output_function=None):
        self.nodes = tuple(nodes)
        self.rows = rows
        self.tensor_shapes = dict(tensor_shapes)
        self.output_function = output_function

    @property
    def layers(self):
        """The nodes' layers, in node order."""
        return [node.layer for node in self.nodes]

    @property
    def input_shape(self):
        """Shape of one input sample, ``(K,)`` or ``(H, W, C)``."""
        return self.tensor_shapes[INPUT]

    @property
    def output_shape(self):
        """Shape of one output sample, ``(N,)`` for scores."""
        return self.tensor_shapes[self.nodes[-1].name]

    @property
    def shapes(self):
        """``[(input_shape, output_shape)]`` of every node, per sample (its first input's
        shape), as :attr:`hwgen.nn.QuantizedNetwork.shapes`."""
        return [(self.tensor_shapes[node.inputs[0]], self.tensor_shapes[node.name])
                for node in self.nodes]

    @property
    def raw(self):
        """Whether the last layer returns its fp32 accumulators."""
        return getattr(self.nodes[-1].layer, "raw", False)

    def __repr__(self):
        kinds = ", ".join(type(layer).__name__ for layer in self.layers)
        return f"Bf16Network([{kinds}], rows={self.rows}, input_shape={self.input_shape})"

    def quantize_input(self, x):
        """Return float inputs rounded to bf16 (:func:`~hwgen.nn.bf16.round_to_bf16`: the
        zero rule, then nearest even), as an array of ``ml_dtypes.bfloat16``.

        Raises
        ------
        ValueError
            Naming the first index, for an input that is Inf or NaN or that rounds to Inf
            (beyond the largest finite bf16).
        """
        x = np.asarray(x, dtype=np.float64)
        _refuse_nonfinite(x, "quantize_input", "x")
        rounded = round_to_bf16(x)
        _refuse_nonfinite(as_bf16(rounded), "quantize_input", "x", " once rounded to bf16")
        return rounded

    def forward_tensors(self, x):
        """Run the network on bf16 inputs; return every tensor by name.

        Parameters
        ----------
        x : numpy.ndarray of ml_dtypes.bfloat16 (or float32 holding bf16 values)
            ``(M, *input_shape)``, finite.

        Returns
        -------
        dict of str to numpy.ndarray
            ``"input"``, then each node's output in node order: ``ml_dtypes.bfloat16``
            arrays, and float32 for a raw last layer.

        Raises
        ------
        ValueError
            For a wrong shape, a value that is not bf16, or an Inf or NaN input (naming the
            first index).
        """
        values = {INPUT: self._check_x(x)}
        for node in self.nodes:
            layer, args = node.layer, [values[name] for name in node.inputs]
            if isinstance(layer, Bf16Add):
                values[node.name] = layer.forward(*args)
            elif isinstance(layer, MaxPool2D | Flatten):
                # The maximum of bf16 values is one of them; a window with a NaN gives NaN.
                values[node.name] = layer.forward(args[0])
            else:
                values[node.name] = layer.forward(args[0], self.rows)
        last = self.nodes[-1].name
        return {name: value if name == last and self.raw else bf16_array(value)
                for name, value in values.items()}

    def forward_trace(self, x):
        """Return every node's output for bf16 inputs ``x``, in node order (what a program
        compiled with ``readout=True`` reads back; see :meth:`forward_tensors`)."""
        values = self.forward_tensors(x)
        return [values[node.name] for node in self.nodes]

    def forward(self, x):
        """Return the last node's output for bf16 inputs ``x`` (see :meth:`forward_tensors`):
        fp32 scores ``(M, N)`` for a raw last layer, bf16 values otherwise."""
        return self.forward_tensors(x)[self.nodes[-1].name]

    def predict(self, x):
        """Return ``argmax(forward(quantize_input(x)), axis=1)`` for float inputs ``x``.

        Ties go to the lowest index, and a NaN score wins (NumPy's argmax).

        Raises
        ------
        ValueError
            If the output is spatial, or as for :meth:`quantize_input`.
        """
        if len(self.output_shape) != 1:
            raise ValueError(f"predict: the network's output has shape {self.output_shape}; "
                             "allowed: a flat output (N,) of class scores")
        scores = self.forward(self.quantize_input(x))
        return np.argmax(np.asarray(scores, dtype=np.float32), axis=1)

    def _check_x(self, x):
        shape = self.input_shape
        x = as_bf16(x, "input", "x")
        if x.ndim != len(shape) + 1 or x.shape[1:] != shape:
            raise ValueError(f"input: field 'x' has shape {x.shape}; allowed: "
                             f"(M, {', '.join(map(str, shape))})")
        _refuse_nonfinite(x, "input", "x")
        return x


def _refuse_nonfinite(values, at, field, how=""):
    """Raise the ValueError naming ``at``, ``field`` and the first Inf or NaN of ``values``."""
    bad = ~np.isfinite(values)
    if bad.any():
        index = first_index(bad)
        raise ValueError(f"{at}: field {field!r} is {values[index]}{how} at index {index}; "
                         "allowed: finite values (Inf and NaN arise only inside the datapath)")


def to_bf16(model, *, rows=8, output="raw"):
    """Return the :class:`Bf16Network` of a float model, per docs/arithmetic.md ("bfloat16").

    Weights are rounded to bf16 and biases to fp32 (nearest even, the zero rule); clamp
    bounds (ReLU6, Hardtanh, Clip) become fp32 values. Nothing is calibrated.

    Parameters
    ----------
    model : MLP or CNN
        A chain or a graph of :class:`FloatDense`, :class:`FloatConv2D` (any groups),
        :class:`MaxPool2D`, :class:`FloatAvgPool2D`, :class:`FloatGlobalAvgPool2D`,
        :class:`Flatten` and :class:`FloatAdd` layers with ReLU, identity and clamp bounds,
        as made by hand or by :func:`~hwgen.nn.from_torch` / :func:`~hwgen.nn.from_onnx`.
    rows : int
        ``R >= 1``, the rows of the array that will run it: the length of the tiles of the
        sums, stored as :attr:`Bf16Network.rows`.
    output : {"raw", "bf16"}
        ``"raw"``: the last layer (a dense or convolution layer) returns its fp32
        accumulators, without activation, as :func:`~hwgen.nn.quantize` does for int8;
        ``"bf16"``: it is activated and rounded like the others.

    Returns
    -------
    Bf16Network
        With the model's node names and inputs, ``rows`` and ``output_function``.

    Raises
    ------
    UnsupportedModelError
        Listing every layer bf16 does not cover (a leaky ReLU), by index and kind.
    ValueError
        For a bad ``rows`` or ``output``, ``output="raw"`` without a dense or convolution
        layer last, or a weight or bias that is Inf or NaN or rounds to Inf (naming the
        layer, the field and the first index).
    TypeError
        If the model is neither an :class:`MLP` nor a :class:`CNN`.
    """
    if isinstance(rows, bool) or not isinstance(rows, numbers.Integral) or rows < 1:
        raise ValueError(f"to_bf16: rows={rows!r}; allowed: an int >= 1")
    if output not in ("raw", "bf16"):
        raise ValueError(f"to_bf16: output={output!r}; allowed: 'raw', 'bf16'")
    cnn = as_cnn(model, "to_bf16")
    shapes = cnn.tensor_shapes
    nodes = cnn.nodes
    last = len(nodes) - 1
    if output == "raw" and not isinstance(nodes[last].layer, FloatDense | FloatConv2D):
        raise ValueError(f"to_bf16: output='raw' but {where(last, nodes[last].name)} is a "
                         f"{type(nodes[last].layer).__name__}; allowed: output='bf16', or a "
                         "FloatDense or FloatConv2D last")
    offenders = [(where(i, node.name), type(node.layer).__name__, reason)
                 for i, node in enumerate(nodes)
                 if (reason := _unsupported(node.layer, raw=output == "raw" and i == last))]
    if offenders:
        raise UnsupportedModelError("to_bf16: the", offenders)
    converted = [Node(node.name, _convert(node.layer, where(i, node.name),
                                          raw=output == "raw" and i == last), node.inputs)
                 for i, node in enumerate(nodes)]
    return Bf16Network(converted, rows=int(rows), tensor_shapes=shapes,
                       output_function=cnn.output_function)



def _unsupported(layer, *, raw):
    """Why bf16 does not cover ``layer``, or ``""``; a raw output ignores its activation."""
    if not isinstance(layer, _SUPPORTED):
        return "not a layer bf16 covers; supported: " + ", ".join(
            kind.__name__ for kind in _SUPPORTED)
    if getattr(layer, "activation", "identity") == "leaky_relu" and not raw:
        return ("a leaky ReLU, which the bf16 contract does not define; supported: ReLU, "
                "identity and clamp bounds (ReLU6, Hardtanh, Clip)")
    return ""


def _convert(layer, at, *, raw):
    """Return the bf16 layer of a float one (``at`` names it in errors)."""
    if isinstance(layer, MaxPool2D | Flatten):
        return layer
    finish = {} if raw else {
        "activation": layer.activation,
        **{bound: None if getattr(layer, bound) is None
           else float(round_to_fp32(getattr(layer, bound)))
           for bound in ("act_min", "act_max")}}
    if isinstance(layer, FloatAdd):
        return Bf16Add(**finish)
    if isinstance(layer, FloatAvgPool2D):
        return Bf16AvgPool2D(kernel_size=layer.kernel_size, strides=layer.strides, **finish)
    if isinstance(layer, FloatGlobalAvgPool2D):
        return Bf16AvgPool2D(**finish)
    params = {"weight": _rounded(layer.weight, at, "weight", "bf16"),
              "bias": _rounded(layer.bias, at, "bias", "fp32"),
              "raw": raw, **finish}
    if isinstance(layer, FloatConv2D):
        return Bf16Conv2D(strides=layer.strides, pads=layer.pads, groups=layer.groups,
                          **params)
    return Bf16Dense(**params)


def _rounded(values, at, field, dtype):
    """Return float ``values`` rounded to ``dtype`` (``"bf16"`` or ``"fp32"``), refusing
    Inf and NaN before, and values that overflow to Inf after."""
    _refuse_nonfinite(values, at, field)
    if dtype == "bf16":
        rounded = round_to_bf16(values)
        _refuse_nonfinite(as_bf16(rounded), at, field, " once rounded to bf16")
    else:
        rounded = round_to_fp32(values)
        _refuse_nonfinite(rounded, at, field, " once rounded to fp32")
    return rounded
