"""What a device says of itself: the INFO payload of :mod:`hwgen.protocol`, decoded, and the
checks a host makes of it.

:class:`DeviceInfo` is what a host checks on opening a device (protocol version, the hash of
the configuration it was built from, the geometry of its memories) and what it needs to talk
to it (its payload buffer, its batch capacity). :func:`check_device` and
:func:`check_program` raise :class:`IncompatibleDevice` when the device cannot run what the
host has.

A device of protocol version 5 (before LOAD, FETCH and CLASSES) is still served: its INFO has
no ``rx_fifo`` nor ``features`` (read as 0 and none), and the host writes and reads it in words
(:mod:`host.runner`).
"""

import dataclasses

from amaranth.lib import data

from hwgen.config import DATAFLOWS
from hwgen.memmap import Region, RegionGeometry, regions
from hwgen.protocol import (
    MAX_PAYLOAD,
    PROTOCOL_VERSION,
    RX_FIFO,
    Features,
    InfoHeader,
    RegionInfo,
    layout_bytes,
    read_chunk_words,
    unpack_layout,
    write_chunk_words,
)

__all__ = ["REMEDY", "SUPPORTED_VERSIONS", "DeviceInfo", "IncompatibleDevice", "check_device",
           "check_program", "unpack_info"]

#: The protocol versions this host speaks: today's, and 5 (words only, classes on the host).
SUPPORTED_VERSIONS = (5, PROTOCOL_VERSION)
#: INFO's header fields that version 5 did not have.
_NEW_IN_6 = ("rx_fifo", "features")
#: The INFO header of protocol version 5.
_INFO_HEADER_5 = data.StructLayout({name: field.shape for name, field
                                    in data.Layout.cast(InfoHeader) if name not in _NEW_IN_6})


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
    #: The UART's rate (0: byte streams, e.g. the simulated board over TCP).
    baud: int = 0
    #: Bytes the device's receive FIFO holds while it answers: never send more than this
    #: ahead of a response not yet read.
    rx_fifo: int = RX_FIFO
    #: The optional commands the device has (:class:`hwgen.protocol.Features`).
    features: Features = Features.ALL

    @classmethod
    def from_config(cls, config, max_payload=MAX_PAYLOAD, baud=0, rx_fifo=RX_FIFO,
                    features=Features.ALL):
        """Return what a device built from ``config`` with a UART at ``baud``, a receive FIFO
        of ``rx_fifo`` bytes and the optional commands ``features`` reports."""
        return cls(
            version=PROTOCOL_VERSION, config_hash=config.hash_int, rows=config.rows,
            cols=config.cols, dataflow=config.dataflow, in_bits=config.in_bits,
            w_bits=config.w_bits, acc_bits=config.acc_bits, mult_bits=config.mult_bits,
            max_payload=max_payload, acc_depth=config.acc_depth, regions=regions(config),
            baud=baud, rx_fifo=rx_fifo, features=Features(features))

    def mismatches(self, config, theirs="expected"):
        """Return a list of ``"name: device X vs <theirs> Y"`` for every disagreement with
        ``config`` (empty when the device was built from ``config`` with this protocol).

        Values read as a person writes them: the hash in hex, a memory as ``N words of B
        bits`` on a line of its own (``WEIGHT memory: ...``), never a Python repr.
        """
        expect = DeviceInfo.from_config(config, self.max_payload, self.baud, self.rx_fifo,
                                        self.features)
        if self.version in SUPPORTED_VERSIONS:  # an older protocol this host still speaks
            expect = dataclasses.replace(expect, version=self.version)
        found = []
        for f in dataclasses.fields(self):
            mine, other = getattr(self, f.name), getattr(expect, f.name)
            if f.name == "regions":
                found += [f"{region.name} memory: device {_memory(mine.get(region))} vs "
                          f"{theirs} {_memory(other.get(region))}"
                          for region in Region if mine.get(region) != other.get(region)]
            elif mine != other:
                if f.name == "config_hash":
                    mine, other = f"{mine:016x}", f"{other:016x}"
                elif isinstance(mine, Features):
                    mine, other = _features(mine), _features(other)
                found.append(f"{f.name}: device {mine} vs {theirs} {other}")
        return found

    def write_chunk_words(self, region):
        """Most words of ``region`` one WRITE can carry."""
        return write_chunk_words(self.regions[region], self.max_payload)

    def read_chunk_words(self, region):
        """Most words of ``region`` one READ can return."""
        return read_chunk_words(self.regions[region], self.max_payload)


def _features(flags):
    return "+".join(f.name for f in Features if f.value and f in flags and f is not Features.ALL
                    ) or "none"


def _memory(geometry):
    if geometry is None:
        return "none"
    return f"{geometry.depth} words of {geometry.word_bits} bits"


def unpack_info(payload):
    """Return the :class:`DeviceInfo` of an INFO payload.

    Raises
    ------
    ValueError
        If the payload is not a whole INFO record, or it names a dataflow or region this host does
        not know.
    """
    header = data.Layout.cast(_INFO_HEADER_5 if payload[:1] == b"\x05" else InfoHeader)
    n = header.size // 8
    if len(payload) < n:
        raise ValueError(f"INFO payload of {len(payload)} bytes is shorter than its "
                         f"{n}-byte header")
    word = int.from_bytes(payload[:n], "little")
    head = {name: (word >> f.offset) & ((1 << f.width) - 1) for name, f in header}
    head.setdefault("rx_fifo", 0)
    head.setdefault("features", Features.NONE)
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
    head["features"] = Features(head["features"] & Features.ALL)
    return DeviceInfo(**head, regions=geometries)


