"""Import float models from PyTorch and ONNX into :class:`~hwgen.nn.MLP`.

Only chains of fully connected layers with optional ReLUs are supported: that is what the
accelerator runs. Anything else is refused with one :class:`UnsupportedModelError` that lists
every offending layer or node, so a user sees the whole extent of the problem at once.

``torch`` and ``onnx`` are optional dependencies, imported only when an importer is called.
"""

import importlib
import os

import numpy as np

from .mlp import MLP

__all__ = ["UnsupportedModelError", "from_onnx", "from_torch"]


class UnsupportedModelError(ValueError):
    """A model holds layers or nodes that cannot be mapped onto dense layers and ReLUs.

    Attributes
    ----------
    offenders : list of (str, str, str)
        ``(name, type, reason)`` of every offending layer or node, in model order.
    """

    def __init__(self, source, offenders):
        self.offenders = list(offenders)
        lines = [f"  - {name} ({kind}): {reason}" for name, kind, reason in self.offenders]
        super().__init__(f"{source} model has {len(self.offenders)} unsupported layer(s)/node(s):\n"
                         + "\n".join(lines))


def _require(module, extra):
    # Imported on demand: torch and onnx are optional and heavy.
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{module} is needed to import this model; install it with "
                          f"`pip install {module}` (or `pip install hwgen[{extra}]`)") from exc


class _Chain:
    """Collects dense layers and ReLU flags, and the offenders met on the way."""

    def __init__(self, source):
        self.source = source
        self.layers = []
        self.relu = []
        self.offenders = []

    def dense(self, name, kind, weight, bias):
        weight = np.asarray(weight, dtype=np.float64)
        bias = (np.zeros(weight.shape[1]) if bias is None
                else np.broadcast_to(np.asarray(bias, dtype=np.float64), (weight.shape[1],)))
        if self.layers and self.layers[-1][0].shape[1] != weight.shape[0]:
            self.offender(name, kind, f"takes {weight.shape[0]} inputs but the previous layer "
                                      f"gives {self.layers[-1][0].shape[1]}")
            return False
        self.layers.append((weight, np.array(bias)))
        self.relu.append(False)
        return True

    def activation(self, name, kind):
        if not self.layers:
            self.offender(name, kind, "a ReLU before the first dense layer cannot be mapped")
        else:
            self.relu[-1] = True  # relu(relu(a)) == relu(a), so repeats are harmless

    def offender(self, name, kind, reason):
        self.offenders.append((name, kind, reason))

    def build(self):
        if not self.layers and not self.offenders:
            self.offender("<model>", "-", "no dense layer found")
        if self.offenders:
            raise UnsupportedModelError(self.source, self.offenders)
        return MLP.from_layers(self.layers, self.relu)


def from_torch(module):
    """Convert a PyTorch ``nn.Sequential`` of dense layers and ReLUs to an :class:`MLP`.

    Supported modules: ``Linear``, ``ReLU``, ``Flatten`` (with ``start_dim=1``, a no-op on
    ``(M, K)`` inputs), ``Identity``, ``Dropout`` (inference is a no-op) and nested
    ``Sequential``. A single ``Linear`` is accepted as a one-layer model.

    Parameters
    ----------
    module : torch.nn.Module

    Returns
    -------
    MLP
        With ``W = linear.weight.T`` and ``b = linear.bias`` (zeros when absent).

    Raises
    ------
    UnsupportedModelError
        Listing every unsupported module with its name and type.
    ImportError
        If PyTorch is not installed.
    """
    torch = _require("torch", "torch")
    nn = torch.nn
    chain = _Chain("PyTorch")

    def visit(name, child):
        kind = type(child).__name__
        if isinstance(child, nn.Sequential):
            for sub_name, sub in child.named_children():
                visit(f"{name}.{sub_name}" if name else sub_name, sub)
        elif isinstance(child, nn.Linear):
            weight = child.weight.detach().cpu().double().numpy().T
            bias = None if child.bias is None else child.bias.detach().cpu().double().numpy()
            chain.dense(name, kind, weight, bias)
        elif isinstance(child, nn.ReLU):
            chain.activation(name, kind)
        elif isinstance(child, nn.Flatten):
            if child.start_dim != 1 or child.end_dim != -1:
                chain.offender(name, kind, f"start_dim={child.start_dim}, "
                                           f"end_dim={child.end_dim}; supported: 1, -1")
        elif isinstance(child, nn.Identity | nn.Dropout):
            pass
        else:
            chain.offender(name, kind, "not a supported layer type (Linear, ReLU, Flatten, "
                                       "Identity, Dropout)")

    visit("", module)
    return chain.build()


