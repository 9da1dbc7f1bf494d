"""Compile a :class:`~hwgen.nn.Bf16Network` for a ``dtype="bf16"`` design (issue 52).

The program has the int8 program's shape (docs/arithmetic.md, "bfloat16", and
:mod:`hwgen.memmap`), its words holding bit patterns: a matrix pass's WEIGHT words bf16
weights in the tile order of :func:`~hwgen.compiler.images.weight_image`, its one PARAM word
per output tile fp32 biases (:func:`~hwgen.memmap.param_lane_layout`); the bounds bf16 in the
descriptor (:func:`~hwgen.memmap.descriptor_layout`); activations 16-bit ACT lanes and a raw
last layer's fp32 scores 32-bit OUTPUT lanes. Nothing is quantized or proved: fp32 sums
cannot overflow a width (they reach Inf, as the reference does).

Dense layers and convolutions through the matrix pass as for int8, where its order of the
sums is the contract's (:func:`_order_differs`: a kernel position's channels a multiple of
``rows`` or a 1x1 kernel; a dense layer after a Flatten alike; or the first pass in the taps
layout, :func:`_taps_node`, whose tiles are the contract's), max pools through the
max-pooling pass (on bf16 values), flatten for free, residual adds through the add pass
(``fl32(a + b)``, no PARAM words). A grouped convolution runs on the matrix pass's
block-diagonal tiles where a group's input channels are a multiple of ``rows``
(:func:`_grouped_refusal`): the entries off a group's block, and the padding rows, hold
:data:`NO_PRODUCT`, which the multiplier makes +0.0 whatever the activation, so that an Inf
in another group's channel gives no NaN. Depthwise convolutions and average pools run
through the depthwise pass (:func:`_depthwise`), whose tiles are the contract's ``(ky, kx)``
taps, on a design with the depthwise unit, and are refused without it; other grouped
convolutions are refused, each named.
"""

import dataclasses

import numpy as np

from ..memmap import BF16_UNBOUNDED, PassKind, has_depthwise
from ..nn.bf16 import as_bf16, bf16_array, bf16_bits, first_index, round_to_bf16
from ..nn.flatten import Flatten
from ..nn.graph import INPUT, where
from ..nn.maxpool import MaxPool2D
from ..nn.patches import conv_output_size
from ..passes import lookup, taps
from ..passes.bf16_matrix import lanes_of_bits, signed_bits
from .bf16_streams import in_taps, stream_refusal, streamed
from .bf16_weights import NO_PRODUCT, Bf16Matrix
from .errors import CompileError
from .kinds import DeviceLayer
from .proofs import check_padded_reduction

__all__ = ["Bf16AddParams", "Bf16Matrix", "bf16_input_lanes", "bf16_output_values", "bf16_passes",
           "check_bf16_arguments"]


def check_bf16_arguments(network, config):
    """Refuse an int8 network on a bf16 design and a bf16 network on an int8 one (naming
    ``dtype``), and a network whose ``rows`` (the order of its sums) is not the design's.

    Raises
    ------
    CompileError
    """
    net_dtype = getattr(network, "dtype", "int8")
    if net_dtype != config.dtype:
        fix = ("hwgen.nn.to_bf16(model, rows=config.rows)" if config.dtype == "bf16" else
               "hwgen.nn.quantize(...) or hwgen.compile_for(...)")
        raise CompileError(f"the network is {type(network).__name__} ({net_dtype}) and the "
                           f"design has dtype={config.dtype!r}; allowed: a network for "
                           f"dtype={config.dtype!r} ({fix}), or a design with "
                           f"dtype={net_dtype!r}",
                           resource="dtype")
    if net_dtype == "bf16" and network.rows != config.rows:
        raise CompileError(f"the network's sums are in tiles of rows={network.rows} and the "
                           f"design has rows={config.rows}: fp32 sums in another order give "
                           "other bits; allowed: hwgen.nn.to_bf16(model, "
                           f"rows={config.rows})", resource="rows", need=network.rows,
                           limit=config.rows)


