"""The passes a network's layers become: :func:`lower_network` and its :class:`DeviceLayer`.

Each kind of :mod:`hwgen.nn` layer is lowered by the pass kind that registers it
(:func:`hwgen.passes.for_layer`: a Dense or Conv2D to a matrix pass, a depthwise
convolution to a depthwise pass where the device has the unit, a MaxPool2D to a max-pooling
pass), which proves what the hardware needs of it; a layer no kind lowers is
refused with a :class:`CompileError` naming it. A :class:`~hwgen.nn.Flatten` costs nothing:
the images' words are already in ``(h, w, c)`` order, so the pass after it takes the image
as its input. Every pass that runs the array, whatever its kind, then has its accumulator
proved here from the weights it runs and the range of the tensor it reads
(:func:`~hwgen.compiler.proofs.check_accumulator`, :func:`~hwgen.compiler.ranges.value_ranges`).
"""

import dataclasses

from ..memmap import PassKind
from ..nn import INPUT, Dense, Flatten
from ..passes import for_layer, layer_types
from .errors import CompileError
from .proofs import check_accumulator
from .ranges import value_ranges

__all__ = ["DeviceLayer", "lower_network"]


@dataclasses.dataclass(frozen=True)
class DeviceLayer:
    """One pass of the device.

    Attributes
    ----------
    source : int
        The network layer whose output it computes.
    kind : PassKind
        Its kind, whose module (:func:`hwgen.passes.lookup`) lays it out.
    matrix : Dense or None
        The weights (of a spatial pass padded by :func:`hwgen.passes.matrix.padded_matrix`),
        biases and requantization of a pass that runs the array; None for one that does not.
    k : int
        The reduction of a pass with a matrix (``KH * KW * C``, unpadded).
    in_shape, out_shape : tuple of int
        Per sample: ``(H, W, C)`` for images, ``(F,)`` for rows.
    kernel : tuple or None
        ``(kh, kw, (sy, sx), (top, bottom, left, right), window)`` of a spatial pass
        (:class:`hwgen.passes.base.Lowered`); None for a pass over rows.
    name : str
        The tensor it writes: its network node's name.
    inputs : tuple of str
        The tensors it reads, in the order it takes them: ``"input"`` or an earlier pass's
        ``name`` (a :class:`~hwgen.nn.Flatten` is no tensor of its own: a pass after it reads
        the tensor it flattens).
    repeat : bool
        Its weight tiles are all alike (:class:`hwgen.passes.base.Lowered`).
    grouped : bool
        A grouped convolution's or an average pool's (:class:`hwgen.passes.base.Lowered`).
    params : object
        What else its kind lays out (:class:`hwgen.passes.base.Lowered`): an ADD pass's
        per-channel multipliers, shift and bounds; None for none.
    taps : int
        The row pitch ``P`` of a first convolution that takes its input in the taps layout
        (:mod:`hwgen.passes.taps`: its matrix the kernel flattened, ``[KH * KW * C, N]``);
        0 for a pass that reads its input pixel by pixel.
    out_pitch : int
        The row pitch ``P`` of the taps layout this pass writes its output in (a bf16
        convolution's input, :mod:`hwgen.compiler.bf16_streams`); 0 for pixel by pixel.
    pool : int
        The window side ``p`` of a max pool fused into this pass
        (:mod:`hwgen.passes.fused_pool`: ``out_shape`` and ``name`` are the pool's, the pass
        walks its ``p * p`` windows); 0 for none.
    in_range : tuple of int or None
        ``(lo, hi)``: the values of the tensor it reads first
        (:func:`~hwgen.compiler.ranges.value_ranges`), from which its accumulator is proved
        and a raw output's wire width follows; None: the signed ``in_bits`` range.
    """

    source: int
    kind: PassKind
    matrix: Dense | None
    k: int
    in_shape: tuple
    out_shape: tuple
    kernel: tuple | None
    name: str = ""
    inputs: tuple = ()
    repeat: bool = False
    grouped: bool = False
    params: object = None
    taps: int = 0
    out_pitch: int = 0
    pool: int = 0
    in_range: tuple | None = None

    @property
    def spatial(self):
        return self.kernel is not None

    @property
    def raw(self):
        """Whether the pass writes the raw accumulators of its matrix to OUTPUT."""
        return self.matrix is not None and self.matrix.output == "raw"


