"""The handlers of ONNX's convolution, normalisation, pooling and activation ops.

A mixin of :mod:`hwgen.nn.import_onnx`'s graph walker, which gives it ``chain`` (the
:class:`~hwgen.nn.import_chain.Chain` being built), ``constants`` (initializers and constant
nodes by name) and ``_shape_of``. Each handler takes ``(node, name, kind, attrs)`` and returns
whether the node was a dense layer (never, here). ONNX images are NCHW: ``pads`` are
``[top, left, bottom, right]`` and a convolution's weight ``(C_out, C_in / group, KH, KW)``.
"""

import math

import numpy as np

__all__ = ["LayerOps"]

_FINAL = {"Softmax": "softmax", "LogSoftmax": "log_softmax", "Sigmoid": "sigmoid"}


class LayerOps:
    """ONNX's ``Conv``, ``BatchNormalization``, pooling, ``Relu``, ``Clip``, ``LeakyRelu``
    and final ``Softmax``/``LogSoftmax``/``Sigmoid``, handed to the chain."""

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

    def _op_Pad(self, node, name, kind, attrs):
        # Before opset 11 the pads and the value are attributes, then inputs; axes from 18.
        inputs = [*node.input, "", "", ""][1:4]
        pads = attrs.get("pads") if not inputs[0] else self._shape_of(inputs[0])
        value = attrs.get("value", 0.0) if not inputs[1] else self.constants.get(inputs[1])
        axes = list(range(4)) if not inputs[2] else self._shape_of(inputs[2])
        mode = attrs.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if pads is None or axes is None or value is None or len(pads) != 2 * len(axes):
            self.chain.offender(name, kind, "pads, constant_value and axes must be constants")
            return False
        per_axis = {a % 4: (pads[i], pads[i + len(axes)]) for i, a in enumerate(axes)}
        if mode != "constant" or np.any(np.asarray(value) != 0) or min(pads) < 0 \
                or any(per_axis.get(a, (0, 0)) != (0, 0) for a in (0, 1)):
            self.chain.offender(name, kind, f"mode={mode}, pads={list(pads)}; supported: zeros "
                                            "on the two spatial axes, no cropping")
            return False
        (top, bottom), (left, right) = per_axis.get(2, (0, 0)), per_axis.get(3, (0, 0))
        self.chain.zero_pad(name, kind, (top, bottom, left, right))
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