def _bounds(layer):
    """Return ``(act_min, act_max)`` of a non-raw bf16 layer as bf16 bit patterns: its fp32
    bounds rounded to bf16 (monotone rounding: the same output bits), ReLU folded into
    ``act_min`` (``relu(a) = max(a, +0.0)``), :data:`~hwgen.memmap.BF16_UNBOUNDED` else."""
    low, high = BF16_UNBOUNDED
    pattern = {}
    for name, value in (("act_min", layer.act_min), ("act_max", layer.act_max)):
        if value is not None:
            pattern[name] = int(bf16_bits(np.asarray(round_to_bf16(np.float32(value)),
                                                     dtype=np.float32)))
    act_min = layer.act_min
    if layer.activation == "relu" and (act_min is None or act_min < 0):
        pattern["act_min"] = 0   # +0.0
    return pattern.get("act_min", low), pattern.get("act_max", high)


def _matrix(layer):
    """Return the :class:`Bf16Matrix` of a :class:`~hwgen.nn.bf16_layers.Bf16Dense`."""
    weight = np.asarray(layer.weight).view(np.uint16).astype(np.int64)
    bias = np.asarray(layer.bias, dtype=np.float32).view(np.uint32).astype(np.int64)
    if layer.raw:
        return Bf16Matrix(weight, bias, "identity", "raw")
    act_min, act_max = _bounds(layer)
    return Bf16Matrix(weight, bias, layer.activation, "bf16", act_min, act_max)


def _refused(network, config, taps_node=None):
    """Return every node the bf16 compiler does not take, as ``"layer i ('name') (Kind)"``;
    node ``taps_node`` takes its input in the taps layout, whose order is the contract's."""
    from ..nn.bf16_layers import Bf16Add, Bf16AvgPool2D, Bf16Conv2D, Bf16Dense

    taken = (Bf16Dense, Bf16Conv2D, Bf16AvgPool2D, Bf16Add, MaxPool2D, Flatten)
    spatial = (Bf16Conv2D, Bf16AvgPool2D, MaxPool2D)
    offenders = []
    for index, node in enumerate(network.nodes):
        kind = type(node.layer).__name__
        if not isinstance(node.layer, taken):
            offenders.append(f"{where(index, node.name)} ({kind})")
        elif not config.spatial and isinstance(node.layer, spatial):
            offenders.append(f"{where(index, node.name)} ({kind}: walks images, and the "
                             "design has spatial=False)")
        elif not config.residual and isinstance(node.layer, Bf16Add):
            offenders.append(f"{where(index, node.name)} ({kind}: the design has no adder, "
                             "residual=False)")
        elif index != taps_node and (reason := _order_differs(index, node, network, config)):
            offenders.append(f"{where(index, node.name)} ({kind}: {reason})")
    return offenders


def _order_differs(index, node, network, config):
    """Why the matrix pass would not sum ``node``'s products as the contract does, or ``""``;
    for a depthwise reduction, why the depthwise unit would not (:func:`_depthwise_refusal`);
    for another grouped convolution, :func:`_grouped_refusal`.

    The contract cuts a patch's ``(ky, kx, c)`` products into tiles of ``rows`` across
    kernel positions; the matrix pass pads each position's channels to whole tiles. The two
    agree where a position's channels fill whole tiles, or there is one position; otherwise
    the pass takes its input as a taps stream where it can (:mod:`.bf16_streams`).
    """
    from ..nn.bf16_layers import Bf16Conv2D

    layer = node.layer
    if _is_depthwise(layer):
        return _depthwise_refusal(layer, network.tensor_shapes[node.inputs[0]], config)
    if isinstance(layer, Bf16Conv2D) and layer.groups > 1:
        return _grouped_refusal(layer, config)
    shape = _padded_order(node, network, config)
    if shape is None:
        return ""
    why = stream_refusal(node, shape, config)
    return why and (f"the matrix pass pads each kernel position's {shape[2]} channels to "
                    f"tiles of rows={config.rows}, the contract's tiles run across "
                    f"positions; allowed: channels a multiple of {config.rows}, one kernel "
                    f"position, or {why}")


