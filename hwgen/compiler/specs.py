"""What a program says about its layers and matrices: plain records, for people and tools."""

import dataclasses

from ..memmap import PassKind, Region

__all__ = ["LayerSpec", "MatrixSpec"]


@dataclasses.dataclass(frozen=True)
class MatrixSpec:
    """Where a matrix of a program's input or output lives in device memory.

    A sample takes ``pixels`` rows (its pixels, in ``(y, x)`` order; 1 for a row of features)
    of ``features`` values each (a pixel's channels): row ``r``, feature ``f`` is lane
    ``f % lanes`` of word ``base + r * stride + f // lanes`` of ``region``, rows of one sample
    after another; lanes are signed ``lane_bits`` wide. ``sample_shape`` is how a sample is
    given and returned: ``(H, W, C)`` of an image, ``(F,)`` of a row, or the flat
    ``(H * W * C,)`` of a flattened image (the rows' order).

    Attributes
    ----------
    region : Region
    base, stride, features, lanes, lane_bits : int
    kind : str
        ``"input"``, ``"requant"`` (saturated activations) or ``"raw"`` (accumulators).
    pixels : int
    sample_shape : tuple of int
    wire_bits : int
        Bits of each value on the wire (LOAD, FETCH), two's complement: ``lane_bits`` but for
        a raw output, which the last layer's worst-case accumulator proof bounds
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

    @property
    def words_per_sample(self):
        """Words one sample takes."""
        return self.pixels * self.stride

    def to_dict(self):
        """Return the fields as plain JSON-friendly values."""
        d = dataclasses.asdict(self)
        d["region"] = self.region.name
        d["sample_shape"] = list(self.sample_shape)
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
