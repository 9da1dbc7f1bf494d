"""The ``.npz`` file of a compiled program: what :meth:`Program.save` writes and
:meth:`Program.load` reads.

The archive holds ``meta`` (UTF-8 JSON as a uint8 array) and one uint8 array per image region
(``PROGRAM``, ``WEIGHT``, ``PARAM``), ``(words, word_bytes)``, little-endian words. The metadata
names the format and its version, the configuration and its hash, the batch, the descriptors,
the layers, each image's base, word count and SHA-256, the input and output matrices, the MAC
counts and, for a program compiled with read-out, where each layer's output lives
(``layer_outputs``: an optional entry, so files written before read-out existed load as
programs without it, one per network layer). Loading cross-checks all of it and refuses any
other version.

Files of versions 2 to 4 hold the descriptors of :func:`legacy_descriptor_layout` (version 2:
matrix layers over rows only, no geometry words; version 3: ``spatial`` and ``pool`` flags where
today's descriptor has ``spatial`` and the pass kind; up to version 4: a ``relu`` flag where
today's has ``leaky`` and the bounds ``act_min``, ``act_max``), PARAM lanes without
``mult_neg`` (:func:`legacy_param_lane_layout`) and the geometry of
:func:`legacy_geometry_layout` (one ``stride`` and one ``pad`` where version 5 has ``sy``,
``sx``, ``pad_top``, ``pad_left``, and no channel window nor weight repeat): their PROGRAM and
PARAM words are checked against those layouts and their own word widths, then converted to
today's (``relu`` becomes ``act_min = 0``, no ``relu`` the saturation range; ``mult_neg``
zero; ``sy = sx = stride``, ``pad_top = pad_left = pad``, the geometry's new fields 0).
Files of version 5 hold today's descriptors without ``src2_base`` (which a design with
``residual`` has since version 6): their PROGRAM words are converted with ``src2_base`` 0
(a design without ``residual`` has version 5's descriptors today). Files of versions 5 and 6
hold geometries without the taps fields (:data:`~hwgen.memmap.TAPS_FIELDS`, which a design
with ``taps`` has since version 7, last in the layout): converted with them 0, and their
matrices without the element stream's fields (the per-pixel layout, their default). Before
version 7 a file holds no output mode (``"scores"``) nor the output's ``wire_bits``: a raw
output's comes from the images (:func:`hwgen.compiler.wire.stored_raw_wire_bits`, the same
proof), a requantized one's is its lane width. Files of versions 5 to 7 hold geometries
without the fused pool's fields (:data:`~hwgen.memmap.POOL_FIELDS`, which a design with
``fuse_pool`` has since version 8): converted with them 0 (no pass of theirs fuses a pool).
Files of versions 5 to 8 hold geometries without ``wdiag``
(:data:`~hwgen.memmap.DIAG_FIELDS`, last in every spatial design's layout since version 9):
converted with it 0 (their weight tiles are stored whole, which reads the same). Version 10
adds the depthwise pass kind and its geometry fields (:data:`~hwgen.memmap.DW_FIELDS`, a
design with ``depthwise``, which no older file was compiled for): an older file's geometry
takes them 0. Version 11 adds a bf16 design's stream fields to its descriptors
(``dst_run``, ``dst_pitch_word``, ``dst_pitch_rem``, ``dst_step_word``, ``dst_step_rem``,
before the bounds): an older file's
take them 0 (each pass writes pixel by pixel).
"""

import dataclasses
import hashlib
import json
import zipfile
import zlib

import numpy as np
from amaranth.hdl import unsigned
from amaranth.lib import data

