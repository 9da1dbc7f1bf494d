"""Import an ONNX graph into a float :class:`~hwgen.nn.MLP` or :class:`~hwgen.nn.CNN`.

ONNX images are NCHW and ``Flatten``/``Reshape`` order features ``(c, h, w)``; ours are NHWC
and ``(h, w, c)``. Convolution weights are transposed to ``(KH, KW, C_in, C_out)`` and the rows
of the dense layer after a flatten are permuted, so that the imported model computes the same
function on the same images (NCHW input ``x`` becomes ``x.transpose(0, 2, 3, 1)``).

Graphs exported by ``torch.onnx.export`` (both the default dynamo exporter and the legacy
TorchScript one) import directly, including the ``Shape``/``Gather``/``Unsqueeze``/``Concat``
nodes that compute the target of ``x.view(x.size(0), -1)``, and graphs with branches (residual
blocks: an ``Add`` of two computed tensors).
"""

import importlib
import math
import os

import numpy as np

from ._ints import sample_shape
from .import_chain import Chain, require
from .import_onnx_ops import LayerOps

__all__ = ["from_onnx"]

_SUPPORTED = ("Gemm, MatMul, Add (of a bias or of two tensors), Conv, Pad before a Conv, "
              "BatchNormalization, MaxPool, AveragePool, GlobalAveragePool, ReduceMean, Relu, "
              "Clip, LeakyRelu, Flatten, "
              "Reshape, Identity, Dropout, Constant, and a final Softmax, LogSoftmax or Sigmoid")
# Nodes that compute on shapes only: evaluated here, never part of the chain.
_SHAPE_OPS = ("Shape", "Gather", "Unsqueeze", "Concat")


def from_onnx(model_or_path, input_shape=None):
    """Convert an ONNX graph to an :class:`MLP` or a :class:`CNN`.

    The graph has one input and one output; each node reads the tensors it names, so
    branches are followed: an ``Add`` of two computed tensors becomes a
    :class:`~hwgen.nn.float_add.FloatAdd` node (inputs in the node's order). A BatchNorm, bias
    or activation folds into the layer before it (a ``Relu`` after an ``Add`` into the add)
    only when nothing else reads that layer's output. Supported nodes: ``Gemm`` (with
    ``alpha``, ``beta`` and ``transB``; ``transA=0``), ``MatMul`` by a constant followed
    optionally by ``Add`` of a constant bias; ``Pad`` of zeros on the spatial axes right
    before a ``Conv``, which takes it into its padding; ``Conv`` with any ``group``, kernel and
    per-axis ``strides``, ``dilations`` 1 and any zero padding (``pads``, or ``auto_pad``
    ``VALID``, ``SAME_UPPER`` or ``SAME_LOWER``, resolved on the running input size);
    ``BatchNormalization`` (inference, right after a dense layer or ``Conv``: folded into it
    in float); ``MaxPool`` with a square window, the same stride on both axes, no padding, no
    dilation, ``ceil_mode=0`` and no indices output; ``AveragePool`` (any window and strides,
    no padding, ``ceil_mode=0``), ``GlobalAveragePool`` and ``ReduceMean`` over the two
    spatial axes (``axes`` an attribute or, from opset 18, a constant input; ``keepdims``
    either); ``Relu``, ``Clip`` (bounds as constant inputs or, before opset 11, attributes)
    and ``LeakyRelu`` (folded into the preceding dense, convolution or average pooling layer,
    through max pooling and flattening, with which they commute); ``Flatten`` (``axis=1``)
    and ``Reshape`` to 2-D ``(batch, features)``, including a target computed by ``Shape``,
    ``Gather``, ``Unsqueeze`` and ``Concat`` nodes; ``Identity``, ``Dropout`` and
    ``Constant``; a final ``Softmax``/``LogSoftmax`` over the classes or ``Sigmoid``,
    recorded as the model's ``output_function`` (see :mod:`hwgen.nn.output_function`).
    Weights must be initializers or constants.

    Parameters
    ----------
    model_or_path : onnx.ModelProto or str or os.PathLike
    input_shape : tuple of int, optional
        ``(H, W, C)`` of one input image, needed only when the graph's NCHW input does not
        state its sizes; ``(K,)`` likewise for rows.

    Returns
    -------
    MLP or CNN
        An :class:`MLP` for a chain of dense layers on rows with ReLUs or none, otherwise a
        :class:`CNN` with ``input_shape``: of layers for a chain, of :class:`~hwgen.nn.Node`
        named after the ONNX nodes for a graph; ``output_function`` is set on either.

    Raises
    ------
    UnsupportedModelError
        Listing every unsupported node with its name, op type and why (including nodes that
        are off the main chain or take non-constant weights).
    ValueError
        If the input's sizes are neither in the graph nor given, or ``input_shape`` is
        malformed or contradicts the graph.
    ImportError
        If the ``onnx`` package is not installed.
    """
    onnx = require("onnx", "onnx")
    helper = importlib.import_module("onnx.helper")
    numpy_helper = importlib.import_module("onnx.numpy_helper")

    model = (onnx.load(os.fspath(model_or_path))
             if isinstance(model_or_path, str | os.PathLike) else model_or_path)
    graph = model.graph
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in constants]
    input_shape = sample_shape(input_shape, "from_onnx")
    offenders = []
    batch = None
    if len(inputs) == 1:
        input_shape, batch = _input_shape(inputs[0], input_shape, offenders)
    else:
        offenders.append(("<graph>", "input",
                          f"{len(inputs)} data inputs; supported: exactly 1"))
    outputs = [o.name for o in graph.output]
    chain = Chain("ONNX", input_shape, _uses(graph, outputs))
    walker = _Walker(chain, constants, helper, numpy_helper)
    chain.offenders += offenders
    walker.batch = batch
    for value_info in inputs:
        chain.alias(value_info.name)
    for position, node in enumerate(graph.node):
        walker.visit(node, node.name or f"node {position}")
    if len(outputs) != 1:
        chain.offender("<graph>", "output", f"outputs {outputs}; supported: exactly one")
        return chain.build()
    if outputs[0] not in chain.states:
        chain.offender("<graph>", "output", f"output {outputs[0]!r} is no node's output")
        return chain.build()
    return chain.build(outputs[0])


