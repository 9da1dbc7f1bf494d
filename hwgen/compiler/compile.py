"""Compile a quantized network: prove that it fits, lay it out, and build the program."""

import dataclasses
import numbers

from ..config import AcceleratorConfig
from ..memmap import (
    BF16_UNBOUNDED,
    DIAG_FIELDS,
    DW_FIELDS,
    GEOMETRY_LIMITS,
    POOL_FIELDS,
    TAPS_FIELDS,
    Region,
    act_addr_bits,
    geometry_layout,
    geometry_words,
    walked_strides,
    writes_streams,
)
from ..nn import CNN, INPUT, MLP, QuantizedNetwork
from ..nn.graph import where as node_label
from ..passes import fused_pool, layer_types, lookup, taps
from .activations import matrix_shape, pass_inputs, plan_activations
from .bf16 import bf16_passes, check_bf16_arguments
from .classes import output_mode
from .descriptors import activation_fields, check_field, descriptor_fields, pack_layer
from .errors import CompileError
from .kinds import lower_network
from .program import Program
from .proofs import check_widths
from .specs import LayerSpec, MatrixSpec
from .suggest import holding_designs
from .wire import raw_wire_bits

__all__ = ["activation_plan", "compile_network"]


def _check_arguments(network, config, batch, readout):
    if not isinstance(network, QuantizedNetwork) and getattr(network, "dtype", None) != "bf16":
        hint = (" (a float model: hwgen.compile_for(model, config, calibration) quantizes it "
                "with the design's widths)" if isinstance(network, MLP | CNN) else "")
        raise TypeError(f"compile: network is {type(network).__name__}; "
                        f"allowed: hwgen.nn.QuantizedNetwork or Bf16Network{hint}")
    if not isinstance(config, AcceleratorConfig):
        raise TypeError(f"compile: config is {type(config).__name__}; "
                        "allowed: hwgen.AcceleratorConfig")
    if batch is not None and (not isinstance(batch, numbers.Integral) or isinstance(batch, bool)):
        raise TypeError(f"compile: batch={batch!r}; allowed: an integer or None")
    if not isinstance(readout, bool):
        raise TypeError(f"compile: readout={readout!r}; allowed: True or False")
    check_bf16_arguments(network, config)


def _place_layers(passes, config, network):
    """Place each pass's images in WEIGHT and PARAM one after the other, as its kind lays
    them out; return the :class:`LayerSpec` of every pass. Neither depends on the batch."""
    specs = []
    w_base = p_base = 0
    for p in passes:
        fields = lookup(p.kind).place(p, config, w_base, p_base)
        # A fused pool's pass computes p * p conv pixels per pixel it writes.
        pixels = matrix_shape(p.out_shape)[0] * max(1, p.pool) ** 2 if p.spatial else 1
        specs.append(LayerSpec(**fields, kind=p.kind, pixels=pixels, source=p.source))
        w_base += fields["w_words"]
        p_base += fields["p_words"]
    for what, words, depth in (("weight", "w_words", "weight_depth"),
                               ("parameter", "p_words", "param_depth")):
        limit = getattr(config, depth)
        need = 0
        for spec in specs:
            need += getattr(spec, words)
            if need > limit:
                raise CompileError(f"{what} words do not fit: layers 0..{spec.source} need "
                                   f"{need} words; limit {depth}={limit}", layer=spec.source,
                                   resource=depth, need=need, limit=limit,
                                   parts=_words_by_layer(specs, words, network, what))
    return specs


def _words_by_layer(specs, words, network, what):
    """Return ``"each layer's weight words: layer 0 ('fc1') 512, ... (608 in all)"``."""
    by_layer = {}
    for spec in specs:
        by_layer[spec.source] = by_layer.get(spec.source, 0) + getattr(spec, words)
    names = [node.name for node in network.nodes]
    listed = ", ".join(f"{node_label(i, names[i])} {n}" for i, n in by_layer.items() if n)
    return f"each layer's {what} words: {listed} ({sum(by_layer.values())} in all)"


