"""Import an ONNX graph into a float :class:`~hwgen.nn.MLP` or :class:`~hwgen.nn.CNN`.

ONNX images are NCHW and ``Flatten``/``Reshape`` order features ``(c, h, w)``; ours are NHWC
and ``(h, w, c)``. Convolution weights are transposed to ``(KH, KW, C_in, C_out)`` and the rows
of the dense layer after a flatten are permuted, so that the imported model computes the same
function on the same images (NCHW input ``x`` becomes ``x.transpose(0, 2, 3, 1)``).

Graphs exported by ``torch.onnx.export`` (both the default dynamo exporter and the legacy
TorchScript one) import directly, including the ``Shape``/``Gather``/``Unsqueeze``/``Concat``
nodes that compute the target of ``x.view(x.size(0), -1)``.
"""

import importlib
import math
import os

import numpy as np

from ._ints import sample_shape
from .import_chain import Chain, require

__all__ = ["from_onnx"]

_SUPPORTED = ("Gemm, MatMul, Add, Conv, BatchNormalization, MaxPool, AveragePool, "
              "GlobalAveragePool, ReduceMean, Relu, Clip, LeakyRelu, Flatten, Reshape, Identity, "
              "Dropout, Constant, and a final Softmax, LogSoftmax or Sigmoid")
_FINAL = {"Softmax": "softmax", "LogSoftmax": "log_softmax", "Sigmoid": "sigmoid"}
# Nodes that compute on shapes only: evaluated here, never part of the chain.
_SHAPE_OPS = ("Shape", "Gather", "Unsqueeze", "Concat")