from ..config import AcceleratorConfig
from ..memmap import (
    DESCRIPTOR_BOUNDS,
    DIAG_FIELDS,
    DW_FIELDS,
    POOL_FIELDS,
    TAPS_FIELDS,
    PassKind,
    Region,
    descriptor_layout,
    geometry_layout,
    param_lane_layout,
    regions,
)
from ..nn.output_function import check_output_function
from .classes import output_mode, output_mode_to_json
from .descriptors import field_values, pack_layer, unpack_program
from .images import IMAGE_REGIONS
from .specs import LayerSpec, MatrixSpec
from .wire import stored_raw_wire_bits
from .words import check_words, word_bytes, words_to_bytes

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "READ_VERSIONS", "legacy_descriptor_layout",
           "legacy_geometry_layout", "legacy_param_lane_layout", "read", "save"]

#: Version of the file written by :func:`save`; older versions that a program of this
#: version can stand for are converted on load, others refused.
# 11: a bf16 design's stream fields (dst_run, dst_pitch_*, dst_step_*);
# 10: the depthwise pass kind and its geometry fields (a design with depthwise);
# 9: diagonal weight tiles (wdiag); 8: the geometry's fused pool fields (a design with
# fuse_pool);
# 7: the matrices' element streams and the geometry's taps fields (a design with taps), the
# output's wire_bits and the program's output_mode (class output);
# 6: the second input's src2_base (a design with residual); 5: activation bounds, leaky
# ReLU, the general convolution's geometry; 4: the pass kind; 3: spatial layers; 2: per-config
# layout
FORMAT_VERSION = 11
#: Versions :func:`read` takes: versions 2 to 7 are converted on load (version 2 holds
#: matrix layers over rows only, whose layers gain their source; before version 7 a raw
#: output's wire width comes from the images, and the output mode is "scores").
READ_VERSIONS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
#: The ``format`` entry of the metadata.
FORMAT_NAME = "hwgen-program"
#: One-bit descriptor flags of the older versions, where today's descriptor has its flags (and,
#: before version 4, its ``kind``); the numeric fields after them are today's but the bounds.
#: (A design without ``bounds`` has version 4's descriptors and PARAM lanes today.)
_LEGACY_FLAGS = {2: ("relu", "raw", "last"), 3: ("relu", "raw", "last", "spatial", "pool"),
                 4: ("relu", "raw", "last", "spatial")}
#: The layers' ``kind`` in files of versions 2 and 3 (and 4 before it held the name of the
#: :class:`~hwgen.memmap.PassKind`): version 2 has none, a matrix layer's.
_LEGACY_KIND_NAMES = {"matrix": PassKind.MATRIX.name, "pool": PassKind.MAXPOOL.name}
#: Descriptor fields of today that no older version has (zero in a converted program).
_NEW_FIELDS = ("src2_base",)
#: Descriptor fields of a bf16 design since version 11 (:func:`~hwgen.memmap.writes_streams`),
#: last before the bounds: an older file's descriptors take them 0.
_STREAM_FIELDS = ("dst_run", "dst_pitch_word", "dst_pitch_rem", "dst_step_word",
                  "dst_step_rem")
#: The pass kind of a descriptor of version 2 or 3, by its ``pool`` flag (version 2: none).
_LEGACY_KIND_BY_POOL_FLAG = (PassKind.MATRIX, PassKind.MAXPOOL)


def legacy_descriptor_layout(config, version):
    """Return the descriptor layout of format ``version`` (2 to 11) for ``config``: version
    11's is today's (:func:`~hwgen.memmap.descriptor_layout`); versions 6's to 10's today's
    without a bf16 design's stream fields; version 5's without ``src2_base`` too; the others
    have the one-bit flags of that version, version 4's ``kind``,
    then today's numeric fields but ``src2_base`` and the bounds, as wide and in the same
    order."""
    today = descriptor_layout(config)
    if version >= 11:
        return today
    if version >= 6:
        return data.StructLayout({name: field.shape for name, field in today
                                  if name not in _STREAM_FIELDS})
    if version == 5:
        return data.StructLayout({name: field.shape for name, field in today
                                  if name not in _NEW_FIELDS + _STREAM_FIELDS})
    numeric_from = list(today.members).index("kind") + 1
    fields = {name: unsigned(1) for name in _LEGACY_FLAGS[version]}
    if version >= 4:
        fields["kind"] = today.members["kind"]
    fields.update({name: field.shape for name, field in list(today)[numeric_from:]
                   if name not in DESCRIPTOR_BOUNDS + _NEW_FIELDS + _STREAM_FIELDS})
    return data.StructLayout(fields)


