"""Trace a PyTorch module's ``forward`` with ``torch.fx`` and hand its graph to the importer.

Why ``torch.fx.symbolic_trace`` rather than ``torch.export``: symbolic tracing keeps every call
of a ``torch.nn`` layer as one node named by the module's qualified path
(``stacks.0.first.0.1``), so each layer goes through the same module visitor as an
``nn.Sequential`` (:func:`~hwgen.nn.import_torch_modules.visit_module`: the same checks, the
same messages, node names the user recognises); it needs no example input, takes
milliseconds, and leaves the functional calls (``+``, ``F.relu``, ``x.view(x.size(0), -1)``)
as they were written. ``torch.export`` lowers everything to ATen ops (a BatchNorm becomes
``_native_batch_norm_legit_no_training``, a flatten a ``view``), loses the module boundaries
but in metadata, and needs a concrete input; what it gains, tracing through data-dependent
control flow, an inference graph does not need. A ``forward`` that symbolic tracing cannot
follow is one offender, with torch's reason.

A traced graph reads: the input (one placeholder), module calls, functions and methods of
tensors (:func:`_functions`), and shape queries (``x.size(0)``, ``x.shape[0]``) whose values
only a ``view``/``reshape`` target may use. Each node's name is the module's path for a module
call (and for a parameter read), ``<module path>.<fx name>`` for a function in a module's
``forward`` (``stacks.1.add``, fx's counter dropped where the name stays unique), the fx name
at the top (``add_1``).
"""

import operator
import re

import numpy as np

from .import_torch_modules import SUPPORTED, visit_module

__all__ = ["trace", "walk"]

_FUNCTIONS_SUPPORTED = (
    "+, torch.add and .add() of two tensors; F.relu, torch.relu, .relu(); F.relu6, "
    "F.hardtanh, F.leaky_relu, torch.clamp, .clamp(); F.max_pool2d, F.avg_pool2d, "
    "F.adaptive_avg_pool2d, .mean((2, 3)); F.pad with zeros before a convolution; "
    "torch.flatten, .flatten(), .view() and .reshape() to (batch, -1); F.dropout; and a final "
    "F.softmax, F.log_softmax or torch.sigmoid")


class _Batch:
    """The batch size, as ``x.size(0)`` gives it while tracing: a ``view`` target may use it."""

    def __repr__(self):
        return "x.size(0)"


BATCH = _Batch()
#: A shape query of a tensor whose shape is unknown.
UNKNOWN = object()


def _functions(torch):
    """``{target: (nn layer type, its argument names, default pairs)}`` for the functions and
    methods (by name) that stand for a layer module; ``"add"``, ``"clamp"``, ``"reshape"``,
    ``"pad"``, ``"mean"`` for those handled apart."""
    F = torch.nn.functional
    pool = ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")
    avg = ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
           "divisor_override")
    table = {
        ("ReLU", (), ()): (F.relu, F.relu_, torch.relu, torch.relu_, "relu", "relu_"),
        ("ReLU6", (), ()): (F.relu6,),
        ("Hardtanh", ("min_val", "max_val"), ()): (F.hardtanh, F.hardtanh_),
        ("LeakyReLU", ("negative_slope",), ()): (F.leaky_relu, F.leaky_relu_),
        ("MaxPool2d", pool, ()): (F.max_pool2d,),
        ("AvgPool2d", avg, ()): (F.avg_pool2d,),
        ("AdaptiveAvgPool2d", ("output_size",), ()): (F.adaptive_avg_pool2d,),
        ("Identity", None, ()): (F.dropout, F.dropout1d, F.dropout2d, torch.dropout,
                                 "contiguous"),
        ("Softmax", ("dim",), ()): (F.softmax, torch.softmax, "softmax"),
        ("LogSoftmax", ("dim",), ()): (F.log_softmax, torch.log_softmax, "log_softmax"),
        ("Sigmoid", (), ()): (F.sigmoid, torch.sigmoid, "sigmoid"),
        ("Flatten", ("start_dim", "end_dim"), (("start_dim", 0),)): (torch.flatten, "flatten"),
        "add": (operator.add, operator.iadd, torch.add, "add", "add_"),
        "clamp": (torch.clamp, torch.clip, "clamp", "clip"),
        "reshape": (torch.reshape, "view", "reshape"),
        "pad": (F.pad,),
        "mean": (torch.mean, "mean"),
    }
    return {target: spec for spec, targets in table.items() for target in targets}