def _padded_order(node, network, config):
    """Return ``(kh, kw, c)`` of a convolution (``groups=1``) or a dense layer after a
    Flatten whose kernel positions' channels do not fill tiles of ``rows``, where the matrix
    pass's per-position padding would sum in another order than the contract's; None
    else."""
    from ..nn.bf16_layers import Bf16Conv2D, Bf16Dense

    layer = node.layer
    if isinstance(layer, Bf16Conv2D) and layer.groups == 1:
        kh, kw, c, _ = layer.weight.shape
    elif isinstance(layer, Bf16Dense):
        source = {n.name: n for n in network.nodes}.get(node.inputs[0])
        if source is None or not isinstance(source.layer, Flatten):
            return None
        kh, kw, c = network.tensor_shapes[source.inputs[0]]
    else:
        return None
    return None if kh * kw == 1 or c % config.rows == 0 else (kh, kw, c)


def _grouped_refusal(layer, config):
    """Why the matrix pass would not sum grouped convolution ``layer``'s products as the
    contract does, or ``""``.

    Its tiles are block-diagonal (:func:`~hwgen.passes.matrix.grouped_matrix`): an output
    channel's tiles at each kernel position run over its tile's channel window, its group's
    channels among others that are no product (:data:`NO_PRODUCT`, +0.0 whatever the
    activation). A tile of no products adds ``s = +0.0``, which leaves the accumulator as it
    was (NaN and Inf too); so the pass sums a group's products in the contract's tiles where
    every group starts a tile (its first channel in its window a multiple of ``rows``) and
    each kernel position's group channels fill whole tiles (or there is one position), as for
    ``groups=1``. A group's input channels a multiple of ``rows`` gives both: a window starts
    at a multiple of its groups' channels, rounded down to a word where the feeder does not
    rotate lanes, whose ``act_lanes`` is then ``rows`` (:func:`~hwgen.passes.matrix.
    window_start`); the starts are read off the layout all the same.
    """
    kh, kw, c_group, _ = layer.weight.shape
    rows = config.rows
    allowed = (f"allowed: a group's input channels a multiple of rows={rows} (a 1x1 kernel: "
               "every group starting a tile), or a depthwise convolution (groups = input "
               "channels = output channels) on a design with depthwise=True")
    if kh * kw > 1 and c_group % rows:
        return (f"a grouped convolution of {c_group} input channels a group: the matrix pass "
                f"pads each kernel position's channels of a group to tiles of rows={rows}, "
                f"the contract's tiles run across positions; {allowed}")
    starts = _group_starts(layer, config)
    if (starts % rows).any():
        n = int(np.flatnonzero(starts % rows)[0])
        return (f"a grouped convolution whose output channel {n}'s group starts at channel "
                f"{int(starts[n])} of its tile's window, inside a tile of rows={rows} (the "
                f"contract's tiles start at the group's first channel); {allowed}")
    return ""


def _group_layout(layer, config):
    """Return ``(present, window)`` of grouped convolution ``layer``: whether each entry of
    its block-diagonal matrix (:func:`~hwgen.passes.matrix.grouped_matrix`) is a product of
    the layer (``[KH * KW * cgs * rows, N]``, bool), and its channel window."""
    # (Imported here: the matrix pass imports the compiler's images and proofs.)
    from ..passes.matrix import grouped_matrix

    ones = np.ones(layer.weight.shape, dtype=np.int64)
    present, window = grouped_matrix(ones, layer.groups, config)
    return present != 0, window


def _group_starts(layer, config):
    """Return the first channel of each output channel's group in its tile's channel window
    (int array ``[N]``)."""
    kh, kw = layer.weight.shape[:2]
    present, _ = _group_layout(layer, config)
    return np.argmax(present.reshape(kh * kw, -1, present.shape[1])[0], axis=0)


def _is_depthwise(layer):
    """Whether ``layer`` is a depthwise reduction: an average pool, or a convolution of one
    input and one output channel per group (more than one group)."""
    from ..nn.bf16_layers import Bf16AvgPool2D, Bf16Conv2D

    if isinstance(layer, Bf16AvgPool2D):
        return True
    return (isinstance(layer, Bf16Conv2D) and layer.groups > 1
            and layer.weight.shape[2] == 1 and layer.weight.shape[3] == layer.groups)


