"""Import a PyTorch module into a float :class:`~hwgen.nn.MLP` or :class:`~hwgen.nn.CNN`.

A module's ``forward`` is traced by :mod:`hwgen.nn.import_fx` into a graph of layer calls and
tensor functions (an ``nn.Sequential`` is the chain of its layers), each layer module read by
:mod:`hwgen.nn.import_torch_modules`.

PyTorch's images are NCHW and its ``Flatten`` orders features ``(c, h, w)``; ours are NHWC and
``(h, w, c)``. Convolution weights are transposed to ``(KH, KW, C_in, C_out)`` and the rows of
the dense layer after a flatten are permuted, so that the imported model computes the same
function on the same images (NCHW input ``x`` becomes ``x.transpose(0, 2, 3, 1)``).
"""

from ._ints import sample_shape
from .import_chain import Chain, require
from .import_fx import trace, uses, walk
from .import_torch_modules import SPATIAL, visit_module

__all__ = ["from_torch"]


def from_torch(module, input_shape=None):
    """Convert a PyTorch module to an :class:`MLP` or a :class:`CNN`.

    ``module``'s ``forward`` is traced with ``torch.fx`` (see :mod:`hwgen.nn.import_fx`): an
    ``nn.Sequential`` is the chain of its layers, any other module the graph its ``forward``
    computes from one input tensor to one output tensor, of module calls and the functions
    :mod:`~hwgen.nn.import_fx` lists (``+``/``torch.add`` of two tensors, which becomes a
    :class:`~hwgen.nn.float_add.FloatAdd`, ``F.relu``, ``torch.flatten``,
    ``x.view(x.size(0), -1)``, the functional pools and activations). A BatchNorm or an
    activation folds into the layer before it (a ReLU after an add into the add) only when
    nothing else reads that layer's output.

    Supported modules: ``Linear``; ``Conv2d`` with any ``groups`` (depthwise included), any
    kernel and per-axis stride, ``dilation=1`` and zero padding (``padding_mode="zeros"``: an
    int, a pair, ``"valid"`` or ``"same"``, which pads the odd pixel of an even kernel at the
    end, as PyTorch does); ``ZeroPad2d`` (or ``ConstantPad2d`` of zeros) right before a
    ``Conv2d``, which takes it into its padding; ``BatchNorm1d``/``BatchNorm2d`` right after a
    ``Linear`` or ``Conv2d`` (folded into it in float with the running statistics:
    ``W' = W * gamma / sqrt(var + eps)``, ``b' = (b - mean) * gamma / sqrt(var + eps) +
    beta``); ``MaxPool2d`` with a square window, the same stride on both axes, no padding, no
    dilation, ``ceil_mode=False`` and no indices; ``AvgPool2d`` (any window and stride, no
    padding, ``ceil_mode=False``, no ``divisor_override``); ``AdaptiveAvgPool2d`` to ``1``
    (global average pooling) or to a size that divides the input; ``ReLU``, ``ReLU6``,
    ``Hardtanh`` and ``LeakyReLU`` (folded into the preceding ``Linear``, ``Conv2d`` or
    average pooling, through max pooling and flattening, with which they commute);
    ``Flatten`` (``start_dim=1``, ``end_dim=-1``); ``Identity``, ``Dropout`` (no-ops at
    inference); nested ``Sequential``; a final ``Softmax``/``LogSoftmax`` (over the classes)
    or ``Sigmoid``, recorded as the model's ``output_function`` (see
    :mod:`hwgen.nn.output_function`). A single ``Linear`` is accepted as a one-layer model.

    Parameters
    ----------
    module : torch.nn.Module
    input_shape : tuple of int, optional
        ``(H, W, C)`` of one input image (PyTorch's ``(C, H, W)`` in our NHWC order); required
        when the model has a ``Conv2d`` or ``MaxPool2d``, which need the spatial size, and to
        convert a ``Flatten`` of images. ``(K,)`` or ``None`` for a model on rows.

    Returns
    -------
    MLP or CNN
        An :class:`MLP` for a chain of ``Linear`` layers on rows with ReLUs or none
        (``W = linear.weight.T``, ``b = linear.bias``, zeros when absent), otherwise a
        :class:`CNN` with ``input_shape``: of layers for a chain, of :class:`~hwgen.nn.Node`
        named after the torch nodes (``stacks.0.first.0.1``, ``stacks.0.add``) for a graph;
        ``output_function`` is set on either.

    Raises
    ------
    UnsupportedModelError
        Listing every unsupported module, function or node with its name, type and why
        (including a ``forward`` that ``torch.fx`` cannot trace).
    ValueError
        If ``input_shape`` is missing for a spatial model or malformed.
    ImportError
        If PyTorch is not installed.
    """
    torch = require("torch", "torch")
    input_shape = sample_shape(input_shape, "from_torch")
    # A lone layer (a Linear) is a one-layer model; anything else is traced.
    graph = None if _is_layer(torch, module) else trace(torch, module)
    modules = ([("", module)] if graph is None else
               [(node.target, module.get_submodule(node.target)) for node in graph.nodes
                if node.op == "call_module"])
    spatial = [(name, type(child).__name__) for name, child in modules
               if type(child).__name__ in SPATIAL]
    if spatial and (input_shape is None or len(input_shape) != 3):
        name, kind = spatial[0]
        raise ValueError(f"from_torch: input_shape={input_shape!r} but {name} ({kind}) needs "
                         "the image size; allowed: input_shape=(H, W, C), one NHWC image")
    if graph is None:
        chain = Chain("PyTorch", input_shape)
        visit_module(chain, torch.nn, "", module)
        return chain.build()
    return walk(Chain("PyTorch", input_shape, uses(torch, graph)), torch, module, graph)


def _is_layer(torch, module):
    """Whether ``module`` is one ``torch.nn`` layer, which tracing would take apart."""
    return isinstance(module, torch.nn.Module) and not isinstance(module, torch.nn.Sequential) \
        and torch.fx.Tracer().is_leaf_module(module, "")


