"""Compile a quantized network into the memory images and layer descriptors of an accelerator.

:func:`compile_network` (also :func:`hwgen.compile`) checks a :class:`hwgen.nn.QuantizedNetwork`
against an :class:`~hwgen.config.AcceleratorConfig` and lays it out in the memories of
:mod:`hwgen.memmap`:

- :attr:`~hwgen.memmap.Region.WEIGHT`: words of ``cols`` signed ``w_bits`` lanes. Weight tile
  ``(nt, kt)`` of a layer with ``k_tiles = ceil(K / rows)`` occupies the ``rows`` words from
  ``w_base + (nt * k_tiles + kt) * rows``; row ``i``, lane ``j`` holds
  ``W[kt * rows + i, nt * cols + j]`` (zero beyond ``K`` or ``N``). Layers follow one another.
- :attr:`~hwgen.memmap.Region.PARAM`: words of ``cols`` lanes of
  :func:`~hwgen.memmap.param_lane_layout`; output tile ``nt`` is word ``p_base + nt``, lane ``j``
  is channel ``nt * cols + j`` (bias, mult and shift all zero beyond ``N``).
- :attr:`~hwgen.memmap.Region.ACT`: words of ``B = act_lanes`` signed ``in_bits`` lanes. A matrix
  ``[M, F]`` at ``base`` with ``stride = ceil(F / B)`` keeps element ``(m, f)`` in word
  ``base + m * stride + f // B``, lane ``f % B``. The network input starts at word 0; layers
  alternate between two disjoint areas (area 0 from word 0, area 1 right after area 0's largest
  matrix at the compiled batch), so that no layer overwrites what it reads.
- :attr:`~hwgen.memmap.Region.OUTPUT` (a last layer with ``output="raw"`` only): words of
  ``cols`` signed ``acc_bits`` lanes, element ``(m, n)`` in word ``m * stride + n // cols``,
  lane ``n % cols``, with ``stride = ceil(N / cols)``.
- :attr:`~hwgen.memmap.Region.PROGRAM`: one descriptor per layer, laid out by
  :func:`~hwgen.memmap.descriptor_layout` for the configuration.

Every word is a Python ``int``: the unsigned value of its bits, lane ``j`` at bit
``j * lane_bits``, each lane in two's complement.
"""

import dataclasses
import hashlib
import json
import math
import numbers
import zipfile
import zlib

import numpy as np

from .config import AcceleratorConfig
from .memmap import (
    Region,
    descriptor_layout,
    descriptor_limits,
    param_lane_layout,
    regions,
)
from .nn import QuantizedNetwork, accumulator_bound

__all__ = ["FORMAT_VERSION", "CompileError", "LayerSpec", "MatrixSpec", "Program",
           "compile_network"]

#: Version of the file written by :meth:`Program.save`; other versions are refused on load.
FORMAT_VERSION = 2  # 2: descriptors laid out per configuration
_FORMAT_NAME = "hwgen-program"

# Regions whose images a program carries; ACT and OUTPUT hold run-time data only.
_IMAGE_REGIONS = (Region.PROGRAM, Region.WEIGHT, Region.PARAM)

# Words packed per NumPy pass, so that the bit arrays of a large weight memory stay small.
_CHUNK_WORDS = 4096


class CompileError(ValueError):
    """A network does not fit an accelerator configuration.

    Attributes
    ----------
    layer : int or None
        Index of the layer concerned, ``None`` for the network as a whole.
    resource : str
        What does not fit, e.g. ``"weight_depth"`` or ``"acc_bits"``.
    need, limit : int
        What the network needs and what the configuration allows.
    """

    def __init__(self, message, *, layer=None, resource=None, need=None, limit=None):
        self.layer = layer
        self.resource = resource
        self.need = need
        self.limit = limit
        where = "network" if layer is None else f"layer {layer}"
        super().__init__(f"{where}: {message}")