def _depthwise_conv(layer, in_shape):
    """Return the depthwise :class:`~hwgen.nn.bf16_layers.Bf16Conv2D` of a depthwise
    reduction on ``in_shape`` images: itself, or an average pool's (weights
    ``bf16(1/(kh*kw))``, bias +0.0, no padding, as the reference computes it)."""
    from ..nn.bf16_layers import Bf16AvgPool2D, Bf16Conv2D

    if not isinstance(layer, Bf16AvgPool2D):
        return layer
    h, w, c = in_shape
    kh, kw = (h, w) if layer.kernel_size is None else layer.kernel_size
    weight = np.full((kh, kw, 1, c), round_to_bf16(1.0 / (kh * kw)))
    return Bf16Conv2D(weight=weight, bias=np.zeros(c, dtype=np.float32), strides=layer.strides,
                      groups=c, activation=layer.activation, act_min=layer.act_min,
                      act_max=layer.act_max)


def _depthwise_refusal(layer, in_shape, config):
    """Why the depthwise unit of ``config`` would not run depthwise reduction ``layer`` on
    ``in_shape`` images, or ``""``: its pass sums each channel's taps in ``(ky, kx)`` order,
    in tiles of ``rows``, the contract's order; the matrix pass's block-diagonal tiles do
    not."""
    # (Imported here: the depthwise pass imports the compiler's images and proofs.)
    from ..passes.depthwise import kernel_refusal

    if not has_depthwise(config):
        return ("a depthwise reduction, which needs the depthwise unit (the matrix pass's "
                "block-diagonal tiles give other bits than the contract's: Inf times the "
                "+0.0 off the diagonal, the order of the sums); allowed: a design with "
                "depthwise=True")
    conv = _depthwise_conv(layer, in_shape)
    kh, kw, _, _ = conv.weight.shape
    (sy, sx), (top, bottom, left, right) = conv.strides, conv.pads
    out_hw = (conv_output_size(in_shape[0], kh, sy, (top, bottom)),
              conv_output_size(in_shape[1], kw, sx, (left, right)))
    why = kernel_refusal((kh, kw, conv.strides, conv.pads), out_hw, config)
    return f"a depthwise reduction the depthwise unit cannot run: {why}" if why else ""


def _depthwise(layer, in_shape, config):
    """Return ``(matrix, k, kernel, repeat, grouped)`` of the depthwise pass of a depthwise
    reduction (:mod:`hwgen.passes.depthwise`): row ``t`` tap ``t`` of the kernel in ``(ky,
    kx)`` order for every channel, bit patterns, +0.0 past the kernel; an average pool's
    tiles all alike (``repeat``)."""
    from ..passes.depthwise import depthwise_matrix

    conv = _depthwise_conv(layer, in_shape)
    matrix = _matrix(conv)
    kh, kw = conv.weight.shape[:2]
    return (dataclasses.replace(matrix, weight=depthwise_matrix(matrix, config.rows)),
            kh * kw, (kh, kw, tuple(conv.strides), tuple(conv.pads), 0), conv is not layer,
            False)


@dataclasses.dataclass(frozen=True)
class Bf16AddParams:
    """What a bf16 add pass needs besides its inputs: its activation (informative) and its
    bounds as bf16 bit patterns (:func:`_bounds`); it has no PARAM words."""

    activation: str
    act_min: int
    act_max: int


def _add(index, node, stored):
    """Return ``(inputs, shape)`` of an add node: the stored tensors it reads, which must be
    stored alike (a pass reads both with one stride)."""
    (first, shape), (second, other) = (stored[name] for name in node.inputs)
    if shape != other:
        raise CompileError(f"node {node.name!r} adds {node.inputs[0]!r} stored as {shape} and "
                           f"{node.inputs[1]!r} stored as {other}; allowed: inputs stored "
                           "alike", layer=index, resource="layout", name=node.name)
    return (first, second), shape


