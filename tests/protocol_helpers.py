"""Helpers of the protocol's tests that no device or host needs: strict one-frame decoding and
an INFO payload built from any :class:`host.info.DeviceInfo` (a device that lies about itself).

(On the path through ``pythonpath = ["tests"]``, as ``support`` is.)
"""

from host.frames import RequestDecoder, ResponseDecoder
from hwgen.config import DATAFLOWS
from hwgen.protocol import InfoHeader, RegionInfo, pack_layout

__all__ = ["decode_request", "decode_response", "pack_info"]


def _decode_one(decoder, raw):
    frames = decoder.feed(raw)
    if len(frames) != 1 or decoder.skipped or decoder.pending:
        raise ValueError(f"expected exactly one frame, got {len(frames)} frame(s) and "
                         f"{decoder.skipped} skipped byte(s) in {len(raw)} bytes")
    return frames[0]


def decode_response(raw):
    """Decode ``raw``, which must be exactly one response frame; raise ValueError otherwise."""
    return _decode_one(ResponseDecoder(), bytes(raw))


def decode_request(raw):
    """Decode ``raw``, which must be exactly one request frame; raise ValueError otherwise."""
    return _decode_one(RequestDecoder(), bytes(raw))


def pack_info(info):
    """Return the INFO payload of a :class:`host.info.DeviceInfo` (its fields as given)."""
    head = pack_layout(
        InfoHeader, version=info.version, config_hash=info.config_hash, rows=info.rows,
        cols=info.cols, dataflow=DATAFLOWS.index(info.dataflow), in_bits=info.in_bits,
        w_bits=info.w_bits, acc_bits=info.acc_bits, mult_bits=info.mult_bits,
        max_payload=info.max_payload, acc_depth=info.acc_depth, n_regions=len(info.regions))
    return head + b"".join(
        pack_layout(RegionInfo, word_bits=g.word_bits, depth=g.depth)
        for _, g in sorted(info.regions.items(), key=lambda item: item[0].value))