@dataclasses.dataclass(frozen=True)
class MatrixSpec:
    """Where a matrix of a program's input or output lives in device memory.

    Row ``m``, feature ``f`` is lane ``f % lanes`` of word ``base + m * stride + f // lanes`` of
    ``region``; lanes are signed ``lane_bits`` wide.

    Attributes
    ----------
    region : Region
    base, stride, features, lanes, lane_bits : int
    kind : str
        ``"input"``, ``"requant"`` (saturated activations) or ``"raw"`` (accumulators).
    """

    region: Region
    base: int
    stride: int
    features: int
    lanes: int
    lane_bits: int
    kind: str

    def to_dict(self):
        """Return the fields as plain JSON-friendly values."""
        d = dataclasses.asdict(self)
        d["region"] = self.region.name
        return d

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`."""
        return cls(**{**d, "region": Region[d["region"]]})


@dataclasses.dataclass(frozen=True)
class LayerSpec:
    """One compiled layer, for people and tools: its shape, tiling and memory footprint.

    Attributes
    ----------
    k, n : int
        Inputs and outputs of the layer.
    k_tiles, n_tiles : int
    activation, output : str
        As in :class:`hwgen.nn.Dense`.
    w_base, w_words, p_base, p_words : int
        Location and size of the layer's images in WEIGHT and PARAM.
    """

    k: int
    n: int
    k_tiles: int
    n_tiles: int
    activation: str
    output: str
    w_base: int
    w_words: int
    p_base: int
    p_words: int


# -- word packing -----------------------------------------------------------------------------

def _word_bytes(bits):
    return max(1, math.ceil(bits / 8))


def _pack_words(fields, count, lanes, lane_bits):
    """Return ``count`` words of ``lanes`` lanes of ``lane_bits`` bits each, as Python ints.

    ``fields`` holds ``(values, offset, width)``: ``values`` an int64 array ``(count, lanes)``
    whose low ``width`` bits (two's complement) go to bits ``offset ..`` of every lane.
    """
    words = []
    weights = [np.arange(width, dtype=np.uint64) for _, _, width in fields]
    for start in range(0, count, _CHUNK_WORDS):
        stop = min(start + _CHUNK_WORDS, count)
        bits = np.zeros((stop - start, lanes, lane_bits), dtype=np.uint8)
        for (values, offset, width), shifts in zip(fields, weights, strict=True):
            u = np.ascontiguousarray(values[start:stop], dtype=np.int64).view(np.uint64)
            bits[:, :, offset:offset + width] = (u[..., None] >> shifts) & np.uint64(1)
        packed = np.packbits(bits.reshape(stop - start, lanes * lane_bits), axis=1,
                             bitorder="little")
        words.extend(int.from_bytes(row.tobytes(), "little") for row in packed)
    return words


def _unpack_words(words, lanes, lane_bits):
    """Return the signed lanes of ``words`` as an int64 array ``(len(words), lanes)``."""
    nbytes = _word_bytes(lanes * lane_bits)
    raw = b"".join(w.to_bytes(nbytes, "little") for w in words)
    arr = np.frombuffer(raw, dtype=np.uint8).reshape(len(words), nbytes)
    bits = np.unpackbits(arr, axis=1, bitorder="little")[:, :lanes * lane_bits]
    bits = bits.reshape(len(words), lanes, lane_bits).astype(np.uint64)
    u = (bits << np.arange(lane_bits, dtype=np.uint64)).sum(axis=2, dtype=np.uint64)
    if lane_bits < 64:
        # Subtract 2**lane_bits from negative lanes; uint64 wraps, the int64 view is exact.
        u = u - ((u >> np.uint64(lane_bits - 1)) << np.uint64(lane_bits))
    return u.view(np.int64)


def _words_to_bytes(words, word_bits):
    nbytes = _word_bytes(word_bits)
    raw = b"".join(w.to_bytes(nbytes, "little") for w in words)
    return np.frombuffer(raw, dtype=np.uint8).reshape(len(words), nbytes)


def _check_words(words, word_bits, what):
    """Return ``words`` as a list of ints, or raise ``ValueError`` naming ``what``."""
    out = []
    high = 1 << word_bits
    for index, word in enumerate(words):
        if not isinstance(word, numbers.Integral) or isinstance(word, bool | np.bool_):
            raise ValueError(f"{what}: word {index} is {type(word).__name__} {word!r}; "
                             "allowed: an integer")
        value = int(word)
        if not 0 <= value < high:
            raise ValueError(f"{what}: word {index} is {value}; allowed: 0..2**{word_bits} - 1 "
                             f"(unsigned {word_bits}-bit words)")
        out.append(value)
    return out


def _descriptor_fields(config):
    """Return ``[(name, offset, width)]`` of :func:`descriptor_layout`."""
    return [(name, field.offset, field.width) for name, field in descriptor_layout(config)]


def _pack_descriptor(config, values):
    return descriptor_layout(config).const(values).as_value().value


def _unpack_descriptor(config, word):
    return {name: (word >> offset) & ((1 << width) - 1)
            for name, offset, width in _descriptor_fields(config)}


# -- the program ------------------------------------------------------------------------------

def check_input_rows(x, features, bits, what, *, rows="M"):
    """Return ``x`` as an int64 ``[rows, features]`` array of signed ``bits``-bit integers.

    Raises
    ------
    ValueError
        Starting with ``what``: not an array, a non-integer dtype or element, a wrong shape, or
        the first value outside the signed range (with its index).
    """
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: x is not an array ({exc}); allowed: integers of shape "
                         f"({rows}, {features})") from None
    if arr.dtype == object:
        bad = [v for v in arr.flat
               if not isinstance(v, numbers.Integral) or isinstance(v, bool | np.bool_)]
        if bad:
            raise ValueError(f"{what}: x holds {type(bad[0]).__name__} {bad[0]!r}; allowed: "
                             "integers")
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{what}: x has dtype {arr.dtype}; allowed: an integer dtype "
                         "(quantize float inputs first, e.g. QuantizedNetwork.quantize_input)")
    if arr.ndim != 2 or arr.shape[1] != features:
        hint = f" (one row: x.reshape(1, {features}))" if arr.ndim == 1 else ""
        raise ValueError(f"{what}: x has shape {arr.shape}; allowed: ({rows}, {features}){hint}")
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if arr.size:
        values = arr.astype(object) if arr.dtype == object else arr
        bad = np.argwhere((values < low) | (values > high))
        if len(bad):
            r, c = (int(i) for i in bad[0])
            raise ValueError(f"{what}: x[{r}, {c}] = {arr[r, c]} is outside signed "
                             f"in_bits={bits} ({low}..{high})")
    return arr.astype(np.int64)


@dataclasses.dataclass(frozen=True, eq=True)
class Program:
    """A network compiled for one accelerator configuration: memory images and descriptors.

    Built by :func:`compile_network` or :meth:`load`; treat it as read-only. To run it, write
    every entry of :attr:`images` to its region at its base, write :meth:`pack_input` words at
    :attr:`input` ``.base`` of ACT, start the program on ``m <= batch`` rows, read
    :meth:`output_words` and decode them with :meth:`unpack_output`.

    Attributes
    ----------
    config : AcceleratorConfig
    config_hash : str
        ``config.hash``, as the device reports it.
    batch : int
        Rows one run can process (1..``acc_depth``); the activation and output memories are laid
        out for it.
    descriptors : tuple of dict
        The fields of each layer's descriptor (:func:`~hwgen.memmap.descriptor_layout`),
        by name.
    layers : tuple of LayerSpec
    images : dict
        ``{Region: (base, [word, ...])}`` for PROGRAM, WEIGHT and PARAM.
    input, output : MatrixSpec
        Where the network's input goes and where its output appears.
    macs_per_row : int
        ``sum K * N`` over the layers: useful multiply-accumulates per input row.
    padded_macs_per_row : int
        ``sum k_tiles * rows * n_tiles * cols``: what the array performs per input row.
    """

    config: AcceleratorConfig
    config_hash: str
    batch: int
    descriptors: tuple
    layers: tuple
    images: dict
    input: MatrixSpec
    output: MatrixSpec
    macs_per_row: int
    padded_macs_per_row: int

    # -- running --------------------------------------------------------------------------------

    def _check_rows(self, m, what):
        if not isinstance(m, numbers.Integral) or isinstance(m, bool) or not 0 <= m <= self.batch:
            raise ValueError(f"{what}: m={m!r} rows; allowed: an integer in 0..{self.batch} "
                             "(the compiled batch)")
        return int(m)

    def pack_input(self, x):
        """Return the ACT words of the input rows ``x``, to be written at :attr:`input` base.

        Parameters
        ----------
        x : array_like of int, shape (M, K)
            Signed ``in_bits`` inputs, ``0 <= M <= batch``, ``K`` the network's input width.

        Returns
        -------
        list of int
            ``M * input.stride`` words; lanes beyond ``K`` are zero.

        Raises
        ------
        ValueError
            Naming the problem: a non-integer dtype, a wrong shape, too many rows or a value
            outside signed ``in_bits``.
        """
        spec = self.input
        arr = check_input_rows(x, spec.features, spec.lane_bits, "pack_input", rows="M")
        m = arr.shape[0]
        if m > self.batch:
            raise ValueError(f"pack_input: x has {m} rows; allowed: at most batch={self.batch} "
                             "per run (split larger inputs)")
        padded = np.zeros((m, spec.stride * spec.lanes), dtype=np.int64)
        padded[:, :spec.features] = arr.astype(np.int64)
        lanes = padded.reshape(m * spec.stride, spec.lanes)
        return _pack_words([(lanes, 0, spec.lane_bits)], len(lanes), spec.lanes, spec.lane_bits)

    def output_words(self, m):
        """Return ``(region, base, count)``: the words to read back after a run on ``m`` rows."""
        m = self._check_rows(m, "output_words")
        return self.output.region, self.output.base, m * self.output.stride

    def unpack_output(self, words, m):
        """Decode the words read from :meth:`output_words` into the network's output.

        Parameters
        ----------
        words : sequence of int
            Exactly ``m * output.stride`` words of the output region, from its base.
        m : int
            Rows of the run, ``0 .. batch``.

        Returns
        -------
        numpy.ndarray of int64, shape (m, N)
            Saturated activations (``requant``) or accumulators (``raw``), as
            :meth:`hwgen.nn.QuantizedNetwork.forward` returns them. Padding lanes are ignored.

        Raises
        ------
        ValueError
            If ``m`` is out of range, the word count is wrong or a word is not an unsigned
            integer of the region's width.
        """
        m = self._check_rows(m, "unpack_output")
        spec = self.output
        words = list(words)
        if len(words) != m * spec.stride:
            raise ValueError(f"unpack_output: got {len(words)} words for m={m} rows; "
                             f"allowed: exactly m * stride = {m * spec.stride}")
        words = _check_words(words, spec.lanes * spec.lane_bits, "unpack_output")
        lanes = _unpack_words(words, spec.lanes, spec.lane_bits)
        return lanes.reshape(m, spec.stride * spec.lanes)[:, :spec.features].copy()

    # -- reporting ------------------------------------------------------------------------------

    def summary(self):
        """Return a short table of the layers and the memory use, for people."""
        c = self.config
        lines = [f"program for {c.name} (config {self.config_hash}), batch {self.batch}",
                 f"{'layer':>5} {'K':>6} {'N':>6} {'k_tiles':>7} {'n_tiles':>7} "
                 f"{'activation':<10} {'output':<7} {'weights':>7} {'params':>6}"]
        for index, layer in enumerate(self.layers):
            activation = "-" if layer.output == "raw" else layer.activation
            lines.append(f"{index:>5} {layer.k:>6} {layer.n:>6} {layer.k_tiles:>7} "
                         f"{layer.n_tiles:>7} {activation:<10} {layer.output:<7} "
                         f"{layer.w_words:>7} {layer.p_words:>6}")
        geometry = regions(c)
        used = ", ".join(f"{r.name} {len(self.images[r][1])}/{geometry[r].depth}"
                         for r in _IMAGE_REGIONS)
        useful = 100 * self.macs_per_row / self.padded_macs_per_row
        lines += [f"words used: {used}",
                  f"input: ACT[{self.input.base}] stride {self.input.stride}; output: "
                  f"{self.output.region.name}[{self.output.base}] stride {self.output.stride} "
                  f"({self.output.kind})",
                  f"MACs per row: {self.macs_per_row} useful of {self.padded_macs_per_row} "
                  f"issued ({useful:.1f} %)"]
        return "\n".join(lines)

    # -- files ----------------------------------------------------------------------------------

    def _metadata(self):
        return {
            "format": _FORMAT_NAME,
            "version": FORMAT_VERSION,
            "config": self.config.to_dict(),
            "config_hash": self.config_hash,
            "batch": self.batch,
            "descriptors": list(self.descriptors),
            "layers": [dataclasses.asdict(layer) for layer in self.layers],
            "images": {r.name: {"base": self.images[r][0], "words": len(self.images[r][1])}
                       for r in _IMAGE_REGIONS},
            "digests": {name: hashlib.sha256(array.tobytes()).hexdigest()
                        for name, array in self._image_bytes().items()},
            "input": self.input.to_dict(),
            "output": self.output.to_dict(),
            "macs_per_row": self.macs_per_row,
            "padded_macs_per_row": self.padded_macs_per_row,
        }

    def _image_bytes(self):
        geometry = regions(self.config)
        return {r.name: _words_to_bytes(self.images[r][1], geometry[r].word_bits)
                for r in _IMAGE_REGIONS}

    def save(self, path):
        """Write the program to one ``.npz`` file at ``path`` (exactly that name).

        The file holds a JSON metadata entry and one byte array per image (little-endian
        words); :meth:`load` needs neither the network nor the training code.
        """
        arrays = self._image_bytes()
        meta = np.frombuffer(json.dumps(self._metadata()).encode(), dtype=np.uint8)
        with open(path, "wb") as f:
            np.savez_compressed(f, meta=meta, **arrays)

    @classmethod
    def load(cls, path):
        """Read a program written by :meth:`save`.

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
            return cls._from_arrays(arrays)
        except (KeyError, TypeError, ValueError, AttributeError, UnicodeDecodeError) as exc:
            detail = f"missing entry {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ValueError(f"{path}: {detail}") from None

    @classmethod
    def _from_arrays(cls, arrays):
        if "meta" not in arrays:
            raise ValueError("no 'meta' entry; not an hwgen program file")
        try:
            meta = json.loads(arrays["meta"].tobytes().decode())
        except json.JSONDecodeError as exc:
            raise ValueError(f"the metadata is not JSON ({exc}); damaged") from None
        if not isinstance(meta, dict) or meta.get("format") != _FORMAT_NAME:
            raise ValueError(f"format is {meta.get('format') if isinstance(meta, dict) else None!r}"
                             f"; allowed: {_FORMAT_NAME!r}")
        if meta.get("version") != FORMAT_VERSION:
            raise ValueError(f"format version {meta.get('version')!r} is not supported; "
                             f"allowed: {FORMAT_VERSION}")
        config = AcceleratorConfig.from_dict(meta["config"])
        if config.hash != meta["config_hash"]:
            raise ValueError(f"config hash {meta['config_hash']!r} does not match the stored "
                             f"configuration ({config.hash}); the file is damaged")
        geometry = regions(config)
        images = {}
        for region in _IMAGE_REGIONS:
            info = meta["images"][region.name]
            data = arrays[region.name]
            nbytes = _word_bytes(geometry[region].word_bits)
            if data.dtype != np.uint8 or data.shape != (info["words"], nbytes):
                raise ValueError(f"image {region.name} has {data.dtype} {data.shape}; "
                                 f"expected uint8 ({info['words']}, {nbytes}); damaged")
            if hashlib.sha256(data.tobytes()).hexdigest() != meta["digests"][region.name]:
                raise ValueError(f"image {region.name} does not match its digest; damaged")
            words = [int.from_bytes(row.tobytes(), "little") for row in data]
            words = _check_words(words, geometry[region].word_bits, f"image {region.name}")
            base = int(info["base"])
            if base < 0 or base + len(words) > geometry[region].depth:
                raise ValueError(f"image {region.name} spans words {base}..{base + len(words)}; "
                                 f"allowed: within depth {geometry[region].depth}")
            images[region] = (base, words)
        descriptors = tuple(meta["descriptors"])
        decoded = tuple(_unpack_descriptor(config, w) for w in images[Region.PROGRAM][1])
        if decoded != descriptors:
            raise ValueError("the PROGRAM image does not match the stored descriptors; damaged")
        return cls(config=config, config_hash=config.hash, batch=int(meta["batch"]),
                   descriptors=descriptors,
                   layers=tuple(LayerSpec(**layer) for layer in meta["layers"]),
                   images=images, input=MatrixSpec.from_dict(meta["input"]),
                   output=MatrixSpec.from_dict(meta["output"]),
                   macs_per_row=int(meta["macs_per_row"]),
                   padded_macs_per_row=int(meta["padded_macs_per_row"]))


# -- the compiler -----------------------------------------------------------------------------

def _check_widths(network, config):
    for name in ("in_bits", "w_bits"):
        have, want = getattr(network, name), getattr(config, name)
        if have != want:
            raise CompileError(f"network {name}={have} does not match the accelerator; "
                               f"allowed: {name}={want}", resource=name, need=have, limit=want)
    for name in ("acc_bits", "mult_bits"):
        have, limit = getattr(network, name), getattr(config, name)
        if have > limit:
            raise CompileError(f"network {name}={have} is wider than the accelerator's; "
                               f"allowed: {name} <= {limit}", resource=name, need=have,
                               limit=limit)


def _check_layer(index, layer, config):
    """Check the batch-independent limits of one layer against ``config``."""
    k = layer.weight.shape[0]
    if k > config.max_k:
        raise CompileError(f"K={k} inputs exceed the largest reduction of the accelerator; "
                           f"limit max_k={config.max_k}", layer=index, resource="max_k",
                           need=k, limit=config.max_k)
    bound = accumulator_bound(layer, config.in_bits)
    limit = (1 << (config.acc_bits - 1)) - 1
    if bound > limit:
        raise CompileError(
            f"cannot prove that no accumulator can leave acc_bits={config.acc_bits}: the "
            f"worst-case partial sum (2**(in_bits-1) * sum_k |W[k, n]| + |b[n]|, K={k}) needs "
            f"magnitude {bound}; limit 2**{config.acc_bits - 1} - 1 = {limit} (smaller weights "
            "or bias, or a design with wider acc_bits)",
            layer=index, resource="acc_bits", need=bound, limit=limit)
    shift_high = config.acc_bits + config.mult_bits - 1
    checks = (("shift", layer.shift, 0, shift_high, "acc_bits + mult_bits - 1"),
              ("mult", layer.mult, 0, (1 << config.mult_bits) - 1, "unsigned mult_bits"),
              ("bias", layer.bias, -(1 << (config.acc_bits - 1)), limit, "signed acc_bits"))
    for field, values, low, high, what in checks:
        bad = np.flatnonzero((values < low) | (values > high))
        if bad.size:
            channel = int(bad[0])
            raise CompileError(f"{field}[{channel}]={int(values[channel])} does not fit the "
                               f"accelerator; allowed: {low}..{high} ({what})", layer=index,
                               resource=field, need=int(values[channel]), limit=high)


def _check_field(config, index, name, value):
    # The checks before packing imply every bound; this one guards descriptor_limits itself.
    limit = descriptor_limits(config).get(name, 1)
    if value > limit:
        raise CompileError(f"descriptor field {name}={value} exceeds its bound; limit {limit} "
                           "(hwgen.memmap.descriptor_limits)", layer=index, resource=name,
                           need=value, limit=limit)


def _weight_image(layer, config):
    """Return the weight words of ``layer``, tile by tile as documented in the module."""
    r, c = config.rows, config.cols
    k, n = layer.weight.shape
    k_tiles, n_tiles = config.tiles(k, n)
    padded = np.zeros((k_tiles * r, n_tiles * c), dtype=np.int64)
    padded[:k, :n] = layer.weight
    # (kt, i, nt, j) -> (nt, kt, i, j): word (nt * k_tiles + kt) * rows + i, lane j.
    tiles = padded.reshape(k_tiles, r, n_tiles, c).transpose(2, 0, 1, 3)
    lanes = tiles.reshape(n_tiles * k_tiles * r, c)
    return _pack_words([(lanes, 0, config.w_bits)], len(lanes), c, config.w_bits)


def _param_image(layer, config):
    """Return the parameter words of ``layer``: one per output tile, zero beyond ``N``."""
    c = config.cols
    n = layer.weight.shape[1]
    n_tiles = math.ceil(n / c)
    layout = param_lane_layout(config)
    fields = []
    for name, field in layout:
        values = np.zeros(n_tiles * c, dtype=np.int64)
        values[:n] = getattr(layer, name)
        fields.append((values.reshape(n_tiles, c), field.offset, field.width))
    return _pack_words(fields, n_tiles, c, layout.size)


def _largest_batch(config, act_per_row, out_per_row):
    batch = min(config.acc_depth, config.act_depth // act_per_row)
    if out_per_row:
        batch = min(batch, config.out_depth // out_per_row)
    return max(batch, 1)  # batch 1 is then checked and refused with the reason


def compile_network(network, config, *, batch=None):
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

    Returns
    -------
    Program

    Raises
    ------
    TypeError
        If ``network`` is not a :class:`~hwgen.nn.QuantizedNetwork`, ``config`` not an
        :class:`AcceleratorConfig` or ``batch`` not an integer.
    CompileError
        A :class:`ValueError` naming the layer, what does not fit, the need and the limit:
        mismatched widths, ``K > max_k``, an accumulator that could leave ``acc_bits``, a
        parameter outside the accelerator's widths, too many layers (``prog_depth``), weights
        (``weight_depth``), parameters (``param_depth``), activations (``act_depth``) or raw
        outputs (``out_depth``) at the batch, a batch outside ``1 .. acc_depth`` or a
        descriptor field beyond its bound.
    ValueError
        If the network itself is inconsistent (see :meth:`QuantizedNetwork.validate`).
    """
    if not isinstance(network, QuantizedNetwork):
        raise TypeError(f"compile: network is {type(network).__name__}; "
                        "allowed: hwgen.nn.QuantizedNetwork")
    if not isinstance(config, AcceleratorConfig):
        raise TypeError(f"compile: config is {type(config).__name__}; "
                        "allowed: hwgen.AcceleratorConfig")
    if batch is not None and (not isinstance(batch, numbers.Integral) or isinstance(batch, bool)):
        raise TypeError(f"compile: batch={batch!r}; allowed: an integer or None")
    network.validate()  # layers are mutable: check them as they are now
    _check_widths(network, config)
    layers = network.layers
    if len(layers) > config.prog_depth:
        raise CompileError(f"the network has {len(layers)} layers, more than the program "
                           f"memory holds; limit prog_depth={config.prog_depth}",
                           layer=config.prog_depth, resource="prog_depth", need=len(layers),
                           limit=config.prog_depth)

    # Weights and parameters do not depend on the batch: place and check them first.
    specs, w_images, p_images = [], [], []
    w_base = p_base = 0
    for index, layer in enumerate(layers):
        _check_layer(index, layer, config)
        k, n = layer.weight.shape
        k_tiles, n_tiles = config.tiles(k, n)
        w_words, p_words = n_tiles * k_tiles * config.rows, n_tiles
        for what, need, depth in (("weight", w_base + w_words, "weight_depth"),
                                  ("parameter", p_base + p_words, "param_depth")):
            limit = getattr(config, depth)
            if need > limit:
                raise CompileError(f"{what} words do not fit: layers 0..{index} need {need} "
                                   f"words; limit {depth}={limit}", layer=index,
                                   resource=depth, need=need, limit=limit)
        specs.append(LayerSpec(k=k, n=n, k_tiles=k_tiles, n_tiles=n_tiles,
                               activation=layer.activation, output=layer.output,
                               w_base=w_base, w_words=w_words, p_base=p_base, p_words=p_words))
        w_base += w_words
        p_base += p_words

    # Activation matrix i is the input of layer i (i < L) or the output of the last layer; it
    # lives in area i % 2, so that each layer reads one area and writes the other.
    lanes = config.act_lanes
    raw = layers[-1].output == "raw"
    features = [network.in_features] + [s.n for s in specs[:len(specs) - raw]]
    strides = [math.ceil(f / lanes) for f in features]
    area_rows = [max(strides[0::2]), max(strides[1::2], default=0)]
    out_stride = math.ceil(specs[-1].n / config.cols) if raw else 0

    chosen = batch is None
    if chosen:
        batch = _largest_batch(config, sum(area_rows), out_stride)
    batch = int(batch)
    # When the batch was chosen, a refusal below means that not even one row fits.
    hint = " (not even batch=1 fits)" if chosen else ""
    if batch < 1 or batch > config.acc_depth:
        raise CompileError(f"batch={batch} is outside the rows one run can process; allowed: "
                           f"1..{config.acc_depth} (acc_depth, the largest batch per run)",
                           resource="batch", need=batch, limit=config.acc_depth)
    act_need = batch * sum(area_rows)
    if act_need > config.act_depth:
        widest = max(range(len(strides)), key=lambda i: strides[i])
        what = (f"input of layer {widest}" if widest < len(specs)
                else f"output of layer {widest - 1}")
        raise CompileError(
            f"activations do not fit at batch={batch}: need {act_need} ACT words ({batch} rows "
            f"x ({area_rows[0]} + {area_rows[1]}) words of the two ping-pong areas; widest: the "
            f"{what}, {features[widest]} features); limit act_depth={config.act_depth}{hint}",
            layer=min(widest, len(specs) - 1), resource="act_depth", need=act_need,
            limit=config.act_depth)
    out_need = batch * out_stride
    if out_need > config.out_depth:
        raise CompileError(f"raw outputs do not fit at batch={batch}: need {out_need} OUTPUT "
                           f"words ({batch} rows x {out_stride} words of {config.cols} "
                           f"accumulators); limit out_depth={config.out_depth}{hint}",
                           layer=len(specs) - 1, resource="out_depth", need=out_need,
                           limit=config.out_depth)

    area_base = [0, batch * area_rows[0]]
    descriptors, words = [], []
    for index, (layer, spec) in enumerate(zip(layers, specs, strict=True)):
        last = index == len(specs) - 1
        is_raw = spec.output == "raw"
        fields = {
            "relu": int(layer.activation == "relu" and not is_raw),
            "raw": int(is_raw),
            "last": int(last),
            "k_tiles": spec.k_tiles,
            "n_tiles": spec.n_tiles,
            "n": spec.n,
            "src_base": area_base[index % 2],
            "src_stride": strides[index],
            "dst_base": 0 if is_raw else area_base[(index + 1) % 2],
            "dst_stride": out_stride if is_raw else strides[index + 1],
            "w_base": spec.w_base,
            "p_base": spec.p_base,
        }
        for name, value in fields.items():
            _check_field(config, index, name, value)
        # Same order as the layout, so that the dicts read like the hardware's struct.
        descriptors.append({name: fields[name] for name, _, _ in _descriptor_fields(config)})
        words.append(_pack_descriptor(config, fields))
        w_images.append(_weight_image(layer, config))
        p_images.append(_param_image(layer, config))

    last_index = len(specs)
    if raw:
        output = MatrixSpec(Region.OUTPUT, 0, out_stride, specs[-1].n, config.cols,
                            config.acc_bits, "raw")
    else:
        output = MatrixSpec(Region.ACT, area_base[last_index % 2], strides[last_index],
                            specs[-1].n, lanes, config.in_bits, "requant")
    return Program(
        config=config,
        config_hash=config.hash,
        batch=batch,
        descriptors=tuple(descriptors),
        layers=tuple(specs),
        images={Region.PROGRAM: (0, words),
                Region.WEIGHT: (0, [w for image in w_images for w in image]),
                Region.PARAM: (0, [w for image in p_images for w in image])},
        input=MatrixSpec(Region.ACT, 0, strides[0], network.in_features, lanes,
                         config.in_bits, "input"),
        output=output,
        macs_per_row=sum(s.k * s.n for s in specs),
        padded_macs_per_row=sum(s.k_tiles * config.rows * s.n_tiles * config.cols
                                for s in specs),
    )