def from_onnx(model_or_path, input_shape=None):
    """Convert an ONNX graph to an :class:`MLP` or a :class:`CNN`.

    Supported nodes, in one chain from the graph's input to its output: ``Gemm`` (with
    ``alpha``, ``beta`` and ``transB``; ``transA=0``), ``MatMul`` by a constant followed
    optionally by ``Add`` of a constant bias; ``Conv`` with any ``group``, kernel and
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
        :class:`CNN` with ``input_shape``; ``output_function`` is set on either.

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
    walker = _Walker(Chain("ONNX", input_shape), constants, helper, numpy_helper)
    walker.chain.offenders += offenders
    walker.batch = batch
    walker.current = inputs[0].name if inputs else None
    walker.tensor_shapes[walker.current] = input_shape
    for position, node in enumerate(graph.node):
        walker.visit(node, node.name or f"node {position}")
    outputs = [o.name for o in graph.output]
    if outputs != [walker.current] and not walker.chain.offenders:
        walker.chain.offender("<graph>", "output", f"outputs {outputs}; supported: exactly the "
                                                   f"last node's output {walker.current!r}")
    return walker.chain.build()


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


class _Walker:
    """Walks the graph's nodes in order, feeding the chain and evaluating shape nodes."""

    def __init__(self, chain, constants, helper, numpy_helper):
        self.chain = chain
        self.constants = constants
        self.helper = helper
        self.numpy_helper = numpy_helper
        self.shape_values = {}  # tensor name -> list of int or None (the batch size)
        self.tensor_shapes = {}  # chain tensor name -> our per-sample shape (None: unknown)
        self.current = None
        self.batch = None  # the graph input's static batch size, if any
        # True while `current` is a dense layer's output with nothing applied yet, so an Add of
        # a constant can still be folded into that layer's bias.
        self.foldable = False

    def visit(self, node, name):
        kind = node.op_type
        attrs = {a.name: self.helper.get_attribute_value(a) for a in node.attribute}
        if kind == "Constant":
            self._constant(node, name, attrs)
            return
        if kind == "Identity" and node.input[0] in self.constants:
            # The legacy exporter names shared or folded weights through Identity nodes.
            self.constants[node.output[0]] = self.constants[node.input[0]]
            return
        if kind in _SHAPE_OPS:
            value = self._shape_op(node, kind, attrs)
            if value is None:
                self.chain.offender(name, kind, "a shape computation that cannot be followed; "
                                                "supported: Shape, Gather, Unsqueeze, Concat "
                                                "computing a Reshape target")
            else:
                self.shape_values[node.output[0]] = value
            return
        data = [i for i in node.input
                if i and i not in self.constants and i not in self.shape_values]
        if data != [self.current]:
            self.chain.offender(name, kind, "does not take exactly the running activation "
                                            f"({self.current!r}) as its one non-constant input")
            self._advance(node, False)
            return
        handler = getattr(self, f"_op_{kind}", None)
        if handler is None:
            self.chain.offender(name, kind, f"not a supported op type ({_SUPPORTED})")
            self._advance(node, False)
            return
        self._advance(node, handler(node, name, kind, attrs))

    def _advance(self, node, was_dense):
        # Dropout has an optional second output (the mask): nothing may consume it.
        self.current = node.output[0]
        self.tensor_shapes[self.current] = self.chain.shape
        self.foldable = was_dense

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
            shape = self.tensor_shapes.get(node.input[0])
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
        if node.input[0] == self.current and node.input[1] in self.constants \
                and self.constants[node.input[1]].ndim == 2:
            return self.chain.dense(name, kind, self.constants[node.input[1]], None)
        self.chain.offender(name, kind, "supported: activation @ constant 2-D matrix")
        return False

    def _op_Add(self, node, name, kind, attrs):
        consts = [self.constants[i] for i in node.input if i in self.constants]
        layer = self.chain.layers[-1] if self.chain.layers else None
        bias = None
        if self.foldable and len(consts) == 1:
            bias = _bias_vector(consts[0], layer.weight.shape[1])
        if bias is None:
            self.chain.offender(name, kind, "supported only as the bias (a constant vector) "
                                            "right after a Gemm or MatMul")
            return False
        layer.bias = layer.bias + bias
        return True

    def _op_Relu(self, node, name, kind, attrs):
        self.chain.relu(name, kind)
        return False

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

    def _op_Conv(self, node, name, kind, attrs):
        chain = self.chain
        weight = self.constants.get(node.input[1]) if len(node.input) > 1 else None
        if weight is None or weight.ndim != 4:
            chain.offender(name, kind, "W must be a constant 4-D (initializer)")
            return False
        bias = None
        if len(node.input) > 2 and node.input[2]:
            bias = self.constants.get(node.input[2])
            if bias is None:
                chain.offender(name, kind, "B must be a constant (initializer)")
                return False
        reasons = []
        if list(attrs.get("dilations", [1, 1])) != [1, 1]:
            reasons.append(f"dilations={list(attrs['dilations'])}; supported: [1, 1]")
        strides, pads = _strides_and_pads(attrs, weight.shape[2:], chain.shape, reasons)
        if reasons:
            chain.offender(name, kind, "; ".join(reasons))
            return False
        weight = np.asarray(weight, dtype=np.float64).transpose(2, 3, 1, 0)
        chain.conv(name, kind, weight, bias, stride=strides, padding=pads,
                   groups=int(attrs.get("group", 1)))
        return False

    def _op_BatchNormalization(self, node, name, kind, attrs):
        params = [self.constants.get(i) for i in node.input[1:5]]
        if len(params) != 4 or any(p is None for p in params):
            self.chain.offender(name, kind, "scale, B, input_mean and input_var must be "
                                            "constants (initializers)")
            return False
        if attrs.get("training_mode", 0) or len([o for o in node.output if o]) > 1:
            self.chain.offender(name, kind, "training_mode=1 or running statistics outputs; "
                                            "supported: inference")
            return False
        gamma, beta, mean, var = (np.asarray(p, dtype=np.float64).reshape(-1) for p in params)
        scale = gamma / np.sqrt(var + attrs.get("epsilon", 1e-5))
        self.chain.batchnorm(name, kind, scale, beta - mean * scale)
        return False

    def _op_MaxPool(self, node, name, kind, attrs):
        kernel = list(attrs.get("kernel_shape", []))
        reasons = []
        if len(kernel) != 2 or kernel[0] != kernel[1]:
            reasons.append(f"kernel_shape={kernel}; supported: a square 2-D window")
        if len([o for o in node.output if o]) > 1:
            reasons.append("the Indices output is not supported")
        strides, _ = self._window(attrs, kernel, reasons)
        if strides is not None and strides[0] != strides[1]:
            reasons.append(f"strides={list(strides)}; supported: the same on both axes")
        if reasons:
            self.chain.offender(name, kind, "; ".join(reasons))
        else:
            self.chain.pool(name, kind, kernel[0], strides[0])
        return False

    def _op_AveragePool(self, node, name, kind, attrs):
        kernel = list(attrs.get("kernel_shape", []))
        reasons = [] if len(kernel) == 2 else [f"kernel_shape={kernel}; supported: 2-D"]
        strides, _ = self._window(attrs, kernel, reasons)
        if reasons:
            self.chain.offender(name, kind, "; ".join(reasons))
        else:
            self.chain.avgpool(name, kind, tuple(kernel), strides)
        return False

    def _window(self, attrs, kernel, reasons):
        """Return the strides and pads of a pooling node, appending why they do not fit."""
        if list(attrs.get("dilations", [1, 1])) != [1, 1]:
            reasons.append(f"dilations={list(attrs['dilations'])}; supported: [1, 1]")
        if attrs.get("ceil_mode", 0):
            reasons.append("ceil_mode=1; supported: 0 (the output size rounds down)")
        strides, pads = _strides_and_pads(attrs, kernel, self.chain.shape, reasons)
        if pads is not None and any(pads):
            reasons.append(f"pads={list(attrs.get('pads', []))} or auto_pad; supported: none")
        return strides, pads

    def _op_GlobalAveragePool(self, node, name, kind, attrs):
        self.chain.global_avgpool(name, kind)
        return False

    def _op_ReduceMean(self, node, name, kind, attrs):
        axes = attrs.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = self._shape_of(node.input[1])  # an input from opset 18
        axes = None if axes is None else sorted(a % 4 for a in axes)
        if axes != [2, 3]:
            self.chain.offender(name, kind, f"axes={axes}; supported: the spatial axes [2, 3] "
                                            "of an NCHW input")
            return False
        self.chain.global_avgpool(name, kind)
        if not attrs.get("keepdims", 1):
            self.chain.flatten(name, kind)  # (N, C): one pixel, so no reordering
        return False

    def _op_Relu(self, node, name, kind, attrs):
        self.chain.activation(name, kind, "relu")
        return False

    def _op_LeakyRelu(self, node, name, kind, attrs):
        self.chain.activation(name, kind, "leaky_relu", alpha=float(attrs.get("alpha", 0.01)))
        return False

    def _op_Clip(self, node, name, kind, attrs):
        bounds = [attrs.get("min"), attrs.get("max")]  # attributes before opset 11
        for index, tensor in enumerate(node.input[1:3]):
            if tensor:
                value = self.constants.get(tensor)
                if value is None or np.size(value) != 1:
                    self.chain.offender(name, kind, "min and max must be constant scalars")
                    return False
                bounds[index] = float(np.reshape(value, -1)[0])
        self.chain.activation(name, kind, "clamp", low=bounds[0], high=bounds[1])
        return False

    def _final(self, node, name, kind, attrs):
        axis = attrs.get("axis", -1)
        shape = self.chain.shape
        if kind != "Sigmoid" and shape is not None and axis not in (-1, len(shape)):
            self.chain.offender(name, kind, f"axis={axis}; supported: the last axis, over "
                                            "the classes")
        else:
            self.chain.final_function(name, kind, _FINAL[kind])
        return False

    _op_Softmax = _op_LogSoftmax = _op_Sigmoid = _final