def lower_network(network, config):
    """Return the :class:`DeviceLayer` passes that compute ``network``.

    A :class:`~hwgen.nn.Flatten` becomes part of the next pass (or of how the output is read,
    when it is last).

    Raises
    ------
    CompileError
        If a kind of layer has no lowering, or a layer does not fit ``config`` (its reduction,
        a partial sum of its accumulator that can leave ``acc_bits``, or a channel's
        parameters).
    """
    passes = []
    shapes = network.shapes
    ranges = value_ranges(network, config.in_bits)
    # The stored tensor and its shape that each network tensor is: itself, or for a Flatten's
    # output the image it flattens (which the next pass takes over).
    stored = {INPUT: (INPUT, shapes[0][0])}
    for index, (node, layer) in enumerate(zip(network.nodes, network.layers, strict=True)):
        in_shape, out_shape = shapes[index]
        if isinstance(layer, Flatten):
            stored[node.name] = stored[node.inputs[0]]
            continue
        kind = for_layer(layer)
        if kind is None:
            allowed = ", ".join(t.__name__ for t in (*layer_types(), Flatten))
            raise CompileError(f"{type(layer).__name__} layers cannot be compiled; allowed: "
                               f"{allowed}", layer=index, resource="layer")
        in_shape = _stored_shape(index, node, stored)
        kind = for_layer(layer, in_shape, config)
        in_range = ranges[node.inputs[0]]
        try:
            found = kind.lower(index, layer, (in_shape, out_shape), config)
            if found.matrix is not None:
                check_accumulator(index, found.matrix, found.k, config, in_range)
        except CompileError as error:
            raise error.named(node.name) from None
        lowered = DeviceLayer(index, kind.kind, found.matrix, found.k, in_shape,
                              found.out_shape or out_shape, found.kernel)
        if lowered.spatial and not config.spatial:
            kind_name = type(layer).__name__
            what = "a Dense after a Flatten" if isinstance(layer, Dense) else \
                f"{'an' if kind_name[0] in 'AEIOU' else 'a'} {kind_name}"
            raise CompileError(f"{what} walks images, and this device has no patch walker "
                               "(its configuration has spatial=False, as the iCEBreaker preset "
                               "does to fit the UP5K); allowed: Dense layers over rows, or a "
                               "configuration with spatial=True", layer=index,
                               resource="spatial", name=node.name)
        passes.append(dataclasses.replace(
            lowered, name=node.name, inputs=tuple(stored[name][0] for name in node.inputs),
            repeat=found.repeat, grouped=found.grouped, params=found.params,
            in_range=in_range))
        stored[node.name] = (node.name, lowered.out_shape)
    return passes


def _stored_shape(index, node, stored):
    """Return the per-sample shape of the tensors node ``index`` reads, as they are stored
    (a Flatten's input's for a flattened tensor): a pass reads all its inputs with one
    stride, so a pass of several inputs needs them stored alike.

    Raises
    ------
    CompileError
        If two inputs are stored differently (one an image flattened, the other rows),
        naming both tensors and their layouts.
    """
    (first, shape), *others = ((name, stored[name][1]) for name in node.inputs)
    for name, other in others:
        if other != shape:
            what = {True: "an image", False: "rows"}
            raise CompileError(
                f"node {node.name!r} reads {first!r} stored as {what[len(shape) == 3]} "
                f"{shape} and {name!r} stored as {what[len(other) == 3]} {other}: the device "
                "reads both inputs of a pass with one layout (a flattened image keeps its "
                "pixels' words, rows pack their features); allowed: inputs stored alike, "
                "both flattened from images of one shape or both rows", layer=index,
                resource="layout", name=node.name)
    return shape