def _uses(graph, outputs):
    """How many times the graph reads each tensor (its outputs count once; a Shape node reads
    no values)."""
    uses = dict.fromkeys(outputs, 1)
    for node in graph.node:
        for name in node.input if node.op_type != "Shape" else ():
            if name:
                uses[name] = uses.get(name, 0) + 1
    return uses


def _input_shape(value_info, given, offenders):
    """Return our per-sample input shape from the graph input's dims and ``given``, and the
    batch size the graph was exported with (``None`` when symbolic)."""
    dims = [d.dim_value if d.HasField("dim_value") else None
            for d in value_info.type.tensor_type.shape.dim]
    if not dims:
        return given, None
    if len(dims) == 4:
        stated = None if None in dims[1:] else (dims[2], dims[3], dims[1])
    elif len(dims) == 2:
        stated = None if dims[1] is None else (dims[1],)
    else:
        offenders.append(("<graph>", "input", f"input {value_info.name!r} has rank {len(dims)}; "
                                              "supported: 2 (M, K) or 4 (M, C, H, W)"))
        return given, None
    if given is not None and (len(given) != len(dims) - 1
                              or (stated is not None and given != stated)):
        raise ValueError(f"from_onnx: input_shape={given} but the graph input "
                         f"{value_info.name!r} has dims {dims}; allowed: "
                         f"{stated or 'a shape of the same rank'} (NHWC order)")
    if given is None and stated is None and len(dims) == 4:
        raise ValueError(f"from_onnx: the graph input {value_info.name!r} has dims {dims}; "
                         "pass input_shape=(H, W, C), one NHWC image")
    return given or stated, dims[0]


def _onnx_shape(shape):
    """Our per-sample shape as the NCHW/rows shape of a batch, ``None`` for the batch size."""
    if len(shape) == 3:
        h, w, c = shape
        return [None, c, h, w]
    return [None, *shape]