def from_onnx(model_or_path):
    """Convert an ONNX graph of dense layers and ReLUs to an :class:`MLP`.

    Supported nodes, in one chain from the graph's input to its output: ``Gemm`` (with
    ``alpha``, ``beta`` and ``transB``; ``transA=0``), ``MatMul`` by a constant followed
    optionally by ``Add`` of a constant bias, ``Relu``, ``Flatten`` (``axis=1``), ``Identity``,
    ``Dropout`` and ``Constant`` (for weights). Weights must be initializers or constants.

    Parameters
    ----------
    model_or_path : onnx.ModelProto or str or os.PathLike

    Returns
    -------
    MLP

    Raises
    ------
    UnsupportedModelError
        Listing every unsupported node with its name and op type (including nodes that are off
        the main chain or take non-constant weights).
    ImportError
        If the ``onnx`` package is not installed.
    """
    onnx = _require("onnx", "onnx")
    helper = importlib.import_module("onnx.helper")
    numpy_helper = importlib.import_module("onnx.numpy_helper")

    model = (onnx.load(os.fspath(model_or_path))
             if isinstance(model_or_path, str | os.PathLike) else model_or_path)
    graph = model.graph
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in constants]
    chain = _Chain("ONNX")
    if len(inputs) != 1:
        chain.offender("<graph>", "input", f"{len(inputs)} data inputs; supported: exactly 1")
    current = inputs[0] if inputs else None
    # True while `current` is a dense layer's output with nothing applied yet, so an Add of a
    # constant can still be folded into that layer's bias.
    foldable = False

    for position, node in enumerate(graph.node):
        name = node.name or f"node {position}"
        kind = node.op_type
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if kind == "Constant":
            if "value" in attrs:
                constants[node.output[0]] = numpy_helper.to_array(attrs["value"])
            else:
                chain.offender(name, kind, "only the 'value' attribute is supported")
            continue
        data = [i for i in node.input if i and i not in constants]
        consts = [constants[i] for i in node.input if i in constants]
        if data != [current]:
            chain.offender(name, kind, "does not take exactly the running activation "
                                       f"({current!r}) as its one non-constant input")
            current, foldable = node.output[0], False
            continue
        ok, was_dense = True, False
        if kind == "Gemm":
            ok = _gemm(chain, name, node, attrs, constants)
            was_dense = ok
        elif kind == "MatMul":
            if node.input[0] == current and node.input[1] in constants \
                    and constants[node.input[1]].ndim == 2:
                ok = was_dense = chain.dense(name, kind, constants[node.input[1]], None)
            else:
                ok = False
                chain.offender(name, kind, "supported: activation @ constant 2-D matrix")
        elif kind == "Add":
            bias = None
            if foldable and len(consts) == 1:
                bias = _bias_vector(consts[0], chain.layers[-1][0].shape[1])
            if bias is not None:
                weight, old = chain.layers[-1]
                chain.layers[-1] = (weight, old + bias)
                was_dense = True
            else:
                ok = False
                chain.offender(name, kind, "supported only as the bias (a constant vector) "
                                           "right after a Gemm or MatMul")
        elif kind == "Relu":
            chain.activation(name, kind)
        elif kind == "Flatten":
            if attrs.get("axis", 1) != 1:
                ok = False
                chain.offender(name, kind, f"axis={attrs['axis']}; supported: 1")
        elif kind not in ("Identity", "Dropout"):
            ok = False
            chain.offender(name, kind, "not a supported op type (Gemm, MatMul, Add, Relu, "
                                       "Flatten, Identity, Dropout)")
        # Dropout has an optional second output (the mask): nothing may consume it.
        current, foldable = node.output[0], ok and was_dense

    outputs = [o.name for o in graph.output]
    if outputs != [current] and not chain.offenders:
        chain.offender("<graph>", "output", f"outputs {outputs}; supported: exactly the last "
                                            f"node's output {current!r}")
    return chain.build()


def _gemm(chain, name, node, attrs, constants):
    """Add the dense layer of a ``Gemm`` node ``Y = alpha * A @ op(B) + beta * C``."""
    if attrs.get("transA", 0):
        chain.offender(name, "Gemm", "transA=1 is not supported")
        return False
    if len(node.input) < 2 or node.input[1] not in constants:
        chain.offender(name, "Gemm", "B must be a constant (initializer)")
        return False
    weight = np.asarray(constants[node.input[1]], dtype=np.float64)
    if attrs.get("transB", 0):
        weight = weight.T  # ONNX stores B as (N, K) when transB=1, as torch.nn.Linear does
    weight = weight * attrs.get("alpha", 1.0)
    bias = None
    if len(node.input) > 2 and node.input[2]:
        if node.input[2] not in constants:
            chain.offender(name, "Gemm", "C must be a constant (initializer)")
            return False
        bias = _bias_vector(constants[node.input[2]], weight.shape[1])
        if bias is None:
            chain.offender(name, "Gemm", f"C has shape {constants[node.input[2]].shape}; "
                                         f"supported: a scalar, ({weight.shape[1]},) or "
                                         f"(1, {weight.shape[1]})")
            return False
        bias = bias * attrs.get("beta", 1.0)
    return chain.dense(name, "Gemm", weight, bias)


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
