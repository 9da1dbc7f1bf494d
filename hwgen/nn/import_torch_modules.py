"""How each PyTorch layer module maps onto the importer's chain: the module visitor.

:func:`visit_module` hands one ``nn.Module`` call to a :class:`~hwgen.nn.import_chain.Chain`
(the running tensor is the one the call reads), with the module's parameters checked and
converted: PyTorch's ``(C_out, C_in / groups, KH, KW)`` convolution weights become ours
``(KH, KW, C_in / groups, C_out)``, a ``Linear``'s ``(N, K)`` weight becomes ``(K, N)``.
``nn.Sequential`` chains and traced graphs (:mod:`hwgen.nn.import_fx`) share it.
"""

import numpy as np

from .import_chain import same_pair

__all__ = ["SPATIAL", "SUPPORTED", "visit_module"]

SUPPORTED = ("Linear, Conv2d, ZeroPad2d before a Conv2d, BatchNorm1d, BatchNorm2d, "
             "MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, ReLU, ReLU6, Hardtanh, LeakyReLU, "
             "Flatten, Identity, Dropout, Sequential, and a final Softmax, LogSoftmax or "
             "Sigmoid")
# The layer types that need the image size.
SPATIAL = ("Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "BatchNorm2d", "ZeroPad2d",
           "ConstantPad2d")


def _numpy(tensor):
    return tensor.detach().cpu().double().numpy()


def visit_module(chain, nn, name, child, kind=None):
    """Hand the call of layer module ``child`` named ``name`` to ``chain``; an unsupported
    module type or parameter is an offender. ``kind`` names what was called in messages
    (default: the module's type; a function that stands for a module names itself)."""
    kind = kind or type(child).__name__
    if isinstance(child, nn.Linear):
        bias = None if child.bias is None else _numpy(child.bias)
        chain.dense(name, kind, _numpy(child.weight).T, bias)
    elif isinstance(child, nn.Conv2d):
        _conv(chain, name, kind, child)
    elif isinstance(child, nn.BatchNorm1d | nn.BatchNorm2d):
        _batchnorm(chain, name, kind, child)
    elif isinstance(child, nn.MaxPool2d):
        _pool(chain, name, kind, child)
    elif isinstance(child, nn.AvgPool2d | nn.AdaptiveAvgPool2d):
        _avgpool(chain, name, kind, child)
    elif isinstance(child, nn.ZeroPad2d | nn.ConstantPad2d):
        left, right, top, bottom = child.padding
        if child.value != 0 or min(child.padding) < 0:
            chain.offender(name, kind, f"padding={child.padding}, value={child.value}; "
                                       "supported: zeros, no cropping")
        else:
            chain.zero_pad(name, kind, (top, bottom, left, right))
    elif isinstance(child, nn.Flatten):
        if child.start_dim != 1 or child.end_dim != -1:
            chain.offender(name, kind, f"start_dim={child.start_dim}, end_dim={child.end_dim}; "
                                       "supported: 1, -1")
        else:
            chain.flatten(name, kind)
    elif not _activation(chain, nn, name, child, kind) \
            and not isinstance(child, nn.Identity | nn.Dropout | nn.Dropout1d | nn.Dropout2d):
        chain.offender(name, kind, f"not a supported layer type ({SUPPORTED})")


