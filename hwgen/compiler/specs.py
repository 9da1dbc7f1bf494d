"""What a program says about its layers and matrices: plain records, for people and tools."""

import dataclasses

from ..memmap import Region

__all__ = ["LayerSpec", "MatrixSpec"]


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