def _spatial_matrix(index, layer, in_shape, config):
    """Return ``(matrix, k, kernel, repeat, grouped)`` of a matrix pass that walks images: a
    convolution or a dense layer after a Flatten (a convolution whose kernel is the whole
    image), laid out as the int8 matrix pass lays them (:mod:`hwgen.passes.matrix`), on bit
    patterns: the padding rows, and a grouped convolution's entries off its group's block,
    :data:`NO_PRODUCT`."""
    from ..nn.bf16_layers import Bf16Conv2D

    # (Imported here: the matrix pass imports the compiler's images and proofs.)
    from ..passes.matrix import grouped_matrix, padded_matrix

    matrix = _matrix(layer)
    window = 0
    conv = isinstance(layer, Bf16Conv2D)
    if conv:
        kh, kw, c, n = matrix.weight.shape
    else:   # a Bf16Dense after a Flatten
        kh, kw, c = in_shape
        n = matrix.weight.shape[1]
    weight = matrix.weight.reshape(kh, kw, c, n)
    if conv and layer.groups > 1:
        present, window = _group_layout(layer, config)
        weight = grouped_matrix(weight, layer.groups, config)[0]
        # The channels each kernel position reads: the tile's window, or all of them.
        channels = weight.shape[0] // (kh * kw) if window else c * layer.groups
    else:
        present = padded_matrix(np.ones(weight.shape, dtype=np.int64), config.rows) != 0
        weight, channels = padded_matrix(weight, config.rows), c
    check_padded_reduction(index, (kh, kw), channels, config,
                           window="kernel" if conv else "image before the Flatten")
    kernel = ((kh, kw, tuple(layer.strides), tuple(layer.pads), window) if conv
              else (kh, kw, (1, 1), (0, 0, 0, 0), 0))
    return (dataclasses.replace(matrix, weight=np.where(present, weight, NO_PRODUCT)),
            kh * kw * c, kernel, False, False)


def _taps_node(network, config):
    """Return the index of the node whose pass takes the network's input in the taps layout
    (:mod:`hwgen.passes.taps`), or None: the first pass, where it is the input's only reader
    and :func:`~hwgen.passes.taps.eligible` (a convolution, or a dense layer after a Flatten,
    of fewer channels than ``rows``, on a device that walks taps). Its flattened kernel is
    summed in tiles of ``rows`` consecutive ``(ky, kx, c)`` taps: the contract's order."""
    from ..nn.bf16_layers import Bf16Conv2D, Bf16Dense

    source = {INPUT: INPUT}   # a Flatten's output is its input's tensor
    readers = []
    for index, node in enumerate(network.nodes):
        inputs = [source.get(name, name) for name in node.inputs]
        if isinstance(node.layer, Flatten):
            source[node.name] = inputs[0]
        elif INPUT in inputs:
            readers.append(index)
    first = next((i for i, n in enumerate(network.nodes) if not isinstance(n.layer, Flatten)),
                 None)
    if readers != [first] or first is None:
        return None
    node = network.nodes[first]
    layer, in_shape = node.layer, network.input_shape
    if len(in_shape) != 3 or not ((isinstance(layer, Bf16Conv2D) and layer.groups == 1)
                                  or isinstance(layer, Bf16Dense)):
        return None
    try:
        matrix, k, kernel, _, _ = _spatial_matrix(first, layer, in_shape, config)
    except CompileError:
        return None   # lowered again below, where the error names the layer
    p = DeviceLayer(first, PassKind.MATRIX, matrix, k, in_shape,
                    network.tensor_shapes[node.name], kernel, name=node.name)
    return first if taps.eligible(p, config) else None