def _activation(chain, nn, name, child, kind):
    """Hand an activation or a final function to the chain; return whether it was one."""
    if isinstance(child, nn.ReLU6):  # a Hardtanh(0, 6) too: test it first
        chain.activation(name, kind, "relu")
        chain.activation(name, kind, "clamp", high=6.0)
    elif isinstance(child, nn.ReLU):
        chain.activation(name, kind, "relu")
    elif isinstance(child, nn.Hardtanh):
        chain.activation(name, kind, "clamp", low=float(child.min_val),
                         high=float(child.max_val))
    elif isinstance(child, nn.LeakyReLU):
        chain.activation(name, kind, "leaky_relu", alpha=float(child.negative_slope))
    elif isinstance(child, nn.Sigmoid):
        chain.final_function(name, kind, "sigmoid")
    elif isinstance(child, nn.Softmax | nn.LogSoftmax):
        function = "softmax" if isinstance(child, nn.Softmax) else "log_softmax"
        # dim=None is PyTorch's implicit choice, the classes (1) on a batch of rows.
        if child.dim not in (1, -1, None):
            chain.offender(name, kind, f"dim={child.dim}; supported: 1 or -1, over the classes")
        else:
            chain.final_function(name, kind, function)
    else:
        return False
    return True


def _batchnorm(chain, name, kind, child):
    if child.running_mean is None or child.running_var is None:
        chain.offender(name, kind, "track_running_stats=False; supported: running statistics, "
                                   "which inference uses")
        return
    mean, var = _numpy(child.running_mean), _numpy(child.running_var)
    gamma = 1.0 if child.weight is None else _numpy(child.weight)
    beta = 0.0 if child.bias is None else _numpy(child.bias)
    scale = gamma / np.sqrt(var + child.eps)
    chain.batchnorm(name, kind, scale, beta - mean * scale)


def _conv_padding(child):
    """Return a Conv2d's padding as ``(top, bottom, left, right)``."""
    padding = child.padding
    if padding == "valid":
        return 0, 0, 0, 0
    if padding == "same":
        # PyTorch pads dilation*(k-1) in total per axis, the odd pixel at the end.
        (th, tw) = (k - 1 for k in child.kernel_size)
        return th // 2, th - th // 2, tw // 2, tw - tw // 2
    ph, pw = padding
    return ph, ph, pw, pw


def _conv(chain, name, kind, child):
    reasons = []
    if tuple(child.dilation) != (1, 1):
        reasons.append(f"dilation={tuple(child.dilation)}; supported: 1")
    if child.padding_mode != "zeros":
        reasons.append(f"padding_mode={child.padding_mode!r}; supported: 'zeros'")
    if reasons:
        chain.offender(name, kind, "; ".join(reasons))
        return
    weight = _numpy(child.weight).transpose(2, 3, 1, 0)  # (C_out, C_in/g, KH, KW) -> ours
    bias = None if child.bias is None else _numpy(child.bias)
    chain.conv(name, kind, weight, bias, stride=tuple(child.stride),
               padding=_conv_padding(child), groups=child.groups)


def _avgpool(chain, name, kind, child):
    if hasattr(child, "output_size"):  # AdaptiveAvgPool2d
        out = child.output_size
        out = (out, out) if np.ndim(out) == 0 else tuple(out)
        if out == (1, 1):
            chain.global_avgpool(name, kind)
            return
        shape = chain.shape
        if None in out or shape is None or len(shape) != 3 \
                or shape[0] % out[0] or shape[1] % out[1]:
            chain.offender(name, kind, f"output_size={child.output_size} on an input "
                                       f"{shape or 'of unknown size'}; supported: 1, or a "
                                       "size that divides the input's (H, W)")
            return
        window = (shape[0] // out[0], shape[1] // out[1])
        chain.avgpool(name, kind, window, window)
        return
    reasons = []
    if child.padding not in (0, (0, 0)):
        reasons.append(f"padding={child.padding}; supported: 0")
    if child.ceil_mode:
        reasons.append("ceil_mode=True; supported: False (the output size rounds down)")
    if child.divisor_override is not None:
        reasons.append(f"divisor_override={child.divisor_override}; supported: None")
    if reasons:
        chain.offender(name, kind, "; ".join(reasons))
        return
    stride = child.kernel_size if child.stride is None else child.stride
    chain.avgpool(name, kind, _pair(child.kernel_size), _pair(stride))


def _pair(value):
    return (int(value), int(value)) if np.ndim(value) == 0 else tuple(int(v) for v in value)


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