class IncompatibleDevice(RuntimeError):
    """The device cannot run what the host has: another protocol version or configuration.

    Attributes
    ----------
    device, expected : str
        What the device reports and what the host needs (versions or config hashes).
    differences : list of str
        ``"field: device X vs config Y"`` (or ``vs program Y``) for every INFO field that
        differs (may be empty).
    """

    def __init__(self, message, *, device=None, expected=None, differences=()):
        self.device = device
        self.expected = expected
        self.differences = list(differences)
        super().__init__(message)


#: How to make a program that a device of another design runs: the user's next step.
REMEDY = ("make a program for the device's design: hwgen compile MODEL --build DIR --out FILE "
          "(DIR: the folder `hwgen build` wrote the device's bitstream to), or --config "
          "DIR/report.json")


def _explained(headline, differences, unreported):
    """Return ``headline`` (ending in ``differing fields:``), then the ``name: device X vs Y``
    of every difference on a line of its own (or why there is none to show), then
    :data:`REMEDY` on the last line: a list the user reads field by field."""
    if not differences:
        return f"{headline} ({unreported})\n{REMEDY}"
    lines = "".join(f"\n  {d}" for d in differences)
    return f"{headline}; differing fields:{lines}\n{REMEDY}"


def _dtype_headline(info, config, theirs, where):
    """Return ``"the <theirs> is for dtype=X and the device at <where> is dtype=Y"`` when INFO
    shows that the device's dtype is not ``config``'s, or None when it does not.

    INFO has no dtype field. It shows one where ``config`` with the other dtype and the
    device's widths hashes to the device's hash (the same design of the other dtype), and a
    device whose widths no bf16 design has is int8 (every bf16 design is 16-bit, fp32 sums)."""
    other = "int8" if config.dtype == "bf16" else "bf16"
    widths = {"in_bits": info.in_bits, "w_bits": info.w_bits, "acc_bits": info.acc_bits,
              "mult_bits": info.mult_bits}
    try:
        same_design = dataclasses.replace(config, dtype=other, **widths).hash_int \
            == info.config_hash
    except ValueError:   # config is no design of the other dtype with these widths
        same_design = False
    not_bf16 = (info.in_bits, info.w_bits, info.acc_bits) != (16, 16, 32)
    if not (same_design or (other == "int8" and not_bf16)):
        return None
    return (f"the {theirs} is for dtype={config.dtype!r} and the device at {where} is "
            f"dtype={other!r}")


def check_device(info, config, where):
    """Raise :class:`IncompatibleDevice` unless the device at ``where`` (its :class:`DeviceInfo`
    ``info``) speaks this host's protocol version and, given a ``config``, was built from it.

    The message names both hashes, then the INFO fields that differ, ``name: device X vs
    config Y`` each on a line of its own, then how to make a program of the device's
    design (:data:`REMEDY`).
    """
    if info.version not in SUPPORTED_VERSIONS:
        raise IncompatibleDevice(
            f"the device at {where} speaks protocol version {info.version}; this host "
            f"speaks version {PROTOCOL_VERSION} (and 5)", device=str(info.version),
            expected=str(PROTOCOL_VERSION))
    if config is not None and info.config_hash != config.hash_int:
        differences = [d for d in info.mismatches(config, "config")
                       if not d.startswith("config_hash:")]
        dtype = _dtype_headline(info, config, "config", where)
        raise IncompatibleDevice(_explained(
            (f"{dtype}: " if dtype else "") +
            f"the device at {where} was built from config hash {info.config_hash:016x}, not "
            f"from {config.name} (config hash {config.hash})", differences,
            "INFO's fields agree, so a field INFO does not report differs, e.g. a buffer "
            "depth or clock_hz"),
            device=f"{info.config_hash:016x}", expected=config.hash, differences=differences)


def check_program(info, program, where):
    """Raise :class:`IncompatibleDevice` if ``program`` was compiled for another configuration
    than the device at ``where`` (its :class:`DeviceInfo` ``info``) was built from.

    The message names both hashes, then the INFO fields that differ, ``name: device X vs
    program Y`` each on a line of its own, then how to make a program of the device's
    design (:data:`REMEDY`).
    """
    device_hash = f"{info.config_hash:016x}"
    if program.config_hash != device_hash:
        differences = [d for d in info.mismatches(program.config, "program")
                       if not d.startswith("config_hash:")]
        dtype = _dtype_headline(info, program.config, "program", where)
        raise IncompatibleDevice(_explained(
            (f"{dtype}: " if dtype else "") +
            f"the program was compiled for {program.config.name} (config hash "
            f"{program.config_hash}); the device at {where} was built from config hash "
            f"{device_hash}", differences,
            "INFO's fields agree, so a field INFO does not report differs, e.g. a buffer "
            "depth or clock_hz"),
            device=device_hash, expected=program.config_hash, differences=differences)