def bf16_passes(network, config, *, taps_layout=True):
    """Return the :class:`~hwgen.compiler.kinds.DeviceLayer` passes of a bf16 network: matrix
    passes of its dense layers and convolutions, depthwise passes of its depthwise
    convolutions and average pools, max-pooling and add passes; a
    Flatten costs nothing (the pass after it walks the image), as for int8. With
    ``taps_layout`` the first pass takes the input in the taps layout where it can
    (:func:`_taps_node`), so that its channels need not fill tiles of ``rows``.

    Raises
    ------
    CompileError
        Listing every layer the bf16 compiler does not take yet (by index, name and kind),
        or naming a layer that does not fit the design.
    """
    from ..nn.bf16_layers import Bf16Add, Bf16Dense

    taps_node = _taps_node(network, config) if taps_layout else None
    offenders = _refused(network, config, taps_node)
    if offenders:
        raise CompileError("the bf16 compiler takes Bf16Dense, Bf16Conv2D, Bf16AvgPool2D, "
                           "Bf16Add, MaxPool2D and Flatten layers; not: "
                           + ", ".join(offenders), resource="layer")
    shapes = network.tensor_shapes
    stored = {INPUT: (INPUT, shapes[INPUT])}
    passes = []
    for index, node in enumerate(network.nodes):
        layer, out_shape = node.layer, shapes[node.name]
        source, in_shape = stored[node.inputs[0]]
        if isinstance(layer, Flatten):
            stored[node.name] = (source, in_shape)
            continue
        if isinstance(layer, Bf16Add):
            inputs, in_shape = _add(index, node, stored)
            # Images are walked as a 1x1 pool, rows as rows (the int8 add pass's walk).
            kernel = (1, 1, (1, 1), (0, 0, 0, 0), 0) if len(in_shape) == 3 else None
            passes.append(DeviceLayer(index, PassKind.ADD, None, 0, in_shape, in_shape,
                                      kernel, name=node.name, inputs=inputs,
                                      params=Bf16AddParams(layer.activation,
                                                           *_bounds(layer))))
            stored[node.name] = (node.name, in_shape)
            continue
        try:
            if isinstance(layer, MaxPool2D):
                kernel = lookup(PassKind.MAXPOOL).lower(index, layer, (in_shape, out_shape),
                                                        config).kernel
                found = (PassKind.MAXPOOL, None, 0, kernel, False, False)
            elif _is_depthwise(layer):   # _refused checked that the unit runs it
                found = (PassKind.DEPTHWISE, *_depthwise(layer, in_shape, config))
            elif isinstance(layer, Bf16Dense) and len(in_shape) == 1:
                k = layer.weight.shape[0]
                found = (PassKind.MATRIX, _matrix(layer), k, None, False, False)
            else:
                found = (PassKind.MATRIX, *_spatial_matrix(index, layer, in_shape, config))
        except CompileError as error:
            raise error.named(node.name) from None
        kind, matrix, k, kernel, repeat, grouped = found
        passes.append(DeviceLayer(index, kind, matrix, k, in_shape, out_shape, kernel,
                                  name=node.name, inputs=(source,), repeat=repeat,
                                  grouped=grouped))
        stored[node.name] = (node.name, out_shape)
    if taps_node is not None:
        passes[0] = in_taps(passes[0], config)
    # The other convolutions whose channels do not fill tiles take their input as a stream.
    return streamed(passes, [i for i, node in enumerate(network.nodes) if i != taps_node
                             and _padded_order(node, network, config) is not None], config)


def bf16_input_lanes(x, what):
    """Return bf16 inputs ``x`` as the signed 16-bit lanes of their bit patterns.

    Raises
    ------
    ValueError
        Starting with ``what``: ``x`` is not bf16 (see :func:`~hwgen.nn.bf16.as_bf16`), or
        holds an Inf or NaN (naming the first index; the contract refuses them as inputs).
    """
    values = as_bf16(x, what, "x")
    bad = ~np.isfinite(values)
    if bad.any():
        index = first_index(bad)
        raise ValueError(f"{what}: field 'x' is {values[index]} at index {index}; allowed: "
                         "finite bf16 values (Bf16Network.quantize_input)")
    return signed_bits(values, 16)


def bf16_output_values(program, values):
    """Return a program's output lanes ``values`` (signed ints) as what they hold on a bf16
    design: fp32 scores (``raw``) or bf16 values; unchanged on an int8 one."""
    if program.config.dtype != "bf16":
        return values
    floats = lanes_of_bits(values, program.output.lane_bits)
    return floats if program.output.kind == "raw" else bf16_array(floats)