def legacy_geometry_layout(config):
    """Return the geometry layout of format versions 3 and 4 for ``config``: today's fields
    up to the steps, with one ``stride`` and one ``pad`` (four bits each) for both axes."""
    today = _geometry_before_taps(config).members
    fields = {}
    for name, shape in today.items():
        if name in ("sy", "pad_top"):
            fields["stride" if name == "sy" else "pad"] = shape
        elif name not in ("sx", "pad_left", "cb_word", "cb_rem", "wrep"):
            fields[name] = shape
    return data.StructLayout(fields)


def _geometry_before_taps(config):
    """Return the geometry layout of format versions 5 and 6: today's without
    :data:`~hwgen.memmap.TAPS_FIELDS` and :data:`~hwgen.memmap.POOL_FIELDS` (the last
    fields, so the others keep their bits)."""
    return data.StructLayout({name: field.shape for name, field in geometry_layout(config)
                              if name not in TAPS_FIELDS + POOL_FIELDS + DW_FIELDS
                              + DIAG_FIELDS})


def _geometry_before_pool(config):
    """Return the geometry layout of format version 7: today's without
    :data:`~hwgen.memmap.POOL_FIELDS` and :data:`~hwgen.memmap.DIAG_FIELDS` (the last
    fields)."""
    return data.StructLayout({name: field.shape for name, field in geometry_layout(config)
                              if name not in POOL_FIELDS + DW_FIELDS + DIAG_FIELDS})


def _geometry_before_diag(config):
    """Return the geometry layout of format version 8: today's without
    :data:`~hwgen.memmap.DIAG_FIELDS` (the last fields)."""
    return data.StructLayout({name: field.shape for name, field in geometry_layout(config)
                              if name not in DW_FIELDS + DIAG_FIELDS})


def _geometry_before_dw(config):
    """Return the geometry layout of format version 9: today's without
    :data:`~hwgen.memmap.DW_FIELDS` (today's on a design without ``depthwise``)."""
    return data.StructLayout({name: field.shape for name, field in geometry_layout(config)
                              if name not in DW_FIELDS})


def _geometry_of_today(config, geometry, version):
    """Return a ``geometry`` of format ``version`` (:func:`legacy_geometry_layout`'s fields
    before version 5) as today's: the taps fields (before version 7) and the pool fields 0."""
    g = dict(geometry)
    if version < 5:
        stride, pad = g.pop("stride"), g.pop("pad")
        g.update(sy=stride, sx=stride, pad_top=pad, pad_left=pad, cb_word=0, cb_rem=0, wrep=0)
    layout = geometry_layout(config).members
    new = {name: 0 for name in TAPS_FIELDS + POOL_FIELDS + DW_FIELDS + DIAG_FIELDS
           if name in layout and name not in g}
    return {**g, **new}


def legacy_param_lane_layout(config):
    """Return the PARAM lane of format versions 2 to 4: today's
    (:func:`~hwgen.memmap.param_lane_layout`) without ``mult_neg``."""
    return data.StructLayout({name: field.shape for name, field in param_lane_layout(config)
                              if name != "mult_neg"})


def _image_bytes(program):
    geometry = regions(program.config)
    return {r.name: words_to_bytes(program.images[r][1], geometry[r].word_bits)
            for r in IMAGE_REGIONS}