def trace(torch, module):
    """Return the ``torch.fx`` graph of ``module``'s ``forward`` (``torch.nn`` layers kept as
    calls).

    Raises
    ------
    UnsupportedModelError
        If symbolic tracing fails (data-dependent control flow, say), with torch's reason.
    """
    from .import_chain import UnsupportedModelError

    try:
        return torch.fx.Tracer().trace(module)
    except Exception as exc:  # whatever the user's forward raises on a proxy
        raise UnsupportedModelError("PyTorch", [(
            "<forward>", type(module).__name__,
            f"torch.fx cannot trace it ({type(exc).__name__}: {exc}); supported: a forward "
            "without data-dependent control flow")]) from exc


def uses(torch, graph):
    """How many times each node's value is read as a tensor (shape queries do not count)."""
    counts = {}
    for node in graph.nodes:
        for arg in () if _shape_query(node) else _node_args(torch, node):
            counts[arg.name] = counts.get(arg.name, 0) + 1
    return counts


def _node_args(torch, node):
    """The nodes ``node`` reads, in argument order, as often as it names them."""
    found = []
    torch.fx.node.map_arg((node.args, node.kwargs), found.append)
    return found


def _shape_query(node):
    return (node.op == "call_method" and node.target in ("size", "dim")) or (
        node.op == "call_function" and node.target is getattr and node.args[1:] == ("shape",))


def walk(chain, torch, root, graph):
    """Hand every node of ``graph`` (traced from ``root``) to ``chain``; return the model.

    Raises
    ------
    UnsupportedModelError
        Listing every unsupported node.
    """
    walker = _Walker(chain, torch, root, graph)
    output = None
    for node in graph.nodes:
        if node.op == "output":
            output = node.args[0]
        else:
            walker.visit(node)
    if not isinstance(output, torch.fx.Node) or output.name not in chain.states:
        chain.offender("<output>", "output", f"returns {output}; supported: one tensor")
        return chain.build()
    return chain.build(output.name)


def node_name(node, taken=()):
    """The name an offender or a node of the imported network gets (see the module's doc):
    in a module, fx's counter is dropped (``stacks.1.add``, not ``stacks.1.add_1``) unless
    that name is in ``taken``."""
    if node.op in ("call_module", "get_attr"):
        return node.target
    stack = node.meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    if not path:
        return node.name
    short = f"{path}.{re.sub(r'_[0-9]+$', '', node.name)}"
    return short if short not in taken else f"{path}.{node.name}"