class _Walker(LayerOps):
    """Walks the graph's nodes in order, feeding the chain (each node reads the tensors it
    names: :meth:`Chain.read <hwgen.nn.import_graph.Tensors.read>`) and evaluating shape
    nodes; the handlers of the spatial and activation ops come from :class:`LayerOps`."""

    def __init__(self, chain, constants, helper, numpy_helper):
        self.chain = chain
        self.constants = constants
        self.helper = helper
        self.numpy_helper = numpy_helper
        self.shape_values = {}  # tensor name -> list of int or None (the batch size)
        self.batch = None  # the graph input's static batch size, if any
        # The tensors that are a dense layer's output with nothing applied yet, so that an Add
        # of a constant can still be folded into that layer's bias.
        self.dense_outputs = set()

    def visit(self, node, name):
        kind = node.op_type
        attrs = {a.name: self.helper.get_attribute_value(a) for a in node.attribute}
        if kind == "Constant":
            self._constant(node, name, attrs)
            return
        if node.input and all(not i or i in self.constants for i in node.input) \
                and self._fold(node):
            return
        data = [i for i in node.input
                if i and i not in self.constants and i not in self.shape_values]
        chain = self.chain
        if kind == "Shape" or (kind in _SHAPE_OPS and not any(i in chain.states for i in data)):
            value = self._shape_op(node, kind, attrs)
            if value is None:
                self.chain.offender(name, kind, "a shape computation that cannot be followed; "
                                                "supported: Shape, Gather, Unsqueeze, Concat "
                                                "computing a Reshape target")
            else:
                self.shape_values[node.output[0]] = value
            return
        missing = [i for i in data if i not in chain.states]
        if missing:
            chain.unknown()
            chain.offender(name, kind, f"reads {missing}, which no node computes")
        elif kind == "Add" and len(data) == 2:
            chain.add(name, kind, *data)  # a residual add; an Add of a constant is a bias
        elif len(data) != 1:
            if data:
                chain.read(data[0])
            else:
                chain.unknown()
            chain.offender(name, kind, "does not take exactly the running activation (one "
                                       "computed tensor; only an Add takes two) as its "
                                       f"non-constant inputs: it reads {data}")
        else:
            chain.read(data[0])
            handler = getattr(self, f"_op_{kind}", None)
            if handler is None:
                chain.offender(name, kind, f"not a supported op type ({_SUPPORTED})")
            elif handler(node, name, kind, attrs):
                self.dense_outputs.add(node.output[0])
        # Dropout's optional second output (the mask) is no tensor of ours: nothing may read it.
        chain.write(node.output[0])

    def _fold(self, node):
        """Evaluate a node whose inputs are all constants (the legacy exporter computes a
        Pad's pads and names shared weights that way); return whether it could."""
        if node.op_type == "Identity":
            self.constants[node.output[0]] = self.constants[node.input[0]]
            return True
        try:
            reference = importlib.import_module("onnx.reference")
            values = reference.ReferenceEvaluator(node).run(
                None, {i: self.constants[i] for i in node.input if i})
        except (RuntimeError, ValueError, TypeError, KeyError, IndexError, NotImplementedError):
            # An op it cannot run stays a node: an offender, said why.
            return False
        self.constants.update(zip(node.output, values, strict=False))
        return True

    def _constant(self, node, name, attrs):
        if "value" in attrs:
            self.constants[node.output[0]] = self.numpy_helper.to_array(attrs["value"])
        elif "value_ints" in attrs or "value_int" in attrs:
            self.constants[node.output[0]] = np.array(attrs.get("value_ints",
                                                                attrs.get("value_int")))
        else:
            self.chain.offender(name, "Constant", "only the 'value', 'value_int' and "
                                                  "'value_ints' attributes are supported")

    def _shape_of(self, name):
        """Return a shape value or constant as a list, ``None`` if neither."""
        if name in self.shape_values:
            return list(self.shape_values[name])
        if name in self.constants:
            return [int(v) for v in np.asarray(self.constants[name]).reshape(-1)]
        return None

    def _shape_op(self, node, kind, attrs):
        """Evaluate a node that computes on shapes; ``None`` if it cannot be followed."""
        if kind == "Shape":
            state = self.chain.states.get(node.input[0])
            shape = None if state is None else state.shape
            return None if shape is None else \
                _onnx_shape(shape)[attrs.get("start", 0):attrs.get("end")]
        args = [self._shape_of(i) for i in node.input if i]
        if any(a is None for a in args) or attrs.get("axis", 0) not in (0, -1):
            return None
        if kind == "Gather":
            index = self.constants.get(node.input[1])
            if index is None or np.ndim(index) > 1:
                return None
            return [args[0][int(i)] for i in np.reshape(index, -1)]
        if kind == "Unsqueeze":
            return args[0]  # a scalar or vector of sizes becomes a vector: the same list
        return [v for a in args for v in a]  # Concat

    # -- one handler per op type: return True when the node is a dense layer ----------------

    def _op_Gemm(self, node, name, kind, attrs):
        chain = self.chain
        if attrs.get("transA", 0):
            chain.offender(name, kind, "transA=1 is not supported")
            return False
        if len(node.input) < 2 or node.input[1] not in self.constants:
            chain.offender(name, kind, "B must be a constant (initializer)")
            return False
        weight = np.asarray(self.constants[node.input[1]], dtype=np.float64)
        if attrs.get("transB", 0):
            weight = weight.T  # ONNX stores B as (N, K) when transB=1, as torch.nn.Linear does
        weight = weight * attrs.get("alpha", 1.0)
        bias = None
        if len(node.input) > 2 and node.input[2]:
            if node.input[2] not in self.constants:
                chain.offender(name, kind, "C must be a constant (initializer)")
                return False
            bias = _bias_vector(self.constants[node.input[2]], weight.shape[1])
            if bias is None:
                chain.offender(name, kind, f"C has shape {self.constants[node.input[2]].shape}; "
                                           f"supported: a scalar, ({weight.shape[1]},) or "
                                           f"(1, {weight.shape[1]})")
                return False
            bias = bias * attrs.get("beta", 1.0)
        return chain.dense(name, kind, weight, bias)

    def _op_MatMul(self, node, name, kind, attrs):
        if node.input[0] not in self.constants and node.input[1] in self.constants \
                and self.constants[node.input[1]].ndim == 2:
            return self.chain.dense(name, kind, self.constants[node.input[1]], None)
        self.chain.offender(name, kind, "supported: activation @ constant 2-D matrix")
        return False

    def _op_Add(self, node, name, kind, attrs):
        consts = [self.constants[i] for i in node.input if i in self.constants]
        data = [i for i in node.input if i not in self.constants]
        state = self.chain.state
        bias = layer = None
        if len(consts) == 1 and data[0] in self.dense_outputs and state.private:
            layer = self.chain.layer(state.node)
            bias = _bias_vector(consts[0], layer.weight.shape[1])
        if bias is None:
            self.chain.offender(name, kind, "supported only as the bias (a constant vector) "
                                            "right after a Gemm or MatMul whose output nothing "
                                            "else reads, or as the sum of two computed tensors")
            return False
        layer.bias = layer.bias + bias
        return True

    def _op_Identity(self, node, name, kind, attrs):
        return False

    _op_Dropout = _op_Identity

    def _op_Flatten(self, node, name, kind, attrs):
        if attrs.get("axis", 1) != 1:
            self.chain.offender(name, kind, f"axis={attrs['axis']}; supported: 1")
        else:
            self.chain.flatten(name, kind)
        return False

    def _op_Reshape(self, node, name, kind, attrs):
        target = self._shape_of(node.input[1]) if len(node.input) > 1 else None
        shape = self.chain.shape
        if target is None:
            self.chain.offender(name, kind, "the target shape is not a constant or a shape "
                                            "computation that can be followed")
            return False
        total = "features" if shape is None else math.prod(shape)
        rows, features = [*target, None, None][:2]
        # The batch axis: symbolic, inferred, copied (0 without allowzero), or the size the
        # graph was exported with; anything else would mix samples.
        batch_ok = rows in (None, -1) or (rows == 0 and not attrs.get("allowzero", 0)) \
            or (rows > 0 and rows == self.batch)
        if len(target) != 2 or not batch_ok or (shape is not None and (
                features not in (-1, total) or (rows == -1 and features != total))):
            self.chain.offender(name, kind, f"target shape {target}; supported: 2-D (batch, "
                                            f"{total}), a flatten")
        else:
            self.chain.flatten(name, kind)
        return False


def _bias_vector(value, n):
    """Return ``value`` as an ``(n,)`` float bias if it broadcasts along a layer's outputs only.

    Scalars and shapes ``(1,)``, ``(n,)``, ``(1, 1)`` and ``(1, n)`` qualify; anything else would
    broadcast across the batch or change the output's shape, and returns ``None``.
    """
    value = np.asarray(value, dtype=np.float64)
    if value.ndim > 2 or (value.ndim == 2 and value.shape[0] != 1):
        return None
    if value.ndim and value.shape[-1] not in (1, n):
        return None
    return np.broadcast_to(value.reshape(-1), (n,)).copy()
