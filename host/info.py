"""What a device says of itself: the INFO payload of :mod:`hwgen.protocol`, decoded.

:class:`DeviceInfo` is what a host checks on opening a device (protocol version, the hash of
the configuration it was built from, the geometry of its memories) and what it needs to talk
to it (its payload buffer, its batch capacity).
"""

import dataclasses

from hwgen.config import DATAFLOWS
from hwgen.memmap import Region, RegionGeometry, regions
from hwgen.protocol import (
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    InfoHeader,
    RegionInfo,
    layout_bytes,
    read_chunk_words,
    unpack_layout,
    write_chunk_words,
)

__all__ = ["DeviceInfo", "unpack_info"]


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """Decoded INFO payload: what a host needs to check and to talk to a device.

    ``regions`` maps every :class:`~hwgen.memmap.Region` to its
    :class:`~hwgen.memmap.RegionGeometry`; ``dataflow`` is a string of
    :data:`hwgen.config.DATAFLOWS`.
    """

    version: int
    config_hash: int
    rows: int
    cols: int
    dataflow: str
    in_bits: int
    w_bits: int
    acc_bits: int
    mult_bits: int
    max_payload: int
    acc_depth: int
    regions: dict

    @classmethod
    def from_config(cls, config, max_payload=MAX_PAYLOAD):
        """Return what a device built from ``config`` reports."""
        return cls(
            version=PROTOCOL_VERSION, config_hash=config.hash_int, rows=config.rows,
            cols=config.cols, dataflow=config.dataflow, in_bits=config.in_bits,
            w_bits=config.w_bits, acc_bits=config.acc_bits, mult_bits=config.mult_bits,
            max_payload=max_payload, acc_depth=config.acc_depth, regions=regions(config))

    def mismatches(self, config):
        """Return a list of ``"name: device X, config Y"`` for every disagreement with
        ``config`` (empty when the device was built from ``config`` with this protocol)."""
        expect = DeviceInfo.from_config(config, self.max_payload)
        return [f"{f.name}: device {getattr(self, f.name)!r}, expected {getattr(expect, f.name)!r}"
                for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(expect, f.name)]

    def write_chunk_words(self, region):
        """Most words of ``region`` one WRITE can carry."""
        return write_chunk_words(self.regions[region], self.max_payload)

    def read_chunk_words(self, region):
        """Most words of ``region`` one READ can return."""
        return read_chunk_words(self.regions[region], self.max_payload)


def unpack_info(payload):
    """Return the :class:`DeviceInfo` of an INFO payload.

    Raises
    ------
    ValueError
        If the payload is not a whole INFO record, or it names a dataflow or region this host does
        not know.
    """
    n = layout_bytes(InfoHeader)
    head = unpack_layout(InfoHeader, payload[:n])
    rsize = layout_bytes(RegionInfo)
    if len(payload) != n + head["n_regions"] * rsize:
        raise ValueError(f"INFO payload of {len(payload)} bytes does not hold "
                         f"{head['n_regions']} regions")
    if head["dataflow"] >= len(DATAFLOWS):
        raise ValueError(f"INFO names unknown dataflow {head['dataflow']}")
    if head["n_regions"] > len(Region):
        raise ValueError(f"INFO names {head['n_regions']} regions; this host knows {len(Region)}")
    geometries = {}
    for i in range(head.pop("n_regions")):
        rec = unpack_layout(RegionInfo, payload[n + i * rsize:n + (i + 1) * rsize])
        geometries[Region(i)] = RegionGeometry(Region(i), rec["word_bits"], rec["depth"])
    head["dataflow"] = DATAFLOWS[head["dataflow"]]
    return DeviceInfo(**head, regions=geometries)
