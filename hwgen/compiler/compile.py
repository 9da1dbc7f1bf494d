"""Compile a quantized network: prove that it fits, lay it out, and build the program."""

import numbers

from ..config import AcceleratorConfig
from ..memmap import Region
from ..nn import QuantizedNetwork
from .activations import plan_activations
from .descriptors import check_field, descriptor_fields, pack_descriptor
from .errors import CompileError
from .images import param_image, weight_image
from .kinds import lower
from .program import Program
from .proofs import check_widths
from .specs import LayerSpec, MatrixSpec

__all__ = ["compile_network"]


def _check_arguments(network, config, batch, readout):
    if not isinstance(network, QuantizedNetwork):
        raise TypeError(f"compile: network is {type(network).__name__}; "
                        "allowed: hwgen.nn.QuantizedNetwork")
    if not isinstance(config, AcceleratorConfig):
        raise TypeError(f"compile: config is {type(config).__name__}; "
                        "allowed: hwgen.AcceleratorConfig")
    if batch is not None and (not isinstance(batch, numbers.Integral) or isinstance(batch, bool)):
        raise TypeError(f"compile: batch={batch!r}; allowed: an integer or None")
    if not isinstance(readout, bool):
        raise TypeError(f"compile: readout={readout!r}; allowed: True or False")


def _place_layers(layers, config):
    """Lower and check each layer, and place its images in WEIGHT and PARAM one after the
    other; return ``(matrix layers, specs)``. Neither depends on the batch."""
    lowered, specs = [], []
    w_base = p_base = 0
    for index, layer in enumerate(layers):
        matrix = lower(index, layer, config)
        k, n = matrix.weight.shape
        k_tiles, n_tiles = config.tiles(k, n)
        w_words, p_words = n_tiles * k_tiles * config.rows, n_tiles
        for what, need, depth in (("weight", w_base + w_words, "weight_depth"),
                                  ("parameter", p_base + p_words, "param_depth")):
            limit = getattr(config, depth)
            if need > limit:
                raise CompileError(f"{what} words do not fit: layers 0..{index} need {need} "
                                   f"words; limit {depth}={limit}", layer=index,
                                   resource=depth, need=need, limit=limit)
        lowered.append(matrix)
        specs.append(LayerSpec(k=k, n=n, k_tiles=k_tiles, n_tiles=n_tiles,
                               activation=matrix.activation, output=matrix.output,
                               w_base=w_base, w_words=w_words, p_base=p_base, p_words=p_words))
        w_base += w_words
        p_base += p_words
    return lowered, specs


def _descriptor(index, matrix, spec, plan, config, *, last):
    """Return the descriptor fields of layer ``index``, in the layout's order, each checked
    against its bound."""
    is_raw = spec.output == "raw"
    fields = {
        "relu": int(matrix.activation == "relu" and not is_raw),
        "raw": int(is_raw),
        "last": int(last),
        "k_tiles": spec.k_tiles,
        "n_tiles": spec.n_tiles,
        "n": spec.n,
        "src_base": plan.base(index),
        "src_stride": plan.strides[index],
        "dst_base": 0 if is_raw else plan.base(index + 1),
        "dst_stride": plan.out_stride if is_raw else plan.strides[index + 1],
        "w_base": spec.w_base,
        "p_base": spec.p_base,
    }
    for name, value in fields.items():
        check_field(config, index, name, value)
    # Same order as the layout, so that the dicts read like the hardware's struct.
    return {name: fields[name] for name, _, _ in descriptor_fields(config)}


def _output_matrix(specs, plan, config):
    last = specs[-1]
    if last.output == "raw":
        return MatrixSpec(Region.OUTPUT, 0, plan.out_stride, last.n, config.cols,
                          config.acc_bits, "raw")
    index = len(specs)
    return MatrixSpec(Region.ACT, plan.base(index), plan.strides[index], last.n,
                      config.act_lanes, config.in_bits, "requant")


def _layer_matrices(specs, plan, config):
    """Where each layer's output lives after a run: its own ACT area (a read-out plan), the
    last one where :attr:`Program.output` says."""
    kept = [MatrixSpec(Region.ACT, plan.base(i + 1), plan.strides[i + 1], spec.n,
                       config.act_lanes, config.in_bits, "requant")
            for i, spec in enumerate(specs[:-1])]
    return (*kept, _output_matrix(specs, plan, config))


def compile_network(network, config, *, batch=None, readout=False):
    """Compile ``network`` for the accelerator described by ``config``.

    Parameters
    ----------
    network : hwgen.nn.QuantizedNetwork
        Its ``in_bits`` and ``w_bits`` must equal the configuration's; its ``acc_bits`` and
        ``mult_bits`` may be narrower.
    config : AcceleratorConfig
    batch : int, optional
        Rows per run (``1 .. acc_depth``) to lay the activation and output memories out for.
        By default, the largest batch that fits every memory.
    readout : bool
        Keep every layer's output of a run in an ACT area of its own (instead of two areas
        that the layers take turns in), so that the host can read them all after the run
        (:attr:`Program.layer_outputs`); the largest batch is then smaller.

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
        mismatched widths, a kind of layer the compiler does not take, ``K > max_k``, an
        accumulator that could leave ``acc_bits``, a parameter outside the accelerator's
        widths, too many layers (``prog_depth``), weights (``weight_depth``), parameters
        (``param_depth``), activations (``act_depth``) or raw outputs (``out_depth``) at the
        batch, a batch outside ``1 .. acc_depth`` or a descriptor field beyond its bound.
    ValueError
        If the network itself is inconsistent (see :meth:`QuantizedNetwork.validate`).
    """
    _check_arguments(network, config, batch, readout)
    network.validate()  # layers are mutable: check them as they are now
    check_widths(network, config)
    layers = network.layers
    if len(layers) > config.prog_depth:
        raise CompileError(f"the network has {len(layers)} layers, more than the program "
                           f"memory holds; limit prog_depth={config.prog_depth}",
                           layer=config.prog_depth, resource="prog_depth", need=len(layers),
                           limit=config.prog_depth)
    lowered, specs = _place_layers(layers, config)
    plan = plan_activations(network.in_features, specs, config, batch, readout=readout)

    descriptors, words, w_images, p_images = [], [], [], []
    for index, (matrix, spec) in enumerate(zip(lowered, specs, strict=True)):
        fields = _descriptor(index, matrix, spec, plan, config, last=index == len(specs) - 1)
        descriptors.append(fields)
        words.append(pack_descriptor(config, fields))
        w_images.append(weight_image(matrix, config))
        p_images.append(param_image(matrix, config))

    return Program(
        config=config,
        config_hash=config.hash,
        batch=plan.batch,
        descriptors=tuple(descriptors),
        layers=tuple(specs),
        images={Region.PROGRAM: (0, words),
                Region.WEIGHT: (0, [w for image in w_images for w in image]),
                Region.PARAM: (0, [w for image in p_images for w in image])},
        input=MatrixSpec(Region.ACT, 0, plan.strides[0], network.in_features,
                         config.act_lanes, config.in_bits, "input"),
        output=_output_matrix(specs, plan, config),
        macs_per_row=sum(s.k * s.n for s in specs),
        padded_macs_per_row=sum(s.k_tiles * config.rows * s.n_tiles * config.cols
                                for s in specs),
        layer_outputs=_layer_matrices(specs, plan, config) if readout else (),
    )