def _geometry(index, p, plan, config):
    """Return ``(origin, geometry fields)`` of spatial pass ``index``: the word of input pixel
    ``(-pad_top, -pad_left)`` of sample 0 (modulo the banks' addresses) and the walk's
    steps."""
    kh, kw, (sy, sx), (top, _, left, _), window = p.kernel
    h, w, _ = p.in_shape
    oh, ow = p.out_shape[:2] if len(p.out_shape) == 3 else (1, 1)
    src = plan.source(index)
    ps = plan.strides[src]
    wrap = 1 << act_addr_bits(config)
    sy, sx = walked_strides((sy, sx), (oh, ow))
    # The bottom and right padding follow from oh, ow: only the top and left are walked.
    for name, value, where in (("stride", sy, "sy"), ("stride", sx, "sx"),
                               ("pad", top, "top"), ("pad", left, "left")):
        if value > GEOMETRY_LIMITS[name]:
            raise CompileError(f"{name}={value} ({where}) is larger than the device walks; "
                               f"allowed: {name} <= {GEOMETRY_LIMITS[name]}", layer=p.source,
                               resource=name, need=value, limit=GEOMETRY_LIMITS[name])
    if p.taps:
        origin, fields = taps.geometry(p, config, plan.base(src))
        return origin, _checked_geometry(p, config, {"cgs": lookup(p.kind).cgs(p, config, ps),
                                                     **fields})
    cb_word, cb_rem = divmod(window, config.act_lanes)
    # With a fused pool oh, ow are the windows (the pooled sides) and the steps a window's.
    steps = fused_pool.conv_steps(oh, ow, p.pool, unit_row=sy * w * ps, unit_col=sx * ps,
                                  h_units=h * w * ps)
    fields = {
        "h": h, "w": w, "oh": oh, "ow": ow, "kh": kh, "kw": kw, "sy": sy, "sx": sx,
        "pad_top": top, "pad_left": left,
        "cgs": lookup(p.kind).cgs(p, config, ps),
        **{f"{name}_step": value % wrap for name, value in steps.items()},
        "ky_step": (w * ps - (kw - 1) * ps) % wrap,
        "cb_word": cb_word, "cb_rem": cb_rem, "wrep": 0,
        **({"pool": p.pool - 1} if p.pool else {}),
        **lookup(p.kind).walk_fields(p, config, ps),
    }
    origin = (plan.base(src) - top * w * ps - left * ps) % wrap
    return origin, _checked_geometry(p, config, fields)


def _checked_geometry(p, config, fields):
    """Return ``fields`` of pass ``p``'s geometry, the taps, pool and diagonal fields of a
    design that has them 0 where not given, each checked against its width."""
    layout = geometry_layout(config)
    fields = {**{name: 0 for name in TAPS_FIELDS + POOL_FIELDS + DW_FIELDS + DIAG_FIELDS
                 if name in layout.members},
              **fields}
    for name, value in fields.items():
        if value >= 1 << layout.members[name].width:
            raise CompileError(f"geometry field {name}={value} exceeds its width; limit "
                               f"{(1 << layout.members[name].width) - 1}", layer=p.source,
                               resource=name, need=value,
                               limit=(1 << layout.members[name].width) - 1)
    return fields


def _with_taps(passes, config):
    """Return ``passes`` with the first in the taps layout (:mod:`hwgen.passes.taps`) where
    it is the only reader of the network's input and can take it so."""
    readers = [i for i, names in enumerate(pass_inputs(passes)) if INPUT in names]
    if readers != [0] or not taps.eligible(passes[0], config):
        return passes
    return [taps.lowered(passes[0], config), *passes[1:]]


def _input_matrix(passes, plan, config, in_shape):
    """Return the :class:`MatrixSpec` of the program's input: pixel by pixel, or the taps
    layout's element stream."""
    stream = taps.stream(passes[0], config) if passes[0].taps else {}
    return _matrix(Region.ACT, plan.base(0), plan.strides[0], in_shape,
                   lanes=config.act_lanes, bits=config.in_bits, kind="input", **stream)


def _second_input(index, plan, config):
    """Return ``{"src2_base": ...}`` of pass ``index`` on a design with ``residual``: the
    first word of the second tensor it reads (0 for a pass that reads one); nothing on a
    design without it (its descriptor has no such field)."""
    if not config.residual:
        return {}
    inputs = plan.inputs[index]
    return {"src2_base": plan.base(inputs[1]) if len(inputs) > 1 else 0}


