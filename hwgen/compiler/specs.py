"""What a program says about its layers and matrices: plain records, for people and tools."""

import dataclasses
import math

from ..memmap import PassKind, Region

__all__ = ["LayerSpec", "MatrixSpec"]


@dataclasses.dataclass(frozen=True)
class MatrixSpec:
    """Where a matrix of a program's input or output lives in device memory.

    A sample takes ``pixels`` rows (its pixels, in ``(y, x)`` order; 1 for a row of features)
    of ``features`` values each (a pixel's channels); lanes are signed ``lane_bits`` wide.
    ``sample_shape`` is how a sample is given and returned: ``(H, W, C)`` of an image,
    ``(F,)`` of a row, or the flat ``(H * W * C,)`` of a flattened image (the rows' order).

    In memory the samples are an *element stream*: sample ``s``, run ``j``, element ``i``
    (``i < run``) is stream element ``E = (s * runs + j) * pitch + lead + i``, lane
    ``E % lanes`` of word ``base + E // lanes`` of ``region``; every other element (the lead,
    the gap up to ``pitch``) is 0. A sample's values, flattened in ``sample_shape`` order, are
    taken ``run`` at a time. The defaults give the per-pixel layout (``runs = pixels``,
    ``run = features``, ``lead = 0``, ``pitch = stride * lanes``: row ``r``, feature ``f`` is
    lane ``f % lanes`` of word ``base + r * stride + f // lanes``); a first convolution's taps
    layout stores an image row per run (``runs = H``, ``run = W * C``, ``lead = pad_left * C``).

    Attributes
    ----------
    region : Region
    base, stride, features, lanes, lane_bits : int
    kind : str
        ``"input"``, ``"requant"`` (saturated activations) or ``"raw"`` (accumulators).
    pixels : int
    sample_shape : tuple of int
    runs, run, lead, pitch : int
        The element stream (``None``: the per-pixel layout's value).
    wire_bits : int
        Bits of each value on the wire (LOAD, FETCH), two's complement: ``lane_bits`` but for
        a raw output, which the last layer's accumulator proof bounds
        (:mod:`hwgen.compiler.wire`); None: ``lane_bits``.
    """

    region: Region
    base: int
    stride: int
    features: int
    lanes: int
    lane_bits: int
    kind: str
    pixels: int = 1
    sample_shape: tuple = None
    runs: int = None
    run: int = None
    lead: int = 0
    pitch: int = None
    wire_bits: int = None

    def __post_init__(self):
        if self.wire_bits is None:
            object.__setattr__(self, "wire_bits", self.lane_bits)
        if not 1 <= self.wire_bits <= self.lane_bits:
            raise ValueError(f"MatrixSpec: wire_bits={self.wire_bits}; allowed: "
                             f"1..lane_bits={self.lane_bits}")
        if self.sample_shape is None:
            object.__setattr__(self, "sample_shape", (self.features,))
        object.__setattr__(self, "sample_shape", tuple(int(v) for v in self.sample_shape))
        for name, value in self._stream_defaults().items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.runs * self.run != self.pixels * self.features:
            raise ValueError(f"MatrixSpec: runs={self.runs} of run={self.run} elements hold "
                             f"{self.runs * self.run} values; allowed: pixels * features = "
                             f"{self.pixels * self.features}")
        if self.lead < 0 or self.run < 0 or self.pitch < self.lead + self.run:
            raise ValueError(f"MatrixSpec: lead={self.lead}, run={self.run}, "
                             f"pitch={self.pitch}; allowed: 0 <= lead, 0 <= run, "
                             "lead + run <= pitch")

    def _stream_defaults(self):
        return {"runs": self.pixels, "run": self.features, "lead": 0,
                "pitch": self.stride * self.lanes}

    @property
    def per_pixel(self):
        """Whether the stream is the per-pixel layout (every stream field at its default)."""
        return all(getattr(self, name) == value
                   for name, value in self._stream_defaults().items())

    @property
    def words_per_sample(self):
        """Words one sample takes in the per-pixel layout (see :meth:`words`)."""
        return self.pixels * self.stride

    def words(self, m):
        """Return the words ``m`` samples take: ``ceil(m * runs * pitch / lanes)``."""
        return math.ceil(m * self.runs * self.pitch / self.lanes)

    def to_dict(self):
        """Return the fields as plain JSON-friendly values (the stream's only where they are
        not the per-pixel layout's)."""
        d = dataclasses.asdict(self)
        d["region"] = self.region.name
        d["sample_shape"] = list(self.sample_shape)
        if self.per_pixel:
            for name in self._stream_defaults():
                del d[name]
        if self.wire_bits == self.lane_bits:
            del d["wire_bits"]
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
        Inputs (``KH * KW * C`` of a convolution) and outputs of the layer; a pooling pass has
        ``k = 0`` and ``n`` its channels.
    k_tiles, n_tiles : int
    activation, output : str
        As in :class:`hwgen.nn.Dense`.
    w_base, w_words, p_base, p_words : int
        Location and size of the layer's images in WEIGHT and PARAM.
    kind : PassKind
        The pass's kind (:mod:`hwgen.passes`).
    pixels : int
        Output pixels per sample (rows of the layer's output matrix per sample).
    source : int or None
        The network layer whose output the pass computes.
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
    kind: PassKind = PassKind.MATRIX
    pixels: int = 1
    source: int | None = None

    def to_dict(self):
        """Return the fields as plain JSON-friendly values (the kind by its name)."""
        return {**dataclasses.asdict(self), "kind": self.kind.name}

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict`; a missing ``kind`` is a matrix pass's.

        Raises
        ------
        ValueError
            If ``kind`` names no :class:`~hwgen.memmap.PassKind`, naming the allowed ones.
        """
        name = d.get("kind", PassKind.MATRIX.name)
        if name not in PassKind.__members__:
            raise ValueError(f"layer kind {name!r} is not a pass kind; allowed: "
                             f"{', '.join(PassKind.__members__)}")
        return cls(**{**d, "kind": PassKind[name]})