class _Walker:
    """The state of one walk: the chain, and the values of shape queries by node name."""

    def __init__(self, chain, torch, root, graph):
        self.chain, self.torch, self.root = chain, torch, root
        self.values = {}
        self.functions = _functions(torch)
        self.placeholders = 0
        # Module paths first, so that a function's shortened name never takes one.
        self.names = {node.target for node in graph.nodes
                      if node.op in ("call_module", "get_attr")}

    def visit(self, node):
        chain, name = self.chain, node_name(node, self.names)
        self.names.add(name)
        if node.op == "placeholder":
            self.placeholders += 1
            if self.placeholders > 1:
                chain.offender(name, "input", "a second input; supported: exactly one")
            chain.alias(node.name)
            return
        if node.op == "get_attr":
            chain.unknown()
            chain.offender(name, "get_attr", f"reads the parameter or buffer {node.target!r} "
                                             "in forward; supported: parameters inside layers")
            chain.write(node.name)
            return
        value = self._shape_value(node)
        if value is not None:
            self.values[node.name] = value
            return
        kind = (type(self.root.get_submodule(node.target)).__name__
                if node.op == "call_module" else _describe(self.torch, node))
        data = [arg.name for arg in _node_args(self.torch, node) if arg.name not in self.values]
        spec = self.functions.get(node.target) if node.op != "call_module" else None
        if spec == "add" and len(data) == 2 and self._plain_add(node):
            chain.add(name, kind, *data)
        elif spec == "add" or len(data) != 1 or (spec is None and node.op != "call_module"):
            if data:
                chain.read(data[0])
            else:
                chain.unknown()
            chain.offender(name, kind, self._reason(node, data, spec))
        else:
            chain.read(data[0])
            self._call(node, name, kind, spec)
        chain.write(node.name)

    def _plain_add(self, node):
        alpha = node.kwargs.get("alpha", node.args[2] if len(node.args) > 2 else 1)
        return alpha == 1 and not set(node.kwargs) - {"alpha"}

    def _reason(self, node, data, spec):
        if spec == "add":
            return (f"adds ({_arguments(node)}): {len(data)} computed tensor(s); supported: the "
                    "plain sum (alpha=1) of two computed tensors (a constant belongs in a "
                    "layer's bias)")
        if len(data) > 1 and spec is not None:
            return f"reads {len(data)} tensors {data}; supported: one"
        if node.op == "call_module":
            return f"called with {_arguments(node)}; supported: one tensor argument"
        return f"not a supported operation (supported: {_FUNCTIONS_SUPPORTED}; and {SUPPORTED})"

    def _call(self, node, name, kind, spec):
        """Hand a call that reads one tensor to the chain: a module, or a function that
        stands for one."""
        nn, chain = self.torch.nn, self.chain
        if node.op == "call_module":
            if node.kwargs or len(node.args) != 1:
                chain.offender(name, kind, f"called with {_arguments(node)}; supported: one "
                                           "tensor argument")
            else:
                visit_module(chain, nn, name, self.root.get_submodule(node.target))
        elif isinstance(spec, str):
            self._special(node, name, kind, spec)
        else:
            layer, names, defaults = spec
            kwargs, extra = _bind(node, names, defaults)
            try:
                module = getattr(nn, layer)(**(kwargs if names is not None else {}))
            except (TypeError, ValueError) as exc:
                extra = [str(exc)]
            if extra and names is not None:
                chain.offender(name, kind, f"arguments {extra}; supported: {', '.join(names)}")
            else:
                visit_module(chain, nn, name, module, kind)

    def _special(self, node, name, kind, spec):
        """A clamp, a view or reshape, a zero padding or a spatial mean."""
        chain = self.chain
        if spec == "reshape":
            self._reshape(node, name, kind)
            return
        names = {"clamp": ("min", "max"), "pad": ("pad", "mode", "value"),
                 "mean": ("dim", "keepdim")}[spec]
        args, extra = _bind(node, names, ())
        if spec == "pad" and (args.get("mode", "constant") != "constant"
                              or args.get("value") not in (None, 0) or len(args["pad"]) != 4):
            extra.append(f"pad={args['pad']}, mode={args.get('mode', 'constant')!r}, "
                         f"value={args.get('value')}")
        dims = sorted(d % 4 for d in np.reshape(args.get("dim", ()), -1))
        shape = chain.shape if chain.state.known else (0, 0, 0)  # after an offender: unknown
        if spec == "mean" and (dims != [2, 3] or shape is None or len(shape) != 3):
            extra.append(f"dim={args.get('dim')}"
                         + (f" of {shape}" if chain.state.known and shape else ""))
        if extra:
            supported = {"clamp": "min, max", "pad": "a zero padding of the two spatial axes",
                         "mean": "the mean over the spatial axes (2, 3) of an image"}[spec]
            chain.offender(name, kind, f"arguments {extra}; supported: {supported}")
        elif spec == "clamp":
            chain.activation(name, kind, "clamp", low=_number(args.get("min")),
                             high=_number(args.get("max")))
        elif spec == "pad":
            visit_module(chain, self.torch.nn, name, self.torch.nn.ZeroPad2d(tuple(args["pad"])),
                         kind)
        else:
            chain.global_avgpool(name, kind)
            if not args.get("keepdim"):
                chain.flatten(name, kind)  # (N, C): one pixel, so no reordering

    def _shape_value(self, node):
        """The value of a shape query or of an index into one; ``None`` for anything else."""
        args = node.args
        if _shape_query(node) and args[0].name in self.chain.states:
            shape = self.chain.states[args[0].name].shape
            if shape is None:
                return UNKNOWN
            dims = (BATCH, shape[2], shape[0], shape[1]) if len(shape) == 3 else (BATCH, *shape)
            if node.target == "dim":
                return len(dims)
            return dims[args[1]] if len(args) > 1 else dims
        if node.op == "call_function" and node.target is operator.getitem \
                and getattr(args[0], "name", None) in self.values:
            value = self.values[args[0].name]
            return UNKNOWN if value is UNKNOWN else value[args[1]]
        return None

    def _reshape(self, node, name, kind):
        """A ``view``/``reshape`` that flattens each sample: ``(x.size(0), -1)`` or
        ``(-1, features)``."""
        chain = self.chain
        target = node.args[1:] or (node.kwargs.get("shape"),)
        if len(target) == 1 and isinstance(target[0], tuple | list):
            target = tuple(target[0])
        target = tuple(self.values.get(getattr(t, "name", None), t) for t in target)
        total = None if chain.shape is None else _prod(chain.shape)
        rows, features = (*target, None, None)[:2]
        # Of a tensor of unknown shape (rows before the first dense layer, or after an
        # offender) a flatten is all that can be checked, as for a Flatten module.
        if total is None or (len(target) == 2 and (
                (rows is BATCH and features in (-1, total)) or (rows == -1 and features == total))):
            chain.flatten(name, kind)
        else:
            chain.offender(name, kind, f"target shape {target}; supported: (x.size(0), -1) or "
                                       f"(-1, {total or 'features'}), a flatten")


