"""The ``.npz`` file of a compiled program: what :meth:`Program.save` writes and
:meth:`Program.load` reads.

The archive holds ``meta`` (UTF-8 JSON as a uint8 array) and one uint8 array per image region
(``PROGRAM``, ``WEIGHT``, ``PARAM``), ``(words, word_bytes)``, little-endian words. The metadata
names the format and its version, the configuration and its hash, the batch, the descriptors,
the layers, each image's base, word count and SHA-256, the input and output matrices, the MAC
counts and, for a program compiled with read-out, where each layer's output lives
(``layer_outputs``: an optional entry, so files written before read-out existed load as
programs without it). Loading cross-checks all of it and refuses any other version.
"""

import dataclasses
import hashlib
import json
import zipfile
import zlib

import numpy as np

from ..config import AcceleratorConfig
from ..memmap import Region, regions
from .descriptors import pack_layer, unpack_program
from .images import IMAGE_REGIONS
from .specs import LayerSpec, MatrixSpec
from .words import check_words, word_bytes, words_to_bytes

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "READ_VERSIONS", "read", "save"]

#: Version of the file written by :func:`save`; older versions that a program of this
#: version can stand for are converted on load, others refused.
FORMAT_VERSION = 3  # 3: spatial layers (descriptor flags, geometry words); 2: per-config layout
#: Versions :func:`read` takes: version 2 holds matrix layers over rows only, whose
#: descriptors gain the spatial and pool flags (both 0) on load.
READ_VERSIONS = (2, 3)
#: The ``format`` entry of the metadata.
FORMAT_NAME = "hwgen-program"


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
        "layers": [dataclasses.asdict(layer) for layer in program.layers],
        "images": {r.name: {"base": program.images[r][0], "words": len(program.images[r][1])}
                   for r in IMAGE_REGIONS},
        "digests": {name: hashlib.sha256(array.tobytes()).hexdigest()
                    for name, array in arrays.items()},
        "input": program.input.to_dict(),
        "output": program.output.to_dict(),
        "macs_per_row": program.macs_per_row,
        "padded_macs_per_row": program.padded_macs_per_row,
        "layer_outputs": [spec.to_dict() for spec in program.layer_outputs],
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


def _images(meta, arrays, config):
    geometry = regions(config)
    images = {}
    for region in IMAGE_REGIONS:
        info = meta["images"][region.name]
        data = arrays[region.name]
        nbytes = word_bytes(geometry[region].word_bits)
        if data.dtype != np.uint8 or data.shape != (info["words"], nbytes):
            raise ValueError(f"image {region.name} has {data.dtype} {data.shape}; "
                             f"expected uint8 ({info['words']}, {nbytes}); damaged")
        if hashlib.sha256(data.tobytes()).hexdigest() != meta["digests"][region.name]:
            raise ValueError(f"image {region.name} does not match its digest; damaged")
        words = [int.from_bytes(row.tobytes(), "little") for row in data]
        words = check_words(words, geometry[region].word_bits, f"image {region.name}")
        base = int(info["base"])
        if base < 0 or base + len(words) > geometry[region].depth:
            raise ValueError(f"image {region.name} spans words {base}..{base + len(words)}; "
                             f"allowed: within depth {geometry[region].depth}")
        images[region] = (base, words)
    return images


def _from_arrays(arrays):
    meta = _metadata_of(arrays)
    config = AcceleratorConfig.from_dict(meta["config"])
    if config.hash != meta["config_hash"]:
        raise ValueError(f"config hash {meta['config_hash']!r} does not match the stored "
                         f"configuration ({config.hash}); the file is damaged")
    images = _images(meta, arrays, config)
    descriptors = tuple(meta["descriptors"])
    if meta["version"] == 2:
        # The digests vouch for the old image; today's layout adds two flags to it.
        descriptors = tuple({**d, "spatial": 0, "pool": 0} for d in descriptors)
        words = [w for d in descriptors for w in pack_layer(config, d)]
        images[Region.PROGRAM] = (images[Region.PROGRAM][0], words)
        descriptors = unpack_program(config, words)
    decoded = unpack_program(config, images[Region.PROGRAM][1])
    if decoded != descriptors:
        raise ValueError("the PROGRAM image does not match the stored descriptors; damaged")
    layers = tuple(LayerSpec(**layer) for layer in meta["layers"])
    output = MatrixSpec.from_dict(meta["output"])
    kept = tuple(MatrixSpec.from_dict(d) for d in meta.get("layer_outputs", []))
    if kept and kept[-1] != output:
        raise ValueError(f"the last layer output {kept[-1]} is not the output {output}; "
                         "damaged")
    return {"config": config, "config_hash": config.hash, "batch": int(meta["batch"]),
            "descriptors": descriptors,
            "layers": layers, "images": images, "input": MatrixSpec.from_dict(meta["input"]),
            "output": output, "macs_per_row": int(meta["macs_per_row"]),
            "padded_macs_per_row": int(meta["padded_macs_per_row"]), "layer_outputs": kept}
