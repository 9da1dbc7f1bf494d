"""Import a PyTorch ``nn.Sequential`` into a float :class:`~hwgen.nn.MLP` or :class:`~hwgen.nn.CNN`.

PyTorch's images are NCHW and its ``Flatten`` orders features ``(c, h, w)``; ours are NHWC and
``(h, w, c)``. Convolution weights are transposed to ``(KH, KW, C_in, C_out)`` and the rows of
the dense layer after a flatten are permuted, so that the imported model computes the same
function on the same images (NCHW input ``x`` becomes ``x.transpose(0, 2, 3, 1)``).
"""

from ._ints import sample_shape
from .import_chain import Chain, require, same_pair

__all__ = ["from_torch"]

_SUPPORTED = "Linear, Conv2d, MaxPool2d, ReLU, Flatten, Identity, Dropout, Sequential"


def from_torch(module, input_shape=None):
    """Convert a PyTorch ``nn.Sequential`` to an :class:`MLP` or a :class:`CNN`.

    Supported modules: ``Linear``; ``Conv2d`` with ``groups=1``, ``dilation=1``, zero padding
    (``padding_mode="zeros"``) that is the same on both axes (an int, an equal pair,
    ``"valid"``, or ``"same"`` when it equals one symmetric int), the same stride on both axes;
    ``MaxPool2d`` with a square window, the same stride on both axes, no padding, no dilation,
    ``ceil_mode=False`` and no indices; ``ReLU`` (folded into the preceding ``Linear`` or
    ``Conv2d``, through pooling and flattening, with which it commutes); ``Flatten``
    (``start_dim=1``, ``end_dim=-1``); ``Identity``, ``Dropout`` (no-ops at inference) and
    nested ``Sequential``. A single ``Linear`` is accepted as a one-layer model.

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
        An :class:`MLP` for a chain of ``Linear`` layers on rows (``W = linear.weight.T``,
        ``b = linear.bias``, zeros when absent), otherwise a :class:`CNN` with
        ``input_shape``.

    Raises
    ------
    UnsupportedModelError
        Listing every unsupported module with its name, type and why.
    ValueError
        If ``input_shape`` is missing for a spatial model or malformed.
    ImportError
        If PyTorch is not installed.
    """
    torch = require("torch", "torch")
    nn = torch.nn
    modules = []

    def walk(name, child):
        if isinstance(child, nn.Sequential):
            for sub_name, sub in child.named_children():
                walk(f"{name}.{sub_name}" if name else sub_name, sub)
        else:
            modules.append((name, child))

    walk("", module)
    input_shape = sample_shape(input_shape, "from_torch")
    spatial = [(name, type(child).__name__) for name, child in modules
               if isinstance(child, nn.Conv2d | nn.MaxPool2d)]
    if spatial and (input_shape is None or len(input_shape) != 3):
        name, kind = spatial[0]
        raise ValueError(f"from_torch: input_shape={input_shape!r} but {name} ({kind}) needs "
                         "the image size; allowed: input_shape=(H, W, C), one NHWC image")
    chain = Chain("PyTorch", input_shape)
    for name, child in modules:
        _visit(chain, nn, name, child)
    return chain.build()


def _numpy(tensor):
    return tensor.detach().cpu().double().numpy()


def _visit(chain, nn, name, child):
    kind = type(child).__name__
    if isinstance(child, nn.Linear):
        bias = None if child.bias is None else _numpy(child.bias)
        chain.dense(name, kind, _numpy(child.weight).T, bias)
    elif isinstance(child, nn.Conv2d):
        _conv(chain, name, kind, child)
    elif isinstance(child, nn.MaxPool2d):
        _pool(chain, name, kind, child)
    elif isinstance(child, nn.ReLU):
        chain.relu(name, kind)
    elif isinstance(child, nn.Flatten):
        if child.start_dim != 1 or child.end_dim != -1:
            chain.offender(name, kind, f"start_dim={child.start_dim}, end_dim={child.end_dim}; "
                                       "supported: 1, -1")
        else:
            chain.flatten(name, kind)
    elif not isinstance(child, nn.Identity | nn.Dropout):
        chain.offender(name, kind, f"not a supported layer type ({_SUPPORTED})")


def _conv_padding(child):
    """Return ``(padding, reason)`` for a Conv2d: one symmetric int, or why not."""
    padding = child.padding
    if padding == "valid":
        return 0, None
    if padding == "same":
        # PyTorch pads dilation*(k-1) in total, the extra pixel at the end when it is odd.
        kh, kw = child.kernel_size
        if kh % 2 == 1 and kh == kw:
            return (kh - 1) // 2, None
        return None, (f"padding='same' with kernel_size={child.kernel_size} pads unevenly or "
                      "differently per axis; supported: one symmetric int")
    return same_pair(padding, "padding")


def _conv(chain, name, kind, child):
    reasons = []
    if child.groups != 1:
        reasons.append(f"groups={child.groups}; supported: 1")
    if tuple(child.dilation) != (1, 1):
        reasons.append(f"dilation={tuple(child.dilation)}; supported: 1")
    if child.padding_mode != "zeros":
        reasons.append(f"padding_mode={child.padding_mode!r}; supported: 'zeros'")
    stride, why = same_pair(child.stride, "stride")
    reasons += [why] if why else []
    padding, why = _conv_padding(child)
    reasons += [why] if why else []
    if reasons:
        chain.offender(name, kind, "; ".join(reasons))
        return
    weight = _numpy(child.weight).transpose(2, 3, 1, 0)  # (C_out, C_in, KH, KW) -> ours
    bias = None if child.bias is None else _numpy(child.bias)
    chain.conv(name, kind, weight, bias, stride=stride, padding=padding)


def _pool(chain, name, kind, child):
    reasons = []
    size, why = same_pair(child.kernel_size, "kernel_size")
    reasons += [why] if why else []
    stride, why = same_pair(child.stride if child.stride is not None else child.kernel_size,
                            "stride")
    reasons += [why] if why else []
    if child.padding not in (0, (0, 0)):
        reasons.append(f"padding={child.padding}; supported: 0")
    if child.dilation not in (1, (1, 1)):
        reasons.append(f"dilation={child.dilation}; supported: 1")
    if child.ceil_mode:
        reasons.append("ceil_mode=True; supported: False (the output size rounds down)")
    if child.return_indices:
        reasons.append("return_indices=True; supported: False")
    if reasons:
        chain.offender(name, kind, "; ".join(reasons))
    else:
        chain.pool(name, kind, size, stride)