def _descriptor(index, p, spec, plan, config, *, last):
    """Return the descriptor fields of pass ``index`` (and a spatial pass's ``geometry``), in
    the layout's order, each checked against its bound."""
    is_raw = spec.output == "raw"
    own = lookup(p.kind).fields(p, spec)
    # Not leaky, the saturation range (bf16: unbounded), unless the kind says otherwise.
    low, high = BF16_UNBOUNDED if config.dtype == "bf16" else \
        (-(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1)
    activation = {"leaky": own.pop("leaky", 0), "act_min": own.pop("act_min", low),
                  "act_max": own.pop("act_max", high)}
    fields = {
        **activation_fields(config, p.source, **activation),
        "raw": int(is_raw),
        "last": int(last),
        "spatial": int(p.spatial),
        "kind": p.kind.value,
        "k_tiles": spec.k_tiles,
        "n_tiles": spec.n_tiles,
        **own,
        "src_base": plan.base(plan.source(index)),
        "src_stride": plan.strides[plan.source(index)],
        **_second_input(index, plan, config),
        "dst_base": 0 if is_raw else plan.base(index + 1),
        "dst_stride": plan.out_stride if is_raw else plan.strides[index + 1],
        "w_base": spec.w_base,
        "p_base": spec.p_base,
        **_stream_out(p, config),
    }
    for name, value in fields.items():
        check_field(config, p.source, name, value)
    geometry = None
    if p.spatial:
        # The walk starts in the padding: its origin may wrap around the banks' addresses.
        fields["src_base"], geometry = _geometry(index, p, plan, config)
    # Same order as the layout, so that the dicts read like the hardware's struct.
    ordered = {name: fields[name] for name, _, _ in descriptor_fields(config)}
    if geometry is not None:
        ordered["geometry"] = geometry
    return ordered


def _stream_out(p, config):
    """Return the descriptor's output stream fields of pass ``p`` on a design that
    :func:`~hwgen.memmap.writes_streams` (all 0 for a pass that writes pixel by pixel)."""
    if not writes_streams(config):
        return {}
    lanes = config.act_lanes
    word, rem = divmod(p.out_pitch, lanes)
    step_word, step_rem = divmod(p.out_shape[-1] if p.out_pitch else 0, lanes)
    return {"dst_run": p.out_shape[1] if p.out_pitch else 0, "dst_pitch_word": word,
            "dst_pitch_rem": rem, "dst_step_word": step_word, "dst_step_rem": step_rem}


def _stream_fields(p):
    """Return the :class:`MatrixSpec` element stream of the output of pass ``p``: its image
    rows ``out_pitch`` elements apart, or ``{}`` for pixel by pixel."""
    if not p.out_pitch:
        return {}
    h, w, c = p.out_shape
    return {"runs": h, "run": w * c, "lead": 0, "pitch": p.out_pitch}


def _matrix(region, base, stride, shape, *, lanes, bits, kind, sample_shape=None, **fields):
    pixels, channels = matrix_shape(shape)
    return MatrixSpec(region, base, stride, channels, lanes, bits, kind, pixels=pixels,
                      sample_shape=sample_shape or shape, **fields)


def _output_matrix(passes, plan, config, sample_shape):
    last = passes[-1]
    if last.raw:
        return _matrix(Region.OUTPUT, 0, plan.out_stride, last.out_shape, lanes=config.cols,
                       bits=config.acc_bits, kind="raw", sample_shape=sample_shape,
                       # fp32 scores take every bit; int8 sums as their proof bounds them.
                       wire_bits=config.acc_bits if config.dtype == "bf16" else
                       raw_wire_bits(last.matrix, config, last.in_range))
    index = len(passes)
    return _matrix(Region.ACT, plan.base(index), plan.strides[index], last.out_shape,
                   lanes=config.act_lanes, bits=config.in_bits, kind="requant",
                   sample_shape=sample_shape)


def _layer_matrices(network, passes, plan, config):
    """Where each network layer's output lives after a run: its pass's own ACT area (a
    read-out plan; a Flatten's is its input's, flat), the last one where
    :attr:`Program.output` says."""
    shapes = network.shapes
    position = {name: m for m, name in enumerate(plan.names)}
    stored = {}  # the matrix each network tensor is: its pass's, or a Flatten's input's
    found = []
    for index, node in enumerate(network.nodes):
        if index == len(network.nodes) - 1:
            found.append(_output_matrix(passes, plan, config, shapes[index][1]))
            break
        source = node.inputs[0]
        m = position[node.name] if node.name in position else \
            stored[source] if source in stored else position[source]
        stored[node.name] = m
        found.append(_matrix(Region.ACT, plan.base(m), plan.strides[m], plan.shapes[m],
                             lanes=config.act_lanes, bits=config.in_bits, kind="requant",
                             sample_shape=shapes[index][1],
                             **(_stream_fields(passes[m - 1]) if m else {})))
    return tuple(found)


def compile_network(network, config, *, batch=None, readout=False, taps=True, output="scores",
                    k=None, fuse_pool=True):
    """Compile ``network`` for the accelerator described by ``config``.

    Parameters
    ----------
    network : hwgen.nn.QuantizedNetwork or hwgen.nn.Bf16Network
        Its ``in_bits`` and ``w_bits`` must equal the configuration's; its ``acc_bits`` and
        ``mult_bits`` may be narrower. A ``dtype="bf16"`` design takes a
        :class:`~hwgen.nn.Bf16Network` of the design's ``rows`` instead (what it takes:
        :mod:`hwgen.compiler.bf16`; ``fuse_pool`` does not apply).
    config : AcceleratorConfig
    batch : int, optional
        Rows per run (``1 .. acc_depth``) to lay the activation and output memories out for.
        By default, the largest batch that fits every memory.
    readout : bool
        Keep every layer's output of a run in an ACT area of its own (instead of areas that
        a tensor leaves once its last reader has run: two that a chain takes turns in), so
        that the host can read them all after the run (:attr:`Program.layer_outputs`); the
        largest batch is then smaller.
    taps : bool
        Store the input of a first convolution with fewer input channels than ``rows`` in the
        taps layout (:mod:`hwgen.passes.taps`), where the device walks it
        (``config.taps``); False keeps every input pixel by pixel (the programs of before).
    fuse_pool : bool
        Run a ``p x p``, stride ``p`` max pool that follows a convolution (its only reader)
        in the convolution's pass (:mod:`hwgen.passes.fused_pool`), where the device can
        (``config.fuse_pool``) and no read-out needs the convolution's output; False keeps
        every pool a pass of its own (the programs of before).
    output : {"scores", "argmax", "top_k"} or ("top_k", k)
        What :meth:`host.Accelerator.infer` returns by default (:attr:`Program.output_mode`,
        :mod:`hwgen.compiler.classes`): the network's output, the index of each sample's
        largest score, or the indices of its ``k`` largest in descending order (ties to the
        lowest index); the device's memories are the same for all three.
    k : int, optional
        The ``k`` of ``output="top_k"``, ``1 ..`` the scores per sample.

    Returns
    -------
    Program

    Raises
    ------
    TypeError
        If ``network`` is not a :class:`~hwgen.nn.QuantizedNetwork`, ``config`` not an
        :class:`AcceleratorConfig`, ``batch`` not an integer or ``readout`` not a bool.
    CompileError
        A :class:`ValueError` naming the layer, what does not fit, the need and the limit:
        mismatched widths, a kind of layer the compiler does not take, a reduction beyond the
        descriptor fields that count it (:func:`~hwgen.memmap.reduction_limits`, which
        ``max_k`` sizes; a spatial layer's once each kernel position's channels are padded
        to whole tiles of ``rows``), a channel whose partial sums could leave ``acc_bits``, a
        parameter outside the accelerator's widths, too many layers (``prog_depth``),
        weights (``weight_depth``), parameters (``param_depth``), activations (``act_depth``)
        or raw outputs (``out_depth``) at the batch, a batch outside ``1 .. acc_depth`` or a
        descriptor field beyond its bound. A refusal that a larger design cures (a buffer,
        ``max_k``, ``spatial``) also says which would hold the network: this design with the
        short fields raised (and the board the fit estimate puts it on), or the board presets
        that compile it (:mod:`hwgen.compiler.suggest`).
    ValueError
        If the network itself is inconsistent (see :meth:`QuantizedNetwork.validate`), or
        ``output``/``k`` are not allowed: an unknown mode, ``k`` outside ``1 ..`` the scores
        per sample, or classes of an output with several rows per sample.
    """
    _check_arguments(network, config, batch, readout)
    for name, value in (("taps", taps), ("fuse_pool", fuse_pool)):
        if not isinstance(value, bool):
            raise TypeError(f"compile: {name}={value!r}; allowed: True or False")
    mode = output_mode(output, "compile", k=k)
    if config.dtype == "bf16":
        program = _compile(network, config, batch, readout, taps, fuse_pool=False)
        output_mode(mode, "compile", spec=program.output)
        return dataclasses.replace(program, output_mode=mode)
    network.validate()  # layers are mutable: check them as they are now
    try:
        program = _compile(network, config, batch, readout, taps, fuse_pool=fuse_pool)
    except CompileError as error:
        def again(n, c):
            return _compile(n, c, batch, readout, taps, fuse_pool=fuse_pool)

        hint = holding_designs(again, network, config, error)
        if not hint:
            raise
        raise error.with_hint(hint) from None
    output_mode(mode, "compile", spec=program.output)
    return dataclasses.replace(program, output_mode=mode)


def _passes(network, config, readout, taps_layout, fuse_pool):
    """Return the passes :func:`compile_network` runs ``network`` as."""
    if config.dtype == "bf16":
        return bf16_passes(network, config, taps_layout=taps_layout)
    check_widths(network, config)
    passes = lower_network(network, config)
    if not passes:
        *others, last = (t.__name__ for t in layer_types())
        raise CompileError("the network has no layer the device computes (only Flatten); "
                           f"allowed: at least one {', '.join(others)} or {last}",
                           resource="layer")
    if taps_layout:
        passes = _with_taps(passes, config)
    if fuse_pool:
        passes = fused_pool.fused(passes, config, readout=readout)
    return passes


def _input_shape(network):
    """Return the per-sample input shape of an int8 or a bf16 network."""
    return network.input_shape if getattr(network, "dtype", None) == "bf16" else \
        network.shapes[0][0]


def _plan(network, passes, config, batch, readout):
    in_shape = _input_shape(network)
    # The streams of a sample's image rows (samples follow each other element by element).
    stream_words = {m + 1: -(-p.out_shape[0] * p.out_pitch // config.act_lanes)
                    for m, p in enumerate(passes) if p.out_pitch}
    if passes[0].taps:
        stream_words[0] = -(-in_shape[0] * passes[0].taps // config.act_lanes)
    return plan_activations(in_shape, passes, config, batch, readout=readout,
                            stream_words=stream_words)


def activation_plan(network, config, batch=None, *, readout=False, taps=True, fuse_pool=True):
    """Return the :class:`~hwgen.compiler.activations.ActivationPlan` that
    :func:`compile_network` lays ``network``'s activations out by (its arguments alike):
    ``act_words`` is the ACT words it takes."""
    passes = _passes(network, config, readout, taps, fuse_pool)
    return _plan(network, passes, config, batch, readout)


def _compile(network, config, batch, readout, taps_layout, *, fuse_pool=True):
    passes = _passes(network, config, readout, taps_layout, fuse_pool)
    specs = _place_layers(passes, config, network)
    plan = _plan(network, passes, config, batch, readout)

    descriptors, words, w_images, p_images = [], [], [], []
    for index, (p, spec) in enumerate(zip(passes, specs, strict=True)):
        fields = _descriptor(index, p, spec, plan, config, last=index == len(passes) - 1)
        descriptors.append(fields)
        words += pack_layer(config, fields)
        weights, params = lookup(p.kind).images(p, config)
        w_images.append(weights)
        p_images.append(params)
    if len(words) > config.prog_depth:
        raise CompileError(f"the program takes {len(words)} words ({len(passes)} layers, "
                           f"{sum(p.spatial for p in passes)} of them spatial with "
                           f"{geometry_words(config)} geometry words each), more than the "
                           f"program memory holds; limit prog_depth={config.prog_depth}",
                           layer=passes[-1].source, resource="prog_depth", need=len(words),
                           limit=config.prog_depth)

    macs = [lookup(s.kind).macs(s, config) for s in specs]
    return Program(
        config=config,
        config_hash=config.hash,
        batch=plan.batch,
        descriptors=tuple(descriptors),
        layers=tuple(specs),
        images={Region.PROGRAM: (0, words),
                Region.WEIGHT: (0, [w for image in w_images for w in image]),
                Region.PARAM: (0, [w for image in p_images for w in image])},
        input=_input_matrix(passes, plan, config, _input_shape(network)),
        output=_output_matrix(passes, plan, config, network.output_shape),
        macs_per_row=sum(useful for useful, _ in macs),
        padded_macs_per_row=sum(issued for _, issued in macs),
        layer_outputs=_layer_matrices(network, passes, plan, config) if readout else (),
        output_function=network.output_function,
        output_scale=(None if getattr(network, "output_scale", None) is None
                      else tuple(float(v) for v in network.output_scale)),
    )