def _metadata(program, arrays):
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "config": program.config.to_dict(),
        "config_hash": program.config_hash,
        "batch": program.batch,
        "descriptors": list(program.descriptors),
        "layers": [layer.to_dict() for layer in program.layers],
        "images": {r.name: {"base": program.images[r][0], "words": len(program.images[r][1])}
                   for r in IMAGE_REGIONS},
        "digests": {name: hashlib.sha256(array.tobytes()).hexdigest()
                    for name, array in arrays.items()},
        "input": program.input.to_dict(),
        "output": program.output.to_dict(),
        "macs_per_row": program.macs_per_row,
        "padded_macs_per_row": program.padded_macs_per_row,
        "layer_outputs": [spec.to_dict() for spec in program.layer_outputs],
        "output_function": program.output_function,
        "output_scale": (None if program.output_scale is None
                         else [float(v) for v in program.output_scale]),
        "output_mode": output_mode_to_json(program.output_mode),
    }


def save(program, path):
    """Write ``program`` (a :class:`~hwgen.compiler.Program`) to one ``.npz`` file at ``path``
    (exactly that name)."""
    arrays = _image_bytes(program)
    meta = np.frombuffer(json.dumps(_metadata(program, arrays)).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez_compressed(f, meta=meta, **arrays)


def read(path):
    """Return the fields of the program saved at ``path``, as keyword arguments of
    :class:`~hwgen.compiler.Program`.

    Raises
    ------
    ValueError
        Naming the file and the problem, if it is not such a file, is of another format
        version, or is damaged (a digest or a cross-check fails).
    OSError
        If the file cannot be opened.
    """
    with open(path, "rb") as f:  # a missing file is an OSError, not a damaged one
        if f.read(4) != b"PK\x03\x04":
            raise ValueError(f"{path}: not an hwgen program file (not an .npz archive)")
        f.seek(0)
        try:
            npz = np.load(f, allow_pickle=False)
            if not isinstance(npz, np.lib.npyio.NpzFile):
                raise ValueError("it holds a single array, not an .npz archive")
            with npz:
                arrays = {name: npz[name] for name in npz.files}
        except (zipfile.BadZipFile, zlib.error, EOFError, KeyError, ValueError,
                OSError) as exc:
            raise ValueError(f"{path}: not a readable hwgen program file ({exc})") from None
    try:
        return _from_arrays(arrays)
    except (KeyError, TypeError, ValueError, AttributeError, UnicodeDecodeError) as exc:
        detail = f"missing entry {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"{path}: {detail}") from None


def _metadata_of(arrays):
    if "meta" not in arrays:
        raise ValueError("no 'meta' entry; not an hwgen program file")
    try:
        meta = json.loads(arrays["meta"].tobytes().decode())
    except json.JSONDecodeError as exc:
        raise ValueError(f"the metadata is not JSON ({exc}); damaged") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ValueError(f"format is {meta.get('format') if isinstance(meta, dict) else None!r}"
                         f"; allowed: {FORMAT_NAME!r}")
    if meta.get("version") not in READ_VERSIONS:
        raise ValueError(f"format version {meta.get('version')!r} is not supported; "
                         f"allowed: {', '.join(map(str, READ_VERSIONS))}")
    return meta


def _word_bits(meta, config):
    """Return ``{Region: word width}`` of the images of a file of ``meta``'s version."""
    bits = {region: geometry.word_bits for region, geometry in regions(config).items()}
    if meta["version"] < FORMAT_VERSION:
        bits[Region.PROGRAM] = legacy_descriptor_layout(config, meta["version"]).size
    if meta["version"] in _LEGACY_FLAGS:
        bits[Region.PARAM] = config.cols * legacy_param_lane_layout(config).size
    return bits


def _images(meta, arrays, config):
    geometry = regions(config)
    word_bits = _word_bits(meta, config)
    images = {}
    for region in IMAGE_REGIONS:
        info = meta["images"][region.name]
        array = arrays[region.name]
        bits = word_bits[region]
        nbytes = word_bytes(bits)
        if array.dtype != np.uint8 or array.shape != (info["words"], nbytes):
            raise ValueError(f"image {region.name} has {array.dtype} {array.shape}; expected "
                             f"uint8 ({info['words']}, {nbytes}) ({info['words']} words of "
                             f"{bits} bits, format version {meta['version']}); damaged")
        if hashlib.sha256(array.tobytes()).hexdigest() != meta["digests"][region.name]:
            raise ValueError(f"image {region.name} does not match its digest; damaged")
        words = [int.from_bytes(row.tobytes(), "little") for row in array]
        words = check_words(words, bits, f"image {region.name}")
        base = int(info["base"])
        if base < 0 or base + len(words) > geometry[region].depth:
            raise ValueError(f"image {region.name} spans words {base}..{base + len(words)}; "
                             f"allowed: within depth {geometry[region].depth}")
        images[region] = (base, words)
    return images


def _from_legacy(config, version, words, stored):
    """Return ``(descriptors, PROGRAM words)`` of today's layout for the PROGRAM ``words`` of
    format ``version``, which must decode to the ``stored`` descriptors."""
    layout = legacy_descriptor_layout(config, version)
    geometry = (legacy_geometry_layout(config) if version < 5 else
                _geometry_before_taps(config) if version < 7 else
                _geometry_before_pool(config) if version < 8 else
                _geometry_before_diag(config) if version < 9 else
                _geometry_before_dw(config) if version < 10 else geometry_layout(config))
    count = -(-geometry.size // layout.size)   # geometry words of that version's width
    decoded, i = [], 0
    while i < len(words):
        d = field_values(layout, words[i])
        i += 1
        if d.get("spatial"):
            bits = sum(w << (j * layout.size) for j, w in enumerate(words[i:i + count]))
            d["geometry"] = {name: (bits >> f.offset) & ((1 << f.width) - 1)
                             for name, f in geometry}
            i += count
        decoded.append(d)
    if decoded != list(stored):
        raise ValueError("the PROGRAM image does not match the stored descriptors (format "
                         f"version {version}); damaged")
    converted = []
    low, high = -(1 << (config.in_bits - 1)), (1 << (config.in_bits - 1)) - 1
    for d in decoded:
        if "kind" not in d:
            d["kind"] = _LEGACY_KIND_BY_POOL_FLAG[d.pop("pool", 0)].value
        fields = {name: d.get(name, 0) for name, _ in descriptor_layout(config)}
        if config.bounds and version < 5:
            # ReLU is the bound act_min = 0; without it the bounds are the saturation range.
            fields.update(leaky=0, act_min=0 if d["relu"] else low, act_max=high)
        if "geometry" in d:
            fields["geometry"] = _geometry_of_today(config, d["geometry"], version)
        converted.append(fields)
    words = [w for d in converted for w in pack_layer(config, d)]
    return unpack_program(config, words), words


def _params_of_today(config, words):
    """Return the PARAM ``words`` of format versions 2 to 4 in today's lanes, ``mult_neg``
    zero."""
    old, today = legacy_param_lane_layout(config), param_lane_layout(config)
    if old == today:   # a design without bounds: the lanes of old
        return list(words)
    converted = []
    for word in words:
        lanes = [field_values(old, word >> (j * old.size)) for j in range(config.cols)]
        converted.append(sum(today.const({**lane, "mult_neg": 0}).as_value().value
                             << (j * today.size) for j, lane in enumerate(lanes)))
    return converted


def _layer_of_today(layer):
    """Return the stored ``layer`` (a :class:`LayerSpec`'s fields) with its kind's name of
    today, whichever version stored it."""
    if "kind" not in layer:
        return layer
    return {**layer, "kind": _LEGACY_KIND_NAMES.get(layer["kind"], layer["kind"])}


def _readout_count(layers, descriptors, output):
    """Return the read-out entries the passes imply: one per network layer.

    A pass names the network layer it computes (``source``); the layers between are
    Flattens, and so is one after the last pass if that pass gives an image (a pooling pass or
    a convolution, not a Dense after a Flatten) and the output is flat.
    """
    sources = [layer.source for layer in layers]
    if not sources or None in sources:  # no pass says its layer: one Dense layer per pass
        return len(layers)
    last = sources[-1]
    after_flatten = last > 0 and last - 1 not in sources
    gives_image = bool(descriptors[-1]["spatial"]) and not after_flatten
    return last + 1 + int(gives_image and len(output.sample_shape) == 1)


def _from_arrays(arrays):
    meta = _metadata_of(arrays)
    config = AcceleratorConfig.from_dict(meta["config"])
    if config.hash != meta["config_hash"]:
        raise ValueError(f"config hash {meta['config_hash']!r} does not match the stored "
                         f"configuration ({config.hash}); the file is damaged")
    images = _images(meta, arrays, config)
    descriptors = tuple(meta["descriptors"])
    if meta["version"] < FORMAT_VERSION:
        base, words = images[Region.PROGRAM]
        descriptors, words = _from_legacy(config, meta["version"], words, descriptors)
        images[Region.PROGRAM] = (base, words)
    if meta["version"] in _LEGACY_FLAGS:
        base, words = images[Region.PARAM]
        images[Region.PARAM] = (base, _params_of_today(config, words))
    decoded = unpack_program(config, images[Region.PROGRAM][1])
    if decoded != descriptors:
        raise ValueError("the PROGRAM image does not match the stored descriptors; damaged")
    layers = tuple(LayerSpec.from_dict(_layer_of_today(layer)) for layer in meta["layers"])
    if meta["version"] == 2:
        # Version 2 held Dense layers only, one pass each: pass i computes network layer i.
        layers = tuple(dataclasses.replace(layer, source=i) for i, layer in enumerate(layers))
    output = MatrixSpec.from_dict(meta["output"])
    kept = tuple(MatrixSpec.from_dict(d) for d in meta.get("layer_outputs", []))
    if meta["version"] < 7 and output.kind == "raw":
        # Before version 7 the file kept no wire width: the same proof, from the images.
        output = dataclasses.replace(output, wire_bits=stored_raw_wire_bits(
            config, layers[-1], images[Region.WEIGHT][1], images[Region.PARAM][1]))
        kept = (*kept[:-1], output) if kept else kept
    if kept:
        if kept[-1] != output:
            raise ValueError(f"the last layer output {kept[-1]} is not the output {output}; "
                             "damaged")
        expected = _readout_count(layers, descriptors, output)
        if len(kept) != expected:
            raise ValueError(f"layer_outputs has {len(kept)} entries; expected {expected} (one "
                             f"per network layer, as the descriptors of the {len(layers)} "
                             "passes imply); damaged")
    return {"config": config, "config_hash": config.hash, "batch": int(meta["batch"]),
            "descriptors": descriptors,
            "layers": layers, "images": images, "input": MatrixSpec.from_dict(meta["input"]),
            "output": output, "macs_per_row": int(meta["macs_per_row"]),
            "padded_macs_per_row": int(meta["padded_macs_per_row"]), "layer_outputs": kept,
            "output_mode": output_mode(meta.get("output_mode", "scores"), "the file's "
                                       "output_mode", spec=output),
            **_output_function(meta)}


def _output_function(meta):
    """Return the program's output function and scale (absent before they were kept: None)."""
    scale = meta.get("output_scale")
    if scale is not None:
        if not isinstance(scale, list) or not all(isinstance(v, int | float) for v in scale):
            raise ValueError(f"output_scale is {scale!r}; allowed: null or a list of numbers")
        scale = tuple(float(v) for v in scale)
    return {"output_function": check_output_function(meta.get("output_function"), "the file"),
            "output_scale": scale}