def _bind(node, names, defaults):
    """Return the arguments after the tensor by name (``names`` in positional order), and a
    list of those that cannot be taken."""
    if names is None:
        return {}, []
    kwargs = dict(defaults)
    extra = [repr(a) for a in node.args[1 + len(names):]]
    kwargs.update(zip(names, node.args[1:], strict=False))
    for key, value in node.kwargs.items():
        if key in names:
            kwargs[key] = value
        elif key not in ("inplace", "_stacklevel") and not (key == "dtype" and value is None):
            extra.append(f"{key}={value!r}")
    return kwargs, extra


def _number(value):
    return None if value is None else float(value)


def _prod(shape):
    total = 1
    for size in shape:
        total *= size
    return total


def _describe(torch, node):
    """``operator.add``, ``torch.cat``, ``torch.nn.functional.relu``, ``Tensor.mul``: what a
    function node calls, by the name it is found under."""
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    name = getattr(node.target, "__name__", str(node.target))
    for prefix, where in (("torch.nn.functional", torch.nn.functional), ("torch", torch),
                          ("operator", operator)):
        if getattr(where, name, None) is node.target:
            return f"{prefix}.{name}"
    return f"{getattr(node.target, '__module__', None) or '?'}.{name}"


def _arguments(node):
    args = [getattr(a, "name", a) for a in node.args]
    return ", ".join([*map(str, args), *(f"{k}={v}" for k, v in node.kwargs.items())])