def _strides_and_pads(attrs, kernel, shape, reasons):
    """Return ``((sy, sx), (top, bottom, left, right))`` of a Conv or pooling node.

    ONNX's default stride is 1, its ``pads`` are ``[top, left, bottom, right]``; ``auto_pad``
    ``SAME_*`` is resolved with the running ``shape`` (``SAME_UPPER`` puts the odd pixel at the
    end, ``SAME_LOWER`` at the start). Appends to ``reasons`` and returns ``(None, None)`` when
    they cannot be had.
    """
    strides = [int(v) for v in attrs.get("strides", [1, 1])]
    if len(strides) != 2:
        reasons.append(f"strides={strides}; supported: 2-D")
        return None, None
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad == "VALID":
        return tuple(strides), (0, 0, 0, 0)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if shape is None or len(shape) != 3 or len(kernel) != 2:
            reasons.append(f"auto_pad={auto_pad} on an input of unknown size")
            return None, None
        pads = []
        for size, k, s in zip(shape[:2], kernel, strides, strict=True):
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            small, large = total // 2, total - total // 2
            pads += [small, large] if auto_pad == "SAME_UPPER" else [large, small]
        return tuple(strides), tuple(pads)
    pads = [int(v) for v in attrs.get("pads", [0, 0, 0, 0])]
    if len(pads) != 4:
        reasons.append(f"pads={pads}; supported: 4 values")
        return None, None
    top, left, bottom, right = pads
    return tuple(strides), (top, bottom, left, right)


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
