"""The host's side of the framing of :mod:`hwgen.protocol`: a byte stream split into frames.

:class:`FrameDecoder` finds frames in whatever bytes a link delivers (garbage, partial frames,
several frames at once); :class:`ResponseDecoder` is the host's, :class:`RequestDecoder` a
device model's (:mod:`sim.inprocess`, ``hwgen serve``). The field positions come from the
:class:`~hwgen.protocol.FrameHeader` layout, so that the decoder follows the schema.
"""

import dataclasses

from amaranth.lib import data

from hwgen.protocol import (
    CRC_BYTES,
    FRAME_OVERHEAD,
    HEADER_BYTES,
    SYNC_REQUEST,
    SYNC_RESPONSE,
    FrameHeader,
    Opcode,
    Status,
    crc16,
    unpack_layout,
)

__all__ = ["Frame", "FrameDecoder", "RequestDecoder", "ResponseDecoder"]

# The header and its CRC: what must be present before a frame's length is believed.
_HEAD = HEADER_BYTES + CRC_BYTES
_LENGTH = data.Layout.cast(FrameHeader)["length"]
_LENGTH_BYTES = slice(_LENGTH.offset // 8, (_LENGTH.offset + _LENGTH.width) // 8)


def _enum_or_int(enum_cls, value):
    try:
        return enum_cls(value)
    except ValueError:
        return value


@dataclasses.dataclass(frozen=True)
class Frame:
    """One decoded frame.

    ``opcode`` and ``status`` are members of :class:`Opcode` and :class:`Status` when known, plain
    integers otherwise. ``crc_ok`` is false when the header was intact (so ``opcode`` and ``seq``
    can be trusted) but the payload CRC did not match.
    """

    sync: int
    opcode: Opcode | int
    seq: int
    status: Status | int
    payload: bytes
    crc_ok: bool = True


class FrameDecoder:
    """Split a byte stream into frames that start with ``sync``.

    Bytes before a sync byte, and a sync byte whose header fails its CRC (or announces more than
    ``max_length`` bytes), are skipped and counted in :attr:`skipped`; the search goes on from
    the byte after it, so a frame hidden behind a false sync is still found.

    Parameters
    ----------
    sync : int
        :data:`SYNC_REQUEST` or :data:`SYNC_RESPONSE`.
    max_length : int
        Largest payload believed.
    """

    def __init__(self, sync, max_length=0xFFFF):
        self.sync = sync
        self.max_length = max_length
        self.skipped = 0
        self._buf = bytearray()

    def reset(self):
        """Forget any partial frame."""
        self.skipped += len(self._buf)
        self._buf.clear()

    @property
    def pending(self):
        """Bytes held of a frame not yet complete."""
        return len(self._buf)

    @property
    def wanted(self):
        """Bytes still missing from the frame in progress (at least 1): a good read size."""
        buf = self._buf
        if len(buf) < _HEAD:
            return _HEAD - len(buf)
        length = int.from_bytes(buf[_LENGTH_BYTES], "little")
        return max(1, FRAME_OVERHEAD + length - len(buf))

    def feed(self, chunk):
        """Add received bytes; return the list of :class:`Frame` completed by them."""
        buf = self._buf
        buf += chunk
        frames = []
        head = _HEAD
        while True:
            start = buf.find(self.sync)
            if start < 0:
                self.skipped += len(buf)
                buf.clear()
                break
            if start:
                self.skipped += start
                del buf[:start]
            if len(buf) < head:
                break
            length = int.from_bytes(buf[_LENGTH_BYTES], "little")
            if crc16(buf[:head]) != 0 or length > self.max_length:
                self.skipped += 1
                del buf[:1]
                continue
            end = head + length + CRC_BYTES
            if len(buf) < end:
                break
            hdr = unpack_layout(FrameHeader, bytes(buf[:HEADER_BYTES]))
            frames.append(Frame(
                sync=hdr["sync"], opcode=_enum_or_int(Opcode, hdr["opcode"]), seq=hdr["seq"],
                status=_enum_or_int(Status, hdr["status"]),
                payload=bytes(buf[head:end - CRC_BYTES]), crc_ok=crc16(buf[head:end]) == 0))
            del buf[:end]
        return frames


class ResponseDecoder(FrameDecoder):
    """:class:`FrameDecoder` for responses (the host's side)."""

    def __init__(self, max_length=0xFFFF):
        super().__init__(SYNC_RESPONSE, max_length)


class RequestDecoder(FrameDecoder):
    """:class:`FrameDecoder` for requests (a simulated device's side)."""

    def __init__(self, max_length=0xFFFF):
        super().__init__(SYNC_REQUEST, max_length)
